import { rm, writeFile } from 'node:fs/promises';
import path from 'node:path';
import type { Readable } from 'node:stream';
import { AudioUnreadable, encodeFile, probeAudio, voiceSampleOpus } from '../audio/index.js';
import { badRequest, conflict, notFound } from '../platform/errors.js';
import { samplesBundle } from './bundles.js';
import { DEFAULT_TTS_TYPE, sampleContentType, voiceFiles } from './files.js';
import { verifyJobFilesToken } from './job-files.js';
import { presentTestSample } from './presenters.js';
import { isLocked, lockedConflict, type VoiceApiDeps } from './requests.js';
import { checkVoiceUpload, type VoiceUpload } from './uploads.js';
import { findVoice, voiceView, withLockedVoice } from './voices.js';
import { makeScratchDir } from '../platform/scratch.js';

/**
 * Samples and files of a voice: uploading a sample to a voice created empty (converted like split
 * samples: Opus in Ogg, 96 kbit/s constant, mono), downloading and deleting samples (indexes never
 * move: deleting sample 2 leaves 0, 1, 3, ...; an upload takes the next unused index), the samples
 * bundle, test samples, the embedding's artefact, and the GPU job's signed download.
 */
export interface StoredDownload {
  stream: Readable;
  filename: string;
  contentType: string;
}

/** Longest uploaded sample: the longest sample splitting makes (sample_duration ≤ 60 s). */
export const MAX_SAMPLE_SECONDS = 60;

/**
 * Adds an uploaded sample to a voice created empty. Refused (409) for a voice with an original
 * (its samples come from splitting it) and while the voice is being processed.
 */
export async function uploadSample(deps: VoiceApiDeps, partnerName: string, voiceName: string, upload: VoiceUpload) {
  const { partner, voice } = await findVoice(deps, partnerName, voiceName);
  if (voice.originalFilename) throw conflict(`voice ${JSON.stringify(voice.name)} has an original recording: its samples come from splitting it (POST .../split)`);
  if (isLocked(voice)) throw lockedConflict(voice);
  await checkVoiceUpload(upload, { field: 'file', maxSeconds: MAX_SAMPLE_SECONDS });
  let audio: Buffer;
  let duration: number;
  const dir = await makeScratchDir('voice-sample-');
  try {
    audio = await encodeFile(upload.path, { ...voiceSampleOpus, timeoutMs: 120_000 });
    const file = path.join(dir, 'sample.opus');
    await writeFile(file, audio);
    duration = (await probeAudio(file)).durationSeconds;
  } catch (err) {
    if (err instanceof AudioUnreadable) throw badRequest(`${upload.originalName || 'the upload'} could not be converted: the file is damaged or truncated`);
    throw err;
  } finally {
    await rm(dir, { recursive: true, force: true });
  }
  await withLockedVoice(deps, voice.id, async (tx, v) => {
    if (v.originalFilename) throw conflict(`voice ${JSON.stringify(v.name)} has an original recording: its samples come from splitting it`);
    if (isLocked(v)) throw lockedConflict(v);
    const index = v.nextSampleIndex;
    // Written under the lock and before the row: a sample row always has its file.
    await deps.storage.write(voiceFiles.sample(v.partnerId, v.id, index), audio);
    await tx.voiceSample.create({ data: { voiceId: v.id, index, sourceStart: null, durationSeconds: duration, origin: 'upload', uploadedName: upload.originalName || null } });
    await tx.voice.update({ where: { id: v.id }, data: { nextSampleIndex: index + 1 } });
  });
  return voiceView(deps, voice.id, partner.name);
}

async function findSample(deps: VoiceApiDeps, voiceId: string, index: number) {
  const sample = await deps.db.voiceSample.findUnique({ where: { voiceId_index: { voiceId, index } } });
  if (!sample) throw notFound(`sample ${index} not found`);
  return sample;
}

export async function openSample(deps: VoiceApiDeps, partnerName: string, voiceName: string, index: number): Promise<StoredDownload> {
  const { voice } = await findVoice(deps, partnerName, voiceName);
  await findSample(deps, voice.id, index);
  const key = voiceFiles.sample(voice.partnerId, voice.id, index);
  if (!(await deps.storage.exists(key))) throw notFound(`sample ${index} not found`);
  return { stream: await deps.storage.stream(key), filename: `${index}.opus`, contentType: sampleContentType };
}

/**
 * Deletes one sample; the others keep their indexes. Its score goes with it, and it stops being
 * the preferred sample. Refused (409) while the voice is being processed.
 */
export async function deleteSample(deps: VoiceApiDeps, partnerName: string, voiceName: string, index: number) {
  const { partner, voice } = await findVoice(deps, partnerName, voiceName);
  await withLockedVoice(deps, voice.id, async (tx, v) => {
    if (isLocked(v)) throw lockedConflict(v);
    const gone = await tx.voiceSample.deleteMany({ where: { voiceId: v.id, index } });
    if (gone.count === 0) throw notFound(`sample ${index} not found`);
    const scores = (v.sampleScores as Array<{ sample_index: number; score: number }>).filter((s) => s.sample_index !== index);
    await tx.voice.update({ where: { id: v.id }, data: { sampleScores: scores, ...(v.preferredSampleIndex === index ? { preferredSampleIndex: null } : {}) } });
  });
  await deps.storage.removePrefix(voiceFiles.sample(voice.partnerId, voice.id, index));
  return voiceView(deps, voice.id, partner.name);
}

const safeName = (name: string) => name.replace(/[^\w.-]+/g, '_').slice(0, 100) || 'voice';

export async function openSamplesBundle(deps: VoiceApiDeps, partnerName: string, voiceName: string): Promise<StoredDownload> {
  const { partner, voice } = await findVoice(deps, partnerName, voiceName);
  const samples = await deps.db.voiceSample.findMany({ where: { voiceId: voice.id }, orderBy: { index: 'asc' } });
  return { stream: samplesBundle(deps.storage, voice, partner.name, samples), filename: `${safeName(voice.name)}-samples.zip`, contentType: 'application/zip' };
}

/** The GPU job service's download of a voice's samples bundle, by signed link (no key). */
export async function openJobFilesBundle(deps: VoiceApiDeps, token: string): Promise<StoredDownload> {
  const voiceId = verifyJobFilesToken(deps.config, token);
  if (!voiceId) throw notFound('this link is invalid or has expired');
  const voice = await deps.db.voice.findUnique({ where: { id: voiceId }, include: { partner: { select: { name: true } }, samples: { orderBy: { index: 'asc' } } } });
  if (!voice) throw notFound('this link is invalid or has expired');
  const { samples, partner, ...row } = voice;
  return { stream: samplesBundle(deps.storage, row, partner.name, samples), filename: `${safeName(voice.name)}-samples.zip`, contentType: 'application/zip' };
}

export async function listTestSamples(deps: VoiceApiDeps, partnerName: string, voiceName: string, ttsType: string | undefined, baseUrl: string) {
  const { voice } = await findVoice(deps, partnerName, voiceName);
  const tts = ttsType ?? DEFAULT_TTS_TYPE;
  const rows = await deps.db.voiceTestSample.findMany({ where: { voiceId: voice.id, ttsType: tts }, orderBy: [{ sentenceIndex: 'asc' }, { filename: 'asc' }] });
  const base = `${baseUrl}/api/voices/${encodeURIComponent(partnerName)}/${encodeURIComponent(voice.name)}/test-samples`;
  return rows.map((t) => ({
    ...presentTestSample(t),
    tts_type: t.ttsType,
    sentence: t.sentence,
    content_type: t.contentType,
    duration: t.durationSeconds,
    url: `${base}/${encodeURIComponent(t.filename)}?tts_type=${encodeURIComponent(t.ttsType)}`,
  }));
}

export async function openTestSample(deps: VoiceApiDeps, partnerName: string, voiceName: string, filename: string, ttsType: string | undefined): Promise<StoredDownload> {
  const { voice } = await findVoice(deps, partnerName, voiceName);
  const tts = ttsType ?? DEFAULT_TTS_TYPE;
  const row = await deps.db.voiceTestSample.findUnique({ where: { voiceId_ttsType_filename: { voiceId: voice.id, ttsType: tts, filename } } });
  const key = row ? voiceFiles.testSample(voice.partnerId, voice.id, tts, row.generation, filename) : null;
  if (!row || !key || !(await deps.storage.exists(key))) throw notFound(`test sample ${JSON.stringify(filename)} of tts_type '${tts}' not found`);
  return { stream: await deps.storage.stream(key), filename, contentType: row.contentType };
}

/** Deletes the test samples of one TTS type (none is not an error). */
export async function deleteTestSamples(deps: VoiceApiDeps, partnerName: string, voiceName: string, ttsType: string) {
  const { partner, voice } = await findVoice(deps, partnerName, voiceName);
  await deps.db.voiceTestSample.deleteMany({ where: { voiceId: voice.id, ttsType } });
  await deps.storage.removePrefix(voiceFiles.testSamples(voice.partnerId, voice.id, ttsType));
  return voiceView(deps, voice.id, partner.name);
}

/** The current embedding's artefact (`embedding_zip_url`). */
export async function openEmbeddingArtefact(deps: VoiceApiDeps, partnerName: string, voiceName: string): Promise<StoredDownload> {
  const { voice } = await findVoice(deps, partnerName, voiceName);
  const key = voice.embeddingFilesGeneration === null ? null : voiceFiles.embedding(voice.partnerId, voice.id, voice.embeddingFilesGeneration);
  if (!key || !(await deps.storage.exists(key))) throw notFound(`voice ${JSON.stringify(voice.name)} has no embedding yet`);
  return { stream: await deps.storage.stream(key), filename: `${safeName(voice.name)}-embedding.zip`, contentType: 'application/zip' };
}
