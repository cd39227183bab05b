import crypto from 'node:crypto';
import { WorkflowNotFoundError, type Client } from '@temporalio/client';
import { TypedSearchAttributes } from '@temporalio/common';
import type { Prisma } from '../platform/db.js';
import type { Services } from '../services.js';
import type { Principal } from '../platform/api-keys.js';
import { AppError, badRequest, conflict, notFound } from '../platform/errors.js';
import { consumeRateLimit } from '../platform/rate-limit.js';
import { isWorkflowRunning } from '../platform/temporal.js';
import { searchAttributes } from '../contracts/search-attributes.js';
import { transcriptPath, transcriptWorkflowId, transcriptWorkflowType, type TranscriptWorkflowInput } from '../contracts/transcript.js';
import { acceptedContainers, transcriptFiles } from './files.js';
import { checkUpload, invalid, requireHttpUrl, tooMany, type TranscriptUpload } from './audio-checks.js';
import { removeAudioUpload, uploadNamedBy, usableUpload } from './uploads.js';
import { deleteTranscript } from './processing.js';
import { idWithoutPath, isUuid } from '../platform/ids.js';
import { webhookOf, webhookView, type TranscriptWebhookRequest } from './webhooks.js';
import { meanConfidence, timedSentencesOf, wordsOf } from './timed-text.js';
import { comparableWords, type SpellingRule } from './text-format.js';

/**
 * The API side of /v2/transcript: admission (per-partner rate and concurrency limits), checks
 * beyond the JSON Schema (one audio source, what an upload really is), the row, the workflow
 * `transcript-<id>`, and reads. A partner key reads its partner's transcripts; the administrator
 * key (which has no partner and is not limited) reads every transcript.
 */
export type TranscriptApiDeps = Pick<Services, 'db' | 'storage' | 'config'> & { temporal: Client };

export interface TranscriptRequestBody extends TranscriptWebhookRequest {
  audio_url?: string;
  /** Present only when a client sent `audio` as a JSON member or a text field, which is refused. */
  audio?: unknown;
  language_code: string;
  language_auto?: boolean;
  filler_words?: boolean;
  format_text: boolean;
  punctuate?: boolean;
  speech_threshold?: number | null;
  boosted_words?: string[];
  /** AssemblyAI's: transcribe only from / up to this point (milliseconds; null: absent). */
  audio_start_from?: number | null;
  audio_end_at?: number | null;
  custom_spelling?: SpellingRule[] | null;
  /** AssemblyAI's names of language_auto, filler_words and boosted_words (two for the last). */
  language_detection?: boolean;
  disfluencies?: boolean;
  word_boost?: string[];
  keyterms_prompt?: string[];
}

/** An option sent under our name or AssemblyAI's (not both), or its default. */
function option<K extends keyof TranscriptRequestBody, A extends keyof TranscriptRequestBody>(body: TranscriptRequestBody, ours: K, theirs: A, fallback: NonNullable<TranscriptRequestBody[K]>) {
  if (body[ours] !== undefined && body[theirs] !== undefined) throw invalid(theirs, `is AssemblyAI's name for ${ours}: send one of the two`);
  return (body[ours] ?? body[theirs] ?? fallback) as NonNullable<TranscriptRequestBody[K]>;
}

/** Transcripts of a partner that are still being worked on: what the concurrency limit counts. */
const inFlight = (deps: TranscriptApiDeps, partnerId: string) => deps.db.transcript.count({ where: { partnerId, status: { in: ['queued', 'processing'] } } });

/**
 * A transcript counted as in flight whose workflow Temporal no longer runs (terminated by hand, or
 * never started because the API process died between the insert and the start) would hold a
 * concurrency slot forever: when the limit is reached, such transcripts (older than two minutes)
 * are ended in `error`.
 */
async function reconcileStuck(deps: TranscriptApiDeps, partnerId: string): Promise<void> {
  const stale = await deps.db.transcript.findMany({
    where: { partnerId, status: { in: ['queued', 'processing'] }, createdAt: { lt: new Date(Date.now() - 120_000) } },
    select: { id: true },
    take: 50,
  });
  for (const t of stale) {
    if (await isWorkflowRunning(deps.temporal, transcriptWorkflowId(t.id))) continue;
    const finishedAt = new Date();
    await deps.db.transcript.updateMany({
      where: { id: t.id, status: { in: ['queued', 'processing'] } },
      data: { status: 'error', error: 'transcription was stopped outside the service (its workflow is no longer running)', finishedAt, expiresAt: new Date(finishedAt.getTime() + deps.config.transcription.retentionSeconds * 1000) },
    });
    await deps.storage.removePrefix(transcriptFiles.prefix(t.id));
  }
}

async function checkConcurrency(deps: TranscriptApiDeps, partnerId: string): Promise<void> {
  const limit = deps.config.transcription.concurrencyLimit;
  if (limit === 0 || (await inFlight(deps, partnerId)) < limit) return;
  await reconcileStuck(deps, partnerId);
  if ((await inFlight(deps, partnerId)) < limit) return;
  throw tooMany(`transcription concurrency limit: at most ${limit} transcripts of a partner can be queued or processing at once; retry when one has finished`, 10);
}

/**
 * Admission before the body is read: the partner's submissions per rolling minute, then its
 * transcripts in flight. Over either: 429 with Retry-After, and nothing is read or stored.
 */
/** `client`: who asks (its address), whose turn a 429 books. */
export async function admitTranscript(deps: TranscriptApiDeps, principal: Principal | null, client: string): Promise<void> {
  if (!principal?.partnerId) return;
  const { rateLimitPerMinute } = deps.config.transcription;
  if (rateLimitPerMinute > 0) {
    const decision = await consumeRateLimit(deps.db, { key: `transcript-create:${principal.partnerId}`, limit: rateLimitPerMinute, windowSeconds: 60, client });
    if (!decision.allowed) {
      throw tooMany(`transcription rate limit: ${rateLimitPerMinute} transcripts per minute per partner; retry in ${decision.retryAfterSeconds} s`, decision.retryAfterSeconds);
    }
  }
  await checkConcurrency(deps, principal.partnerId);
}

/** Boosted words: trimmed, duplicates dropped (the schema bounds the count and lengths). */
function cleanBoostedWords(words: string[] | undefined): string[] {
  const out: string[] = [];
  for (const w of words ?? []) {
    const t = w.trim().replace(/\s+/g, ' ');
    if (!t) throw invalid('boosted_words', 'must not contain empty terms');
    if (!out.includes(t)) out.push(t);
  }
  return out;
}

/** Custom spelling: trimmed; a `from` that has no letter or digit could never match (422). */
function cleanSpelling(rules: SpellingRule[]): SpellingRule[] {
  return rules.map((rule, i) => {
    const to = rule.to.trim();
    if (!to) throw invalid('custom_spelling', `entry ${i}: to must not be blank`);
    const from = rule.from.map((f) => f.trim());
    const empty = from.find((f) => comparableWords(f).length === 0);
    if (empty !== undefined) throw invalid('custom_spelling', `entry ${i}: from '${empty}' has no letter or digit to match`);
    return { from, to };
  });
}

export interface SubmitRequest {
  body: TranscriptRequestBody;
  upload: TranscriptUpload | null;
  /** The body came as JSON (an `audio` member then cannot be a file). */
  json: boolean;
  /** This API's address as the client reached it: an `audio_url` there is an upload_url of POST /v2/upload. */
  origin: string;
}

/**
 * Accepts a transcript: checks, then under the partner's lock the concurrency limit again (the
 * preflight check may race) and the row, the upload moved into storage, the workflow started.
 * A start that fails leaves nothing behind (503).
 */
export async function submitTranscript(deps: TranscriptApiDeps, principal: Principal, req: SubmitRequest): Promise<{ id: string; status: 'queued'; audio_url?: string } & ReturnType<typeof rangeView> & ReturnType<typeof webhookView>> {
  const { body, upload } = req;
  if (body.audio !== undefined) throw invalid('audio', req.json ? 'upload the audio as a multipart file (field audio), or send audio_url' : 'must be a file, not a text field');
  if (body.audio_url && upload) throw invalid('audio', 'send audio_url or an audio file, not both');
  if (!body.audio_url && !upload) {
    throw badRequest('The request is invalid: audio_url or an audio file is required', {
      fieldErrors: { audio_url: ['audio_url or an audio file is required'], audio: ['audio_url or an audio file is required'] },
    });
  }
  if (body.audio_url) requireHttpUrl('audio_url', body.audio_url);
  const uploadId = body.audio_url ? await uploadNamedBy(deps, body.audio_url, req.origin) : null;
  if (body.keyterms_prompt !== undefined && (body.boosted_words !== undefined || body.word_boost !== undefined)) {
    throw invalid('keyterms_prompt', "is AssemblyAI's name for boosted_words: send one of boosted_words, word_boost and keyterms_prompt");
  }
  const boostedWords = cleanBoostedWords(body.keyterms_prompt ?? option(body, 'boosted_words', 'word_boost', []));
  const customSpelling = cleanSpelling(body.custom_spelling ?? []);
  const languageAuto = option(body, 'language_auto', 'language_detection', false);
  const fillerWords = option(body, 'filler_words', 'disfluencies', false);
  const webhook = webhookOf(body);
  const range = { audioStartFromMs: body.audio_start_from ?? null, audioEndAtMs: body.audio_end_at ?? null };
  if (range.audioStartFromMs !== null && range.audioEndAtMs !== null && range.audioEndAtMs <= range.audioStartFromMs) throw invalid('audio_end_at', 'must be after audio_start_from');
  const uploaded = uploadId ? await usableUpload(deps, principal, uploadId) : null;
  const kind = upload ? await checkUpload(upload) : (uploaded?.kind ?? null);

  const id = crypto.randomUUID();
  const partnerId = principal.partnerId;
  await deps.db.$transaction(async (tx) => {
    if (partnerId) {
      await tx.$executeRaw`SELECT pg_advisory_xact_lock(hashtextextended(${`transcripts:${partnerId}`}, 0))`;
      const limit = deps.config.transcription.concurrencyLimit;
      const count = await tx.transcript.count({ where: { partnerId, status: { in: ['queued', 'processing'] } } });
      if (limit > 0 && count >= limit) {
        throw tooMany(`transcription concurrency limit: at most ${limit} transcripts of a partner can be queued or processing at once; retry when one has finished`, 10);
      }
    }
    await tx.transcript.create({
      data: {
        id,
        partnerId,
        sourceKind: upload || uploaded ? 'upload' : 'url',
        audioUrl: body.audio_url ?? null,
        uploadedName: upload?.originalName ?? null,
        audioKind: kind,
        languageCode: body.language_code,
        languageAuto,
        fillerWords,
        formatText: body.format_text,
        punctuate: body.punctuate ?? true,
        speechThreshold: body.speech_threshold ?? null,
        boostedWords,
        ...(customSpelling.length ? { customSpelling: customSpelling as unknown as Prisma.InputJsonValue } : {}),
        ...range,
        ...webhook,
      },
    });
  });
  try {
    if (upload && kind) await deps.storage.moveIn(transcriptFiles.original(id, acceptedContainers[kind]), upload.path);
    // A copy, and the upload removed only once the workflow runs: a submission that fails keeps it for the retry.
    if (uploaded) await deps.storage.copy(uploaded.storageKey, transcriptFiles.original(id, acceptedContainers[uploaded.kind]));
    const t = deps.config.transcription;
    const input: TranscriptWorkflowInput = {
      transcriptId: id,
      audioTaskQueue: t.audioTaskQueue,
      segmentConcurrency: t.segmentConcurrency,
      heartbeatTimeoutSeconds: t.heartbeatTimeoutSeconds,
      retentionSeconds: t.retentionSeconds,
      ...(webhook.webhookUrl ? { webhook: true } : {}),
    };
    await deps.temporal.workflow.start(transcriptWorkflowType, {
      taskQueue: deps.config.temporalTaskQueue,
      workflowId: transcriptWorkflowId(id),
      args: [input],
      typedSearchAttributes: new TypedSearchAttributes([
        { key: searchAttributes.partner, value: principal.partnerName ?? 'admin' },
        { key: searchAttributes.jobStatus, value: 'queued' },
      ]),
    });
  } catch (err) {
    await deps.db.transcript.deleteMany({ where: { id } });
    // The storage may be what failed: its outage must not hide the answer (the row is gone already).
    await deps.storage.removePrefix(transcriptFiles.prefix(id)).catch(() => undefined);
    throw new AppError('unavailable', `the transcript could not be queued, nothing was kept; retry later (${(err as Error).message})`);
  }
  // A submitted upload is used up (its transcript has its copy); were this to fail, it would expire.
  if (uploaded) await removeAudioUpload(deps, uploaded).catch(() => undefined);
  return { id: transcriptPath(id), status: 'queued', ...audioUrlOf(body.audio_url ?? null), ...rangeView(range), ...webhookView({ ...webhook, webhookStatusCode: null }) };
}

/** A transcript of part of its audio repeats the part in its answers, as AssemblyAI's do. */
function rangeView(row: { audioStartFromMs: number | null; audioEndAtMs: number | null }) {
  return { ...(row.audioStartFromMs !== null ? { audio_start_from: row.audioStartFromMs } : {}), ...(row.audioEndAtMs !== null ? { audio_end_at: row.audioEndAtMs } : {}) };
}

/** A URL submission's answers repeat its `audio_url`, which AssemblyAI's Python client requires; an upload's have none. */
const audioUrlOf = (audioUrl: string | null) => (audioUrl ? { audio_url: audioUrl } : {});

/** The transcripts a key may see: its partner's (every one for the administrator key), not past their retention. */
export function visibleTo(principal: Principal): Prisma.TranscriptWhereInput {
  return { ...(principal.isAdmin ? {} : { partnerId: principal.partnerId }), OR: [{ expiresAt: null }, { expiresAt: { gt: new Date() } }] };
}

/** The filter of one transcript the key may see (`id`: its uuid); null when `id` cannot name one. */
export function visibleTranscriptWhere(principal: Principal, id: string): Prisma.TranscriptWhereInput | null {
  const uuid = idWithoutPath(id, transcriptPath);
  return isUuid(uuid) ? { id: uuid.toLowerCase(), ...visibleTo(principal) } : null;
}

/** One transcript the key may see (`id`: its uuid), or a 404. */
export async function visibleTranscript(deps: Pick<TranscriptApiDeps, 'db'>, principal: Principal, id: string) {
  const where = visibleTranscriptWhere(principal, id);
  const row = where ? await deps.db.transcript.findFirst({ where }) : null;
  if (!row) throw notFound('transcript not found');
  return row;
}

/**
 * The transcript as spec 2.2 shows it: `{id, status}`, plus `text` and `audio_duration` when
 * completed, or `error` when failed. A completed one also has AssemblyAI's `words` (null when the
 * engine gave text only), `confidence` and `language_code` (null with language_auto). Another
 * partner's, an unknown and an expired transcript are the same 404.
 */
export async function readTranscript(deps: TranscriptApiDeps, principal: Principal, id: string) {
  const row = await visibleTranscript(deps, principal, id);
  const base = { id: transcriptPath(row.id), status: row.status, ...audioUrlOf(row.audioUrl), ...rangeView(row), ...webhookView(row) };
  if (row.status === 'completed') {
    const sentences = timedSentencesOf(row);
    return {
      ...base,
      text: row.text ?? '',
      audio_duration: row.audioDurationSeconds ?? 0,
      words: sentences ? wordsOf(sentences) : null,
      confidence: sentences ? meanConfidence(sentences.flat()) : null,
      language_code: row.languageAuto ? null : row.languageCode,
    };
  }
  if (row.status === 'error') return { ...base, error: row.error ?? 'transcription failed' };
  return base;
}

/**
 * DELETE, as AssemblyAI's `transcripts.delete`: a completed or failed transcript is gone for reads
 * at once (its retention ends now), and its workflow, cancelled in its retention wait, deletes the
 * row as it would at the end of that period; without a workflow the row is deleted here. One still
 * queued or processing is a 409, as AssemblyAI refuses it too. The answer is AssemblyAI's: the
 * transcript with its text and audio_url replaced.
 */
export async function deleteTranscriptNow(deps: TranscriptApiDeps, principal: Principal, id: string) {
  const row = await visibleTranscript(deps, principal, id);
  if (row.status !== 'completed' && row.status !== 'error') throw conflict(`the transcript is ${row.status}: it can be deleted once it is completed or in error`);
  await deps.db.transcript.updateMany({ where: { id: row.id }, data: { expiresAt: new Date() } });
  const answer = { id: transcriptPath(row.id), status: row.status, audio_url: 'http://deleted_by_user', text: 'Deleted by user.' };
  const workflowId = transcriptWorkflowId(row.id);
  // The server accepts the cancellation of a closed workflow without an error: whether it runs is asked first.
  if (await isWorkflowRunning(deps.temporal, workflowId)) {
    try {
      await deps.temporal.workflow.getHandle(workflowId).cancel();
      return answer;
    } catch (err) {
      if (!(err instanceof WorkflowNotFoundError)) throw err;
    }
  }
  await deleteTranscript(deps, row.id);
  return answer;
}
