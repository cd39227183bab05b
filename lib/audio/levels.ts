import { createReadStream } from 'node:fs';
import { decodePcmChunks, type DecodeOptions } from './decode.js';
import { readWavInfo } from './wav.js';

/**
 * Loudness of a recording over time: the RMS level of each short frame (20 ms by default) in dB
 * relative to full scale (dBFS; digital silence is -100). From it, a silence threshold adapted to
 * the recording: a quiet recording and a noisy one get different thresholds, so pauses are found in
 * both (measured on speech recorded 30 dB too quiet and with noise at -40 dBFS, issue-14 plan).
 */
export interface Levels {
  frameSeconds: number;
  /** dBFS of each frame, in order. */
  db: Float32Array;
}

const SILENT_DB = -100;

/** Accumulates s16le mono samples into frame levels (the last partial frame is dropped). */
export class LevelMeter {
  private readonly frameSamples: number;
  private sum = 0;
  private count = 0;
  private carry: number | null = null;
  private out: number[] = [];

  constructor(
    readonly sampleRate: number,
    readonly frameSeconds = 0.02,
  ) {
    this.frameSamples = Math.max(1, Math.round(sampleRate * frameSeconds));
  }

  /** Adds raw s16le bytes (chunks may split a sample). */
  push(chunk: Buffer): void {
    let i = 0;
    if (this.carry !== null && chunk.length > 0) {
      this.add(((chunk[0]! << 8) | this.carry) << 16 >> 16);
      this.carry = null;
      i = 1;
    }
    const whole = (chunk.length - i) >> 1;
    if ((chunk.byteOffset + i) % 2 === 0) {
      for (const s of new Int16Array(chunk.buffer, chunk.byteOffset + i, whole)) this.add(s);
    } else {
      for (let k = 0; k < whole; k++) this.add(chunk.readInt16LE(i + 2 * k));
    }
    i += 2 * whole;
    if (i < chunk.length) this.carry = chunk[i]!;
  }

  pushSamples(samples: Int16Array): void {
    for (const s of samples) this.add(s);
  }

  private add(sample: number) {
    this.sum += sample * sample;
    if (++this.count === this.frameSamples) {
      const rms = Math.sqrt(this.sum / this.count) / 32768;
      this.out.push(rms > 0 ? Math.max(SILENT_DB, 20 * Math.log10(rms)) : SILENT_DB);
      this.sum = 0;
      this.count = 0;
    }
  }

  levels(): Levels {
    return { frameSeconds: this.frameSeconds, db: Float32Array.from(this.out) };
  }
}

/** Frame levels of samples already in memory. */
export function frameLevels(samples: Int16Array, sampleRate: number, frameSeconds = 0.02): Levels {
  const meter = new LevelMeter(sampleRate, frameSeconds);
  meter.pushSamples(samples);
  return meter.levels();
}

/**
 * Frame levels of a file: a 16-bit mono WAV is read as it is; anything else is decoded by ffmpeg
 * (16 kHz mono) as a stream, so memory stays small however long the recording.
 */
export async function measureLevels(file: string, options: DecodeOptions & { frameSeconds?: number } = {}): Promise<Levels> {
  const wav = await readWavInfo(file).catch(() => null);
  if (wav && wav.channels === 1) {
    const meter = new LevelMeter(wav.sampleRate, options.frameSeconds);
    // A header with no samples after it has no levels (and a read range ending before it starts).
    if (wav.dataBytes === 0) return meter.levels();
    const stream = createReadStream(file, { start: wav.dataOffset, end: wav.dataOffset + wav.dataBytes - 1, highWaterMark: 1 << 20, signal: options.signal });
    for await (const chunk of stream) meter.push(chunk as Buffer);
    return meter.levels();
  }
  const meter = new LevelMeter(options.sampleRate ?? 16000, options.frameSeconds);
  for await (const chunk of decodePcmChunks(file, { ...options, channels: 1 })) meter.push(chunk);
  return meter.levels();
}

function percentile(sorted: Float32Array, p: number): number {
  if (sorted.length === 0) return SILENT_DB;
  return sorted[Math.min(sorted.length - 1, Math.max(0, Math.floor(p * (sorted.length - 1))))]!;
}

export interface SilenceThreshold {
  /** Frames quieter than this are silence (the `noise` of ffmpeg silencedetect), dBFS. */
  noiseDb: number;
  /** 10th percentile of the frame levels: the room's floor. */
  floorDb: number;
  /** 95th percentile: how loud the speech is. */
  speechDb: number;
  /** True when even the loud frames are below -55 dBFS: no speech to find. */
  silent: boolean;
}

/**
 * The threshold between pause and speech for this recording:
 * noise = min(max(floor + max(6, 0.3 × (speech − floor)), −70), speech − 10) dB.
 * Clean speech gets about −53 dB, speech over noise at −40 dBFS about −37 dB.
 */
export function silenceThreshold(levels: Levels): SilenceThreshold {
  const sorted = Float32Array.from(levels.db).sort();
  const floorDb = percentile(sorted, 0.1);
  const speechDb = percentile(sorted, 0.95);
  const noiseDb = Math.min(Math.max(floorDb + Math.max(6, 0.3 * (speechDb - floorDb)), -70), speechDb - 10);
  return { noiseDb: Math.round(noiseDb * 10) / 10, floorDb, speechDb, silent: speechDb < -55 };
}

/**
 * Stretches of frames quieter than `noiseDb` lasting at least `minSeconds`, in seconds: the pauses
 * of samples already in memory (what ffmpeg's silencedetect finds in a file, without a second decode).
 */
export function quietRuns(levels: Levels, noiseDb: number, minSeconds: number): Array<{ start: number; end: number }> {
  const f = levels.frameSeconds;
  const runs: Array<{ start: number; end: number }> = [];
  let open = -1;
  for (let i = 0; i <= levels.db.length; i++) {
    const quiet = i < levels.db.length && levels.db[i]! < noiseDb;
    if (quiet && open < 0) open = i;
    if (!quiet && open >= 0) {
      if ((i - open) * f >= minSeconds) runs.push({ start: open * f, end: i * f });
      open = -1;
    }
  }
  return runs;
}
