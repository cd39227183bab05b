import type { Voice, VoiceSample, VoiceTestSample } from '../../generated/prisma/client.js';
import { formatTimestamp } from '../audio/index.js';
import { DEFAULT_TTS_TYPE } from './files.js';

/**
 * Voices as the API shows them (spec 2.1): the list element and the detail object, plus a few
 * documented extensions (docs/api/voices-transcription-speech-dialog.md, "The detail object"):
 * `id`, `workflow_id`, `has_original`, `sample_count`, the errors of failed steps in `status`, the
 * last split's settings, and how /v2/audio/speech speaks the voice.
 */
export interface VoiceView {
  voice: Voice;
  partnerName: string;
  samples: VoiceSample[];
  /** Test samples of the latest embedding's TTS type. */
  testSamples: VoiceTestSample[];
}

/** The TTS type the voice's embeddings use unless a request names another. */
export const embeddingTypeOf = (v: Pick<Voice, 'embeddingType'>) => v.embeddingType ?? DEFAULT_TTS_TYPE;

/** The TTS type of the latest embedding (requested or made). */
export const latestTtsTypeOf = (v: Pick<Voice, 'embeddingType' | 'embedTtsType'>) => v.embedTtsType ?? embeddingTypeOf(v);

const round3 = (x: number) => Math.round(x * 1000) / 1000;

export function presentSample(s: VoiceSample) {
  return { index: s.index, source_timestamp: formatTimestamp(s.sourceStart ?? 0), duration: round3(s.durationSeconds) };
}

export function presentTestSample(t: VoiceTestSample) {
  return { sample_index: t.sampleIndex, sentence_index: t.sentenceIndex, filename: t.filename };
}

export function presentVoiceListElement(v: Voice & { _count: { samples: number } }) {
  return {
    name: v.name,
    has_original: v.originalFilename !== null,
    sample_count: v._count.samples,
    splitting_status: v.splittingStatus,
    embedding_status: v.embeddingStatus,
    creator_name: v.creatorName ?? '',
    creator_email: v.creatorEmail ?? '',
  };
}

/** Path of a voice's resources under /api/voices. */
export const voicePath = (partnerName: string, voiceName: string) => `/api/voices/${encodeURIComponent(partnerName)}/${encodeURIComponent(voiceName)}`;

/** `baseUrl`: this API as the client reached it (for `embedding_zip_url`). */
export function presentVoice(view: VoiceView, baseUrl: string) {
  const { voice: v, samples, testSamples } = view;
  return {
    id: v.id,
    name: v.name,
    workflow_id: v.workflowId,
    has_original: v.originalFilename !== null,
    original_filename: v.originalFilename,
    original_uploaded_name: v.originalUploadedName,
    original_duration: v.originalDuration === null ? null : round3(v.originalDuration),
    status: { splitting: v.splittingStatus, embedding: v.embeddingStatus, splitting_error: v.splittingError, embedding_error: v.embeddingError },
    split_settings: { max_samples: v.splitMaxSamples, sample_duration: v.splitSampleDuration },
    sample_count: samples.length,
    samples: samples.map(presentSample),
    embedding_info: {
      tts_type: latestTtsTypeOf(v),
      last_update_status: v.embeddingUpdateStatus,
      last_update_time: v.embeddingUpdatedAt?.toISOString() ?? null,
      test_samples: testSamples.map(presentTestSample),
      sample_scores: v.sampleScores as Array<{ sample_index: number; score: number }>,
    },
    embedding_type: embeddingTypeOf(v),
    embedding_zip_url: v.embeddingFilesGeneration === null ? null : `${baseUrl}${voicePath(view.partnerName, v.name)}/embedding-zip`,
    preferred_sample_index: v.preferredSampleIndex,
    speech: { ready: v.embeddingEngine !== null, built_in_voice: v.builtInVoice, remote_voice_id: v.remoteVoiceId },
    creator_name: v.creatorName ?? '',
    creator_email: v.creatorEmail ?? '',
    created_at: v.createdAt.toISOString(),
    updated_at: v.updatedAt.toISOString(),
  };
}
