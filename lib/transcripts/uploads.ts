import crypto from 'node:crypto';
import type { Services } from '../services.js';
import type { Principal } from '../platform/api-keys.js';
import { consumeRateLimit } from '../platform/rate-limit.js';
import { audioUploadFiles, type AcceptedContainer } from './files.js';
import { checkUpload, invalid, tooMany, type TranscriptUpload } from './audio-checks.js';
import { uuidText } from '../platform/ids.js';

/**
 * POST /v2/upload, AssemblyAI's way of sending a local file: the file is kept until a transcript is
 * made of it, at most TRANSCRIPT_UPLOAD_RETENTION_SECONDS; the `upload_url` of the answer (an address
 * of this API) is submitted as a transcript's `audio_url` with a key of the same partner. A partner
 * holds at most TRANSCRIPT_PENDING_UPLOADS_PER_PARTNER of them at once: what bounds the storage a
 * key can fill. The reconciler removes expired uploads; a partner's go with it.
 */
export type AudioUploadDeps = Pick<Services, 'db' | 'storage' | 'config'>;

// A suffix: behind a proxy that adds a path prefix the client's URL has it.
const uploadPath = new RegExp(`/v2/upload/(${uuidText})$`, 'i');

/**
 * Admission before the body is read: uploads count against the partner's transcription rate
 * (TRANSCRIPTION_RATE_LIMIT_PER_MINUTE) in a window of their own (an upload is followed by its
 * submission, which counts in the other), then its uploads not yet submitted.
 */
export async function admitAudioUpload(deps: AudioUploadDeps, principal: Principal | null, client: string): Promise<void> {
  if (!principal?.partnerId) return;
  const { rateLimitPerMinute, pendingUploadsLimit } = deps.config.transcription;
  if (rateLimitPerMinute > 0) {
    const decision = await consumeRateLimit(deps.db, { key: `transcript-upload:${principal.partnerId}`, limit: rateLimitPerMinute, windowSeconds: 60, client });
    if (!decision.allowed) throw tooMany(`transcription rate limit: ${rateLimitPerMinute} uploads per minute per partner; retry in ${decision.retryAfterSeconds} s`, decision.retryAfterSeconds);
  }
  if (pendingUploadsLimit === 0) return;
  const pending = await deps.db.audioUpload.count({ where: { partnerId: principal.partnerId, expiresAt: { gt: new Date() } } });
  if (pending >= pendingUploadsLimit) {
    throw tooMany(`at most ${pendingUploadsLimit} uploads of a partner wait to be transcribed at once: submit one (POST /v2/transcript with its upload_url) before uploading more`, 10);
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

/**
 * The upload an `audio_url` names when it is an upload_url of this API (`.../v2/upload/<id>`); null: any
 * other URL, fetched as such. On the address the submission came to, the path alone decides (an
 * unknown id is then a 422, not a fetch of ourselves). On another address (a second hostname, a
 * proxy, an internal name) it is ours when an upload with that id exists: the id is a random UUID
 * only this API hands out.
 */
export async function uploadNamedBy(deps: AudioUploadDeps, audioUrl: string, origin: string): Promise<string | null> {
  let url: URL;
  try {
    url = new URL(audioUrl);
  } catch {
    return null;
  }
  const id = uploadPath.exec(url.pathname)?.[1]?.toLowerCase();
  if (!id) return null;
  if (url.origin === new URL(origin).origin) return id;
  return (await deps.db.audioUpload.count({ where: { id } })) > 0 ? id : null;
}

export interface UsableUpload {
  id: string;
  storageKey: string;
  kind: AcceptedContainer;
}

/** The upload a submission names, if this key may use it and it has not expired; else a 422 on `audio_url`. */
export async function usableUpload(deps: AudioUploadDeps, principal: Principal, uploadId: string): Promise<UsableUpload> {
  const row = await deps.db.audioUpload.findUnique({ where: { id: uploadId } });
  const usable = row && (principal.isAdmin || row.partnerId === principal.partnerId) && row.expiresAt > new Date();
  if (!row || !usable) {
    throw invalid('audio_url', 'names an upload that does not exist, has expired, was transcribed already, or was uploaded with another partner\'s key (upload the file again)');
  }
  return uploadOf(row);
}

function uploadOf(row: { id: string; partnerId: string | null; audioKind: string }): UsableUpload {
  const kind = row.audioKind as AcceptedContainer;
  return { id: row.id, storageKey: audioUploadFiles.file(row.partnerId, row.id, kind), kind };
}

/** Removes an upload, the file first: a crash in between leaves a row the sweep removes, never a file nothing refers to. */
export async function removeAudioUpload(deps: Pick<Services, 'db' | 'storage'>, upload: UsableUpload): Promise<void> {
  await deps.storage.removePrefix(upload.storageKey);
  await deps.db.audioUpload.deleteMany({ where: { id: upload.id } });
}

/** Removes expired uploads (rows and files), at most `limit` a call; returns how many. */
export async function removeExpiredAudioUploads(deps: Pick<Services, 'db' | 'storage'>, limit: number): Promise<number> {
  const expired = await deps.db.audioUpload.findMany({ where: { expiresAt: { lte: new Date() } }, orderBy: { expiresAt: 'asc' }, take: limit });
  for (const row of expired) await removeAudioUpload(deps, uploadOf(row));
  return expired.length;
}
