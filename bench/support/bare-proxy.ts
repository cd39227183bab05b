/**
 * The floor of bench/messaging-latency.ts: a pass-through proxy that does nothing a gateway must do
 * (no key, no validation, no admission, no settlement, no parsing of what it relays): it forwards
 * each request to BENCH_PROVIDER_URL on a keep-alive pool and pipes the answer back. Run as a
 * process of its own, it shows what one more Node process in the path costs on this machine, the
 * part of /v3's added time that no gateway code can remove. Prints `{"url": ...}` on its first line
 * of output, then serves until SIGTERM.
 */
import http from 'node:http';
import { serveProxy } from './serve-proxy.js';

const upstream = new URL(process.env.BENCH_PROVIDER_URL!.replace(/\/?$/, '/'));
const agent = new http.Agent({ keepAlive: true, maxSockets: 1024, maxFreeSockets: 1024, scheduling: 'lifo' });

const server = http.createServer((req, res) => {
  const target = new URL((req.url ?? '/').replace(/^\/+/, ''), upstream);
  const forward = http.request(target, { method: req.method, agent, headers: { ...req.headers, host: target.host } }, (answer) => {
    res.writeHead(answer.statusCode ?? 502, answer.headers);
    answer.pipe(res);
  });
  forward.on('error', () => res.destroy());
  res.on('close', () => {
    if (!res.writableFinished) forward.destroy();
  });
  req.pipe(forward);
});
serveProxy(server);
