import type http from 'node:http';
import type { AddressInfo } from 'node:net';

/**
 * Serves a benchmark's middle process on a free loopback port: prints `{"url": ...}` as its first
 * line of output (bench/messaging-latency.ts reads it), keeps client connections alive between
 * streams, and stops on SIGTERM.
 */
export function serveProxy(server: http.Server): void {
  server.keepAliveTimeout = 120_000;
  server.listen(0, '127.0.0.1', () => {
    process.stdout.write(`${JSON.stringify({ url: `http://127.0.0.1:${(server.address() as AddressInfo).port}` })}\n`);
  });
  process.on('SIGTERM', () => {
    server.closeAllConnections();
    server.close(() => process.exit(0));
  });
}
