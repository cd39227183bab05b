import assert from 'node:assert/strict';
import fs from 'node:fs';
import { client, eventually, startApi, startWorker, type RunningApi, type RunningWorker } from '../support/system.js';
import { newKnowledgeBase, newPartner } from '../support/fixtures.js';
import { anythingStored, storedNames } from '../support/stored-files.js';
import { concatWithPauses, silence, speak } from '../support/audio.js';
import { asWav16k, humanRecordings } from '../support/speech-recordings.js';
import { multipartFields, startOpenAiUpstream, type OpenAiUpstream } from '../support/openai-upstream.js';

/**
 * The two engines behind /v2/transcript: local Moonshine (English only; boosted words compared with
 * the model's own words) and an OpenAI-compatible transcription API (language mapped, boosted words in
 * the prompt, fillers and formatting applied to its text, failures retried or final).
 */
describe('transcription engines', function () {
  this.timeout(300_000);
  let api: RunningApi;
  let http: ReturnType<typeof client>;
  let partner: { name: string; key: string };

  before(async () => {
    api = await startApi({ TRANSCRIPTION_RATE_LIMIT_PER_MINUTE: '0', TRANSCRIPTION_CONCURRENCY_LIMIT: '0' });
    http = client(api.url);
    partner = await newPartner(http);
  });
  after(async () => {
    await api?.close();
  });

  const submit = async (audio: string, fields: Record<string, string | string[]> = {}) => {
    const fd = new FormData();
    fd.append('audio', new Blob([new Uint8Array(fs.readFileSync(audio))]), 'speech.wav');
    for (const [k, v] of Object.entries(fields)) for (const x of Array.isArray(v) ? v : [v]) fd.append(Array.isArray(v) ? `${k}[]` : k, x);
    const res = await fetch(`${api.url}/v2/transcript`, { method: 'POST', headers: { 'X-Api-Key': partner.key }, body: fd });
    assert.equal(res.status, 200, await res.clone().text());
    return ((await res.json()) as { id: string }).id;
  };
  const result = (id: string) =>
    eventually(`transcript ${id}`, async () => {
      const r = await http('GET', id, { key: partner.key });
      return r.body.status === 'completed' || r.body.status === 'error' ? r.body : null;
    }, 180_000);

  describe('local Moonshine', () => {
    let worker: RunningWorker;
    let card: string;
    before(async () => {
      worker = await startWorker();
      // A real speaker saying "ten of clubs" (pocketsphinx-testdata): the model hears "ten of cloves".
      card = await asWav16k(humanRecordings().find((r) => r.name === 'cards-001')!);
    });
    after(async () => {
      await worker?.kill();
    });

    it('boosted words change a near miss into the boosted word; unspoken boosted words change nothing', async () => {
      const [plain, boosted, unspoken] = await Promise.all([
        submit(card, { format_text: 'false' }),
        submit(card, { format_text: 'false', boosted_words: ['clubs'] }),
        submit(card, { format_text: 'false', boosted_words: ['quinoa', 'gdansk', 'ibuprofen', 'kowalski'] }),
      ]);
      const a = await result(plain);
      const b = await result(boosted);
      const c = await result(unspoken);
      assert.equal(a.text, 'ten of cloves', 'without boosting the engine hears "cloves"');
      assert.equal(b.text, 'ten of clubs');
      assert.equal(c.text, a.text);
      // Word times are spread over the same speech: the sentence spans the same time.
      const span = (t: { words: Array<{ start: number; end: number }> }) => [t.words[0]!.start, t.words.at(-1)!.end];
      assert.deepEqual(span(b), span(a));
    });

    it('a language the engine cannot do ends in error saying so, never in a transcript', async () => {
      const german = await speak('Die Besprechung beginnt morgen früh um neun Uhr.', 'espeak', 'de');
      const de = await result(await submit(german, { language_code: 'de' }));
      assert.deepEqual(Object.keys(de).sort(), ['error', 'id', 'status']);
      assert.equal(de.status, 'error');
      assert.match(de.error, /language_code 'de' cannot be transcribed by the local Moonshine engine \(English only\)/);
      const auto = await result(await submit(german, { language_auto: 'true' }));
      assert.equal(auto.status, 'error');
      assert.match(auto.error, /language_auto .* cannot be transcribed/);
      const uk = await result(await submit(card, { language_code: 'en_uk' }));
      assert.equal(uk.status, 'completed', 'regional English is English');
    });
  });

  describe('an OpenAI-compatible transcription API (TRANSCRIPTION_MODEL)', () => {
    let worker: RunningWorker;
    let upstream: OpenAiUpstream;
    let clip: string;
    let answer: string;
    before(async () => {
      answer = 'Um, I think, uh, we should go. Hmm, what time is it?';
      upstream = await startOpenAiUpstream((call) => (call.path.endsWith('/audio/transcriptions') ? { json: { text: answer } } : { status: 404, json: { error: { message: 'no' } } }));
      worker = await startWorker({ TRANSCRIPTION_MODEL: 'test-stt', TRANSCRIPTION_BASE_URL: upstream.baseUrl, TRANSCRIPTION_API_KEY: 'sk-stt', DIGITIZATION_MAX_OUTAGE_SECONDS: '8' });
      clip = await speak('Hello there.', 'flite-kal');
    });
    after(async () => {
      await worker?.kill();
      await upstream?.close();
    });

    const lastFields = () => multipartFields(upstream.callsTo('/v1/audio/transcriptions').at(-1)!.body);

    it('sends the model, the mapped language and the boosted words as the prompt', async () => {
      const uk = await result(await submit(clip, { language_code: 'en_uk', boosted_words: ['Kowalski', 'quinoa'] }));
      assert.equal(uk.status, 'completed', JSON.stringify(uk));
      assert.equal(uk.words, null, 'the model gives text without word times');
      assert.equal(uk.language_code, 'en_uk');
      const sentences = await http('GET', `${uk.id}/sentences`, { key: partner.key });
      assert.equal(sentences.status, 409);
      assert.match(sentences.body.error, /no word times: it was made by openai:test-stt/);
      const f = lastFields();
      assert.equal(f.model, 'test-stt');
      assert.equal(f.language, 'en');
      assert.match(f.prompt ?? '', /Kowalski, quinoa/);
      assert.equal(upstream.callsTo('/v1/audio/transcriptions').at(-1)!.headers.authorization, 'Bearer sk-stt');
      await result(await submit(clip, { language_code: 'de' }));
      assert.equal(lastFields().language, 'de');
      const auto = await result(await submit(clip, { language_auto: 'true', language_code: 'fr' }));
      assert.equal(lastFields().language, undefined, 'language_auto: the model identifies it');
      assert.equal(auto.language_code, null, 'with language_auto no language_code is claimed');
    });

    it('fillers are removed unless filler_words; format_text=false lowers the case and drops punctuation; punctuate=false drops only the punctuation', async () => {
      const plain = await result(await submit(clip));
      assert.equal(plain.text, 'I think, we should go. What time is it?');
      const fillers = await result(await submit(clip, { filler_words: 'true' }));
      assert.equal(fillers.text, answer);
      assert.match(lastFields().prompt ?? '', /Umm, let me think/);
      const unpunctuated = await result(await submit(clip, { punctuate: 'false' }));
      assert.equal(unpunctuated.text, 'I think we should go What time is it');
      const bare = await result(await submit(clip, { filler_words: 'true', format_text: 'false' }));
      assert.equal(bare.text, 'um i think uh we should go hmm what time is it');
    });

    it('server errors are retried; a refusal ends in error with the provider message', async () => {
      const before = upstream.callsTo('/v1/audio/transcriptions').length;
      upstream.respond(() => (upstream.callsTo('/v1/audio/transcriptions').length - before <= 2 ? { status: 500, json: { error: { message: 'overloaded' } } } : { json: { text: 'Recovered.' } }));
      const ok = await result(await submit(clip));
      assert.equal(ok.status, 'completed');
      assert.equal(ok.text, 'Recovered.');
      assert.equal(upstream.callsTo('/v1/audio/transcriptions').length - before, 3);
      upstream.respond(() => ({ status: 400, json: { error: { message: 'Audio file might be corrupted or unsupported', type: 'invalid_request_error' } } }));
      const failed = await result(await submit(clip));
      assert.equal(failed.status, 'error');
      assert.match(failed.error, /refused the audio \(HTTP 400\).*Audio file might be corrupted/);
    });

    it('a provider rate-limiting for over a minute (five 429s in a row) is waited out: the transcript completes', async () => {
      const calls = () => upstream.callsTo('/v1/audio/transcriptions').length;
      const before = calls();
      upstream.respond(() => (calls() - before <= 5 ? { status: 429, json: { error: { message: 'Rate limit reached for requests', type: 'requests' } } } : { json: { text: 'Waited out.' } }));
      const id = await submit(clip);
      await eventually('the third 429', async () => calls() - before >= 3);
      assert.equal((await http('GET', id, { key: partner.key })).body.status, 'processing');
      const done = await result(id);
      assert.deepEqual({ status: done.status, text: done.text }, { status: 'completed', text: 'Waited out.' });
      assert.equal(calls() - before, 6);
    });

    it('an audio document digitized through the API: an outage (503s) delays it; a refusal (400) fails it at once, naming the file', async () => {
      const k = await newKnowledgeBase(http);
      const calls = () => upstream.callsTo('/v1/audio/transcriptions').length;
      const upload = async (name: string) => {
        const res = await http('POST', `/api/documents/${k.partner.name}/${k.kb}`, { key: k.partner.key, form: { type: 'file', folder: k.folder, use_original_as_rewritten: 'true', file: { name, content: fs.readFileSync(clip) } } });
        assert.equal(res.status, 201, JSON.stringify(res.body));
        return res.body.id as string;
      };
      const read = async (id: string) => (await http('GET', `/api/document/${k.partner.name}/${k.kb}/${id}`, { key: k.partner.key })).body;

      let before = calls();
      upstream.respond(() => (calls() - before <= 2 ? { status: 503, json: { error: { message: 'The engine is overloaded' } } } : { json: { text: 'Meeting moved to Friday.' } }));
      const memo = await upload('memo.wav');
      const digitized = await eventually('digitized after the outage', async () => {
        const d = await read(memo);
        if (d.processing_error) throw new Error(d.processing_error);
        return d.digitized_char_count > 0 ? d : null;
      });
      assert.equal(digitized.digitized_char_count, 'Meeting moved to Friday.'.length);
      assert.equal(calls() - before, 3, 'two refused calls, then the one that answered');

      before = calls();
      upstream.respond(() => ({ status: 400, json: { error: { message: 'Audio file might be corrupted or unsupported', type: 'invalid_request_error' } } }));
      const broken = await upload('broken.wav');
      const failed = await eventually('failed', async () => {
        const d = await read(broken);
        return d.processing_error ? d : null;
      }, 30_000);
      assert.match(failed.processing_error, /^broken\.wav: the transcription model test-stt refused the audio \(HTTP 400\): Audio file might be corrupted or unsupported$/);
      assert.equal(calls() - before, 1, 'a refusal is not sent again');
    });

    it('a long audio document whose second piece meets an outage: once the API answers, only the pieces not yet transcribed are sent again', async () => {
      const k = await newKnowledgeBase(http);
      const calls = () => upstream.callsTo('/v1/audio/transcriptions').length;
      // Over the API engine's 600 s a call: two pieces, cut in a pause.
      const recording = await concatWithPauses([clip, await silence(330), clip, await silence(330), clip]);
      const before = calls();
      let answered = 0;
      upstream.respond(() => (calls() - before === 2 || calls() - before === 3 ? { status: 503, json: { error: { message: 'The engine is overloaded' } } } : { json: { text: `Piece ${++answered}.` } }));
      const res = await http('POST', `/api/documents/${k.partner.name}/${k.kb}`, { key: k.partner.key, form: { type: 'file', folder: k.folder, use_original_as_rewritten: 'true', file: { name: 'lecture.wav', content: fs.readFileSync(recording) } } });
      assert.equal(res.status, 201, JSON.stringify(res.body));
      const kept = `documents/${res.body.id}/media-pieces`;
      await eventually('the second piece refused', async () => calls() - before >= 2);
      assert.equal((await storedNames(kept)).length, 1, 'the first piece is kept beside the document while the outage lasts');
      const digitized = await eventually('digitized after the outage', async () => {
        const d = (await http('GET', `/api/document/${k.partner.name}/${k.kb}/${res.body.id}`, { key: k.partner.key })).body;
        if (d.processing_error) throw new Error(d.processing_error);
        return d.digitized_char_count > 0 ? d : null;
      }, 90_000);
      assert.equal(calls() - before, 4, 'the first piece once, the second refused twice and then answered');
      const content = await http('GET', `/api/documents/${k.partner.name}/${k.kb}/${res.body.id}/content/digitized`, { key: k.partner.key });
      assert.equal(content.body.content.trim(), 'Piece 1. Piece 2.', 'each piece transcribed once, in order');
      assert.equal(digitized.digitized_char_count, content.body.content.length);
      assert.ok(!(await anythingStored(kept)), 'the kept pieces are gone once the recording is digitized');
    });
  });
});
