import { partnerVoiceFilesPrefix } from '../partners/partners.js';
import { describedPattern } from '../platform/schema-errors.js';

/**
 * Storage keys of a voice's files, all under voices/<partner id>/<voice id>/ (deleting the voice
 * removes that prefix, deleting the partner removes voices/<partner id>/):
 * - original.<ext>: the recording as uploaded;
 * - samples/<index>.opus: the samples (Opus in Ogg, 96 kbit/s constant, mono, 48 kHz);
 * - embedding/<generation>.zip: the embedding's artefact (`embedding_zip_url`);
 * - test-samples/<tts_type>/<generation>/<filename>: the test sentences spoken with a TTS type.
 * An embedding writes under its own generation and the row names the current one, so an embedding
 * overtaken by a newer request never overwrites the files of the current one.
 */
export const voiceFiles = {
  prefix: (partnerId: string, voiceId: string) => `${partnerVoiceFilesPrefix(partnerId)}/${voiceId}`,
  original: (partnerId: string, voiceId: string, filename: string) => `${voiceFiles.prefix(partnerId, voiceId)}/${filename}`,
  samples: (partnerId: string, voiceId: string) => `${voiceFiles.prefix(partnerId, voiceId)}/samples`,
  sample: (partnerId: string, voiceId: string, index: number) => `${voiceFiles.samples(partnerId, voiceId)}/${index}.opus`,
  embedding: (partnerId: string, voiceId: string, generation: number) => `${voiceFiles.prefix(partnerId, voiceId)}/embedding/${generation}.zip`,
  testSamples: (partnerId: string, voiceId: string, ttsType: string) => `${voiceFiles.prefix(partnerId, voiceId)}/test-samples/${ttsType}`,
  testSampleGeneration: (partnerId: string, voiceId: string, ttsType: string, generation: number) => `${voiceFiles.testSamples(partnerId, voiceId, ttsType)}/${generation}`,
  testSample: (partnerId: string, voiceId: string, ttsType: string, generation: number, filename: string) =>
    `${voiceFiles.testSampleGeneration(partnerId, voiceId, ttsType, generation)}/${filename}`,
};

/**
 * The TTS type (`embedding_type`, `tts_type`) when none is set: `builtin`, the built-in speech
 * engines of /v2/audio/speech (festival, flite, espeak-ng). Locally it is the only one; with the
 * GPU job service configured every TTS type, this one included, is handed to that service.
 */
export const DEFAULT_TTS_TYPE = 'builtin';

/** TTS types name a folder of test samples and a path segment: lower-case letters, digits, `.`, `_`, `-`. */
export const ttsTypePattern = describedPattern('^[a-z0-9][a-z0-9._-]{0,63}$', 'must be a TTS type: 1-64 lower-case letters, digits, ".", "_" or "-", the first a letter or digit');

/** The sentences spoken as test samples after every embedding (index = `sentence_index`). */
export const testSentences = [
  'Hello, this is a short test of my new voice.',
  'The quick brown fox jumps over the lazy dog, and then it runs back home.',
  'Could you tell me how long the journey to the city centre takes today?',
] as const;

/** Sample audio as the API serves it. */
export const sampleContentType = 'audio/ogg';
