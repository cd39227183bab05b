import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { existsSync } from 'node:fs';
import { mkdtemp, readdir, rm, writeFile } from 'node:fs/promises';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { wavFile } from '../../lib/audio/index.js';
import { extractMedia } from '../../lib/digitization/extractors/media.js';
import { UnreadableDocument } from '../../lib/digitization/extractors/types.js';
import { OpenAiTranscriptionEngine, type SpeechToTextEngine } from '../../lib/providers/speech-to-text.js';
import { MoonshineEngine } from '../../lib/providers/moonshine.js';
import { setting } from '../../lib/platform/config.js';
import { readWavInfo } from '../../lib/audio/wav.js';

/** An engine that answers `text` and lets the test see each segment it was given. */
function fakeEngine(text: string, seen: (wavPath: string) => Promise<void> = async () => undefined): SpeechToTextEngine {
  return {
    id: 'fake',
    description: 'a fake engine',
    maxSegmentSeconds: 600,
    supports: () => true,
    async transcribeSegment(req) {
      await seen(req.wavPath);
      return { text, words: null };
    },
  };
}
const local = new MoonshineEngine({ modelDir: setting(process.env, 'TRANSCRIPTION_LOCAL_MODEL_DIR') ?? '' });

/**
 * Media extractors: OCR (tesseract) and speech to text (ffmpeg + the local Moonshine engine, or an
 * OpenAI-compatible endpoint). Every input is generated here with offline tools from
 * scripts/runtime-packages.txt and scripts/dev-packages.txt (ffmpeg drawtext + fonts-dejavu-core for images, flite or espeak-ng for
 * speech); the OpenAI-compatible server listens on 127.0.0.1 only.
 */

const FONT = '/usr/share/fonts/truetype/dejavu/DejaVuSans-Bold.ttf';
const SENTENCE = 'Please call the doctor tomorrow morning about the weather report';
const KEY_WORDS = ['doctor', 'tomorrow', 'morning', 'weather', 'report'];

function sh(cmd: string, args: string[]): Promise<string> {
  return new Promise((resolve, reject) => {
    execFile(cmd, args, { timeout: 120_000 }, (err, stdout, stderr) =>
      err ? reject(new Error(`${cmd} ${args.join(' ')}: ${stderr || err.message}`)) : resolve(stdout),
    );
  });
}

const ffmpeg = (...args: string[]) => sh('ffmpeg', ['-nostdin', '-hide_banner', '-loglevel', 'error', '-y', ...args]);

async function rejectsUnreadable(p: Promise<unknown>, pattern: RegExp) {
  await assert.rejects(p, (err: unknown) => {
    assert.ok(err instanceof UnreadableDocument, `expected UnreadableDocument, got ${String(err)}`);
    assert.match(err.message, pattern);
    return true;
  });
}

async function mediaTempDirs(): Promise<string[]> {
  return (await readdir(os.tmpdir())).filter((n) => n.startsWith('kb-media-'));
}

describe('media extractors', function () {
  this.timeout(180_000);
  let dir: string;

  before(async () => {
    dir = await mkdtemp(path.join(os.tmpdir(), 'media-test-'));
  });
  after(async () => {
    await rm(dir, { recursive: true, force: true });
  });

  describe('images (tesseract OCR)', () => {
    let png: string;
    before(async () => {
      png = path.join(dir, 'hello.png');
      const font = existsSync(FONT) ? FONT : '/usr/share/fonts/truetype/dejavu/DejaVuSans.ttf';
      await ffmpeg(
        '-f', 'lavfi', '-i', 'color=c=white:s=900x220', '-frames:v', '1',
        '-vf', `drawtext=fontfile=${font}:text='HELLO WORLD':fontsize=72:fontcolor=black:x=40:y=60`,
        png,
      );
    });

    for (const ext of ['png', 'jpg', 'tiff', 'gif', 'webp']) {
      it(`reads the text of a .${ext} image`, async () => {
        const file = ext === 'png' ? png : path.join(dir, `hello.${ext}`);
        if (ext !== 'png') await ffmpeg('-i', png, '-frames:v', '1', file);
        const before = await mediaTempDirs();
        const { text } = await extractMedia(file, ext, { speech: local, ocrLanguages: null });
        assert.match(text, /hello/i);
        assert.match(text, /world/i);
        assert.deepEqual(await mediaTempDirs(), before, 'temp files are cleaned');
      });
    }

    it('accepts an upload path without extension and an upper-case extension', async () => {
      const file = path.join(dir, 'upload-no-ext');
      await ffmpeg('-i', png, '-frames:v', '1', '-f', 'image2', '-c:v', 'mjpeg', file);
      const { text } = await extractMedia(file, '.JPG', { speech: local, ocrLanguages: null });
      assert.match(text, /hello world/i);
    });

    it('a blank image is unreadable', async () => {
      const file = path.join(dir, 'blank.png');
      await ffmpeg('-f', 'lavfi', '-i', 'color=c=white:s=400x200', '-frames:v', '1', file);
      await rejectsUnreadable(extractMedia(file, 'png', { speech: local, ocrLanguages: null }), /no text was recognised in the image/);
    });

    it('a corrupt image is unreadable', async () => {
      const file = path.join(dir, 'corrupt.gif');
      await sh('sh', ['-c', `printf 'GIF89a not really an image' > '${file}'`]);
      await rejectsUnreadable(extractMedia(file, 'gif', { speech: local, ocrLanguages: null }), /could not be read/);
    });
  });

  describe('audio and video (ffmpeg + speech to text)', () => {
    let speechWav: string;
    before(async () => {
      speechWav = path.join(dir, 'speech.wav');
      try {
        await sh('flite', ['-voice', 'slt', '-t', SENTENCE, '-o', speechWav]);
      } catch {
        await sh('espeak-ng', ['-v', 'en-us', '-s', '130', '-w', speechWav, SENTENCE]);
      }
      await ffmpeg('-i', speechWav, path.join(dir, 'speech.mp3'));
      await ffmpeg('-i', speechWav, '-c:a', 'aac', path.join(dir, 'speech.m4a'));
      await ffmpeg(
        '-f', 'lavfi', '-i', 'color=c=blue:s=160x120:r=10', '-i', speechWav,
        '-shortest', '-c:v', 'libx264', '-pix_fmt', 'yuv420p', '-c:a', 'aac',
        path.join(dir, 'speech.mp4'),
      );
      await ffmpeg('-f', 'lavfi', '-i', 'color=c=green:s=160x120:r=10', '-i', speechWav, '-shortest', '-c:v', 'mpeg4', '-c:a', 'libmp3lame', path.join(dir, 'speech.avi'));
      await ffmpeg('-i', path.join(dir, 'speech.mp4'), '-c', 'copy', path.join(dir, 'speech.mov'));
      await ffmpeg('-f', 'lavfi', '-i', 'color=c=red:s=160x120:r=10', '-t', '2', '-c:v', 'libx264', '-pix_fmt', 'yuv420p', path.join(dir, 'silent-video.mp4'));
    });

    for (const ext of ['wav', 'mp3', 'm4a', 'mp4', 'mov', 'avi']) {
      it(`transcribes a .${ext} file locally (Moonshine)`, async () => {
        const before = await mediaTempDirs();
        const { text } = await extractMedia(path.join(dir, `speech.${ext}`), ext, { speech: local, ocrLanguages: null });
        console.log(`      [${ext}] transcript: ${JSON.stringify(text)}`);
        const hits = KEY_WORDS.filter((w) => text.toLowerCase().includes(w));
        assert.deepEqual(hits, KEY_WORDS, `every one of ${KEY_WORDS.join(', ')} in ${JSON.stringify(text)}`);
        assert.deepEqual(await mediaTempDirs(), before, 'temp files are cleaned');
      });
    }

    it('hands the provider a 16 kHz mono 16-bit WAV and reports its duration', async () => {
      let seen: { rate: number; channels: number; bits: number; duration: number } | null = null;
      const spy = fakeEngine('spy text', async (wavPath) => {
          const out = await sh('ffprobe', [
            '-v', 'error', '-show_entries', 'stream=sample_rate,channels,bits_per_sample,codec_name',
            '-of', 'json', wavPath,
          ]);
          const s = (JSON.parse(out) as { streams: Array<Record<string, unknown>> }).streams[0]!;
          seen = {
            rate: Number(s.sample_rate), channels: Number(s.channels), bits: Number(s.bits_per_sample),
            duration: (await readWavInfo(wavPath)).durationSeconds,
          };
      });
      const res = await extractMedia(path.join(dir, 'speech.mp4'), 'mp4', { speech: spy, ocrLanguages: null });
      assert.equal(res.text, 'spy text');
      assert.ok(seen);
      const s = seen as { rate: number; channels: number; bits: number; duration: number };
      assert.equal(s.rate, 16000);
      assert.equal(s.channels, 1);
      assert.equal(s.bits, 16);
      assert.ok(s.duration > 1 && s.duration < 15, `duration ${s.duration}`);
    });

    it('a video without an audio track is unreadable', async () => {
      await rejectsUnreadable(extractMedia(path.join(dir, 'silent-video.mp4'), 'mp4', { speech: local, ocrLanguages: null }), /no audio/);
    });

    it('silence is unreadable (no speech recognised)', async () => {
      const file = path.join(dir, 'silence.wav');
      await ffmpeg('-f', 'lavfi', '-i', 'anullsrc=r=16000:cl=mono', '-t', '2', file);
      const empty = fakeEngine('  ');
      await rejectsUnreadable(extractMedia(file, 'wav', { speech: empty, ocrLanguages: null }), /no speech was recognised/);
    });

    it('a recording with no samples (a WAV header alone) is unreadable, saying it is empty', async () => {
      const file = path.join(dir, 'header-only.wav');
      await writeFile(file, wavFile({ sampleRate: 16000, channels: 1 }, Buffer.alloc(0)));
      await rejectsUnreadable(extractMedia(file, 'wav', { speech: local, ocrLanguages: null }), /the recording is empty/);
    });

    it('a corrupt media file is unreadable', async () => {
      const file = path.join(dir, 'corrupt.mp3');
      await sh('sh', ['-c', `head -c 2000 /dev/urandom > '${file}'`]);
      await rejectsUnreadable(extractMedia(file, 'mp3', { speech: local, ocrLanguages: null }), /could not be read|no audio|could not be decoded|no speech/);
    });

    describe('OpenAI-compatible provider', () => {
      let server: http.Server;
      let base: string;
      const requests: Array<{ path: string; auth: string | undefined; contentType: string; body: Buffer }> = [];

      before(async () => {
        server = http.createServer((req, res) => {
          const chunks: Buffer[] = [];
          req.on('data', (c: Buffer) => chunks.push(c));
          req.on('end', () => {
            const body = Buffer.concat(chunks);
            requests.push({ path: req.url ?? '', auth: req.headers.authorization, contentType: req.headers['content-type'] ?? '', body });
            if (req.method !== 'POST' || req.url !== '/v1/audio/transcriptions') {
              res.writeHead(404, { 'content-type': 'application/json' }).end('{"error":{"message":"not found"}}');
              return;
            }
            res.writeHead(200, { 'content-type': 'application/json' }).end(JSON.stringify({ text: ' Remote transcript of the meeting. ' }));
          });
        });
        await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
        base = `http://127.0.0.1:${(server.address() as AddressInfo).port}/v1`;
      });
      after(async () => {
        await new Promise<void>((resolve) => server.close(() => resolve()));
      });

      it('posts the WAV as multipart with the model and returns the text', async () => {
        const stt = new OpenAiTranscriptionEngine({ baseURL: base, apiKey: 'sk-test', model: 'whisper-test', timeoutMs: 30_000 });
        const { text } = await extractMedia(path.join(dir, 'speech.mp3'), 'mp3', { speech: stt, ocrLanguages: null });
        assert.equal(text, 'Remote transcript of the meeting.');
        const req = requests.at(-1)!;
        assert.equal(req.path, '/v1/audio/transcriptions');
        assert.equal(req.auth, 'Bearer sk-test');
        assert.match(req.contentType, /^multipart\/form-data; boundary=/);
        const body = req.body.toString('latin1');
        assert.match(body, /name="model"\r\n\r\nwhisper-test\r\n/);
        assert.match(body, /name="file"; filename="audio\.wav"/);
        assert.ok(body.includes('RIFF') && body.includes('WAVE'), 'the file part is a WAV');
      });

      it('reads the duration of a WAV from its header', async () => {
        const wav16 = path.join(dir, 'speech16.wav');
        await ffmpeg('-i', speechWav, '-ac', '1', '-ar', '16000', '-c:a', 'pcm_s16le', wav16);
        const { durationSeconds } = await readWavInfo(wav16);
        const probed = Number((await sh('ffprobe', ['-v', 'error', '-show_entries', 'format=duration', '-of', 'csv=p=0', wav16])).trim());
        assert.ok(Math.abs(durationSeconds - probed) < 0.05, `${durationSeconds} vs ${probed}`);
      });
    });
  });

  it('rejects extensions it does not handle', async () => {
    await assert.rejects(extractMedia('/nonexistent', 'pdf', { speech: local, ocrLanguages: null }), /does not handle/);
  });
});
