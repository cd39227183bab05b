import assert from 'node:assert/strict';
import fs from 'node:fs';
import { client, eventually, startApi, startWorker, type RunningApi, type RunningWorker } from '../support/system.js';
import { newPartner } from '../support/fixtures.js';
import { anythingStored } from '../support/stored-files.js';
import { encodeAs, speak, wer } from '../support/audio.js';
import { pdf } from '../support/samples.js';
import { binary, startAudioHost } from '../support/audio-host.js';

/**
 * What becomes of an `audio_url` that cannot be used. Submission only checks that it is an http(s)
 * URL (422 otherwise, test/transcription/requests.test.ts); the worker downloads it through the
 * safe fetcher, so every refusal below is accepted as `queued` and then ends in status `error` with
 * a message that says why (nothing retried, no audio kept). The worker runs as in production
 * (private and link-local addresses refused; loopback is allowed only so that it can reach this
 * test's own server) with a download bound of 64 KiB (TRANSCRIPT_AUDIO_FETCH_MAX_BYTES).
 */
const MAX_BYTES = 64 * 1024;
/** A presigned URL's query (an S3 session token makes them 1-3 KB): longer than the 2,048 characters the schema once allowed. */
const presignedQuery = `X-Amz-Security-Token=${'A'.repeat(3000)}&X-Amz-Signature=${'0'.repeat(64)}`;
const escape = (text: string) => text.replace(/[$()*+.?[\\\]^{|}]/g, '\\$&');

describe('transcription: audio_url that cannot be used', function () {
  this.timeout(300_000);
  let api: RunningApi;
  let worker: RunningWorker;
  let call: ReturnType<typeof client>;
  let partner: { name: string; key: string };
  let host: Awaited<ReturnType<typeof startAudioHost>>;
  let small: Buffer;
  let large: Buffer;

  before(async () => {
    const clip = await speak('Please call the doctor tomorrow morning about the weather report.', 'flite-kal');
    small = fs.readFileSync(await encodeAs(clip, 'mp3'));
    // Real audio, over the bound: some four seconds of 16 kHz 16-bit PCM.
    large = fs.readFileSync(await speak('The river road will stay closed until the water level falls again next week.', 'flite-kal'));
    assert.ok(small.length < MAX_BYTES && large.length > MAX_BYTES, `${small.length} / ${large.length} bytes`);
    host = await startAudioHost({
      '/small.mp3': binary(small, 'audio/mpeg'),
      [`/canci%C3%B3n.mp3?${presignedQuery}`]: binary(small, 'audio/mpeg'),
      '/large.wav': binary(large, 'audio/wav'),
      // No Content-Length: the bound must be enforced while the body arrives.
      '/large-chunked.wav': (res) => {
        res.writeHead(200, { 'content-type': 'audio/wav' });
        for (let i = 0; i < large.length; i += 8192) res.write(large.subarray(i, i + 8192));
        res.end();
      },
      '/gone.mp3': (res) => void res.writeHead(404, { 'content-type': 'text/html' }).end('<h1>Not Found</h1>'),
      '/private.mp3': (res) => void res.writeHead(403, { 'content-type': 'application/xml' }).end('<Error><Code>AccessDenied</Code></Error>'),
      '/page.mp3': (res) => void res.writeHead(200, { 'content-type': 'text/html' }).end('<!doctype html><html><body><h1>Episode 12</h1><p>Listen on our site.</p></body></html>'),
      '/notes.mp3': binary(pdf(['Show notes of episode 12']), 'audio/mpeg'),
      '/metadata.mp3': (res) => void res.writeHead(302, { location: 'http://169.254.169.254/latest/meta-data/iam/security-credentials/' }).end(),
    });
    api = await startApi({ TRANSCRIPTION_RATE_LIMIT_PER_MINUTE: '0', TRANSCRIPTION_CONCURRENCY_LIMIT: '0' });
    call = client(api.url);
    partner = await newPartner(call);
    worker = await startWorker({ TRANSCRIPT_AUDIO_FETCH_MAX_BYTES: String(MAX_BYTES) });
  });
  after(async () => {
    await worker?.kill();
    await api?.close();
    await host?.close();
  });

  const storedAudio = (id: string) => anythingStored(`transcripts/${id}`);

  /** Submits `url` (accepted: 200 queued) and answers the transcript once it has finished. */
  async function transcriptOf(url: string) {
    const res = await call('POST', '/v2/transcript', { key: partner.key, json: { audio_url: url } });
    assert.equal(res.status, 200, JSON.stringify(res.body));
    assert.equal(res.body.status, 'queued');
    const done = await eventually(`${url} to finish`, async () => {
      const r = await call('GET', res.body.id, { key: partner.key });
      return r.body.status === 'completed' || r.body.status === 'error' ? r.body : null;
    }, 120_000);
    return { ...done, uuid: (res.body.id as string).split('/').pop()! };
  }

  /** The transcript ended in `error` with `message`, in the spec's shape, and kept no audio. */
  async function endsInError(url: string, message: RegExp) {
    const t = await transcriptOf(url);
    assert.equal(t.status, 'error', JSON.stringify(t));
    assert.deepEqual(Object.keys(t).filter((k) => k !== 'uuid').sort(), ['audio_url', 'error', 'id', 'status']);
    assert.equal(t.audio_url, url);
    assert.match(t.error, message);
    assert.equal(await storedAudio(t.uuid), false, 'no audio is kept');
    return t;
  }

  it('a download within the bound is transcribed (the bound refuses only what is over it)', async () => {
    const t = await transcriptOf(host.url('/small.mp3'));
    assert.equal(t.status, 'completed', JSON.stringify(t));
    assert.ok(wer('please call the doctor tomorrow morning about the weather report', t.text) <= 0.3, t.text);
  });

  it('a URL with non-ASCII characters as they are, and a long presigned query, is fetched (percent-encoded) and transcribed', async () => {
    const url = host.url(`/canción.mp3?${presignedQuery}`);
    const t = await transcriptOf(url);
    assert.equal(t.status, 'completed', JSON.stringify(t));
    assert.equal(t.audio_url, url);
    assert.equal(host.requestsTo(`/canci%C3%B3n.mp3?${presignedQuery}`), 1);
  });

  it('a link-local address (cloud metadata) is refused even though loopback is allowed', () =>
    endsInError('http://169.254.169.254/latest/meta-data/', /^audio_url could not be used: Refused to fetch http:\/\/169\.254\.169\.254\/latest\/meta-data\/: host 169\.254\.169\.254 resolves to a link-local address 169\.254\.169\.254$/));

  it('a private address is refused (URL_FETCH_ALLOW_PRIVATE is off, as in production)', () =>
    endsInError('http://10.0.0.1/episode.mp3', /^audio_url could not be used: Refused to fetch http:\/\/10\.0\.0\.1\/episode\.mp3: host 10\.0\.0\.1 resolves to a private address 10\.0\.0\.1$/));

  it('a host name that does not exist (.invalid never resolves, RFC 2606) ends in error at once: the name server answered, a retry cannot help', () =>
    endsInError('http://no-such-host.invalid/episode.mp3', /^audio_url could not be used: Refused to fetch http:\/\/no-such-host\.invalid\/episode\.mp3: host no-such-host\.invalid does not resolve \(ENOTFOUND\)$/));

  it('a redirect to a link-local address is refused at the redirect', async () => {
    const url = host.url('/metadata.mp3');
    await endsInError(url, /^audio_url could not be used: Refused to fetch .*\/metadata\.mp3 \(redirected to http:\/\/169\.254\.169\.254\/latest\/meta-data\/iam\/security-credentials\/\): host 169\.254\.169\.254 resolves to a link-local address/);
  });

  it('a URL answering 404 or 403 ends in error naming the status, asked once (a 4xx is not retried)', async () => {
    for (const [p, status] of [['/gone.mp3', 404], ['/private.mp3', 403]] as const) {
      const url = host.url(p);
      await endsInError(url, new RegExp(`^audio_url could not be used: Fetching ${escape(url)} failed: HTTP ${status} from `));
      assert.equal(host.requestsTo(p), 1, `${p} was requested once`);
    }
  });

  it('a URL answering something that is not audio (a web page, a PDF sent as audio/mpeg) ends in error saying so', async () => {
    for (const p of ['/page.mp3', '/notes.mp3']) {
      const url = host.url(p);
      await endsInError(url, new RegExp(`^audio_url could not be used: ${escape(url)} is not an audio file \\(mp3, wav, ogg, flac, m4a, mp4, webm\\)$`));
    }
  });

  it('a download over TRANSCRIPT_AUDIO_FETCH_MAX_BYTES ends in error naming the bound, declared or not', async () => {
    for (const p of ['/large.wav', '/large-chunked.wav']) {
      await endsInError(host.url(p), new RegExp(`^audio_url could not be used: Refused to fetch .*${escape(p)}: the response is larger than ${MAX_BYTES} bytes$`));
    }
  });
});
