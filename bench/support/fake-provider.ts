/**
 * The fake model provider of bench/messaging-latency.ts, in a process of its own: an
 * OpenAI-protocol server that answers every streamed chat completion with BENCH_TOKENS word chunks
 * BENCH_TOKEN_MS ms apart. The role chunk and the first word go out at once (time to first token
 * is the time to the answer's first bytes); the finish chunk, the usage chunk (when the request
 * asks for it, as the gateway always does) and `[DONE]` go out together after the last word, as
 * OpenAI sends them, so that asking for usage costs no extra interval. Nothing is recorded per call
 * (a long run keeps its memory flat). Prints `{"baseUrl": ...}` on its first line of output, then
 * serves until SIGTERM.
 */
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { setting } from '../../lib/platform/config.js';

const tokens = setting(process.env, 'BENCH_TOKENS');
const tokenMs = setting(process.env, 'BENCH_TOKEN_MS');

function answer(res: http.ServerResponse, body: { model?: string; stream_options?: { include_usage?: boolean } }) {
  const head = { id: `chatcmpl-${Math.random().toString(36).slice(2)}`, object: 'chat.completion.chunk', created: Math.floor(Date.now() / 1000), model: body.model ?? 'bench' };
  const chunk = (delta: Record<string, string>, finish: string | null = null) => `data: ${JSON.stringify({ ...head, choices: [{ index: 0, delta, finish_reason: finish }] })}\n\n`;
  res.writeHead(200, { 'content-type': 'text/event-stream', 'cache-control': 'no-cache' });
  res.write(chunk({ role: 'assistant', content: '' }) + chunk({ content: 'tok0 ' }));
  let sent = 1;
  const finish = () => {
    const usage = body.stream_options?.include_usage ? `data: ${JSON.stringify({ ...head, choices: [], usage: { prompt_tokens: 8, completion_tokens: tokens, total_tokens: 8 + tokens } })}\n\n` : '';
    res.end(`${chunk({}, 'stop')}${usage}data: [DONE]\n\n`);
  };
  if (sent >= tokens) return finish();
  const timer = setInterval(() => {
    if (sent < tokens) res.write(chunk({ content: `tok${sent++} ` }));
    if (sent >= tokens) {
      clearInterval(timer);
      finish();
    }
  }, tokenMs);
  res.on('close', () => clearInterval(timer));
}

const server = http.createServer((req, res) => {
  const parts: Buffer[] = [];
  req.on('data', (c: Buffer) => parts.push(c));
  req.on('end', () => {
    let body: { model?: string; stream?: boolean; stream_options?: { include_usage?: boolean } } = {};
    try {
      body = JSON.parse(Buffer.concat(parts).toString('utf8')) as typeof body;
    } catch {
      // answered below
    }
    if (req.method !== 'POST' || !req.url?.endsWith('/chat/completions') || body.stream !== true) {
      res.writeHead(404, { 'content-type': 'application/json' });
      res.end(JSON.stringify({ error: { message: 'the benchmark provider streams chat completions only', type: 'invalid_request_error' } }));
      return;
    }
    answer(res, body);
  });
});
server.keepAliveTimeout = 120_000;
server.listen(0, '127.0.0.1', () => {
  process.stdout.write(`${JSON.stringify({ baseUrl: `http://127.0.0.1:${(server.address() as AddressInfo).port}/v1` })}\n`);
});
process.on('SIGTERM', () => {
  server.closeAllConnections();
  server.close(() => process.exit(0));
});
