import type { Server } from 'node:http';

/**
 * The API's HTTP server keeps an idle client connection HTTP_KEEP_ALIVE_SECONDS (Node's default is
 * 5 s). Partners' clients pool connections and a load balancer holds its own to the API for ~60 s:
 * the side that closes an idle connection must be the one that knows it is closing, else a request
 * sent on it at that moment fails, so the API waits longer than they do. (Since Node 12.19 an idle
 * connection is not judged by headersTimeout, which therefore stays Node's.)
 */
export function keepClientConnections(server: Server, keepAliveMs: number): void {
  server.keepAliveTimeout = keepAliveMs;
}
