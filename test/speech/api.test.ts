import assert from 'node:assert/strict';
import OpenAI from 'openai';
import { client, startApi, type RunningApi } from '../support/system.js';
import { newQuotaKey } from '../messaging/support.js';
import { probe, tempFile } from '../support/audio.js';

/**
 * /v2/audio/speech through the official openai client, unmodified: baseURL `<api>/v2` and a quota
 * key as its apiKey. Every format is decoded by ffprobe; durations follow `speed`.
 */
describe('speech: /v2/audio/speech with the official openai client', function () {
  this.timeout(180_000);
  let api: RunningApi;
  let http: ReturnType<typeof client>;
  let openai: OpenAI;
  let key: string;

  before(async () => {
    api = await startApi();
    http = client(api.url);
    key = (await newQuotaKey(http, { quota_type: 'speech' })).key;
    openai = new OpenAI({ baseURL: `${api.url}/v2`, apiKey: key, maxRetries: 0 });
  });
  after(async () => {
    await api?.close();
  });

  const text = 'The meeting starts tomorrow morning at nine. Please bring the report and your notes.';

  async function speech(body: Record<string, unknown>) {
    const res = await openai.audio.speech.create({ model: 'tts-1', voice: 'slt', input: text, ...body } as OpenAI.Audio.SpeechCreateParams).asResponse();
    return { res, bytes: Buffer.from(await res.arrayBuffer()) };
  }

  it('mp3: audio/mpeg, decoded as mp3 at 24 kHz mono', async () => {
    const { res, bytes } = await speech({ response_format: 'mp3' });
    assert.equal(res.headers.get('content-type'), 'audio/mpeg');
    assert.match(res.headers.get('x-service-tts-request-id') ?? '', /^\d+$/);
    const p = await probe(tempFile(bytes, 'mp3'));
    assert.equal(p.codec, 'mp3');
    assert.equal(p.sampleRate, 24000);
    assert.equal(p.channels, 1);
    assert.ok(p.duration > 3 && p.duration < 10, `${p.duration} s`);
  });

  it('opus: audio/ogg, Opus in Ogg', async () => {
    const { res, bytes } = await speech({ response_format: 'opus' });
    assert.equal(res.headers.get('content-type'), 'audio/ogg');
    const p = await probe(tempFile(bytes, 'ogg'));
    assert.equal(p.codec, 'opus');
    assert.equal(p.format, 'ogg');
    assert.ok(p.duration > 3 && p.duration < 10, `${p.duration} s`);
  });

  it('wav: audio/wav with a correct RIFF header and Content-Length', async () => {
    const { res, bytes } = await speech({ response_format: 'wav' });
    assert.equal(res.headers.get('content-type'), 'audio/wav');
    assert.equal(Number(res.headers.get('content-length')), bytes.length);
    assert.equal(bytes.toString('ascii', 0, 4), 'RIFF');
    assert.equal(bytes.readUInt32LE(4), bytes.length - 8);
    assert.equal(bytes.toString('ascii', 36, 40), 'data');
    assert.equal(bytes.readUInt32LE(40), bytes.length - 44);
    const p = await probe(tempFile(bytes, 'wav'));
    assert.equal(p.codec, 'pcm_s16le');
    assert.equal(p.sampleRate, 24000);
    assert.equal(p.channels, 1);
  });

  it('2,000 emoji answer a decodable mp3 (as one utterance festival ran out of parser stack, exited 0 and wrote nothing: an mp3 without a frame)', async () => {
    const { res, bytes } = await speech({ response_format: 'mp3', input: '😀'.repeat(2000) });
    assert.equal(res.status, 200);
    const p = await probe(tempFile(bytes, 'mp3'));
    assert.equal(p.codec, 'mp3');
    assert.ok(p.duration > 0, `${p.duration} s`);
  });

  it('pcm: application/octet-stream, raw s16le mono at 24 kHz', async () => {
    const wav = (await speech({ response_format: 'wav' })).bytes;
    const { res, bytes } = await speech({ response_format: 'pcm' });
    assert.equal(res.headers.get('content-type'), 'application/octet-stream');
    assert.equal(bytes.length % 2, 0);
    const p = await probe(tempFile(bytes, 'pcm'), { rate: 24000 });
    assert.ok(Math.abs(p.duration - (wav.length - 44) / 48000) < 0.05, `${p.duration}`);
  });

  for (const [voice, language] of [['slt', undefined], ['kal', undefined], ['espeak', 'de']] as const) {
    it(`speed follows the engine's rate control (${voice}${language ? `, ${language}` : ''})`, async () => {
      const input = language === 'de' ? 'Die Besprechung beginnt morgen früh um neun Uhr. Bitte bringen Sie den Bericht mit.' : text;
      const duration = async (speed: number) => {
        const { bytes } = await speech({ voice, input, speed, response_format: 'wav', ...(language ? { language } : {}) });
        return (bytes.length - 44) / 48000;
      };
      const base = await duration(1);
      for (const speed of [0.5, 1.5]) {
        const d = await duration(speed);
        const expected = base / speed;
        assert.ok(Math.abs(d - expected) / expected < 0.15, `speed ${speed}: ${d.toFixed(2)} s, expected about ${expected.toFixed(2)} s`);
      }
    });
  }

  it('the served OpenAPI document declares the one model name as an enum of /v2/audio/speech, and documents /v2/audio/voices', async () => {
    const doc = (await http('GET', '/openapi.json')).body;
    const op = doc.paths['/v2/audio/speech'].post;
    const schema = op.requestBody.content['application/json'].schema;
    assert.deepEqual(schema.properties.model, { type: 'string', enum: ['tts-1'] });
    assert.deepEqual(schema.required, ['model', 'voice', 'input']);
    assert.deepEqual(schema.properties.response_format.enum, ['mp3', 'opus', 'wav', 'pcm']);
    assert.deepEqual(Object.keys(op.responses).sort(), ['200', '400', '401', '403', '413', '422', '429', '500', '502', '503', '504']);
    assert.ok(doc.paths['/v2/audio/voices'].get, 'the voices extension is documented');
    // The enum is what the API enforces: the client's model name is refused on `model`.
    const other = await http('POST', '/v2/audio/speech', { headers: { authorization: `Bearer ${key}` }, json: { model: 'gpt-4o-mini-tts', voice: 'kal', input: 'Hi.' } });
    assert.equal(other.status, 422);
    assert.deepEqual(Object.keys(other.body.errors), ['model']);
  });

  it('accepts the key as X-Api-Key and X-API-Key too, and the voice as {id}', async () => {
    for (const header of ['X-Api-Key', 'X-API-Key']) {
      const res = await fetch(`${api.url}/v2/audio/speech`, {
        method: 'POST',
        headers: { [header]: key, 'content-type': 'application/json' },
        body: JSON.stringify({ model: 'tts-1', voice: { id: 'kal' }, input: 'Hello.', response_format: 'pcm' }),
      });
      assert.equal(res.status, 200, await res.clone().text());
      assert.ok((await res.arrayBuffer()).byteLength > 1000);
    }
  });
});
