import { rm } from 'node:fs/promises';
import path from 'node:path';
import type { FileStorage } from '../platform/storage.js';
import { decodeForPrint, rankBuiltInVoices, referencePrints } from './builtin-prints.js';
import { voiceFiles } from './files.js';
import { centroidOf, printSimilarity, VOICE_PRINT_METHOD, voicePrint, type VoicePrint } from './voice-print.js';
import { makeScratchDir } from '../platform/scratch.js';

/**
 * The local voice print of a voice: the print of each sample, their centroid, each sample's score
 * (its similarity to the centroid: how much it sounds like the rest of the voice) and the built-in
 * voices ranked by similarity to the centroid.
 */
export interface VoicePrintSummary {
  method: typeof VOICE_PRINT_METHOD;
  samples: Array<{ index: number; print: VoicePrint | null; score: number | null }>;
  centroid: number[];
  builtIn: Array<{ name: string; similarity: number }>;
  normalisation: { reference_voices: string[]; mean: number[]; std: number[] };
}

/** Null when no sample holds enough speech for a print (0.5 s). */
export async function printVoiceSamples(
  storage: FileStorage,
  voice: { id: string; partnerId: string },
  indexes: readonly number[],
  signal?: AbortSignal,
): Promise<VoicePrintSummary | null> {
  const refs = await referencePrints();
  const dir = await makeScratchDir('voice-print-');
  const samples: VoicePrintSummary['samples'] = [];
  try {
    for (const index of indexes) {
      const file = path.join(dir, `${index}.opus`);
      await storage.download(voiceFiles.sample(voice.partnerId, voice.id, index), file);
      samples.push({ index, print: voicePrint(await decodeForPrint(file, signal)), score: null });
      await rm(file, { force: true });
    }
  } finally {
    await rm(dir, { recursive: true, force: true });
  }
  const printed = samples.filter((s) => s.print).map((s) => s.print!.vector);
  if (printed.length === 0) return null;
  const centroid = centroidOf(printed);
  for (const s of samples) if (s.print) s.score = Math.round(printSimilarity(s.print.vector, centroid, refs.normalisation) * 1e4) / 1e4;
  return {
    method: VOICE_PRINT_METHOD,
    samples,
    centroid: centroid.map((x) => Math.round(x * 1e5) / 1e5),
    builtIn: rankBuiltInVoices(centroid, refs),
    normalisation: { reference_voices: refs.voices.map((v) => v.name), mean: refs.normalisation.mean, std: refs.normalisation.std },
  };
}
