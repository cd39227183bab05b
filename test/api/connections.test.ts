import assert from 'node:assert/strict';
import http from 'node:http';
import net from 'node:net';
import { startApi, type RunningApi } from '../support/system.js';

/** Sends `GET /health` on `socket` and reads its whole answer's head. */
function healthOn(socket: net.Socket): Promise<string> {
  return new Promise((resolve, reject) => {
    let text = '';
    const onData = (d: Buffer) => {
      text += d.toString('latin1');
      const head = text.indexOf('\r\n\r\n');
      const length = /content-length: (\d+)/i.exec(text);
      if (head >= 0 && length && text.length >= head + 4 + Number(length[1])) {
        socket.off('data', onData);
        resolve(text.slice(0, head));
      }
    };
    socket.on('data', onData);
    socket.once('error', reject);
    socket.write('GET /health HTTP/1.1\r\nHost: api\r\n\r\n');
  });
}

const connect = (url: string) =>
  new Promise<net.Socket>((resolve) => {
    const socket = net.connect(Number(new URL(url).port), '127.0.0.1', () => resolve(socket));
  });
const closed = (socket: net.Socket) => new Promise<void>((resolve) => (socket.closed ? resolve() : socket.once('close', () => resolve())));
const pause = (ms: number) => new Promise((r) => setTimeout(r, ms));

describe('client connections: kept open between requests (HTTP_KEEP_ALIVE_SECONDS)', () => {
  let api: RunningApi;
  after(() => api?.close());

  it('announces its default wait of 65 s, longer than the common load balancers\' 60 s', async () => {
    api = await startApi();
    const answer = await new Promise<http.IncomingMessage>((resolve, reject) => http.get(`${api.url}/health`, resolve).on('error', reject));
    answer.resume();
    assert.equal(answer.headers['keep-alive'], 'timeout=65');
    await api.close();
  });

  it('serves the next request on an idle connection within the wait, and closes it after', async () => {
    api = await startApi({ HTTP_KEEP_ALIVE_SECONDS: '2' });
    const socket = await connect(api.url);
    assert.match(await healthOn(socket), /^HTTP\/1\.1 200[\s\S]*keep-alive: timeout=2/i);
    await pause(1200);
    assert.match(await healthOn(socket), /^HTTP\/1\.1 200/, 'the connection was still open after 1.2 s idle');
    const idleSince = Date.now();
    await closed(socket);
    const idle = Date.now() - idleSince;
    assert.ok(idle >= 1500 && idle < 5000, `closed after ${idle} ms idle`);
  });
});
