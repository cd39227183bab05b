import crypto from 'node:crypto';
import type { Services } from '../services.js';
import type { Principal } from '../platform/api-keys.js';
import { consumeRateLimit } from '../platform/rate-limit.js';
import { AppError } from '../platform/errors.js';
import { audioUploadFiles, type AcceptedContainer } from './files.js';
import { checkUpload, invalid, type TranscriptUpload } from './audio-checks.js';

/**
 * POST /v2/upload, AssemblyAI's way of sending a local file: the file is kept for
 * TRANSCRIPT_UPLOAD_RETENTION_SECONDS, and the `upload_url` of the answer (an address of this API)
 * is then submitted as a transcript's `audio_url`, with a key of the same partner, as often as
 * needed. The reconciler removes expired uploads; a partner's go with it.
 */
export type AudioUploadDeps = Pick<Services, 'db' | 'storage' | 'config'>;

const uploadPath = /^\/v2\/upload\/([0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12})$/i;

/**
 * Uploads count against the partner's transcription rate (TRANSCRIPTION_RATE_LIMIT_PER_MINUTE) in
 * a window of their own: an upload is followed by its submission, which counts in the other.
 */
export async function admitAudioUpload(deps: AudioUploadDeps, principal: Principal | null): Promise<void> {
  const limit = deps.config.transcription.rateLimitPerMinute;
  if (!principal?.partnerId || limit === 0) return;
  const decision = await consumeRateLimit(deps.db, { key: `transcript-upload:${principal.partnerId}`, limit, windowSeconds: 60 });
  if (!decision.allowed) {
    throw new AppError('rate_limited', `transcription rate limit: ${limit} uploads per minute per partner; retry in ${decision.retryAfterSeconds} s`, {
      retryAfterSeconds: decision.retryAfterSeconds,
    });
  }
}

/** Keeps an uploaded audio file; `origin` is this API's address as the client reached it. */
export async function storeAudioUpload(deps: AudioUploadDeps, principal: Principal, file: TranscriptUpload, origin: string): Promise<{ upload_url: string }> {
  const kind = await checkUpload(file, 'file');
  const id = crypto.randomUUID();
  const partnerId = principal.partnerId ?? null;
  const expiresAt = new Date(Date.now() + deps.config.transcription.uploadRetentionSeconds * 1000);
  // The row first: a crash before the file is in place leaves a row the sweep removes, never a file nothing refers to.
  await deps.db.audioUpload.create({ data: { id, partnerId, audioKind: kind, sizeBytes: file.size, expiresAt } });
  try {
    await deps.storage.moveIn(audioUploadFiles.file(partnerId, id, kind), file.path);
  } catch (err) {
    await deps.db.audioUpload.deleteMany({ where: { id } });
    throw err;
  }
  return { upload_url: `${origin}/v2/upload/${id}` };
}

/** The upload an `audio_url` names when it is an upload_url of this API (its address, `/v2/upload/<id>`); null: any other URL. */
export function uploadIdOf(audioUrl: string, origin: string): string | null {
  let url: URL;
  try {
    url = new URL(audioUrl);
  } catch {
    return null;
  }
  if (url.origin !== new URL(origin).origin) return null;
  return uploadPath.exec(url.pathname)?.[1]?.toLowerCase() ?? null;
}

export interface UsableUpload {
  storageKey: string;
  kind: AcceptedContainer;
}

/** The upload a submission names, if this key may use it and it has not expired; else a 422 on `audio_url`. */
export async function usableUpload(deps: AudioUploadDeps, principal: Principal, uploadId: string): Promise<UsableUpload> {
  const row = await deps.db.audioUpload.findUnique({ where: { id: uploadId } });
  const usable = row && (principal.isAdmin || row.partnerId === principal.partnerId) && row.expiresAt > new Date();
  if (!row || !usable) throw invalid('audio_url', 'names an upload that does not exist, has expired, or was uploaded with another partner\'s key (upload the file again)');
  const kind = row.audioKind as AcceptedContainer;
  return { storageKey: audioUploadFiles.file(row.partnerId, row.id, kind), kind };
}

/** Removes expired uploads (rows and files), at most `limit` a call; returns how many. */
export async function removeExpiredAudioUploads(deps: Pick<Services, 'db' | 'storage'>, limit: number): Promise<number> {
  const expired = await deps.db.audioUpload.findMany({ where: { expiresAt: { lte: new Date() } }, orderBy: { expiresAt: 'asc' }, take: limit });
  for (const row of expired) {
    await deps.storage.removePrefix(audioUploadFiles.file(row.partnerId, row.id, row.audioKind as AcceptedContainer));
    await deps.db.audioUpload.deleteMany({ where: { id: row.id } });
  }
  return expired.length;
}
