import assert from 'node:assert/strict';
import http from 'node:http';
import net from 'node:net';
import type { AddressInfo } from 'node:net';
import { eventually } from '../support/system.js';
import { SseWriter } from '../../api/messaging/sse-writer.js';

/** The SSE writer over a real socket: a client that stops reading stops the producer. */
describe('messaging SSE writer', () => {
  it('waits for the client to read (back-pressure) instead of buffering the whole stream', async () => {
    const events = 400;
    const payload = 'x'.repeat(64 * 1024);
    let written = 0;
    let writer: SseWriter | null = null;
    const server = http.createServer(async (_req, res) => {
      writer = new SseWriter(res, 60_000);
      for (let i = 0; i < events; i++) {
        await writer.data({ i, payload });
        written++;
      }
      writer.end();
    });
    server.listen(0, '127.0.0.1');
    await new Promise((r) => server.once('listening', r));
    const { port } = server.address() as AddressInfo;
    try {
      const socket = net.connect(port, '127.0.0.1');
      socket.pause();
      socket.write(`GET / HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n`);
      await eventually('the writer to wait for the paused client', async () => writer?.waitingForDrain === true, 10_000);
      assert.ok(written < events / 2, `only ${written} of ${events} events (${(written * 64) / 1024} MiB) were produced while the client did not read`);
      let received = 0;
      socket.on('data', (d: Buffer) => (received += d.length));
      socket.resume();
      await new Promise((r) => socket.once('end', r));
      assert.equal(written, events);
      assert.ok(received > events * payload.length, 'every event arrived once the client read');
    } finally {
      server.closeAllConnections();
      await new Promise((r) => server.close(r));
    }
  });
});
