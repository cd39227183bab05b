/**
 * The local voice print: a classical speaker description made from MFCC statistics, NOT a neural
 * speaker embedding. Each recording (16 kHz mono samples) becomes the mean and the standard
 * deviation of its mel-frequency cepstral coefficients c1..c19 over its speech frames (38 numbers).
 * Two prints are compared by the cosine of their z-normalised vectors (each dimension shifted and
 * scaled by reference statistics). On synthetic voices such a print tells speakers apart well; on
 * real microphones, rooms and codecs expect much worse, since it also describes the channel.
 */
export const VOICE_PRINT_METHOD = 'mfcc-stats-v1';
export const VOICE_PRINT_SAMPLE_RATE = 16000;

const FRAME = 400; // 25 ms at 16 kHz
const HOP = 160; // 10 ms
const FFT = 512;
const MEL_FILTERS = 26;
const COEFFICIENTS = 19; // c1..c19 (c0, the loudness, is left out)
const LOW_HZ = 60;
const HIGH_HZ = 7600;

export interface VoicePrint {
  method: typeof VOICE_PRINT_METHOD;
  /** Means of c1..c19, then their standard deviations. */
  vector: number[];
  /** Speech frames the statistics were made from (10 ms each). */
  frames: number;
}

const hz2mel = (hz: number) => 2595 * Math.log10(1 + hz / 700);
const mel2hz = (mel: number) => 700 * (10 ** (mel / 2595) - 1);

/** Triangular mel filters over the FFT bins (computed once). */
const melBank: Array<{ start: number; weights: Float64Array }> = (() => {
  const bins = FFT / 2 + 1;
  const lo = hz2mel(LOW_HZ);
  const hi = hz2mel(HIGH_HZ);
  const points = Array.from({ length: MEL_FILTERS + 2 }, (_, i) => Math.floor(((FFT + 1) * mel2hz(lo + ((hi - lo) * i) / (MEL_FILTERS + 1))) / VOICE_PRINT_SAMPLE_RATE));
  const bank: Array<{ start: number; weights: Float64Array }> = [];
  for (let m = 1; m <= MEL_FILTERS; m++) {
    const [a, b, c] = [points[m - 1]!, points[m]!, points[m + 1]!];
    const weights = new Float64Array(Math.max(1, c - a + 1));
    for (let k = a; k <= c && k < bins; k++) {
      weights[k - a] = k < b ? (k - a) / Math.max(1, b - a) : (c - k) / Math.max(1, c - b);
    }
    bank.push({ start: a, weights });
  }
  return bank;
})();

const hamming = Float64Array.from({ length: FRAME }, (_, i) => 0.54 - 0.46 * Math.cos((2 * Math.PI * i) / (FRAME - 1)));

/** DCT-II rows for c1..c19 over the log mel energies. */
const dct: Float64Array[] = Array.from({ length: COEFFICIENTS }, (_, i) =>
  Float64Array.from({ length: MEL_FILTERS }, (_, j) => Math.cos((Math.PI * (i + 1) * (j + 0.5)) / MEL_FILTERS)),
);

/** In-place radix-2 FFT of (re, im), length a power of two. */
function fft(re: Float64Array, im: Float64Array): void {
  const n = re.length;
  for (let i = 1, j = 0; i < n; i++) {
    let bit = n >> 1;
    for (; j & bit; bit >>= 1) j ^= bit;
    j ^= bit;
    if (i < j) {
      [re[i], re[j]] = [re[j]!, re[i]!];
      [im[i], im[j]] = [im[j]!, im[i]!];
    }
  }
  for (let len = 2; len <= n; len <<= 1) {
    const angle = (-2 * Math.PI) / len;
    const wr = Math.cos(angle);
    const wi = Math.sin(angle);
    for (let i = 0; i < n; i += len) {
      let cr = 1;
      let ci = 0;
      for (let k = 0; k < len / 2; k++) {
        const a = i + k;
        const b = a + len / 2;
        const tr = re[b]! * cr - im[b]! * ci;
        const ti = re[b]! * ci + im[b]! * cr;
        re[b] = re[a]! - tr;
        im[b] = im[a]! - ti;
        re[a] = re[a]! + tr;
        im[a] = im[a]! + ti;
        const next = cr * wr - ci * wi;
        ci = cr * wi + ci * wr;
        cr = next;
      }
    }
  }
}

/**
 * MFCC c1..c19 of each speech frame. Speech frames are those within 30 dB of the recording's loud
 * frames (95th percentile of frame energy) and above -55 dBFS: pauses and breath say nothing about
 * the voice.
 */
export function mfccFrames(samples: Int16Array): Float64Array[] {
  const count = samples.length < FRAME ? 0 : Math.floor((samples.length - FRAME) / HOP) + 1;
  const energies = new Float64Array(count);
  for (let f = 0; f < count; f++) {
    let sum = 0;
    for (let i = 0; i < FRAME; i++) {
      const s = samples[f * HOP + i]! / 32768;
      sum += s * s;
    }
    energies[f] = 10 * Math.log10(sum / FRAME + 1e-12);
  }
  const sorted = Float64Array.from(energies).sort();
  const loud = sorted.length ? sorted[Math.floor(0.95 * (sorted.length - 1))]! : -120;
  const floor = Math.max(loud - 30, -55);
  const out: Float64Array[] = [];
  const re = new Float64Array(FFT);
  const im = new Float64Array(FFT);
  const logMel = new Float64Array(MEL_FILTERS);
  for (let f = 0; f < count; f++) {
    if (energies[f]! < floor) continue;
    re.fill(0);
    im.fill(0);
    const base = f * HOP;
    let prev = base > 0 ? samples[base - 1]! / 32768 : 0;
    for (let i = 0; i < FRAME; i++) {
      const s = samples[base + i]! / 32768;
      re[i] = (s - 0.97 * prev) * hamming[i]!; // pre-emphasis, window
      prev = s;
    }
    fft(re, im);
    for (let m = 0; m < MEL_FILTERS; m++) {
      const { start, weights } = melBank[m]!;
      let e = 0;
      for (let k = 0; k < weights.length; k++) {
        const bin = start + k;
        if (bin > FFT / 2) break;
        e += weights[k]! * (re[bin]! * re[bin]! + im[bin]! * im[bin]!);
      }
      logMel[m] = Math.log(e + 1e-10);
    }
    const c = new Float64Array(COEFFICIENTS);
    for (let i = 0; i < COEFFICIENTS; i++) {
      let v = 0;
      const row = dct[i]!;
      for (let j = 0; j < MEL_FILTERS; j++) v += row[j]! * logMel[j]!;
      c[i] = v;
    }
    out.push(c);
  }
  return out;
}

/** The voice print of a recording (16 kHz mono s16). Null when it has too little speech (under 0.5 s). */
export function voicePrint(samples: Int16Array): VoicePrint | null {
  const frames = mfccFrames(samples);
  if (frames.length < 50) return null;
  const mean = new Float64Array(COEFFICIENTS);
  const sq = new Float64Array(COEFFICIENTS);
  for (const c of frames) {
    for (let i = 0; i < COEFFICIENTS; i++) {
      mean[i]! += c[i]!;
      sq[i]! += c[i]! * c[i]!;
    }
  }
  const n = frames.length;
  const vector: number[] = [];
  for (let i = 0; i < COEFFICIENTS; i++) vector.push(mean[i]! / n);
  for (let i = 0; i < COEFFICIENTS; i++) vector.push(Math.sqrt(Math.max(0, sq[i]! / n - (mean[i]! / n) ** 2)));
  return { method: VOICE_PRINT_METHOD, vector: vector.map((v) => Math.round(v * 1e5) / 1e5), frames: n };
}

/** Per-dimension reference statistics that z-normalise prints before they are compared. */
export interface PrintNormalisation {
  mean: number[];
  std: number[];
}

/** Reference statistics of a set of prints (at least two); a dimension that does not vary gets scale 1. */
export function normalisationOf(prints: readonly number[][]): PrintNormalisation {
  const dims = prints[0]?.length ?? 0;
  const mean = Array.from({ length: dims }, (_, d) => prints.reduce((s, p) => s + p[d]!, 0) / prints.length);
  const std = Array.from({ length: dims }, (_, d) => {
    const v = prints.reduce((s, p) => s + (p[d]! - mean[d]!) ** 2, 0) / Math.max(1, prints.length - 1);
    return v > 1e-9 ? Math.sqrt(v) : 1;
  });
  return { mean, std };
}

const normalise = (v: readonly number[], n: PrintNormalisation) => v.map((x, d) => (x - n.mean[d]!) / n.std[d]!);

/** Cosine similarity of two prints after z-normalisation: 1 the same direction, 0 unrelated, -1 opposite. */
export function printSimilarity(a: readonly number[], b: readonly number[], n: PrintNormalisation): number {
  const x = normalise(a, n);
  const y = normalise(b, n);
  let dot = 0;
  let nx = 0;
  let ny = 0;
  for (let i = 0; i < x.length; i++) {
    dot += x[i]! * y[i]!;
    nx += x[i]! * x[i]!;
    ny += y[i]! * y[i]!;
  }
  return nx > 0 && ny > 0 ? dot / Math.sqrt(nx * ny) : 0;
}

/** The element-wise mean of prints (a voice's centroid). */
export function centroidOf(prints: readonly number[][]): number[] {
  const dims = prints[0]?.length ?? 0;
  return Array.from({ length: dims }, (_, d) => prints.reduce((s, p) => s + p[d]!, 0) / Math.max(1, prints.length));
}
