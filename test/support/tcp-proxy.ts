import net from 'node:net';
import type { AddressInfo } from 'node:net';

/**
 * A loopback TCP proxy in front of a real service (Weaviate here), which a test can take down: while
 * down it cuts every open connection and drops each new one as soon as it is made, as a restarting
 * server does; while hung it cuts the open connections and then accepts new ones, reads what they
 * send and never answers, as a server stuck in a long pause does; back up, connections reach the
 * service again (the ones held while hung are cut).
 */
export interface TcpProxy {
  /** The target's URL with the proxy's host and port. */
  url: string;
  /** Connections dropped while down. */
  dropped: number;
  setDown(down: boolean): void;
  /** Connections accepted and left unanswered while hung. */
  held: number;
  setHung(hung: boolean): void;
  close(): Promise<void>;
}

export async function startTcpProxy(targetUrl: string): Promise<TcpProxy> {
  const target = new URL(targetUrl);
  const open = new Set<net.Socket>();
  let down = false;
  let hung = false;
  const track = (s: net.Socket) => {
    open.add(s);
    s.on('close', () => open.delete(s));
    s.on('error', () => undefined);
  };
  const cutAll = () => {
    for (const s of open) s.destroy();
  };
  const server = net.createServer((socket) => {
    if (down) {
      proxy.dropped++;
      socket.destroy();
      return;
    }
    if (hung) {
      proxy.held++;
      track(socket);
      socket.resume();
      return;
    }
    const upstream = net.connect(Number(target.port), target.hostname);
    for (const s of [socket, upstream]) track(s);
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
    held: 0,
    setDown(value) {
      down = value;
      if (down) cutAll();
    },
    setHung(value) {
      if (value !== hung) cutAll();
      hung = value;
    },
    async close() {
      cutAll();
      await new Promise((resolve) => server.close(resolve));
    },
  };
  return proxy;
}
