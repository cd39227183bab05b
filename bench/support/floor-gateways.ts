/**
 * Two more floors of bench/messaging-latency.ts, between the bare proxy and /v3: what a gateway's
 * unavoidable parts cost by themselves on this machine, so that the gap to the bare proxy can be
 * split into what no gateway escapes and what is ours. BENCH_FLOOR picks one:
 * - `express`: the bare proxy inside Express, with as many middleware layers before the route as
 *   api/app.ts puts before a /v3 route, the JSON body parsed (express.json) and serialised again
 *   for the provider, and the stream relayed as /v3 relays it (pieces with nothing to read as
 *   their bytes, the others as text, events split, the usage chunk parsed). No key, no
 *   admission, no accounting.
 * - `relay`: no framework and no database: the body read and parsed, the stream relayed as above,
 *   one log line per request. What a gateway costs that reads and rewrites what it relays but
 *   meters nothing: the floor of /v3's own steps beside its metering.
 * - `lean`: `relay` plus the work every metered gateway must do per stream with a plain database
 *   client: one PostgreSQL round trip before the provider is called (the hold) and one after the
 *   stream ends (the settlement).
 * Prints `{"url": ...}` on its first line of output, then serves until SIGTERM.
 */
import fs from 'node:fs';
import http from 'node:http';
import { StringDecoder } from 'node:string_decoder';
import express from 'express';
import pg from 'pg';
import { serveProxy } from './serve-proxy.js';

const upstream = new URL(process.env.BENCH_PROVIDER_URL!.replace(/\/?$/, '/'));
const agent = new http.Agent({ keepAlive: true, maxSockets: 1024, maxFreeSockets: 1024, scheduling: 'lifo' });
const floor = process.env.BENCH_FLOOR;
/** Layers api/app.ts runs before a /v3 route's own handlers (gates, request id, metrics, other mounts, routers). */
const LAYERS_BEFORE_V3 = 9;
const carriesUsage = /"usage"\s*:\s*\{/;

const USAGE = Buffer.from('"usage"');

/**
 * Forwards `body` to the provider and relays its events as /v3 relays them: a piece of whole events
 * with no usage in it passes as its bytes; any other is split into events as text, the usage read.
 */
function relay(res: http.ServerResponse, body: Record<string, unknown>, onEnd: () => void) {
  const payload = Buffer.from(JSON.stringify({ ...body, stream_options: { include_usage: true } }));
  const headers = { 'content-type': 'application/json', 'content-length': payload.length, accept: 'text/event-stream' };
  const call = http.request(new URL('chat/completions', upstream), { method: 'POST', agent, headers }, (answer) => {
    res.writeHead(200, { 'content-type': 'text/event-stream; charset=utf-8', 'cache-control': 'no-cache, no-transform' });
    const decoder = new StringDecoder('utf8');
    let pending = '';
    answer.on('data', (piece: Buffer) => {
      if (pending === '' && piece.at(-1) === 10 && piece.at(-2) === 10 && !piece.includes(USAGE) && !piece.includes('[DONE]')) {
        res.write(piece);
        return;
      }
      const text = pending + decoder.write(piece);
      let out = '';
      let start = 0;
      for (let end = text.indexOf('\n\n'); end >= 0; end = text.indexOf('\n\n', start)) {
        const data = text.slice(start + 6, end);
        start = end + 2;
        if (data === '[DONE]') continue;
        if (carriesUsage.test(data)) JSON.parse(data);
        out += `data: ${data}\n\n`;
      }
      pending = text.slice(start);
      if (out) res.write(out);
    });
    answer.on('end', () => {
      res.end('data: [DONE]\n\n');
      onEnd();
    });
  });
  call.on('error', () => res.destroy());
  res.on('close', () => {
    if (!res.writableFinished) call.destroy();
  });
  call.end(payload);
}

function expressFloor(): http.RequestListener {
  const app = express();
  for (let i = 0; i < LAYERS_BEFORE_V3; i++) app.use((_req, _res, next) => next());
  app.post('/chat/completions', express.json(), (req, res) => relay(res, req.body as Record<string, unknown>, () => undefined));
  return app;
}

/** The relay floor; the lean floor when `db` is given: a round trip before the call and one after the stream. */
function relayFloor(db: pg.Pool | null): http.RequestListener {
  const log = fs.openSync(process.env.BENCH_FLOOR_LOG ?? '/dev/null', 'a');
  const logLine = (req: http.IncomingMessage, res: http.ServerResponse, started: number) =>
    fs.writeSync(log, `${JSON.stringify({ time: new Date().toISOString(), level: 'info', msg: 'request', method: req.method, path: req.url, status: res.statusCode, duration_ms: Math.round(performance.now() - started) })}\n`);
  return (req, res) => {
    const parts: Buffer[] = [];
    req.on('data', (c: Buffer) => parts.push(c));
    req.on('end', () => {
      const started = performance.now();
      const body = JSON.parse(Buffer.concat(parts).toString('utf8')) as Record<string, unknown>;
      if (!db) return relay(res, body, () => logLine(req, res, started));
      db.query('SELECT 1').then(
        () =>
          relay(res, body, () => {
            db.query('SELECT 1').catch(() => undefined);
            logLine(req, res, started);
          }),
        () => res.destroy(),
      );
    });
  };
}

const listeners: Record<string, () => http.RequestListener> = {
  express: expressFloor,
  relay: () => relayFloor(null),
  lean: () => relayFloor(new pg.Pool({ connectionString: process.env.DATABASE_URL, max: 10 })),
};
const listener = listeners[floor ?? ''];
if (!listener) throw new Error('BENCH_FLOOR must be express, relay or lean');
const server = http.createServer(listener());
serveProxy(server);
