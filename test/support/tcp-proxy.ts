import net from 'node:net';
import type { AddressInfo } from 'node:net';

/**
 * A loopback TCP proxy in front of a real service (Weaviate here), which a test can take down: while
 * down it cuts every open connection and drops each new one as soon as it is made, as a restarting
 * server does; back up, connections reach the service again.
 */
export interface TcpProxy {
  /** The target's URL with the proxy's host and port. */
  url: string;
  /** Connections dropped while down. */
  dropped: number;
  setDown(down: boolean): void;
  close(): Promise<void>;
}

export async function startTcpProxy(targetUrl: string): Promise<TcpProxy> {
  const target = new URL(targetUrl);
  const open = new Set<net.Socket>();
  let down = false;
  const server = net.createServer((socket) => {
    if (down) {
      proxy.dropped++;
      socket.destroy();
      return;
    }
    const upstream = net.connect(Number(target.port), target.hostname);
    for (const s of [socket, upstream]) {
      open.add(s);
      s.on('close', () => open.delete(s));
      s.on('error', () => undefined);
    }
    socket.pipe(upstream).pipe(socket);
    socket.on('close', () => upstream.destroy());
    upstream.on('close', () => socket.destroy());
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const url = new URL(targetUrl);
  url.host = `127.0.0.1:${(server.address() as AddressInfo).port}`;
  const proxy: TcpProxy = {
    url: url.toString().replace(/\/$/, ''),
    dropped: 0,
    setDown(value) {
      down = value;
      if (down) for (const s of open) s.destroy();
    },
    async close() {
      for (const s of open) s.destroy();
      await new Promise((resolve) => server.close(resolve));
    },
  };
  return proxy;
}
