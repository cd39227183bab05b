import crypto from 'node:crypto';
import http from 'node:http';
import type { AddressInfo } from 'node:net';

/**
 * A local server that speaks the OpenAI HTTP protocol (chat completions, responses, embeddings)
 * closely enough for the official `openai` client, with every answer under the test's control:
 * usage, delays, status codes (429, 5xx), malformed bodies, hangs (timeouts) and SSE streams.
 * It records every call, so tests can assert on what our code sent and how often.
 */
export interface UpstreamCall {
  method: string;
  path: string;
  headers: http.IncomingHttpHeaders;
  body: any;
  at: number;
  /** Set when the caller closed the connection before the answer was complete (a cancelled call). */
  abortedAt?: number;
}

export type Reply =
  /** A JSON answer (status defaults to 200). */
  | { status?: number; json: unknown; headers?: Record<string, string>; delayMs?: number }
  /** A raw answer, e.g. a malformed body or audio bytes. */
  | { status?: number; raw: string | Buffer; contentType?: string; delayMs?: number; headers?: Record<string, string> }
  /** Server-sent events: each item is sent as `data: <JSON>` (or as-is for strings), then `data: [DONE]` unless `done: false`. */
  | { sse: Array<unknown>; delayMs?: number; eventDelayMs?: number; done?: boolean; named?: boolean }
  /** Never answers (the client's timeout fires), until the server closes. */
  | { hang: true }
  /** Drops the connection without an answer. */
  | { destroy: true };

export type Responder = (call: UpstreamCall, index: number) => Reply | Promise<Reply>;

export interface OpenAiUpstream {
  /** Base URL for the `openai` client, ending in /v1. */
  baseUrl: string;
  calls: UpstreamCall[];
  /** Replaces the answering function; `index` counts calls from 0 across the server's life. */
  respond(responder: Responder): void;
  /** Calls to one path, e.g. '/v1/chat/completions'. */
  callsTo(path: string): UpstreamCall[];
  /** Resolves once `n` calls matching `match` have arrived (rejects after `timeoutMs`). */
  waitForCalls(match: (call: UpstreamCall) => boolean, n: number, timeoutMs?: number): Promise<UpstreamCall[]>;
  close(): Promise<void>;
}

/**
 * The text fields of a multipart/form-data body (what the openai client sends to
 * /audio/transcriptions), by name; file parts are left out.
 */
export function multipartFields(body: unknown): Record<string, string> {
  const fields: Record<string, string> = {};
  if (typeof body !== 'string') return fields;
  for (const part of body.split(/\r\n--[^\r\n]+/)) {
    const head = /name="([^"]+)"(; filename="[^"]*")?\r\n(?:[^\r\n]+\r\n)*\r\n/.exec(part);
    if (!head || head[2]) continue;
    fields[head[1]!] = part.slice(head.index + head[0].length);
  }
  return fields;
}

/** Rough token count the fake reports as usage: one token per word or punctuation mark. */
export function fakeTokenCount(text: string): number {
  return (text.match(/[\p{L}\p{N}_]+|[^\s\p{L}\p{N}_]/gu) ?? []).length;
}

function messageText(messages: Array<{ content?: unknown }> | undefined): string {
  return (messages ?? []).map((m) => (typeof m.content === 'string' ? m.content : JSON.stringify(m.content ?? ''))).join('\n');
}

/** A normal chat completion whose answer is `content`, with usage the fake counts itself unless given. */
export function chatCompletion(call: UpstreamCall, content: string, options: { usage?: { prompt_tokens: number; completion_tokens: number } | null; finishReason?: string; model?: string } = {}) {
  const usage = options.usage === undefined
    ? { prompt_tokens: fakeTokenCount(messageText(call.body?.messages)), completion_tokens: fakeTokenCount(content) }
    : options.usage;
  return {
    id: `chatcmpl-${Math.random().toString(36).slice(2)}`,
    object: 'chat.completion',
    created: Math.floor(Date.now() / 1000),
    model: options.model ?? call.body?.model ?? 'unknown',
    choices: [{ index: 0, message: { role: 'assistant', content, refusal: null }, finish_reason: options.finishReason ?? 'stop', logprobs: null }],
    ...(usage ? { usage: { ...usage, total_tokens: usage.prompt_tokens + usage.completion_tokens } } : {}),
  };
}

/** A chat completion whose answer is `value` as JSON text (what a model in JSON or structured-output mode sends). */
const EMBEDDING_DIMENSIONS = 64;

/** A deterministic bag-of-words embedding (64 dimensions), so a fake model still retrieves sensibly. */
function fakeEmbedding(text: string): number[] {
  const v = new Array<number>(EMBEDDING_DIMENSIONS).fill(0);
  for (const w of text.toLowerCase().match(/\p{L}+/gu) ?? []) v[crypto.createHash('md5').update(w).digest()[0]! % EMBEDDING_DIMENSIONS]! += 1;
  const n = Math.hypot(...v) || 1;
  return v.map((x) => x / n);
}

/** The answer of /v1/embeddings to `call`: a fake embedding per input, usage counted by fakeTokenCount. */
export function embeddingsAnswer(call: UpstreamCall) {
  const input: string[] = Array.isArray(call.body?.input) ? call.body.input : [call.body?.input];
  const tokens = input.reduce((s, t) => s + fakeTokenCount(t), 0);
  return {
    object: 'list',
    model: call.body?.model,
    data: input.map((t, index) => ({ object: 'embedding', index, embedding: fakeEmbedding(t) })),
    usage: { prompt_tokens: tokens, total_tokens: tokens },
  };
}

export function jsonCompletion(call: UpstreamCall, value: unknown, options: Parameters<typeof chatCompletion>[2] = {}) {
  return chatCompletion(call, JSON.stringify(value), options);
}

/** A structured-outputs refusal: `content: null` and the model's `refusal` text. */
export function refusalCompletion(call: UpstreamCall, text: string) {
  const completion = chatCompletion(call, '', { usage: { prompt_tokens: 10, completion_tokens: 5 } });
  return { ...completion, choices: [{ ...completion.choices[0]!, message: { role: 'assistant', content: null, refusal: text } }] };
}

/** OpenAI's answer when the model has no structured outputs (json_schema), exactly as the API sends it. */
export const responseFormatRejected: Reply = {
  status: 400,
  json: {
    error: {
      message: "Invalid parameter: 'response_format' of type 'json_schema' is not supported with this model. Learn more about supported models at the Structured Outputs guide: https://platform.openai.com/docs/guides/structured-outputs",
      type: 'invalid_request_error',
      param: 'response_format',
      code: null,
    },
  },
};

export type Step = Reply | ((call: UpstreamCall) => Reply | Promise<Reply>);

/**
 * A responder that answers the calls matching `match` with `steps` in order: the i-th matching
 * call since it was installed gets step i, and the last step repeats. Other calls go to
 * `fallback` (the echo by default), so a late call of an earlier test never takes a step.
 */
export function scripted(steps: Step[], options: { match?: (call: UpstreamCall) => boolean; fallback?: Responder } = {}): Responder {
  let taken = 0;
  return (call, index) => {
    if (options.match && !options.match(call)) return (options.fallback ?? echoResponder)(call, index);
    const step = steps[Math.min(taken++, steps.length - 1)]!;
    return typeof step === 'function' ? step(call) : step;
  };
}

/** The default answer: chat completions echo the last user message; responses echo the input. */
export const echoResponder: Responder = (call) => {
  if (call.path.endsWith('/chat/completions')) {
    const last = [...(call.body?.messages ?? [])].reverse().find((m: { role: string }) => m.role === 'user');
    return { json: chatCompletion(call, typeof last?.content === 'string' ? last.content : 'ok') };
  }
  if (call.path.endsWith('/responses')) {
    const input = typeof call.body?.input === 'string' ? call.body.input : JSON.stringify(call.body?.input ?? '');
    const id = `resp_${Math.random().toString(36).slice(2)}`;
    return {
      json: {
        id,
        object: 'response',
        created_at: Math.floor(Date.now() / 1000),
        status: 'completed',
        model: call.body?.model ?? 'unknown',
        output: [{ id: `msg_${id}`, type: 'message', role: 'assistant', status: 'completed', content: [{ type: 'output_text', text: input, annotations: [] }] }],
        usage: { input_tokens: fakeTokenCount(input), output_tokens: fakeTokenCount(input), total_tokens: 2 * fakeTokenCount(input) },
      },
    };
  }
  return { status: 404, json: { error: { message: `no fake for ${call.path}`, type: 'invalid_request_error' } } };
};

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

export async function startOpenAiUpstream(responder: Responder = echoResponder): Promise<OpenAiUpstream> {
  let current = responder;
  const calls: UpstreamCall[] = [];
  const hanging = new Set<http.ServerResponse>();

  const server = http.createServer(async (req, res) => {
    const chunks: Buffer[] = [];
    for await (const c of req) chunks.push(c as Buffer);
    const text = Buffer.concat(chunks).toString('utf8');
    let body: unknown = text;
    try {
      body = text ? JSON.parse(text) : null;
    } catch {
      // keep the raw text
    }
    const call: UpstreamCall = { method: req.method ?? 'GET', path: (req.url ?? '/').split('?')[0]!, headers: req.headers, body, at: Date.now() };
    const index = calls.push(call) - 1;
    res.on('close', () => {
      if (!res.writableFinished) call.abortedAt = Date.now();
    });
    let reply: Reply;
    try {
      reply = await current(call, index);
    } catch (err) {
      reply = { status: 500, json: { error: { message: String(err), type: 'server_error' } } };
    }
    if ('destroy' in reply) return void req.socket.destroy();
    if ('hang' in reply) {
      hanging.add(res);
      res.on('close', () => hanging.delete(res));
      return;
    }
    if (reply.delayMs) await sleep(reply.delayMs);
    if ('sse' in reply) {
      res.writeHead(200, { 'content-type': 'text/event-stream', 'cache-control': 'no-cache', connection: 'keep-alive' });
      for (const event of reply.sse) {
        if (res.destroyed) return;
        if (typeof event === 'string') res.write(event);
        else if (reply.named && event && typeof event === 'object' && 'type' in event) res.write(`event: ${(event as { type: string }).type}\ndata: ${JSON.stringify(event)}\n\n`);
        else res.write(`data: ${JSON.stringify(event)}\n\n`);
        if (reply.eventDelayMs) await sleep(reply.eventDelayMs);
      }
      if (reply.done !== false) res.write('data: [DONE]\n\n');
      return void res.end();
    }
    if ('raw' in reply) {
      res.writeHead(reply.status ?? 200, { 'content-type': reply.contentType ?? 'application/json', ...(reply.headers ?? {}) });
      return void res.end(reply.raw);
    }
    res.writeHead(reply.status ?? 200, { 'content-type': 'application/json', ...(reply.headers ?? {}) });
    res.end(JSON.stringify(reply.json));
  });
  server.listen(0, '127.0.0.1');
  await new Promise((r) => server.once('listening', r));
  const { port } = server.address() as AddressInfo;
  return {
    baseUrl: `http://127.0.0.1:${port}/v1`,
    calls,
    respond: (r) => void (current = r),
    callsTo: (p) => calls.filter((c) => c.path === p),
    async waitForCalls(match, n, timeoutMs = 30_000) {
      const deadline = Date.now() + timeoutMs;
      for (;;) {
        const found = calls.filter(match);
        if (found.length >= n) return found;
        if (Date.now() > deadline) throw new Error(`waited ${timeoutMs} ms for ${n} upstream calls, saw ${found.length}`);
        await sleep(50);
      }
    },
    async close() {
      for (const res of hanging) res.destroy();
      server.closeAllConnections();
      await new Promise((r) => server.close(r));
    },
  };
}
