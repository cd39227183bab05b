/**
 * Speech to text for audio and video documents. Input is always a 16 kHz mono 16-bit PCM WAV file
 * (the media extractor converts with ffmpeg first). The local engine is CMU PocketSphinx from the
 * Debian packages `pocketsphinx` + `pocketsphinx-en-us` (0.8+5prealpha in bookworm, whose CLI is
 * `pocketsphinx_continuous -infile`; the 5.x `pocketsphinx single` JSON CLI is handled as well), so
 * a fresh machine transcribes without any network. Its accuracy is modest; an OpenAI-compatible
 * `/v1/audio/transcriptions` endpoint plugs in behind the same interface when configured.
 */
import { execFile } from 'node:child_process';
import { createReadStream, existsSync } from 'node:fs';
import { open } from 'node:fs/promises';
import OpenAI from 'openai';
import { runTool } from '../process.js';

export interface Transcript {
  text: string;
  durationSeconds: number;
}

export interface SpeechToText {
  transcribe(wavPath: string): Promise<Transcript>;
}

/** Duration of a PCM WAV file from its header (fmt byte rate and data chunk size); 0 if unreadable. */
export async function wavDurationSeconds(wavPath: string): Promise<number> {
  const fh = await open(wavPath, 'r');
  try {
    const { size } = await fh.stat();
    const head = Buffer.alloc(Math.min(size, 4096));
    await fh.read(head, 0, head.length, 0);
    if (head.length < 12 || head.toString('ascii', 0, 4) !== 'RIFF' || head.toString('ascii', 8, 12) !== 'WAVE') return 0;
    let byteRate = 0;
    let off = 12;
    while (off + 8 <= head.length) {
      const id = head.toString('ascii', off, off + 4);
      const len = head.readUInt32LE(off + 4);
      if (id === 'fmt ' && off + 20 <= head.length) byteRate = head.readUInt32LE(off + 8 + 8);
      if (id === 'data') {
        if (!byteRate) return 0;
        // ffmpeg writing to a pipe leaves 0 or 0xFFFFFFFF here; fall back to the file size.
        const dataLen = len === 0 || len === 0xffffffff || off + 8 + len > size ? size - off - 8 : len;
        return dataLen / byteRate;
      }
      off += 8 + len + (len % 2);
    }
    return 0;
  } finally {
    await fh.close();
  }
}

export interface PocketSphinxOptions {
  /** Acoustic model, language model and dictionary; defaults are the Debian pocketsphinx-en-us paths. */
  hmm?: string;
  lm?: string;
  dict?: string;
  /** Time bound for one file: base plus a multiple of the audio duration. */
  baseTimeoutMs?: number;
  timeoutPerAudioSecond?: number;
}

const DEBIAN_MODEL_DIR = '/usr/share/pocketsphinx/model/en-us';

export class LocalPocketSphinx implements SpeechToText {
  private cli: Promise<'continuous' | 'single'> | null = null;

  constructor(private readonly options: PocketSphinxOptions = {}) {}

  private detectCli(): Promise<'continuous' | 'single'> {
    this.cli ??= new Promise((resolve) => {
      execFile('pocketsphinx_continuous', ['-h'], { timeout: 10_000 }, (err) => {
        const code = (err as NodeJS.ErrnoException | null)?.code;
        resolve(code === 'ENOENT' ? 'single' : 'continuous');
      });
    });
    return this.cli;
  }

  private modelArgs(): string[] {
    const hmm = this.options.hmm ?? `${DEBIAN_MODEL_DIR}/en-us`;
    const lm = this.options.lm ?? `${DEBIAN_MODEL_DIR}/en-us.lm.bin`;
    const dict = this.options.dict ?? `${DEBIAN_MODEL_DIR}/cmudict-en-us.dict`;
    const args: string[] = [];
    if (this.options.hmm || existsSync(hmm)) args.push('-hmm', hmm);
    if (this.options.lm || existsSync(lm)) args.push('-lm', lm);
    if (this.options.dict || existsSync(dict)) args.push('-dict', dict);
    return args;
  }

  async transcribe(wavPath: string): Promise<Transcript> {
    const durationSeconds = await wavDurationSeconds(wavPath);
    const timeoutMs =
      (this.options.baseTimeoutMs ?? 10 * 60_000) + durationSeconds * 1000 * (this.options.timeoutPerAudioSecond ?? 2);
    const cli = await this.detectCli();
    let text: string;
    if (cli === 'continuous') {
      // 0.8/5prealpha: one hypothesis line per utterance on stdout, logging to -logfn.
      const { stdout } = await runTool(
        'pocketsphinx_continuous',
        ['-infile', wavPath, '-logfn', '/dev/null', ...this.modelArgs()],
        timeoutMs,
      );
      text = stdout
        .split('\n')
        .map((l) => l.trim())
        .filter((l) => l && !/^(READY|Listening|Stopped)\b/.test(l))
        .join(' ');
    } else {
      // 5.x: `pocketsphinx single FILE` prints one JSON object per utterance with its text in "t".
      const { stdout } = await runTool('pocketsphinx', ['-loglevel', 'FATAL', 'single', wavPath], timeoutMs);
      text = stdout
        .split('\n')
        .map((l) => {
          try {
            const o = JSON.parse(l) as { t?: unknown };
            return typeof o.t === 'string' ? o.t : '';
          } catch {
            return '';
          }
        })
        .filter(Boolean)
        .join(' ');
    }
    return { text: text.replace(/\s+/g, ' ').trim(), durationSeconds };
  }
}

export interface OpenAiSpeechOptions {
  baseURL: string;
  apiKey: string;
  /** e.g. "whisper-1" or "gpt-4o-mini-transcribe". */
  model: string;
  timeoutMs?: number;
}

export class OpenAiCompatibleSpeechToText implements SpeechToText {
  private readonly client: OpenAI;

  constructor(private readonly options: OpenAiSpeechOptions) {
    this.client = new OpenAI({
      baseURL: options.baseURL,
      apiKey: options.apiKey,
      timeout: options.timeoutMs ?? 10 * 60_000,
      maxRetries: 2,
    });
  }

  async transcribe(wavPath: string): Promise<Transcript> {
    const durationSeconds = await wavDurationSeconds(wavPath);
    const res = await this.client.audio.transcriptions.create({
      file: createReadStream(wavPath),
      model: this.options.model,
    });
    const text = typeof (res as { text?: unknown }).text === 'string' ? (res as { text: string }).text : '';
    return { text: text.replace(/\s+/g, ' ').trim(), durationSeconds };
  }
}
