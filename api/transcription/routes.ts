import type { Request } from 'express';
import type { ApiDeps } from '../deps.js';
import { defineRoute, type RouteDefinition } from '../http/route.js';
import { clientAddress } from '../http/rate-limits.js';
import type { Principal } from '../../lib/platform/api-keys.js';
import { admitTranscript, deleteTranscriptNow, readTranscript, submitTranscript, type TranscriptRequestBody } from '../../lib/transcripts/requests.js';
import { maxTranscriptUploadBytes } from '../../lib/transcripts/audio-checks.js';
import { admitAudioUpload, storeAudioUpload } from '../../lib/transcripts/uploads.js';
import {
  audioUploadObject,
  errorBody,
  subtitlesQuery,
  timedSpans,
  transcriptBody,
  transcriptIdParams,
  transcriptionErrors,
  transcriptList,
  transcriptListQuery,
  transcriptObject,
  wordSearchQuery,
  wordSearchResult,
} from './schemas.js';
import { readParagraphs, readSentences, readSubtitles, searchTranscriptWords } from '../../lib/transcripts/exports.js';
import { DEFAULT_CHARS_PER_CAPTION } from '../../lib/transcripts/timed-text.js';
import { listTranscripts, type TranscriptListQuery } from '../../lib/transcripts/listing.js';

/** The transcription interface (spec 4.2). Error bodies: `{error}`, and 422 `{message, errors}` for invalid input. */
export function transcriptionRoutes(deps: ApiDeps): RouteDefinition[] {
  return [
    defineRoute<unknown, unknown, TranscriptRequestBody>({
      method: 'post',
      path: '/v2/transcript',
      access: 'authenticated',
      summary: 'Submit audio for transcription',
      description:
        'JSON `{audio_url, ...}` or multipart with the file in `audio` (never both). Answers `{id: "/v2/transcript/<id>", status: "queued"}` (plus the `audio_url` of a URL submission); the transcript is made by the workflow `transcript-<id>`. The partner\'s rate and concurrency limits are checked before the body is read (429 with `Retry-After`).',
      body: { type: 'json-or-form', schema: transcriptBody, files: [{ name: 'audio', maxCount: 1 }], maxFileBytes: maxTranscriptUploadBytes, arrayFields: ['boosted_words', 'word_boost', 'keyterms_prompt'], jsonFields: ['custom_spelling'] },
      preflight: ({ principal, req }) => admitTranscript(deps, principal, clientAddress(req)),
      responses: { 200: { description: 'Queued', schema: transcriptObject }, ...transcriptionErrors },
      handler: async ({ body, files, principal, req }) => {
        const file = files.find((f) => f.field === 'audio');
        return {
          body: await submitTranscript(deps, principal as Principal, {
            body,
            upload: file ? { path: file.path, originalName: file.originalName, size: file.size } : null,
            json: !!req.is('application/json'),
            origin: originOf(req),
          }),
        };
      },
    }),
    defineRoute({
      method: 'post',
      path: '/v2/upload',
      access: 'authenticated',
      summary: 'Upload a local audio file (as AssemblyAI\'s clients do)',
      description:
        'The body is the file itself (any Content-Type; AssemblyAI\'s clients send `application/octet-stream`), at most 100 MB, in one of the containers `/v2/transcript` accepts (else a 422 on `file`). Answers `{upload_url}`, an address of this API: submit it once as the `audio_url` of `POST /v2/transcript`, to the same address and with a key of the same partner, within `TRANSCRIPT_UPLOAD_RETENTION_SECONDS` (24 h); then the file is removed. A partner holds at most `TRANSCRIPT_PENDING_UPLOADS_PER_PARTNER` (20) uploads not yet submitted (429). Uploads count against the partner\'s transcription rate limit, in a window of their own.',
      body: { type: 'binary', maxBytes: maxTranscriptUploadBytes, field: 'file' },
      preflight: ({ principal, req }) => admitAudioUpload(deps, principal, clientAddress(req)),
      responses: { 200: { description: 'Stored', schema: audioUploadObject }, ...transcriptionErrors },
      handler: async ({ files, principal, req }) => {
        const file = files[0]!;
        return { body: await storeAudioUpload(deps, principal as Principal, { path: file.path, originalName: '', size: file.size }, originOf(req)) };
      },
    }),
    defineRoute<unknown, TranscriptListQuery>({
      method: 'get',
      path: '/v2/transcript',
      access: 'authenticated',
      summary: "List transcripts (AssemblyAI's transcripts.list)",
      description:
        "The key's transcripts (every one for the administrator key) within their retention, newest first: `{page_details: {limit, result_count, current_url, prev_url, next_url}, transcripts: [{id, resource_url, status, created, completed, audio_url, error}]}`. `prev_url` is the page of older ones (`before_id`), `next_url` of newer ones (`after_id`); null when there is none now.",
      query: transcriptListQuery,
      responses: { 200: { description: 'A page of transcripts', schema: transcriptList }, ...transcriptionErrors },
      handler: async ({ query, principal, req }) => ({ body: await listTranscripts(deps, principal as Principal, query, originOf(req)) }),
    }),
    ...idRoutes('', (path, note) =>
      defineRoute<{ id: string }>({
        method: 'get',
        path,
        access: 'authenticated',
        summary: `Poll a transcript${note}`,
        description:
          '`{id, status}` (plus the `audio_url` of a URL submission) while `queued` or `processing`; when `completed`: `text`, `audio_duration` (integer seconds), `words` (`[{text, start, end, confidence, speaker: null}]`, milliseconds; null when the engine gives text only), `confidence` (their mean) and `language_code` (null with language_auto); `error` when `error`.',
        params: transcriptIdParams,
        responses: { 200: { description: 'The transcript', schema: transcriptObject }, ...transcriptionErrors },
        handler: async ({ params, principal }) => ({ body: await readTranscript(deps, principal as Principal, params.id) }),
      }),
    ),
    ...idRoutes('', (path, note) =>
      defineRoute<{ id: string }>({
        method: 'delete',
        path,
        access: 'authenticated',
        summary: `Delete a transcript${note}`,
        description:
          "As AssemblyAI's `transcripts.delete`: a `completed` or `error` transcript is deleted at once (reads answer 404 from now on) instead of at the end of its retention period. Answers it as AssemblyAI does, `{id, status, audio_url: \"http://deleted_by_user\", text: \"Deleted by user.\"}`. One still `queued` or `processing` is a 409.",
        params: transcriptIdParams,
        responses: { 200: { description: 'Deleted', schema: transcriptObject }, ...transcriptionErrors, 409: { description: 'Still queued or processing', schema: errorBody } },
        handler: async ({ params, principal }) => ({ body: await deleteTranscriptNow(deps, principal as Principal, params.id) }),
      }),
    ),
    ...(['sentences', 'paragraphs'] as const).flatMap((unit) =>
      idRoutes(`/${unit}`, (path, note) =>
        defineRoute<{ id: string }>({
          method: 'get',
          path,
          access: 'authenticated',
          summary: `A completed transcript's ${unit}${note}`,
          description:
            unit === 'sentences'
              ? "AssemblyAI's `transcripts.sentences`: `{id, confidence, audio_duration, sentences: [{text, start, end, confidence, words, speaker: null}]}` (milliseconds). A sentence ends where the speaker stopped (a pause of 0.5 s, or the end of a segment the engine was given)."
              : "AssemblyAI's `transcripts.paragraphs`: `{id, confidence, audio_duration, paragraphs: [{text, start, end, confidence, words, speaker: null}]}` (milliseconds). A paragraph is the sentences between pauses of 1.5 s, at most about 150 words.",
          params: transcriptIdParams,
          responses: { 200: { description: `The ${unit}`, schema: timedSpans(unit) }, ...transcriptionErrors, 409: notTimed },
          handler: async ({ params, principal }) => ({
            body: await (unit === 'sentences' ? readSentences : readParagraphs)(deps, principal as Principal, params.id),
          }),
        }),
      ),
    ),
    ...(['srt', 'vtt'] as const).flatMap((format) =>
      idRoutes(`/${format}`, (path, note) =>
        defineRoute<{ id: string }, { chars_per_caption?: number }>({
          method: 'get',
          path,
          access: 'authenticated',
          summary: `A completed transcript's subtitles as ${format === 'srt' ? 'SRT' : 'WebVTT'}${note}`,
          description: `AssemblyAI's \`transcripts.subtitles(id, '${format}')\`. A cue ends at a sentence end, or before the word that would make it longer than \`chars_per_caption\` characters (default ${DEFAULT_CHARS_PER_CAPTION}).`,
          params: transcriptIdParams,
          query: subtitlesQuery,
          responses: { 200: { description: 'The subtitles', contentType: subtitleTypes[format], schema: { type: 'string', description: `${format.toUpperCase()} text` } }, ...transcriptionErrors, 409: notTimed },
          handler: async ({ params, query, principal, res }) => {
            const text = await readSubtitles(deps, principal as Principal, params.id, format, query.chars_per_caption);
            res.type(subtitleTypes[format]).send(text);
            return undefined;
          },
        }),
      ),
    ),
    ...idRoutes('/word-search', (path, note) =>
      defineRoute<{ id: string }, { words: string }>({
        method: 'get',
        path,
        access: 'authenticated',
        summary: `Search a completed transcript for words${note}`,
        description:
          "AssemblyAI's `transcripts.wordSearch`: `words` is a comma-separated list of words or phrases (up to 5 words each), compared without case or punctuation. Answers `{id, total_count, matches: [{text, count, timestamps: [[start, end]], indexes}]}`: the terms found, each occurrence's times (milliseconds) and the index in `words` of its first word.",
        params: transcriptIdParams,
        query: wordSearchQuery,
        responses: { 200: { description: 'The matches', schema: wordSearchResult }, ...transcriptionErrors, 409: notTimed },
        handler: async ({ params, query, principal }) => ({ body: await searchTranscriptWords(deps, principal as Principal, params.id, query.words) }),
      }),
    ),
  ];
}

/**
 * Every route of one transcript twice: at `/v2/transcript/{id}<suffix>`, and at the path
 * AssemblyAI's clients make by appending the id, which here is itself a path, to `/v2/transcript/`.
 */
function idRoutes(suffix: string, make: (path: string, note: string) => RouteDefinition): RouteDefinition[] {
  return [make(`/v2/transcript/{id}${suffix}`, ''), make(`/v2/transcript//v2/transcript/{id}${suffix}`, " (the path AssemblyAI's clients make of the id)")];
}

const subtitleTypes = { srt: 'application/x-subrip', vtt: 'text/vtt' } as const;
const notTimed = { description: 'Not completed, or made by an engine that gives text without word times', schema: errorBody };

/** This API's address as the client reached it (behind a proxy: as TRUST_PROXY lets Express read it). */
const originOf = (req: Request) => `${req.protocol}://${req.get('host')}`;
