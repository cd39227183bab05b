import assert from 'node:assert/strict';
import fs from 'node:fs';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { AssemblyAI } from 'assemblyai';
import { client, eventually, startApi, startWorker, type RunningApi, type RunningWorker } from '../support/system.js';
import { newPartner } from '../support/fixtures.js';
import { speak } from '../support/audio.js';
import { binary, startAudioHost } from '../support/audio-host.js';
import { transcriptProgressQuery, transcriptWorkflowId } from '../../lib/contracts/transcript.js';

interface Delivery {
  method: string;
  headers: http.IncomingHttpHeaders;
  body: unknown;
}

/** A partner's webhook receiver: records every delivery and answers each with the next status of `answers` (the last one repeats). */
async function startReceiver(answers: number[]) {
  const deliveries: Delivery[] = [];
  const server = http.createServer((req, res) => {
    let body = '';
    req.on('data', (chunk) => (body += chunk));
    req.on('end', () => {
      deliveries.push({ method: req.method ?? '', headers: req.headers, body: JSON.parse(body || 'null') });
      res.writeHead(answers[Math.min(deliveries.length, answers.length) - 1]!, { 'content-type': 'text/plain' }).end('ok');
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return {
    url: `http://127.0.0.1:${(server.address() as AddressInfo).port}/hooks/transcripts`,
    deliveries,
    close: () => new Promise<void>((resolve) => {
      server.closeAllConnections();
      server.close(() => resolve());
    }),
  };
}

/**
 * AssemblyAI's webhooks: a transcript submitted with `webhook_url` is announced there, by a POST of
 * `{transcript_id, status}` with the partner's auth header, once it is completed or in error. A 2xx
 * is a delivery, a 4xx is final, anything else is tried again (10 attempts, 5 s apart at first).
 */
describe('transcription: webhooks (webhook_url)', function () {
  this.timeout(300_000);
  let api: RunningApi;
  let worker: RunningWorker;
  let partner: { name: string; key: string };
  let audioHost: Awaited<ReturnType<typeof startAudioHost>>;
  let call: ReturnType<typeof client>;

  before(async () => {
    api = await startApi({ TRANSCRIPTION_RATE_LIMIT_PER_MINUTE: '0' });
    worker = await startWorker();
    call = client(api.url);
    partner = await newPartner(call);
    audioHost = await startAudioHost({ '/clip.wav': binary(fs.readFileSync(await speak('Please call the doctor tomorrow morning.', 'flite-kal')), 'audio/wav') });
  });
  after(async () => {
    await worker?.kill();
    await api?.close();
    await audioHost?.close();
  });
  const audioUrl = () => audioHost.url('/clip.wav');

  const assemblyai = () => new AssemblyAI({ apiKey: partner.key, baseUrl: api.url });
  const stepOf = (id: string) => api.deps.temporal.workflow.getHandle(transcriptWorkflowId(id.split('/').pop()!)).query(transcriptProgressQuery);

  it("AssemblyAI's client sets a webhook with an auth header: the completed transcript is announced with it, a 500 is tried again, and the header's value is never shown", async () => {
    const receiver = await startReceiver([500, 200]);
    try {
      const submitted = await assemblyai().transcripts.submit({ audio: audioUrl(), webhook_url: receiver.url, webhook_auth_header_name: 'X-Webhook-Secret', webhook_auth_header_value: 'hook-secret-41' });
      assert.equal(submitted.status, 'queued');
      assert.deepEqual(
        { url: submitted.webhook_url, auth: submitted.webhook_auth, name: submitted.webhook_auth_header_name, code: submitted.webhook_status_code },
        { url: receiver.url, auth: true, name: 'X-Webhook-Secret', code: null },
      );
      await eventually('two deliveries (the first answered 500)', async () => receiver.deliveries.length >= 2, 90_000);
      for (const delivery of receiver.deliveries) {
        assert.equal(delivery.method, 'POST');
        assert.equal(delivery.headers['x-webhook-secret'], 'hook-secret-41');
        assert.match(String(delivery.headers['content-type']), /^application\/json/);
        assert.deepEqual(delivery.body, { transcript_id: submitted.id, status: 'completed' });
      }
      // The id it carries is one the client reads the transcript with.
      const transcript = await assemblyai().transcripts.get((receiver.deliveries[0]!.body as { transcript_id: string }).transcript_id);
      assert.equal(transcript.status, 'completed');
      assert.equal(transcript.webhook_status_code, 200);
      assert.equal(transcript.webhook_auth, true);
      assert.ok(!JSON.stringify(transcript).includes('hook-secret-41'), 'the header value is not shown');
      await eventually('the webhook step to be over', async () => (await stepOf(submitted.id)).step === 'retain');
      assert.equal(receiver.deliveries.length, 2, 'delivered once the receiver answered 200, then no more');
    } finally {
      await receiver.close();
    }
  });

  it('a transcript that ends in error is announced too; a 4xx from the receiver is final', async () => {
    const receiver = await startReceiver([410]);
    try {
      const submitted = await call('POST', '/v2/transcript', { key: partner.key, json: { audio_url: audioHost.url('/missing.wav'), webhook_url: receiver.url } });
      assert.equal(submitted.status, 200, JSON.stringify(submitted.body));
      assert.equal(submitted.body.webhook_auth, false);
      await eventually('the webhook step to be over', async () => (await stepOf(submitted.body.id)).step === 'retain', 90_000);
      assert.equal(receiver.deliveries.length, 1, 'a 4xx is not tried again');
      assert.deepEqual(receiver.deliveries[0]!.body, { transcript_id: submitted.body.id, status: 'error' });
      assert.equal(receiver.deliveries[0]!.headers['x-webhook-secret'], undefined);
      const read = await call('GET', submitted.body.id, { key: partner.key });
      assert.equal(read.body.status, 'error');
      assert.equal(read.body.webhook_status_code, 410);
    } finally {
      await receiver.close();
    }
  });

  it('a transcript without a webhook has no webhook fields; unusable webhook fields are a 422 on the field, and nothing is queued', async () => {
    const plain = await call('POST', '/v2/transcript', { key: partner.key, json: { audio_url: audioUrl() } });
    assert.equal(plain.status, 200);
    assert.deepEqual(Object.keys(plain.body).sort(), ['audio_url', 'id', 'status']);

    const count = () => api.deps.db.transcript.count();
    const before = await count();
    const cases: Array<[Record<string, unknown>, string, RegExp]> = [
      [{ webhook_url: 'ftp://example.org/hook' }, 'webhook_url', /must be an http or https URL/],
      [{ webhook_auth_header_name: 'X-Secret', webhook_auth_header_value: 'v' }, 'webhook_url', /is required with webhook_auth_header_name/],
      [{ webhook_url: 'https://example.org/hook', webhook_auth_header_name: 'X-Secret' }, 'webhook_auth_header_value', /is required/],
      [{ webhook_url: 'https://example.org/hook', webhook_auth_header_name: 'Bad Header', webhook_auth_header_value: 'v' }, 'webhook_auth_header_name', /pattern/],
      [{ webhook_url: 'https://example.org/hook', webhook_auth_header_name: 'Host', webhook_auth_header_value: 'v' }, 'webhook_auth_header_name', /the delivery sets that header itself/],
      [{ webhook_url: 'https://example.org/hook', webhook_auth_header_name: 'X-Secret', webhook_auth_header_value: 'a\r\nInjected: 1' }, 'webhook_auth_header_value', /pattern/],
    ];
    for (const [fields, field, message] of cases) {
      const refused = await call('POST', '/v2/transcript', { key: partner.key, json: { audio_url: audioUrl(), ...fields } });
      assert.equal(refused.status, 422, `${JSON.stringify(fields)}: ${JSON.stringify(refused.body)}`);
      assert.match(refused.body.errors[field]?.[0] ?? '', message, JSON.stringify(refused.body));
    }
    assert.equal(await count(), before);
  });
});
