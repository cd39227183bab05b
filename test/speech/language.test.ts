import assert from 'node:assert/strict';
import fs from 'node:fs';
import { client, startApi, type RunningApi } from '../support/system.js';
import { newQuotaKey } from '../messaging/support.js';
import { detectLanguage } from '../../lib/speech/detect.js';
import { synthesize } from '../../lib/speech/synthesize.js';
import { speechLanguages } from '../../lib/speech/languages.js';

const sentences = JSON.parse(fs.readFileSync(new URL('../fixtures/language-sentences.json', import.meta.url), 'utf8')) as Record<string, string[]>;

/**
 * Language of the speech input: script first, then eld for Latin script; only confident answers
 * reach the engine. Every supported language is spoken by a local engine.
 */
describe('speech: language detection and the engines of every language', function () {
  this.timeout(180_000);

  it('has ten sentences of every supported language to test with', () => {
    assert.deepEqual(Object.keys(sentences).sort(), [...speechLanguages].sort());
  });

  it('recognises the language of 150 sentences (10 in each of the 15), never confidently wrong', async () => {
    let right = 0;
    const wrong: string[] = [];
    for (const [language, list] of Object.entries(sentences)) {
      for (const s of list) {
        const d = await detectLanguage(s);
        if (d.language === language) right++;
        else wrong.push(`${language}: ${s} → ${d.language} (${d.confidence})`);
        if (d.confident) assert.equal(d.language, language, `confidently wrong: ${s} → ${JSON.stringify(d)}`);
      }
    }
    assert.ok(right >= 148, `${right}/150; ${wrong.join('; ')}`);
  });

  it('short or ambiguous input is not confident (the engine default applies)', async () => {
    for (const text of ['Hello', 'OK', '12345', '!!!', 'Bom dia']) {
      const d = await detectLanguage(text);
      assert.equal(d.confident, false, `${text}: ${JSON.stringify(d)}`);
    }
  });

  it('Japanese kanji are read through kana (kakasi): the audio is as long as the kana spelling, not the "Chinese letter" reading', async () => {
    const kanji = await synthesize({ text: '会議は明日の九時に始まります。', voice: 'espeak', language: 'ja', format: 'pcm' });
    const kana = await synthesize({ text: 'かいぎはあしたのくじにはじまります。', voice: 'espeak', language: 'ja', format: 'pcm' });
    const ratio = kanji.audio.length / kana.audio.length;
    assert.equal(kanji.engine, 'espeak-ng:ja');
    assert.ok(ratio > 0.7 && ratio < 1.3, `kanji/kana duration ratio ${ratio.toFixed(2)}`);
  });

  describe('through /v2/audio/speech with language auto', () => {
    let api: RunningApi;
    let key: string;
    before(async () => {
      api = await startApi();
      key = (await newQuotaKey(client(api.url), { quota_type: 'speech' })).key;
    });
    after(async () => {
      await api?.close();
    });

    for (const language of speechLanguages) {
      it(`${language}: detected, and spoken by a local engine`, async () => {
        const res = await fetch(`${api.url}/v2/audio/speech`, {
          method: 'POST',
          headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json' },
          body: JSON.stringify({ model: 'tts-1', voice: 'espeak', input: sentences[language]![0], response_format: 'pcm' }),
        });
        assert.equal(res.status, 200, await res.clone().text());
        assert.equal(res.headers.get('x-service-tts-language'), language);
        assert.ok(Number(res.headers.get('x-service-tts-language-confidence')) >= 0.5);
        // At least half a second of audio: the sentence was spoken, not skipped.
        assert.ok((await res.arrayBuffer()).byteLength > 24000, 'audio');
      });
    }

    it('an explicit language is used as given (no detection header)', async () => {
      const res = await fetch(`${api.url}/v2/audio/speech`, {
        method: 'POST',
        headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json' },
        body: JSON.stringify({ model: 'tts-1', voice: 'slt', input: 'Hello', language: 'de', response_format: 'pcm' }),
      });
      assert.equal(res.status, 200);
      assert.equal(res.headers.get('x-service-tts-language'), 'de');
      assert.equal(res.headers.get('x-service-tts-language-confidence'), null);
    });

    it('an unsure detection leaves the engine its default', async () => {
      const res = await fetch(`${api.url}/v2/audio/speech`, {
        method: 'POST',
        headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json' },
        body: JSON.stringify({ model: 'tts-1', voice: 'slt', input: 'OK', response_format: 'pcm' }),
      });
      assert.equal(res.status, 200);
      assert.equal(res.headers.get('x-service-tts-language'), 'default');
    });
  });
});
