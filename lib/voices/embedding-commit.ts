import type { VoiceStepOutcome } from '../contracts/voice-job.js';
import { voiceFiles } from './files.js';
import type { VoiceJobDeps } from './job-steps.js';

/**
 * The end of an embedding, whoever made it (the local voice print or the GPU job service): its
 * files are written under its own generation, then, in one transaction and only if this generation
 * is still the one wanted, the voice becomes `completed` with its scores and its test samples
 * replace those of its TTS type. The files of the embedding it replaced are removed afterwards;
 * an embedding that was overtaken (or whose voice was deleted) removes its own.
 */
export interface EmbeddingResult {
  engine: 'local-voiceprint' | 'gpu-job';
  ttsType: string;
  sampleScores: Array<{ sample_index: number; score: number }>;
  builtInVoice: string | null;
  remoteVoiceId: string | null;
  /** The artefact served at `embedding_zip_url` (a ZIP). */
  artefact: Buffer;
  testSamples: Array<{ filename: string; sampleIndex: number | null; sentenceIndex: number; sentence: string; contentType: string; durationSeconds: number | null; audio: Buffer }>;
}

export async function commitEmbedding(deps: VoiceJobDeps, voiceId: string, generation: number, result: EmbeddingResult): Promise<VoiceStepOutcome> {
  const v = await deps.db.voice.findUnique({ where: { id: voiceId } });
  if (!v) return 'gone';
  if (v.embedGeneration !== generation || v.embeddingStatus !== 'in_progress') return 'superseded';
  const { partnerId } = v;
  await deps.storage.write(voiceFiles.embedding(partnerId, voiceId, generation), result.artefact);
  for (const t of result.testSamples) await deps.storage.write(voiceFiles.testSample(partnerId, voiceId, result.ttsType, generation, t.filename), t.audio);

  const replaced = await deps.db.$transaction(async (tx) => {
    const before = await tx.voice.findUnique({ where: { id: voiceId }, select: { embeddingFilesGeneration: true } });
    const updated = await tx.voice.updateMany({
      where: { id: voiceId, embedGeneration: generation, embeddingStatus: 'in_progress' },
      data: {
        embeddingStatus: 'completed',
        embeddingError: null,
        embeddingUpdateStatus: 'completed',
        embeddingUpdatedAt: new Date(),
        embeddingEngine: result.engine,
        embeddingFilesGeneration: generation,
        sampleScores: result.sampleScores,
        builtInVoice: result.builtInVoice,
        remoteVoiceId: result.remoteVoiceId,
      },
    });
    if (updated.count === 0) return null;
    const old = await tx.voiceTestSample.findMany({ where: { voiceId, ttsType: result.ttsType }, select: { generation: true }, distinct: ['generation'] });
    await tx.voiceTestSample.deleteMany({ where: { voiceId, ttsType: result.ttsType } });
    await tx.voiceTestSample.createMany({
      data: result.testSamples.map((t) => ({
        voiceId, ttsType: result.ttsType, filename: t.filename, sampleIndex: t.sampleIndex, sentenceIndex: t.sentenceIndex,
        sentence: t.sentence, generation, contentType: t.contentType, durationSeconds: t.durationSeconds,
      })),
    });
    return { artefact: before?.embeddingFilesGeneration ?? null, testSamples: old.map((o) => o.generation) };
  });

  if (!replaced) {
    const exists = await deps.db.voice.count({ where: { id: voiceId } });
    if (!exists) {
      await deps.storage.removePrefix(voiceFiles.prefix(partnerId, voiceId));
      return 'gone';
    }
    await deps.storage.removePrefix(voiceFiles.embedding(partnerId, voiceId, generation));
    await deps.storage.removePrefix(voiceFiles.testSampleGeneration(partnerId, voiceId, result.ttsType, generation));
    return 'superseded';
  }
  if (replaced.artefact !== null && replaced.artefact !== generation) await deps.storage.removePrefix(voiceFiles.embedding(partnerId, voiceId, replaced.artefact));
  for (const g of replaced.testSamples) if (g !== generation) await deps.storage.removePrefix(voiceFiles.testSampleGeneration(partnerId, voiceId, result.ttsType, g));
  return 'done';
}
