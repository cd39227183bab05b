import http from 'node:http';
import type { AddressInfo } from 'node:net';

/** An answer of 200 with `body` as `type`. */
export const binary = (body: Buffer, type: string) => (res: http.ServerResponse) => void res.writeHead(200, { 'content-type': type, 'content-length': body.length }).end(body);

/**
 * A loopback server standing for the host of an `audio_url`, whose answers the test chooses by
 * path (404 for any other); every request is recorded.
 */
export async function startAudioHost(routes: Record<string, (res: http.ServerResponse) => void>) {
  const requests: string[] = [];
  const server = http.createServer((req, res) => {
    requests.push(req.url ?? '');
    const route = routes[req.url ?? ''];
    if (route) route(res);
    else res.writeHead(404, { 'content-type': 'text/plain' }).end('not found');
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const base = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  return {
    url: (p: string) => base + p,
    requestsTo: (p: string) => requests.filter((r) => r === p).length,
    close: () => new Promise<void>((resolve) => {
      server.closeAllConnections();
      server.close(() => resolve());
    }),
  };
}
