import { open, rm } from 'node:fs/promises';
import path from 'node:path';
import type { Services } from '../services.js';
import type { Prisma } from '../platform/db.js';
import { AudioUnreadable, decodeToWav, findPauses, planSegments, probeAudio, readWavInfo, sliceWav, sniffAudioContainer } from '../audio/index.js';
import { fetchToFile, FetchRefused, isTransientFetchFailure } from '../providers/web-fetch.js';
import { UnsupportedLanguage, type RecognizedWord } from '../providers/speech-to-text.js';
import type { TranscriptPlan } from '../contracts/transcript.js';
import { transcriptFailure } from '../contracts/transcript.js';
import { engineLanguage } from './languages.js';
import { acceptedContainers, transcriptFiles, type AcceptedContainer } from './files.js';
import { applyCustomSpelling, formatSentences, formatText, spellText, textOfSentences, type SpellingRule } from './text-format.js';
import { makeScratchDir } from '../platform/scratch.js';

/**
 * The work of the `transcript` workflow's activities, each safe to repeat (Temporal retries them):
 * prepare (once: a stored plan is returned as is), transcribe one segment (a finished segment is
 * never redone), complete / fail (only from `processing` / not yet finished), delete.
 */

/** The audio cannot be used: retrying cannot help, the transcript ends in `error` with this message. */
export class TranscriptInputError extends Error {
  override name = transcriptFailure.input;
}

export type TranscriptDeps = Pick<Services, 'db' | 'storage' | 'config' | 'speechToText'>;

/**
 * Where a transcript ended, as its row says: what the workflow reports (JobStatus) once the row is
 * final. `gone`: the row was deleted meanwhile (its partner was deleted).
 */
export type TranscriptOutcome = 'completed' | 'error' | 'gone';

const mmss = (seconds: number) => `${Math.floor(seconds / 60)} min ${Math.round(seconds % 60)} s`;

/** Downloads `audio_url` safely (SSRF rules of URL documents) into `file`; refusals are input errors, outages retried. */
async function download(deps: TranscriptDeps, url: string, file: string, signal?: AbortSignal): Promise<void> {
  try {
    await fetchToFile(url, file, {
      allowPrivate: deps.config.urlFetchAllowPrivate,
      allowLoopback: deps.config.urlFetchAllowLoopback,
      maxBytes: deps.config.transcription.audioFetchMaxBytes,
      timeoutMs: deps.config.transcription.audioFetchTimeoutSeconds * 1000,
      accept: 'audio/*, video/*;q=0.9, */*;q=0.5',
    });
  } catch (err) {
    if (signal?.aborted) throw err;
    if (!(err instanceof FetchRefused)) throw err;
    if (isTransientFetchFailure(err)) throw err;
    throw new TranscriptInputError(`audio_url could not be used: ${err.message}`);
  }
}

async function sniff(file: string): Promise<AcceptedContainer | null> {
  const head = Buffer.alloc(64 * 1024);
  const fh = await open(file, 'r');
  try {
    const { bytesRead } = await fh.read(head, 0, head.length, 0);
    const kind = sniffAudioContainer(head.subarray(0, bytesRead));
    return kind && kind in acceptedContainers ? (kind as AcceptedContainer) : null;
  } finally {
    await fh.close();
  }
}

/**
 * Readies a transcript: status `processing`, the language checked against the engine (before any
 * download), the audio fetched or taken from storage, probed, decoded to 16 kHz mono WAV, cut into
 * segments in its pauses (each stored as its own WAV), and the plan recorded. Idempotent.
 */
export async function prepareTranscript(deps: TranscriptDeps, transcriptId: string, signal?: AbortSignal): Promise<TranscriptPlan> {
  const row = await deps.db.transcript.findUnique({ where: { id: transcriptId } });
  if (!row) return { kind: 'gone' };
  if (row.status === 'completed' || row.status === 'error') return { kind: 'finished' };
  if (row.segmentCount !== null) return { kind: 'ready', segmentCount: row.segmentCount };
  const engine = deps.speechToText;
  await deps.db.transcript.updateMany({ where: { id: transcriptId, status: 'queued' }, data: { status: 'processing', startedAt: new Date(), engine: engine.id } });

  const language = engineLanguage(row.languageCode, row.languageAuto);
  if (!engine.supports(language)) {
    const what = language === 'auto' ? 'language_auto (automatic language detection)' : `language_code '${row.languageCode}'`;
    throw new UnsupportedLanguage(
      `${what} cannot be transcribed by ${engine.description}: it transcribes English only (language_code en, en_us, en_uk, en_au, without language_auto); an OpenAI-compatible transcription model (TRANSCRIPTION_MODEL) handles the other languages`,
    );
  }

  const dir = await makeScratchDir('transcript-');
  try {
    let original: string;
    let kind = row.audioKind as AcceptedContainer | null;
    if (row.sourceKind === 'url') {
      original = path.join(dir, 'download');
      await download(deps, row.audioUrl!, original, signal);
      kind = await sniff(original);
      if (!kind) throw new TranscriptInputError(`audio_url could not be used: ${row.audioUrl} is not an audio file (mp3, wav, ogg, flac, m4a, mp4, webm)`);
    } else {
      original = path.join(dir, `original.${acceptedContainers[kind!]}`);
      await deps.storage.download(transcriptFiles.original(transcriptId, acceptedContainers[kind!]), original);
    }

    const limit = deps.config.transcription.maxAudioSeconds;
    let probe;
    try {
      probe = await probeAudio(original, { signal });
    } catch (err) {
      if (err instanceof AudioUnreadable) throw new TranscriptInputError('the audio could not be read: the file is damaged or not a media file');
      throw err;
    }
    if (probe.audioStreams.length === 0) throw new TranscriptInputError('the file has no audio stream');
    if (probe.durationSeconds > limit) throw new TranscriptInputError(`the audio is ${mmss(probe.durationSeconds)} long; at most ${mmss(limit)} can be transcribed`);

    const wav = path.join(dir, 'audio-16k.wav');
    try {
      await decodeToWav(original, wav, { signal, timeoutMs: 60 * 60_000 });
    } catch (err) {
      if (err instanceof AudioUnreadable) throw new TranscriptInputError('the audio could not be decoded: the file is damaged');
      throw err;
    }
    const { durationSeconds } = await readWavInfo(wav);
    if (durationSeconds === 0) throw new TranscriptInputError('the audio is empty: the file holds no sound (0 seconds)');
    if (durationSeconds > limit) throw new TranscriptInputError(`the audio is ${mmss(durationSeconds)} long; at most ${mmss(limit)} can be transcribed`);
    // AssemblyAI's audio_start_from / audio_end_at: only that part is transcribed, its times stay the recording's.
    const from = (row.audioStartFromMs ?? 0) / 1000;
    const to = Math.min(row.audioEndAtMs !== null ? row.audioEndAtMs / 1000 : durationSeconds, durationSeconds);
    if (from >= durationSeconds) throw new TranscriptInputError(`audio_start_from (${mmss(from)}) is not before the end of the audio (${mmss(durationSeconds)})`);
    let part = wav;
    if (from > 0 || to < durationSeconds) {
      part = path.join(dir, 'audio-part.wav');
      await sliceWav(wav, from, to, part);
    }
    const partSeconds = to - from;
    const target = Math.min(deps.config.transcription.segmentSeconds, engine.maxSegmentSeconds);
    const analysis = await findPauses(part, { durationSeconds: partSeconds, signal });
    if (row.speechThreshold !== null) {
      const silent = analysis.threshold.silent ? partSeconds : analysis.pauses.reduce((sum, p) => sum + (p.end - p.start), 0);
      const speech = Math.max(0, 1 - silent / partSeconds);
      if (speech < row.speechThreshold) {
        throw new TranscriptInputError(`the audio holds sound for ${Math.round(speech * 100)} % of its length, less than speech_threshold ${row.speechThreshold} asks`);
      }
    }
    // Silence has nothing to transcribe: no segments, and the transcript completes with "".
    const segments = analysis.threshold.silent ? [] : planSegments({ durationSeconds: partSeconds, pauses: analysis.pauses, targetSeconds: target, maxSeconds: Math.min(target * 1.5, engine.maxSegmentSeconds) });
    for (const s of segments) {
      const piece = path.join(dir, `segment-${s.index}.wav`);
      await sliceWav(part, s.start, s.end, piece);
      await deps.storage.moveIn(transcriptFiles.segment(transcriptId, s.index), piece);
    }
    await deps.db.$transaction([
      deps.db.transcriptSegment.createMany({
        data: segments.map((s) => ({ transcriptId, index: s.index, startSeconds: from + s.start, endSeconds: from + s.end })),
        skipDuplicates: true,
      }),
      deps.db.transcript.update({
        where: { id: transcriptId },
        data: { segmentCount: segments.length, audioDurationSeconds: Math.round(probe.durationSeconds || durationSeconds), audioKind: kind, engine: engine.id },
      }),
    ]);
    if (row.sourceKind === 'upload') await deps.storage.removePrefix(transcriptFiles.original(transcriptId, acceptedContainers[kind!]));
    return { kind: 'ready', segmentCount: segments.length };
  } finally {
    await rm(dir, { recursive: true, force: true });
  }
}

/** Transcribes one segment, unless it is done already; the attempt is counted when it starts. */
export async function transcribeSegment(deps: TranscriptDeps, transcriptId: string, index: number, signal?: AbortSignal): Promise<void> {
  const segment = await deps.db.transcriptSegment.findUnique({ where: { transcriptId_index: { transcriptId, index } }, include: { transcript: true } });
  if (!segment || segment.completedAt || segment.transcript.status !== 'processing') return;
  await deps.db.transcriptSegment.update({ where: { transcriptId_index: { transcriptId, index } }, data: { attempts: { increment: 1 } } });
  const t = segment.transcript;
  const dir = await makeScratchDir('transcript-segment-');
  try {
    const wav = path.join(dir, `${index}.wav`);
    await deps.storage.download(transcriptFiles.segment(transcriptId, index), wav);
    const result = await deps.speechToText.transcribeSegment({
      wavPath: wav,
      language: engineLanguage(t.languageCode, t.languageAuto),
      boostedWords: t.boostedWords,
      fillerWords: t.fillerWords,
      signal,
    });
    await deps.db.transcriptSegment.updateMany({
      where: { transcriptId, index, completedAt: null },
      data: { text: result.text, words: result.words ? (result.words as unknown as object) : undefined, completedAt: new Date() },
    });
  } finally {
    await rm(dir, { recursive: true, force: true });
  }
}

const expiry = (retentionSeconds: number) => {
  const finishedAt = new Date();
  return { finishedAt, expiresAt: new Date(finishedAt.getTime() + retentionSeconds * 1000) };
};

/** The final status of a transcript's row (after a conditional update that may have lost a race). */
async function outcomeOf(deps: TranscriptDeps, transcriptId: string): Promise<TranscriptOutcome> {
  const row = await deps.db.transcript.findUnique({ where: { id: transcriptId }, select: { status: true } });
  if (!row) return 'gone';
  if (row.status === 'completed' || row.status === 'error') return row.status;
  // Only completeTranscript and failTranscript end a row, and each has just tried to.
  throw new Error(`transcript ${transcriptId} is still ${row.status}`);
}

/**
 * Removes the audio, then joins the segments (times made absolute) and formats the text as the
 * request asked. Answers the status the transcript ended in: `completed`, or `error` when its row had already
 * been ended in error (by an operator's cancel that won the race, or by the API's clean-up of
 * transcripts whose workflow had stopped, before an operator reset the workflow), or `gone`.
 */
export async function completeTranscript(deps: TranscriptDeps, transcriptId: string, retentionSeconds: number): Promise<TranscriptOutcome> {
  const t = await deps.db.transcript.findUnique({ where: { id: transcriptId }, include: { segments: { orderBy: { index: 'asc' } } } });
  // The audio goes before the row says `completed` (nothing from here on reads it, the segments'
  // text is in the rows): a client that sees a transcript finished never has its audio still kept.
  await deps.storage.removePrefix(transcriptFiles.prefix(transcriptId));
  if (!t) return 'gone';
  if (t.status === 'processing') {
    const options = { fillerWords: t.fillerWords, formatText: t.formatText, punctuate: t.punctuate };
    const timed = t.segments.every((s) => s.words !== null);
    const spelling = (t.customSpelling ?? []) as unknown as SpellingRule[];
    const sentences = timed
      ? applyCustomSpelling(formatSentences(t.segments.flatMap((s) => (s.words as unknown as RecognizedWord[]).map((w) => ({ ...w, s: w.s + s.startSeconds, e: w.e + s.startSeconds }))), options), spelling)
      : null;
    const text = sentences ? textOfSentences(sentences) : spellText(formatText(t.segments.map((s) => s.text ?? '').join(' '), options), spelling);
    await deps.db.transcript.updateMany({
      where: { id: transcriptId, status: 'processing' },
      data: { status: 'completed', text, ...(sentences ? { sentences: sentences as unknown as Prisma.InputJsonValue } : {}), error: null, ...expiry(retentionSeconds) },
    });
  }
  return outcomeOf(deps, transcriptId);
}

/**
 * Removes a transcript's audio and ends it in `error` with a message for the client. Answers the
 * status it ended in (`completed` if it had completed before the failure reached it).
 */
export async function failTranscript(deps: TranscriptDeps, transcriptId: string, message: string, retentionSeconds: number): Promise<TranscriptOutcome> {
  // As in completeTranscript: the audio is gone before the row says the transcript has ended.
  await deps.storage.removePrefix(transcriptFiles.prefix(transcriptId));
  await deps.db.transcript.updateMany({
    where: { id: transcriptId, status: { in: ['queued', 'processing'] } },
    data: { status: 'error', error: message.slice(0, 2000), text: null, ...expiry(retentionSeconds) },
  });
  return outcomeOf(deps, transcriptId);
}

/** The end of the retention period: row, segments and any file left are deleted. */
export async function deleteTranscript(deps: Pick<Services, 'db' | 'storage'>, transcriptId: string): Promise<void> {
  await deps.db.transcript.deleteMany({ where: { id: transcriptId } });
  await deps.storage.removePrefix(transcriptFiles.prefix(transcriptId));
}
