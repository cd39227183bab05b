import { rm, writeFile } from 'node:fs/promises';
import path from 'node:path';
import { decodePcm } from '../audio/index.js';
import { builtInVoices, synthesize } from '../speech/index.js';
import { normalisationOf, printSimilarity, voicePrint, VOICE_PRINT_SAMPLE_RATE, type PrintNormalisation } from './voice-print.js';
import { makeScratchDir } from '../platform/scratch.js';

/**
 * Voice prints of the built-in speech voices (lib/speech), made once per process from a fixed
 * English passage. They serve twice: as the reference population whose statistics z-normalise every
 * comparison, and as the candidates for "the built-in voice nearest to this voice", which is how
 * /v2/audio/speech speaks a partner's voice locally (no local engine can clone a voice).
 */
const REFERENCE_PASSAGE =
  'The library on the corner of the square opens at nine every morning. Visitors can borrow up to ten books for three weeks at a time. ' +
  'On Saturdays the reading room is full of students preparing for their exams. Last year the city paid for new windows and a better heating system.';

export interface ReferencePrints {
  voices: Array<{ name: string; vector: number[] }>;
  normalisation: PrintNormalisation;
}

/** Decodes any audio file to the voice print's 16 kHz mono samples. */
export const decodeForPrint = (file: string, signal?: AbortSignal) => decodePcm(file, { sampleRate: VOICE_PRINT_SAMPLE_RATE, channels: 1, maxSeconds: 3600, signal, timeoutMs: 10 * 60_000 });

async function makeReferencePrints(): Promise<ReferencePrints> {
  const dir = await makeScratchDir('voice-reference-');
  try {
    const voices: ReferencePrints['voices'] = [];
    for (const v of builtInVoices()) {
      const speech = await synthesize({ text: REFERENCE_PASSAGE, voice: v.name, language: 'en', format: 'wav' });
      const file = path.join(dir, `${v.name}.wav`);
      await writeFile(file, speech.audio);
      const print = voicePrint(await decodeForPrint(file));
      if (print) voices.push({ name: v.name, vector: print.vector });
    }
    if (voices.length < 2) throw new Error('fewer than two built-in voices could be synthesized: no reference for the voice print');
    return { voices, normalisation: normalisationOf(voices.map((v) => v.vector)) };
  } finally {
    await rm(dir, { recursive: true, force: true });
  }
}

let cached: Promise<ReferencePrints> | null = null;

/** The reference prints (made on first use; a failure is not cached). */
export function referencePrints(): Promise<ReferencePrints> {
  cached ??= makeReferencePrints().catch((err: unknown) => {
    cached = null;
    throw err;
  });
  return cached;
}

/** The built-in voices ranked by similarity to a voice's centroid, nearest first. */
export function rankBuiltInVoices(centroid: readonly number[], refs: ReferencePrints): Array<{ name: string; similarity: number }> {
  return refs.voices
    .map((v) => ({ name: v.name, similarity: Math.round(printSimilarity(centroid, v.vector, refs.normalisation) * 1e4) / 1e4 }))
    .sort((a, b) => b.similarity - a.similarity);
}
