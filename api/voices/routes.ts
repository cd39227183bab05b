import { pipeline } from 'node:stream/promises';
import type { Request, Response } from 'express';
import type { ApiDeps } from '../deps.js';
import { defineRoute, type RouteDefinition } from '../http/route.js';
import { clientAddress } from '../http/rate-limits.js';
import { badRequest } from '../../lib/platform/errors.js';
import { admitVoiceRequest } from '../../lib/voices/requests.js';
import { createVoice, deleteVoice, describeVoice, listVoices, renameVoice, requestEmbed, requestSplit, setPreferredSample, type CreateVoiceInput } from '../../lib/voices/voices.js';
import {
  deleteSample, deleteTestSamples, listTestSamples, openEmbeddingArtefact, openJobFilesBundle, openSample, openSamplesBundle, openTestSample, uploadSample,
  type StoredDownload,
} from '../../lib/voices/samples.js';
import { presentVoice, type VoiceView } from '../../lib/voices/presenters.js';
import type { UploadedFile } from '../../lib/digitization/uploads.js';
import { sampleContentType } from '../../lib/voices/files.js';
import { gpuSampleContentTypes } from '../../lib/voices/gpu-embedding.js';
import * as s from './schemas.js';

type VoiceParams = { partner: string; voice: string };

/**
 * This API as the client reached it, for the URLs in answers (`embedding_zip_url`, test-sample
 * links): behind a proxy named by TRUST_PROXY, its X-Forwarded-Proto and X-Forwarded-Host.
 */
const baseUrlOf = (req: Request) => `${req.protocol}://${req.host ?? 'localhost'}`;

async function sendFile(res: Response, file: StoredDownload, disposition: 'inline' | 'attachment') {
  res.setHeader('Content-Type', file.contentType);
  res.setHeader('Content-Disposition', `${disposition}; filename="${file.filename.replace(/["\\]/g, '_')}"`);
  res.setHeader('X-Content-Type-Options', 'nosniff');
  try {
    await pipeline(file.stream, res);
  } catch (err) {
    // A client that goes away mid-download is not a server error.
    if ((err as NodeJS.ErrnoException).code === 'ERR_STREAM_PREMATURE_CLOSE') return;
    throw err;
  }
}

const theFile = (files: UploadedFile[]) => {
  const f = files.find((x) => x.field === 'file');
  return f ? { path: f.path, originalName: f.originalName, size: f.size } : null;
};

/**
 * The voice interface (spec 4.1), partner-scoped: every route takes the partner's key or the
 * administrator key, in `X-Api-Key` or the `api_key` query parameter. Errors are `{detail}`.
 * Changes answer the voice's detail object (split and embed with 202: the work is queued).
 */
export function voiceRoutes(deps: ApiDeps): RouteDefinition[] {
  const access = 'partner' as const;
  const queryKey = s.API_KEY_PARAMETER;
  const query = s.voiceQuery();
  const admit = ({ principal, req }: { principal: Parameters<typeof admitVoiceRequest>[1]; req: Request }) => admitVoiceRequest(deps, principal, clientAddress(req));
  const answer = (view: VoiceView, req: Request, status = 200) => ({ status, body: presentVoice(view, baseUrlOf(req)) });
  const upload = { files: [{ name: 'file', maxCount: 1 }], maxFileBytes: deps.config.voices.maxUploadBytes };
  const detail = { description: 'The voice (detail object)', schema: s.voiceDetail };

  return [
    defineRoute<{ partner: string }>({
      method: 'get', path: '/api/voices/{partner}', access, queryKey, summary: "List the partner's voices",
      params: s.partnerParams, query,
      responses: { 200: { description: 'Array of voice list elements', schema: { type: 'array', items: s.voiceListElement } }, ...s.voiceErrors },
      handler: async ({ params }) => ({ body: await listVoices(deps, params.partner) }),
    }),
    defineRoute<{ partner: string }, unknown, CreateVoiceInput>({
      method: 'post', path: '/api/voices/{partner}', access, queryKey, summary: 'Create a voice (with a recording: splitting and embedding start)',
      description:
        'Multipart: `name` (1-255 characters, unique per partner), optionally `file` (any audio or video ffmpeg reads, recognised by its signature, at most VOICE_MAX_UPLOAD_BYTES and VOICE_MAX_ORIGINAL_SECONDS), `creator_name`, `creator_email`; extensions: `embedding_type`, and `max_samples` / `sample_duration` for the first split. With a file, answers 201 with splitting and embedding `in_progress` (the workflow `voice-<partner>-<id>`); without, both `idle`.',
      params: s.partnerParams, query,
      body: { type: 'form', schema: s.createVoiceForm, ...upload },
      preflight: admit,
      responses: { 201: detail, ...s.voiceErrors, 409: { description: 'The name is taken', schema: s.detailError }, 413: { description: 'The file is larger than VOICE_MAX_UPLOAD_BYTES', schema: s.detailError }, 429: s.rateLimited, 503: s.unavailable },
      handler: async ({ params, body, files, req }) => answer(await createVoice(deps, params.partner, body, theFile(files)), req, 201),
    }),
    defineRoute<{ partner: string }, unknown, Omit<CreateVoiceInput, 'max_samples' | 'sample_duration'>>({
      method: 'post', path: '/api/voices/{partner}/empty', access, queryKey, summary: 'Create a voice without audio (its samples are uploaded)',
      params: s.partnerParams, query,
      body: { type: 'form', schema: s.emptyVoiceForm },
      preflight: admit,
      responses: { 201: detail, ...s.voiceErrors, 409: { description: 'The name is taken', schema: s.detailError }, 429: s.rateLimited },
      handler: async ({ params, body, req }) => answer(await createVoice(deps, params.partner, { ...body, max_samples: 25, sample_duration: 15 }, null), req, 201),
    }),
    defineRoute<VoiceParams>({
      method: 'get', path: '/api/voices/{partner}/{voice}', access, queryKey, summary: 'Read a voice',
      params: s.voiceParams, query,
      responses: { 200: detail, ...s.voiceErrors },
      handler: async ({ params, req }) => ({ body: await describeVoice(deps, params.partner, params.voice, baseUrlOf(req)) }),
    }),
    defineRoute<VoiceParams>({
      method: 'delete', path: '/api/voices/{partner}/{voice}', access, queryKey, summary: 'Delete a voice with all its files',
      description: 'Answers `{status: "deleted", name}`. Removes the samples, the original, the embedding and test samples, and cancels the voice\'s workflow if a failed job is waiting for a retry. 409 while splitting or embedding is `in_progress`.',
      params: s.voiceParams, query,
      responses: { 200: { description: 'Deleted', schema: s.voiceDeletedAnswer }, ...s.voiceErrors, 409: s.lockedError },
      handler: async ({ params }) => ({ body: await deleteVoice(deps, params.partner, params.voice) }),
    }),
    defineRoute<VoiceParams, unknown, { name: string }>({
      method: 'put', path: '/api/voices/{partner}/{voice}/name', access, queryKey, summary: 'Rename a voice',
      description: 'Multipart or urlencoded `name`. Answers the voice. 409 while it is being processed, or when the name is taken.',
      params: s.voiceParams, query, body: { type: 'form', schema: s.nameForm },
      responses: { 200: detail, ...s.voiceErrors, 409: s.lockedError },
      handler: async ({ params, body, req }) => answer(await renameVoice(deps, params.partner, params.voice, body.name), req),
    }),
    defineRoute<VoiceParams>({
      method: 'post', path: '/api/voices/{partner}/{voice}/samples', access, queryKey, summary: 'Upload a sample to a voice created empty',
      description: `Multipart \`file\` (any audio ffmpeg reads, at most ${60} s), converted to Opus 96 kbit/s mono; it takes the next unused index. Answers 201 with the voice. 409 for a voice with an original recording (its samples come from splitting) and while it is being processed.`,
      params: s.voiceParams, query, body: { type: 'form', schema: s.sampleForm, ...upload },
      preflight: admit,
      responses: { 201: detail, ...s.voiceErrors, 409: s.lockedError, 413: { description: 'The file is larger than VOICE_MAX_UPLOAD_BYTES', schema: s.detailError }, 429: s.rateLimited },
      handler: async ({ params, files, req }) => {
        const file = theFile(files);
        if (!file) throw badRequest('file is required (multipart field `file`)');
        return answer(await uploadSample(deps, params.partner, params.voice, file), req, 201);
      },
    }),
    defineRoute<VoiceParams & { index: number }>({
      method: 'get', path: '/api/voices/{partner}/{voice}/samples/{index}', access, queryKey, summary: 'Download a sample (Opus in Ogg, audio/ogg)',
      params: s.sampleParams, query,
      responses: { 200: s.binary('audio/ogg', 'The sample'), ...s.voiceErrors },
      handler: async ({ params, res }) => {
        await sendFile(res, await openSample(deps, params.partner, params.voice, params.index), 'inline');
        return undefined;
      },
    }),
    defineRoute<VoiceParams & { index: number }>({
      method: 'delete', path: '/api/voices/{partner}/{voice}/samples/{index}', access, queryKey, summary: 'Delete a sample (the other indexes do not change)',
      description: 'Answers the voice. The sample\'s score goes with it and it stops being the preferred sample. 409 while the voice is being processed.',
      params: s.sampleParams, query,
      responses: { 200: detail, ...s.voiceErrors, 409: s.lockedError },
      handler: async ({ params, req }) => answer(await deleteSample(deps, params.partner, params.voice, params.index), req),
    }),
    defineRoute<VoiceParams>({
      method: 'get', path: '/api/voices/{partner}/{voice}/samples-bundle', access, queryKey, summary: 'Download every sample as a ZIP',
      description: 'A streamed ZIP: `voice_info.json` (the voice, each sample with its file, timestamp and duration) and `{index}.opus` per sample.',
      params: s.voiceParams, query,
      responses: { 200: s.binary('application/zip', 'ZIP archive'), ...s.voiceErrors },
      handler: async ({ params, res }) => {
        await sendFile(res, await openSamplesBundle(deps, params.partner, params.voice), 'attachment');
        return undefined;
      },
    }),
    defineRoute<VoiceParams, unknown, { max_samples: number; sample_duration: number }>({
      method: 'post', path: '/api/voices/{partner}/{voice}/split', access, queryKey, summary: 'Re-split the original recording (then embed the new samples)',
      description:
        'Form (urlencoded or multipart; an empty body takes the defaults): `max_samples` (1-100, default 25), `sample_duration` (5-60 s, default 15). The old samples, the preferred sample and the sample scores are cleared at once; answers 202 with splitting and embedding `in_progress`. 409 for a voice without an original and while it is being processed.',
      params: s.voiceParams, query, body: { type: 'form', schema: s.splitForm, allowEmptyBody: true },
      preflight: admit,
      responses: { 202: detail, ...s.voiceErrors, 409: s.lockedError, 429: s.rateLimited, 503: s.unavailable },
      handler: async ({ params, body, req }) => answer(await requestSplit(deps, params.partner, params.voice, body), req, 202),
    }),
    defineRoute<VoiceParams, unknown, { tts_type?: string }>({
      method: 'post', path: '/api/voices/{partner}/{voice}/embed', access, queryKey, summary: 'Embed the current samples',
      description:
        "Form (an empty body is fine): `tts_type` (default: the voice's `embedding_type`). With VOICE_JOB_BASE_URL, a job of the GPU job service; without, the local voice print (only the default TTS type). Answers 202 with embedding `in_progress`. An embedding in progress is superseded (its GPU job cancelled). 409 while the voice is being split and when it has no samples.",
      params: s.voiceParams, query, body: { type: 'form', schema: s.embedForm, allowEmptyBody: true },
      preflight: admit,
      responses: { 202: detail, ...s.voiceErrors, 409: { description: 'Being split, or no samples', schema: s.detailError }, 429: s.rateLimited, 503: s.unavailable },
      handler: async ({ params, body, req }) => answer(await requestEmbed(deps, params.partner, params.voice, body.tts_type), req, 202),
    }),
    defineRoute<VoiceParams, { tts_type?: string }>({
      method: 'get', path: '/api/voices/{partner}/{voice}/test-samples', access, queryKey, summary: 'List the test samples of a TTS type',
      description: 'An array of `{filename, sample_index, sentence_index, sentence, tts_type, content_type, duration, url}` (empty when there are none).',
      params: s.voiceParams, query: s.ttsTypeQuery,
      responses: { 200: { description: 'Test samples', schema: s.testSampleList }, ...s.voiceErrors },
      handler: async ({ params, query: q, req }) => ({ body: await listTestSamples(deps, params.partner, params.voice, q.tts_type, baseUrlOf(req)) }),
    }),
    defineRoute<VoiceParams & { filename: string }, { tts_type?: string }>({
      method: 'get', path: '/api/voices/{partner}/{voice}/test-samples/{filename}', access, queryKey, summary: 'Download a test sample',
      params: s.testSampleParams, query: s.ttsTypeQuery,
      responses: { 200: s.binary([...new Set([sampleContentType, ...gpuSampleContentTypes])], 'The test sample in its own media type: audio/ogg for those made locally, as the GPU job service made it otherwise'), ...s.voiceErrors },
      handler: async ({ params, query: q, res }) => {
        await sendFile(res, await openTestSample(deps, params.partner, params.voice, params.filename, q.tts_type), 'inline');
        return undefined;
      },
    }),
    defineRoute<VoiceParams & { tts_type: string }>({
      method: 'delete', path: '/api/voices/{partner}/{voice}/test-files/{tts_type}', access, queryKey, summary: 'Delete the test samples of a TTS type',
      description: 'Answers the voice. Deleting none is not an error.',
      params: s.testFilesParams, query,
      responses: { 200: detail, ...s.voiceErrors },
      handler: async ({ params, req }) => answer(await deleteTestSamples(deps, params.partner, params.voice, params.tts_type), req),
    }),
    defineRoute<VoiceParams, unknown, { sample_index: string }>({
      method: 'put', path: '/api/voices/{partner}/{voice}/preferred-sample', access, queryKey, summary: 'Set (or clear) the preferred sample',
      description: 'Form `sample_index`: an index of one of the voice\'s samples, or empty (or left out, or no body) to clear. Answers the voice. The preferred sample is the reference of the next embedding\'s test samples.',
      params: s.voiceParams, query, body: { type: 'form', schema: s.preferredSampleForm, allowEmptyBody: true },
      responses: { 200: detail, ...s.voiceErrors },
      handler: async ({ params, body, req }) => answer(await setPreferredSample(deps, params.partner, params.voice, body.sample_index), req),
    }),
    defineRoute<VoiceParams>({
      method: 'get', path: '/api/voices/{partner}/{voice}/embedding-zip', access, queryKey, summary: "Download the current embedding's artefact (`embedding_zip_url`)",
      description: 'A ZIP: locally `embedding.json` (the voice print of every sample, the centroid, scores, the nearest built-in voices) and `README.txt`; with the GPU job service, the artefact its job produced. 404 before the first embedding.',
      params: s.voiceParams, query,
      responses: { 200: s.binary('application/zip', 'ZIP archive'), ...s.voiceErrors },
      handler: async ({ params, res }) => {
        await sendFile(res, await openEmbeddingArtefact(deps, params.partner, params.voice), 'attachment');
        return undefined;
      },
    }),
    defineRoute<{ token: string }>({
      method: 'get', path: '/api/voice-job-files/{token}', access: 'none', summary: "The GPU job service's download of a voice's samples bundle (signed link)",
      description: 'The link a GPU job receives as `samples_bundle_url`: no key, the signed token names the voice and expires. The same ZIP as samples-bundle.',
      params: s.jobFilesParams,
      responses: { 200: s.binary('application/zip', 'ZIP archive'), 404: { description: 'Invalid or expired link', schema: s.detailError } },
      handler: async ({ params, res }) => {
        await sendFile(res, await openJobFilesBundle(deps, params.token), 'attachment');
        return undefined;
      },
    }),
  ];
}
