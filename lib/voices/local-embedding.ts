import { rm, writeFile } from 'node:fs/promises';
import path from 'node:path';
import type { VoiceStepOutcome } from '../contracts/voice-job.js';
import { probeAudio } from '../audio/index.js';
import { synthesize } from '../speech/index.js';
import { zipToBuffer } from './bundles.js';
import { commitEmbedding, type EmbeddingResult } from './embedding-commit.js';
import { DEFAULT_TTS_TYPE, testSentences } from './files.js';
import { VoiceInputError, VoiceUnsupported, type VoiceJobDeps } from './job-steps.js';
import { latestTtsTypeOf } from './presenters.js';
import { printVoiceSamples, type VoicePrintSummary } from './sample-prints.js';
import { makeScratchDir } from '../platform/scratch.js';

/**
 * The embedding made on the worker when no GPU job service is configured: the local voice print
 * (MFCC statistics of the samples: a classical voice print, not a neural speaker embedding), each
 * sample scored by its similarity to the voice's centroid, the built-in speech voice nearest to it
 * (how /v2/audio/speech speaks the voice: no local engine can clone one), and the test sentences
 * spoken by that voice. The artefact `embedding.zip` holds `embedding.json` (every number of it)
 * and `README.txt` saying what it is.
 */
export const LOCAL_ENGINE = 'local-voiceprint';

/** The sample the test samples are made for: the preferred one, else the best scoring. */
export function referenceSample(preferred: number | null, summary: VoicePrintSummary): number | null {
  if (preferred !== null && summary.samples.some((s) => s.index === preferred)) return preferred;
  const scored = summary.samples.filter((s) => s.score !== null).sort((a, b) => b.score! - a.score! || a.index - b.index);
  return scored[0]?.index ?? null;
}

/** The test sentences spoken by a built-in voice, as Opus in Ogg. */
export async function speakTestSentences(builtInVoice: string, sampleIndex: number | null, signal?: AbortSignal): Promise<EmbeddingResult['testSamples']> {
  const dir = await makeScratchDir('voice-test-samples-');
  try {
    const out: EmbeddingResult['testSamples'] = [];
    for (const [i, sentence] of testSentences.entries()) {
      const speech = await synthesize({ text: sentence, voice: builtInVoice, language: 'en', format: 'opus', signal });
      const file = path.join(dir, `${i}.opus`);
      await writeFile(file, speech.audio);
      const { durationSeconds } = await probeAudio(file, { signal });
      out.push({
        filename: `${sampleIndex ?? 'voice'}_${i}.opus`,
        sampleIndex,
        sentenceIndex: i,
        sentence,
        contentType: speech.contentType,
        durationSeconds: Math.round(durationSeconds * 1000) / 1000,
        audio: speech.audio,
      });
    }
    return out;
  } finally {
    await rm(dir, { recursive: true, force: true });
  }
}

const README = `Local voice print (${LOCAL_ENGINE}) made by this service without a GPU job service.

It is a classical voice print, NOT a neural speaker embedding: for every sample, the mean and the
standard deviation of its mel-frequency cepstral coefficients c1..c19 over its speech frames
(25 ms frames every 10 ms, 26 mel filters, 60-7600 Hz). Prints are compared by the cosine of their
vectors z-normalised with the statistics of the built-in speech voices' prints. A sample's score is
its similarity to the voice's centroid. Expect it to tell synthetic voices apart well and real
microphones much less well, since it also describes the channel. Local speech speaks this voice with
the nearest built-in voice; no local engine can clone a voice.
`;

export async function embedVoiceLocally(deps: VoiceJobDeps, voiceId: string, generation: number, signal?: AbortSignal): Promise<VoiceStepOutcome> {
  const v = await deps.db.voice.findUnique({ where: { id: voiceId }, include: { samples: { orderBy: { index: 'asc' } } } });
  if (!v) return 'gone';
  if (v.embedGeneration !== generation || v.embeddingStatus !== 'in_progress') return 'superseded';
  const ttsType = latestTtsTypeOf(v);
  if (ttsType !== DEFAULT_TTS_TYPE) {
    throw new VoiceUnsupported(`tts_type '${ttsType}' needs the GPU job service (VOICE_JOB_BASE_URL), which is not configured; locally only '${DEFAULT_TTS_TYPE}' can be made`);
  }
  if (v.samples.length === 0) throw new VoiceInputError('the voice has no samples to embed');
  const summary = await printVoiceSamples(deps.storage, v, v.samples.map((s) => s.index), signal);
  if (!summary) throw new VoiceInputError('no sample holds enough speech for a voice print (at least half a second)');
  const nearest = summary.builtIn[0]!.name;
  const reference = referenceSample(v.preferredSampleIndex, summary);
  const testSamples = await speakTestSentences(nearest, reference, signal);
  const embedding = {
    engine: LOCAL_ENGINE,
    method: summary.method,
    description: 'MFCC c1..c19 mean and standard deviation per sample (a classical voice print, not a neural speaker embedding)',
    tts_type: ttsType,
    voice: v.name,
    samples: summary.samples.map((s) => ({ index: s.index, score: s.score, speech_frames: s.print?.frames ?? 0, vector: s.print?.vector ?? null })),
    centroid: summary.centroid,
    normalisation: summary.normalisation,
    nearest_builtin_voice: nearest,
    builtin_similarities: summary.builtIn,
    reference_sample_index: reference,
    test_sentences: testSentences,
  };
  const artefact = await zipToBuffer([
    { name: 'embedding.json', data: `${JSON.stringify(embedding, null, 2)}\n` },
    { name: 'README.txt', data: README },
  ]);
  return commitEmbedding(deps, voiceId, generation, {
    engine: LOCAL_ENGINE,
    ttsType,
    sampleScores: summary.samples.filter((s) => s.score !== null).map((s) => ({ sample_index: s.index, score: s.score! })),
    builtInVoice: nearest,
    remoteVoiceId: null,
    artefact,
    testSamples,
  });
}
