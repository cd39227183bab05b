import assert from 'node:assert/strict';
import fs from 'node:fs';
import { client, eventually, startApi, startWorker, type RunningApi, type RunningWorker } from '../support/system.js';
import { newPartner } from '../support/fixtures.js';
import { newQuotaKey } from '../messaging/support.js';
import { wavFile } from '../../lib/audio/index.js';
import { concatWithPauses, encodeAs, probe, silence, speak, startFileServer, wer } from '../support/audio.js';
import { asWav16k, humanRecordings, wordErrors } from '../support/speech-recordings.js';

/**
 * /v2/transcript end to end with the local engine: speech made by festival and real people's
 * recordings, submitted by URL and by upload in every accepted container, polled until completed,
 * compared by word error rate.
 */
const passage = [
  'The weather service expects heavy rain in the northern valleys tomorrow afternoon.',
  'Farmers should move their animals to higher ground before the evening.',
  'The bridge on the river road will stay closed until the water level falls.',
  'Schools in the area will open one hour later than usual on Thursday morning.',
];

describe('transcription: /v2/transcript with the local engine', function () {
  this.timeout(300_000);
  let api: RunningApi;
  let worker: RunningWorker;
  let http: ReturnType<typeof client>;
  let files: Awaited<ReturnType<typeof startFileServer>>;
  let recording: string;
  let partner: { name: string; key: string };

  before(async () => {
    api = await startApi({ TRANSCRIPTION_CONCURRENCY_LIMIT: '0', TRANSCRIPTION_RATE_LIMIT_PER_MINUTE: '0' });
    http = client(api.url);
    worker = await startWorker();
    files = await startFileServer();
    recording = await concatWithPauses(await Promise.all(passage.map((s) => speak(s))));
    partner = await newPartner(http);
  });
  after(async () => {
    await worker?.kill();
    await api?.close();
    await files?.close();
  });

  const poll = (id: string, key = partner.key) => http('GET', id, { key });
  const finished = (id: string, key = partner.key) =>
    eventually(`transcript ${id} to finish`, async () => {
      const r = await poll(id, key);
      return r.body.status === 'completed' || r.body.status === 'error' ? r : null;
    }, 240_000);

  it('transcribes an audio_url: queued, then processing, then the text and the duration', async () => {
    const res = await http('POST', '/v2/transcript', { key: partner.key, json: { audio_url: files.url(await encodeAs(recording, 'mp3')) } });
    assert.equal(res.status, 200, JSON.stringify(res.body));
    assert.match(res.body.id, /^\/v2\/transcript\/[0-9a-f-]{36}$/);
    assert.equal(res.body.status, 'queued');
    // Every status a polling client sees, in order, starting with the submission's answer.
    const observed: string[] = [res.body.status];
    const done = await eventually('completion', async () => {
      const r = await poll(res.body.id);
      observed.push(r.body.status);
      if (r.body.status === 'completed' || r.body.status === 'error') return r;
      // A URL submission's answers repeat its audio_url (AssemblyAI's Python client requires it).
      assert.deepEqual(Object.keys(r.body).sort(), ['audio_url', 'id', 'status']);
      return null;
    }, 240_000);
    assert.equal(done.body.status, 'completed', JSON.stringify(done.body));
    assert.deepEqual(Object.keys(done.body).sort(), ['audio_duration', 'audio_url', 'confidence', 'id', 'language_code', 'status', 'text', 'words']);
    assert.equal(done.body.language_code, 'en_us');
    assert.equal(done.body.audio_url, res.body.audio_url);
    assert.equal(done.body.audio_duration, Math.round((await probe(recording)).duration));
    const rate = wer(passage.join(' '), done.body.text);
    assert.ok(rate <= 0.1, `WER ${rate.toFixed(2)}: ${done.body.text}`);

    // Statuses only move forward (queued → processing → completed), and the client saw the
    // transcript at work: the first poll follows the submission by milliseconds, while preparing
    // and recognising some 20 s of speech takes seconds, so polls every 200 ms see `processing`.
    const order = ['queued', 'processing', 'completed'];
    const steps = observed.filter((s, i) => i === 0 || s !== observed[i - 1]);
    for (const s of steps) assert.ok(order.includes(s), `unexpected status ${s} in ${steps.join(' → ')}`);
    for (let i = 1; i < steps.length; i++) assert.ok(order.indexOf(steps[i]!) > order.indexOf(steps[i - 1]!), `went backwards: ${steps.join(' → ')}`);
    assert.deepEqual(steps.slice(-2), ['processing', 'completed'], `processing was seen before completion: ${steps.join(' → ')}`);
  });

  it('real human speech, read and prompted, comes back with under 5 % of its words wrong', async () => {
    // Debian's recordings of real speakers (test/support/speech-recordings.ts): LibriVox readings;
    // card names, a robot command and speaker-test's channel names. Case, punctuation and the
    // spelling of numbers are not counted.
    const recordings = humanRecordings();
    assert.ok(recordings.length >= 19, `pocketsphinx-testdata and alsa-utils are installed (scripts/dev-packages.txt): ${recordings.length}`);
    const sets = (['read', 'prompted'] as const).map((set) => recordings.filter((r) => r.set === set));
    const results = await Promise.all(
      sets.map(async (set) => {
        const audio = await concatWithPauses(await Promise.all(set.map(asWav16k)), 1);
        const res = await http('POST', '/v2/transcript', { key: partner.key, form: { audio: { name: 'people.wav', content: fs.readFileSync(audio) } } });
        const done = (await finished(res.body.id)).body;
        assert.equal(done.status, 'completed', JSON.stringify(done));
        return { ...wordErrors(set.map((r) => r.text).join(' '), done.text), text: done.text as string };
      }),
    );
    const errors = results.reduce((n, r) => n + r.errors, 0);
    const words = results.reduce((n, r) => n + r.words, 0);
    assert.ok(errors / words < 0.05, `${errors} of ${words} words wrong: ${results.map((r) => r.text).join(' | ')}`);
  });

  it('transcribes an upload in each accepted container (mp3 wav ogg flac m4a mp4 webm)', async () => {
    const clip = await speak('Please call the doctor tomorrow morning about the weather report.', 'flite-kal');
    const ids: Array<[string, string]> = [];
    for (const ext of ['mp3', 'wav', 'ogg', 'flac', 'm4a', 'mp4', 'webm']) {
      const file = await encodeAs(clip, ext);
      const res = await http('POST', '/v2/transcript', { key: partner.key, form: { audio: { name: `clip.${ext}`, content: fs.readFileSync(file) } } });
      assert.equal(res.status, 200, `${ext}: ${JSON.stringify(res.body)}`);
      ids.push([ext, res.body.id]);
    }
    for (const [ext, id] of ids) {
      const done = await finished(id);
      assert.equal(done.body.status, 'completed', `${ext}: ${JSON.stringify(done.body)}`);
      assert.ok(wer('please call the doctor tomorrow morning about the weather report', done.body.text) <= 0.1, `${ext}: ${done.body.text}`);
    }
  });

  it('format_text adds capitals and sentence ends; without it the text is lower case and unpunctuated', async () => {
    const upload = { name: 'passage.wav', content: fs.readFileSync(recording) };
    const formatted = await http('POST', '/v2/transcript', { key: partner.key, form: { audio: upload } });
    const plain = await http('POST', '/v2/transcript', { key: partner.key, form: { audio: upload, format_text: 'false' } });
    const a = (await finished(formatted.body.id)).body.text as string;
    const b = (await finished(plain.body.id)).body.text as string;
    assert.match(a, /^[A-Z]/);
    assert.match(a, /[.?]$/);
    assert.equal(b, b.toLowerCase());
    assert.doesNotMatch(b, /[.,?!]/);
    assert.ok(wer(a, b) === 0, `${a} / ${b}`);
  });

  it('silence completes with an empty text', async () => {
    const res = await http('POST', '/v2/transcript', { key: partner.key, form: { audio: { name: 'quiet.wav', content: fs.readFileSync(await silence(3)) } } });
    const done = await finished(res.body.id);
    assert.deepEqual(done.body, { id: res.body.id, status: 'completed', text: '', audio_duration: 3, words: [], confidence: null, language_code: 'en_us' });
    // The id filled into the documented path GET /v2/transcript/{id} percent-encoded, as path templating does.
    const encoded = await http('GET', `/v2/transcript/${encodeURIComponent(res.body.id)}`, { key: partner.key });
    assert.deepEqual(encoded.body, done.body);
  });

  it("a completed transcript's words, sentences, paragraphs, subtitles and word search follow the audio's times", async () => {
    // Two sentences 0.8 s apart, then 2.5 s of silence, then a third: two paragraphs.
    const [a, b, c] = await Promise.all(passage.slice(0, 3).map((s) => speak(s)));
    const audio = await concatWithPauses([await concatWithPauses([a!, b!], 0.8), c!], 2.5);
    const res = await http('POST', '/v2/transcript', { key: partner.key, form: { audio: { name: 'paragraphs.wav', content: fs.readFileSync(audio) } } });
    const done = (await finished(res.body.id)).body;
    assert.equal(done.status, 'completed', JSON.stringify(done));
    const get = (suffix: string, key = partner.key) => http('GET', `${res.body.id}${suffix}`, { key });

    type Word = { text: string; start: number; end: number; confidence: number | null; speaker: null };
    const words = done.words as Word[];
    assert.equal(words.map((w) => w.text).join(' '), done.text, 'the words are those of the text, punctuation included');
    for (const [i, w] of words.entries()) {
      assert.ok(Number.isInteger(w.start) && w.end >= w.start, JSON.stringify(w));
      assert.ok(i === 0 || w.start >= words[i - 1]!.end, `word ${i} starts before the one before it ends`);
      assert.ok(w.confidence !== null && w.confidence >= 0 && w.confidence <= 1 && w.speaker === null, JSON.stringify(w));
    }
    assert.ok(words.at(-1)!.end <= done.audio_duration * 1000 + 500, `the last word ends within the audio (${words.at(-1)!.end} ms of ${done.audio_duration} s)`);
    const mean = words.reduce((n, w) => n + w.confidence!, 0) / words.length;
    assert.ok(Math.abs(done.confidence - mean) < 1e-3, `confidence ${done.confidence} is the words' mean ${mean}`);

    const sentences = await get('/sentences');
    assert.equal(sentences.status, 200, JSON.stringify(sentences.body));
    assert.equal(sentences.body.id, res.body.id);
    assert.equal(sentences.body.audio_duration, done.audio_duration);
    type Span = { text: string; start: number; end: number; words: Word[] };
    const sentenceList = sentences.body.sentences as Span[];
    assert.ok(sentenceList.length >= 3, `three sentences were spoken: ${sentenceList.map((s) => s.text).join(' | ')}`);
    assert.equal(sentenceList.map((s) => s.text).join(' '), done.text);
    for (const s of sentenceList) {
      assert.match(s.text, /^[A-Z].*[.?]$/, s.text);
      assert.deepEqual([s.start, s.end], [s.words[0]!.start, s.words.at(-1)!.end]);
    }

    const paragraphs = (await get('/paragraphs')).body.paragraphs as Span[];
    assert.equal(paragraphs.length, 2, paragraphs.map((p) => p.text).join(' | '));
    assert.ok(wer(`${passage[0]} ${passage[1]}`, paragraphs[0]!.text) <= 0.15, paragraphs[0]!.text);
    assert.ok(wer(passage[2]!, paragraphs[1]!.text) <= 0.15, paragraphs[1]!.text);
    assert.ok(paragraphs[1]!.start - paragraphs[0]!.end >= 1500, 'the second paragraph starts after the long pause');

    // SRT: numbered cues whose times are the words' and whose texts make up the text.
    const srt = await fetch(`${api.url}${res.body.id}/srt?chars_per_caption=32`, { headers: { 'X-Api-Key': partner.key } });
    assert.equal(srt.status, 200);
    assert.match(srt.headers.get('content-type') ?? '', /^application\/x-subrip/);
    const cues = (await srt.text()).trim().split(/\n\n/).map((block) => block.split('\n'));
    const clock = (t: string) => t.split(/[:,.]/).map(Number).reduce((acc, n, i) => (i < 3 ? acc * 60 + n : acc * 1000 + n), 0);
    assert.deepEqual(cues.map((c) => c[0]), cues.map((_, i) => String(i + 1)));
    assert.equal(cues.map((c) => c[2]).join(' '), done.text);
    for (const c of cues) assert.ok(c[2]!.length <= 32 || !c[2]!.includes(' '), `cue longer than 32 characters: ${c[2]}`);
    const [firstStart, firstEnd] = cues[0]![1]!.split(' --> ').map(clock);
    assert.equal(firstStart, words[0]!.start);
    assert.ok(firstEnd! > firstStart!);
    const vtt = await fetch(`${api.url}${res.body.id}/vtt`, { headers: { 'X-Api-Key': partner.key } });
    assert.match(vtt.headers.get('content-type') ?? '', /^text\/vtt/);
    const vttText = await vtt.text();
    assert.match(vttText, /^WEBVTT\n\n\d\d:\d\d:\d\d\.\d{3} --> \d\d:\d\d:\d\d\.\d{3}\n/);
    assert.equal((await get('/srt?chars_per_caption=0')).status, 422);

    // Word search: case and punctuation do not matter; a phrase matches consecutive words.
    const bare = (w: Word) => w.text.toLowerCase().replace(/[.?,]/g, '');
    const last = words.at(-1)!;
    const phrase = `${bare(words[1]!)} ${bare(words[2]!)}`;
    const search = await get(`/word-search?words=${encodeURIComponent(`${last.text.toUpperCase()},${phrase},xylophone`)}`);
    assert.equal(search.status, 200, JSON.stringify(search.body));
    const lastMatch = search.body.matches.find((m: { text: string }) => m.text === bare(last));
    assert.ok(lastMatch, JSON.stringify(search.body));
    assert.deepEqual(lastMatch.timestamps.at(-1), [last.start, last.end]);
    assert.equal(lastMatch.indexes.at(-1), words.length - 1);
    const phraseMatch = search.body.matches.find((m: { text: string }) => m.text === phrase);
    assert.deepEqual([phraseMatch.timestamps[0], phraseMatch.indexes[0]], [[words[1]!.start, words[2]!.end], 1]);
    assert.ok(!search.body.matches.some((m: { text: string }) => m.text === 'xylophone'));
    assert.equal(search.body.total_count, lastMatch.count + phraseMatch.count);

    // Refused: no word, a phrase over five words, another partner's transcript.
    assert.equal((await get('/word-search?words=%2C%20%2C')).status, 422);
    assert.equal((await get(`/word-search?words=${encodeURIComponent('one two three four five six')}`)).status, 422);
    const other = await newPartner(http);
    assert.equal((await get('/sentences', other.key)).status, 404);
  });

  it('audio_start_from and audio_end_at: only that part is transcribed, in the times of the whole recording', async () => {
    const clips = await Promise.all(passage.slice(0, 3).map((s) => speak(s)));
    const [first, second] = await Promise.all(clips.slice(0, 2).map(async (c) => (await probe(c)).duration));
    const audio = await concatWithPauses(clips, 0.8);
    // From the middle of the pause after the first sentence to the middle of the pause after the second.
    const from = Math.round((first! + 0.4) * 1000);
    const to = Math.round((first! + 0.8 + second! + 0.4) * 1000);
    const res = await http('POST', '/v2/transcript', { key: partner.key, form: { audio: { name: 'part.wav', content: fs.readFileSync(audio) }, audio_start_from: String(from), audio_end_at: String(to) } });
    assert.equal(res.status, 200, JSON.stringify(res.body));
    assert.deepEqual([res.body.audio_start_from, res.body.audio_end_at], [from, to]);
    const done = (await finished(res.body.id)).body;
    assert.equal(done.status, 'completed', JSON.stringify(done));
    assert.ok(wer(passage[1]!, done.text) <= 0.1, `only the second sentence: ${done.text}`);
    assert.deepEqual([done.audio_start_from, done.audio_end_at], [from, to]);
    assert.equal(done.audio_duration, Math.round((await probe(audio)).duration), 'the whole recording');
    for (const w of done.words as Array<{ text: string; start: number; end: number }>) assert.ok(w.start >= from && w.end <= to, `${w.text} ${w.start}-${w.end} outside ${from}-${to}`);

    const past = await http('POST', '/v2/transcript', { key: partner.key, form: { audio: { name: 'part.wav', content: fs.readFileSync(audio) }, audio_start_from: '3600000' } });
    const failed = (await finished(past.body.id)).body;
    assert.equal(failed.status, 'error');
    assert.match(failed.error, /^audio_start_from \(60 min 0 s\) is not before the end of the audio/);
    const backwards = await http('POST', '/v2/transcript', { key: partner.key, json: { audio_url: files.url(audio), audio_start_from: 5000, audio_end_at: 5000 } });
    assert.equal(backwards.status, 422);
    assert.deepEqual(backwards.body.errors, { audio_end_at: ['must be after audio_start_from'] });
  });

  it("custom_spelling writes a word or phrase as asked in the text and the words, with the said words' times", async () => {
    const clip = files.url(await speak('Please call the doctor tomorrow morning about the weather report.'));
    const plain = await http('POST', '/v2/transcript', { key: partner.key, json: { audio_url: clip } });
    const spelled = await http('POST', '/v2/transcript', {
      key: partner.key,
      json: { audio_url: clip, keyterms_prompt: ['doctor'], custom_spelling: [{ from: ['Doctor'], to: 'Dr. Smith' }, { from: ['forecast', 'weather  report'], to: 'Forecast' }] },
    });
    assert.equal(spelled.status, 200, JSON.stringify(spelled.body));
    const [a, b] = [(await finished(plain.body.id)).body, (await finished(spelled.body.id)).body];
    assert.match(a.text, /doctor .* weather report\.$/, a.text);
    assert.equal(b.text, a.text.replace('doctor', 'Dr. Smith').replace('weather report.', 'Forecast.'));
    type Word = { text: string; start: number; end: number };
    const said = (w: Word[], text: string) => w.find((x) => x.text === text)!;
    const [aw, bw] = [a.words as Word[], b.words as Word[]];
    assert.deepEqual(said(bw, 'Forecast.'), { ...said(bw, 'Forecast.'), start: said(aw, 'weather').start, end: said(aw, 'report.').end });
    assert.deepEqual([said(bw, 'Dr. Smith').start, said(bw, 'Dr. Smith').end], [said(aw, 'doctor').start, said(aw, 'doctor').end]);
    const row = await api.deps.db.transcript.findUniqueOrThrow({ where: { id: spelled.body.id.split('/').pop() } });
    assert.deepEqual(row.boostedWords, ['doctor'], 'keyterms_prompt is boosted_words');

    const both = await http('POST', '/v2/transcript', { key: partner.key, json: { audio_url: clip, keyterms_prompt: ['a'], word_boost: ['b'] } });
    assert.equal(both.status, 422);
    assert.ok(both.body.errors.keyterms_prompt, JSON.stringify(both.body));
    // In a multipart form the array comes as JSON text.
    const form = await http('POST', '/v2/transcript', { key: partner.key, form: { audio_url: clip, custom_spelling: JSON.stringify([{ from: ['doctor'], to: 'Dr. Smith' }]) } });
    assert.equal(form.status, 200, JSON.stringify(form.body));
    assert.equal((await finished(form.body.id)).body.text, a.text.replace('doctor', 'Dr. Smith'));
    const notJson = await http('POST', '/v2/transcript', { key: partner.key, form: { audio_url: clip, custom_spelling: '[{from: doctor}]' } });
    assert.equal(notJson.status, 422);
    assert.deepEqual(notJson.body.errors, { custom_spelling: ['must be JSON text'] });
    const blank = await http('POST', '/v2/transcript', { key: partner.key, json: { audio_url: clip, custom_spelling: [{ from: ['...'], to: 'x' }] } });
    assert.equal(blank.status, 422);
    assert.deepEqual(blank.body.errors, { custom_spelling: ["entry 0: from '...' has no letter or digit to match"] });
  });

  it('speech_threshold: audio that is mostly silence ends in error when it asks for more sound', async () => {
    const audio = fs.readFileSync(await concatWithPauses([await speak('Please call the doctor.'), await silence(8)], 0));
    const strict = await http('POST', '/v2/transcript', { key: partner.key, form: { audio: { name: 'quiet.wav', content: audio }, speech_threshold: '0.6' } });
    const lenient = await http('POST', '/v2/transcript', { key: partner.key, form: { audio: { name: 'quiet.wav', content: audio }, speech_threshold: '0.05', punctuate: 'false' } });
    const failed = (await finished(strict.body.id)).body;
    assert.equal(failed.status, 'error');
    assert.match(failed.error, /^the audio holds sound for \d+ % of its length, less than speech_threshold 0\.6 asks$/);
    assert.ok(Number(/for (\d+) %/.exec(failed.error)![1]) < 30, failed.error);
    const done = (await finished(lenient.body.id)).body;
    assert.equal(done.status, 'completed', JSON.stringify(done));
    assert.match(done.text, /^Please call the doctor$/i, 'punctuate=false: no full stop');
    assert.equal((await http('POST', '/v2/transcript', { key: partner.key, json: { audio_url: files.url(await silence(1)), speech_threshold: 1.5 } })).status, 422);
  });

  it('sentences and subtitles of a transcript that is not completed are a 409', async () => {
    const headerOnly = wavFile({ sampleRate: 16000, channels: 1 }, Buffer.alloc(0));
    const res = await http('POST', '/v2/transcript', { key: partner.key, form: { audio: { name: 'nothing.wav', content: headerOnly } } });
    assert.equal((await finished(res.body.id)).body.status, 'error');
    for (const suffix of ['/sentences', '/paragraphs', '/srt', '/vtt', '/word-search?words=a']) {
      const r = await http('GET', `${res.body.id}${suffix}`, { key: partner.key });
      assert.equal(r.status, 409, suffix);
      assert.match(r.body.error, /the transcript is error: its words can be read once it is completed/);
    }
  });

  it('a recording with no sound at all (a WAV header alone) ends in error saying it is empty', async () => {
    const headerOnly = wavFile({ sampleRate: 16000, channels: 1 }, Buffer.alloc(0));
    const res = await http('POST', '/v2/transcript', { key: partner.key, form: { audio: { name: 'nothing.wav', content: headerOnly } } });
    assert.equal(res.status, 200, JSON.stringify(res.body));
    const done = await finished(res.body.id);
    assert.deepEqual(done.body, { id: res.body.id, status: 'error', error: 'the audio is empty: the file holds no sound (0 seconds)' });
  });

  it('round trip: speech from /v2/audio/speech, transcribed back by /v2/transcript', async () => {
    const text = 'Our office in Nairobi opens next week. The new team will start on Monday morning.';
    const { key } = await newQuotaKey(http, { quota_type: 'speech' });
    const spoken = await fetch(`${api.url}/v2/audio/speech`, {
      method: 'POST',
      headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json' },
      body: JSON.stringify({ model: 'tts-1', voice: 'slt', input: text, response_format: 'wav' }),
    });
    assert.equal(spoken.status, 200);
    const res = await http('POST', '/v2/transcript', { key: partner.key, form: { audio: { name: 'speech.wav', content: Buffer.from(await spoken.arrayBuffer()) } } });
    const done = await finished(res.body.id);
    assert.equal(done.body.status, 'completed');
    assert.ok(wer(text, done.body.text) <= 0.1, done.body.text);
  });
});
