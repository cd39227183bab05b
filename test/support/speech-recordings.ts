import { execFile } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import { promisify } from 'node:util';
import { audioDir } from './audio.js';

/**
 * Real human recordings of English with a known text, shipped in Debian packages (scripts/dev-packages.txt):
 * - `pocketsphinx-testdata`: five LibriVox readings of Sense and Sensibility (read speech, a male
 *   reader at 16 kHz), five spoken card names (prompted speech) and "go forward ten meters";
 * - `alsa-utils`: the channel announcements of `speaker-test` ("Front left", ...; 48 kHz).
 * Their texts are the packages' own transcriptions (the reader's stumble "a more a amiable"
 * included). Used by `npm run eval:transcription` and the transcription tests.
 */
export interface Recording {
  /** e.g. `librivox-0870`. */
  name: string;
  set: 'read' | 'prompted';
  /** The recording as its package ships it (WAV, or raw 16 kHz s16le for `.raw`). */
  source: string;
  text: string;
}

const PS = '/usr/share/pocketsphinx/test/data';
const ALSA = '/usr/share/sounds/alsa';

/** The recordings this machine has (none when the packages are missing). */
export function humanRecordings(): Recording[] {
  const out: Recording[] = [];
  const transcript = (file: string) => (fs.existsSync(file) ? fs.readFileSync(file, 'utf8').split('\n') : []);
  for (const line of transcript(`${PS}/librivox/transcription`)) {
    const m = /^<s> (.*) <\/s> \((.+)\)$/.exec(line.trim());
    if (m) out.push({ name: `librivox-${m[2]!.slice(-4)}`, set: 'read', source: `${PS}/librivox/${m[2]}.wav`, text: m[1]!.trim() });
  }
  for (const line of transcript(`${PS}/cards/cards.transcription`)) {
    const m = /^<s> (.*) <\/s> \((.+)\)$/.exec(line.trim());
    if (m) out.push({ name: `cards-${m[2]}`, set: 'prompted', source: `${PS}/cards/${m[2]}.wav`, text: m[1]!.trim() });
  }
  out.push({ name: 'goforward', set: 'prompted', source: `${PS}/goforward.raw`, text: 'go forward ten meters' });
  for (const [file, text] of Object.entries({
    Front_Center: 'front center', Front_Left: 'front left', Front_Right: 'front right', Rear_Center: 'rear center',
    Rear_Left: 'rear left', Rear_Right: 'rear right', Side_Left: 'side left', Side_Right: 'side right',
  })) {
    out.push({ name: `alsa-${file.toLowerCase().replace('_', '-')}`, set: 'prompted', source: `${ALSA}/${file}.wav`, text });
  }
  return out.filter((r) => fs.existsSync(r.source));
}

/** A recording as 16 kHz mono 16-bit WAV (cached in the tests' audio folder). */
export async function asWav16k(r: Recording): Promise<string> {
  const out = path.join(audioDir, `human-${r.name}.wav`);
  if (fs.existsSync(out)) return out;
  const input = r.source.endsWith('.raw') ? ['-f', 's16le', '-ar', '16000', '-ac', '1', '-i', r.source] : ['-i', r.source];
  await promisify(execFile)('ffmpeg', ['-nostdin', '-loglevel', 'error', '-y', ...input, '-ar', '16000', '-ac', '1', '-c:a', 'pcm_s16le', out]);
  return out;
}

const ones = ['zero', 'one', 'two', 'three', 'four', 'five', 'six', 'seven', 'eight', 'nine', 'ten', 'eleven', 'twelve', 'thirteen', 'fourteen', 'fifteen', 'sixteen', 'seventeen', 'eighteen', 'nineteen'];
const tens = ['', '', 'twenty', 'thirty', 'forty', 'fifty', 'sixty', 'seventy', 'eighty', 'ninety'];

/** A whole number below a million in words ("10" → "ten", "1990" → "one thousand nine hundred ninety"). */
export function numberWords(n: number): string[] {
  if (n < 20) return [ones[n]!];
  if (n < 100) return [tens[Math.floor(n / 10)]!, ...(n % 10 ? [ones[n % 10]!] : [])];
  if (n < 1000) return [ones[Math.floor(n / 100)]!, 'hundred', ...(n % 100 ? numberWords(n % 100) : [])];
  return [...numberWords(Math.floor(n / 1000)), 'thousand', ...(n % 1000 ? numberWords(n % 1000) : [])];
}

const abbreviations: Record<string, string[]> = { mr: ['mister'], mrs: ['missus'], dr: ['doctor'], st: ['saint'] };

/**
 * Words as a word error rate counts them when case, punctuation and the spelling of numbers do not
 * count: lower case, hyphens split, digits read out, "Mr." read "mister", "and" dropped from
 * numbers' "hundred and".
 */
export function normalizedWords(text: string): string[] {
  return text
    .toLowerCase()
    .replace(/(\d),(\d{3})/g, '$1$2')
    .replace(/[^\p{L}\p{N}'\s]+/gu, ' ')
    .split(/\s+/)
    .filter(Boolean)
    .flatMap((w) => (/^\d{1,6}$/.test(w) ? numberWords(Number(w)) : (abbreviations[w] ?? [w])));
}

/** Word-level edit operations between a reference and a hypothesis (normalizedWords of each). */
export function wordErrors(reference: string, hypothesis: string): { errors: number; words: number } {
  const r = normalizedWords(reference);
  const h = normalizedWords(hypothesis);
  let prev = Array.from({ length: h.length + 1 }, (_, j) => j);
  for (let i = 1; i <= r.length; i++) {
    const cur = [i];
    for (let j = 1; j <= h.length; j++) cur[j] = Math.min(prev[j]! + 1, cur[j - 1]! + 1, prev[j - 1]! + (r[i - 1] === h[j - 1] ? 0 : 1));
    prev = cur;
  }
  return { errors: prev[h.length]!, words: r.length };
}
