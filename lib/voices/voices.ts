import crypto from 'node:crypto';
import type { Voice } from '../../generated/prisma/client.js';
import type { Prisma } from '../platform/db.js';
import { badRequest, conflict, notFound } from '../platform/errors.js';
import { hasControlCharacters, isBlank } from '../platform/text.js';
import { voiceJobWorkflowId, type VoiceJobStep } from '../contracts/voice-job.js';
import { DEFAULT_TTS_TYPE, voiceFiles } from './files.js';
import { embeddingTypeOf, latestTtsTypeOf, presentVoice, presentVoiceListElement, type VoiceView } from './presenters.js';
import { cancelVoiceJob, isLocked, lockedConflict, releaseStuckVoice, wakeVoiceJob, type VoiceApiDeps } from './requests.js';
import { checkVoiceUpload, containerExtension, type VoiceUpload } from './uploads.js';
import { findPartner } from '../partners/partners.js';

/**
 * The voice interface's voices (spec 4.1): create (with a recording, which starts splitting and
 * embedding, or empty), list, read, rename, delete, split, embed, and the preferred sample. Every
 * change that depends on the voice's state runs under its row lock (`SELECT ... FOR UPDATE`), so
 * the lock of spec 3 (409 while splitting or embedding is `in_progress`) cannot be raced.
 */
type Tx = Prisma.TransactionClient;

const isUniqueViolation = (err: unknown) => (err as { code?: string }).code === 'P2002';
const nameTaken = (name: string) => conflict(`a voice named ${JSON.stringify(name)} already exists for this partner`);

export async function findVoicePartner(deps: Pick<VoiceApiDeps, 'db'>, partnerName: string) {
  return findPartner(deps.db, partnerName);
}

/** A voice of a partner by its name (404 `voice not found`), released first if its workflow was lost. */
export async function findVoice(deps: VoiceApiDeps, partnerName: string, voiceName: string) {
  const partner = await findVoicePartner(deps, partnerName);
  const voice = await deps.db.voice.findUnique({ where: { partnerId_name: { partnerId: partner.id, name: voiceName } } });
  if (!voice) throw notFound(`voice ${JSON.stringify(voiceName)} not found`);
  return { partner, voice: await releaseStuckVoice(deps, voice) };
}

/** Runs `work` with the voice's row locked. */
export async function withLockedVoice<T>(deps: Pick<VoiceApiDeps, 'db'>, voiceId: string, work: (tx: Tx, voice: Voice) => Promise<T>): Promise<T> {
  return deps.db.$transaction(async (tx) => {
    const rows = await tx.$queryRaw<Array<{ id: string }>>`SELECT id FROM voices WHERE id = ${voiceId}::uuid FOR UPDATE`;
    if (rows.length === 0) throw notFound('voice not found');
    return work(tx, await tx.voice.findUniqueOrThrow({ where: { id: voiceId } }));
  });
}

export async function voiceView(deps: Pick<VoiceApiDeps, 'db'>, voiceId: string, partnerName: string): Promise<VoiceView> {
  const voice = await deps.db.voice.findUnique({ where: { id: voiceId }, include: { samples: { orderBy: { index: 'asc' } } } });
  if (!voice) throw notFound('voice not found');
  const testSamples = await deps.db.voiceTestSample.findMany({ where: { voiceId, ttsType: latestTtsTypeOf(voice) }, orderBy: [{ sentenceIndex: 'asc' }, { filename: 'asc' }] });
  const { samples, ...row } = voice;
  return { voice: row, partnerName, samples, testSamples };
}

export async function describeVoice(deps: VoiceApiDeps, partnerName: string, voiceName: string, baseUrl: string) {
  const { partner, voice } = await findVoice(deps, partnerName, voiceName);
  return presentVoice(await voiceView(deps, voice.id, partner.name), baseUrl);
}

export async function listVoices(deps: VoiceApiDeps, partnerName: string) {
  const partner = await findVoicePartner(deps, partnerName);
  const rows = await deps.db.voice.findMany({ where: { partnerId: partner.id }, include: { _count: { select: { samples: true } } }, orderBy: [{ name: 'asc' }] });
  return rows.map(presentVoiceListElement);
}

/** Names: 1-255 characters (the schema), not blank, no control characters; kept exactly as sent. */
export function checkVoiceName(name: string, field = 'name'): string {
  if (isBlank(name)) throw badRequest(`${field} must not be blank`);
  if (hasControlCharacters(name)) throw badRequest(`${field} must not contain control characters`);
  return name;
}

/** A TTS type this deployment can embed: any with the GPU job service, only the default one without. */
export function checkTtsType(deps: Pick<VoiceApiDeps, 'config'>, ttsType: string, field: string): string {
  if (ttsType !== DEFAULT_TTS_TYPE && !deps.config.voices.gpuJobs) {
    throw badRequest(`${field} '${ttsType}' needs the GPU job service (VOICE_JOB_BASE_URL), which is not configured; this server embeds only '${DEFAULT_TTS_TYPE}'`);
  }
  return ttsType;
}

/** Wakes the workflow; when Temporal cannot take the work, the requested steps fail saying so (503). */
async function handOver(deps: VoiceApiDeps, voice: Voice, partnerName: string, steps: VoiceJobStep[]): Promise<void> {
  try {
    await wakeVoiceJob(deps, voice, partnerName);
  } catch (err) {
    const message = 'could not be queued (the job service was unreachable); request it again';
    const now = new Date();
    if (steps.includes('split')) await deps.db.voice.updateMany({ where: { id: voice.id, splitGeneration: voice.splitGeneration, splittingStatus: 'in_progress' }, data: { splittingStatus: 'failed', splittingError: message } });
    if (steps.includes('embed')) {
      await deps.db.voice.updateMany({
        where: { id: voice.id, embedGeneration: voice.embedGeneration, embeddingStatus: 'in_progress' },
        data: { embeddingStatus: 'failed', embeddingError: message, embeddingUpdateStatus: 'failed', embeddingUpdatedAt: now },
      });
    }
    throw err;
  }
}

export interface CreateVoiceInput {
  name: string;
  creator_name?: string;
  creator_email?: string;
  embedding_type?: string;
  max_samples: number;
  sample_duration: number;
}

/**
 * Creates a voice. With a recording: the file is checked (signature, ffprobe, length), stored as
 * `original.<ext>`, and splitting then embedding start (both `in_progress`). If the job cannot be
 * queued, nothing is kept (503).
 */
export async function createVoice(deps: VoiceApiDeps, partnerName: string, input: CreateVoiceInput, upload: VoiceUpload | null): Promise<VoiceView> {
  const partner = await findVoicePartner(deps, partnerName);
  const name = checkVoiceName(input.name);
  if (input.embedding_type) checkTtsType(deps, input.embedding_type, 'embedding_type');
  const checked = upload ? await checkVoiceUpload(upload, { field: 'file', maxSeconds: deps.config.voices.maxOriginalSeconds }) : null;
  const id = crypto.randomUUID();
  const originalFilename = checked ? `original.${containerExtension(checked.container)}` : null;
  let voice: Voice;
  try {
    voice = await deps.db.voice.create({
      data: {
        id,
        partnerId: partner.id,
        name,
        creatorName: input.creator_name ?? null,
        creatorEmail: input.creator_email ?? null,
        workflowId: voiceJobWorkflowId(partner.name, id),
        embeddingType: input.embedding_type ?? null,
        splitMaxSamples: input.max_samples,
        splitSampleDuration: input.sample_duration,
        ...(checked && upload
          ? {
              originalFilename,
              originalUploadedName: upload.originalName || null,
              originalContainer: checked.container,
              originalDuration: checked.durationSeconds,
              splittingStatus: 'in_progress',
              splitGeneration: 1,
              embeddingStatus: 'in_progress',
              embedGeneration: 1,
            }
          : {}),
      },
    });
  } catch (err) {
    if (isUniqueViolation(err)) throw nameTaken(name);
    throw err;
  }
  if (checked && upload) {
    try {
      await deps.storage.moveIn(voiceFiles.original(partner.id, id, originalFilename!), upload.path);
      await wakeVoiceJob(deps, voice, partner.name);
    } catch (err) {
      await deps.db.voice.deleteMany({ where: { id } });
      await deps.storage.removePrefix(voiceFiles.prefix(partner.id, id));
      throw err;
    }
  }
  return voiceView(deps, id, partner.name);
}

export async function renameVoice(deps: VoiceApiDeps, partnerName: string, voiceName: string, newName: string): Promise<VoiceView> {
  const { partner, voice } = await findVoice(deps, partnerName, voiceName);
  const name = checkVoiceName(newName);
  try {
    await withLockedVoice(deps, voice.id, async (tx, v) => {
      if (isLocked(v)) throw lockedConflict(v);
      if (v.name !== name) await tx.voice.update({ where: { id: v.id }, data: { name } });
    });
  } catch (err) {
    if (isUniqueViolation(err)) throw nameTaken(name);
    throw err;
  }
  return voiceView(deps, voice.id, partner.name);
}

/** Deletes a voice that is not being processed: its row, every file, and its workflow if one is still open (a failed job waiting for a retry). */
export async function deleteVoice(deps: VoiceApiDeps, partnerName: string, voiceName: string) {
  const { partner, voice } = await findVoice(deps, partnerName, voiceName);
  await withLockedVoice(deps, voice.id, async (tx, v) => {
    if (isLocked(v)) throw lockedConflict(v);
    await tx.voice.delete({ where: { id: v.id } });
  });
  await deps.storage.removePrefix(voiceFiles.prefix(partner.id, voice.id));
  await cancelVoiceJob(deps, voice.workflowId);
  return { status: 'deleted', name: voice.name };
}

/**
 * Re-splits the original: the old samples (and the preferred sample and scores, which name them)
 * are cleared at once, then splitting runs with the new settings and an embedding of the new
 * samples follows.
 */
export async function requestSplit(deps: VoiceApiDeps, partnerName: string, voiceName: string, settings: { max_samples: number; sample_duration: number }): Promise<VoiceView> {
  const { partner, voice } = await findVoice(deps, partnerName, voiceName);
  const updated = await withLockedVoice(deps, voice.id, async (tx, v) => {
    if (!v.originalFilename) throw conflict(`voice ${JSON.stringify(v.name)} has no original recording to split (it was created empty; upload its samples instead)`);
    if (isLocked(v)) throw lockedConflict(v);
    await tx.voiceSample.deleteMany({ where: { voiceId: v.id } });
    return tx.voice.update({
      where: { id: v.id },
      data: {
        splittingStatus: 'in_progress', splittingError: null, splitGeneration: { increment: 1 },
        splitMaxSamples: settings.max_samples, splitSampleDuration: settings.sample_duration,
        embeddingStatus: 'in_progress', embeddingError: null, embedGeneration: { increment: 1 }, embedTtsType: embeddingTypeOf(v),
        preferredSampleIndex: null, sampleScores: [], nextSampleIndex: 0,
      },
    });
  });
  await handOver(deps, updated, partner.name, ['split', 'embed']);
  return voiceView(deps, voice.id, partner.name);
}

/**
 * Queues an embedding of the current samples with `tts_type` (default: the voice's
 * embedding_type). An embedding already in progress is superseded: its GPU job is cancelled and
 * the new one runs. Refused (409) while the voice is being split (its embedding follows) and when
 * it has no samples.
 */
export async function requestEmbed(deps: VoiceApiDeps, partnerName: string, voiceName: string, ttsType: string | undefined): Promise<VoiceView> {
  const { partner, voice } = await findVoice(deps, partnerName, voiceName);
  const tts = checkTtsType(deps, ttsType ?? embeddingTypeOf(voice), 'tts_type');
  const updated = await withLockedVoice(deps, voice.id, async (tx, v) => {
    if (v.splittingStatus === 'in_progress') throw conflict(`voice ${JSON.stringify(v.name)} is being split; it is embedded when splitting completes`);
    if ((await tx.voiceSample.count({ where: { voiceId: v.id } })) === 0) throw conflict(`voice ${JSON.stringify(v.name)} has no samples to embed`);
    return tx.voice.update({ where: { id: v.id }, data: { embeddingStatus: 'in_progress', embeddingError: null, embedGeneration: { increment: 1 }, embedTtsType: tts } });
  });
  await handOver(deps, updated, partner.name, ['embed']);
  return voiceView(deps, voice.id, partner.name);
}

/** `sample_index`: an index of one of the voice's samples, or empty to clear. */
export async function setPreferredSample(deps: VoiceApiDeps, partnerName: string, voiceName: string, sampleIndex: string): Promise<VoiceView> {
  const { partner, voice } = await findVoice(deps, partnerName, voiceName);
  const index = sampleIndex.trim() === '' ? null : Number(sampleIndex);
  await withLockedVoice(deps, voice.id, async (tx, v) => {
    if (index !== null && !(await tx.voiceSample.findUnique({ where: { voiceId_index: { voiceId: v.id, index } } }))) {
      throw badRequest(`voice ${JSON.stringify(v.name)} has no sample ${index}`);
    }
    await tx.voice.update({ where: { id: v.id }, data: { preferredSampleIndex: index } });
  });
  return voiceView(deps, voice.id, partner.name);
}

