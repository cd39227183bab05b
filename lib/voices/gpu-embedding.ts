import { setTimeout as sleep } from 'node:timers/promises';
import type { GpuEmbeddingOutput, GpuJobOutcome, VoiceStepOutcome } from '../contracts/voice-job.js';
import { sniffAudioContainer } from '../audio/index.js';
import { GpuJobError, GpuJobService } from '../providers/gpu-jobs.js';
import type { Config } from '../platform/config.js';
import { commitEmbedding, type EmbeddingResult } from './embedding-commit.js';
import { testSentences } from './files.js';
import { jobSamplesBundleUrl } from './job-files.js';
import { VoiceGpuJobFailed, VoiceInputError, type VoiceJobDeps } from './job-steps.js';
import { latestTtsTypeOf, presentSample } from './presenters.js';
import { printVoiceSamples } from './sample-prints.js';

/**
 * The embedding made by the GPU job service (VOICE_JOB_BASE_URL, RunPod serverless queue protocol):
 * submit (once per embed generation: the job's id is recorded before it is awaited, so a worker
 * killed mid-embed resumes the same job), await (poll its status until COMPLETED, FAILED,
 * CANCELLED or TIMED_OUT; cancel it when the voice is deleted, re-embedded, or the job outlives
 * VOICE_JOB_TIMEOUT_SECONDS), store (download its artefact and test samples, commit).
 * docs/api/voices-transcription-speech-dialog.md ("Embedding with a GPU job service") documents the
 * job's input and the output expected.
 */
export const GPU_ENGINE = 'gpu-job';

export function gpuJobService(config: Pick<Config, 'voices'>): GpuJobService {
  if (!config.voices.gpuJobs) throw new Error('VOICE_JOB_BASE_URL is not configured');
  return new GpuJobService({ baseUrl: config.voices.gpuJobs.baseUrl, apiKey: config.voices.gpuJobs.apiKey });
}

/** A refusal of the service is final; anything else is thrown on for Temporal to retry. */
function final(err: unknown, what: string): unknown {
  if (err instanceof GpuJobError && err.kind === 'refused') return new VoiceGpuJobFailed(`${what}: ${err.message}`);
  return err;
}

/** The job's input (docs/api/voices-transcription-speech-dialog.md, "Embedding with a GPU job service"). */
export function gpuJobInput(
  v: { id: string; name: string; workflowId: string; preferredSampleIndex: number | null },
  partnerName: string,
  generation: number,
  ttsType: string,
  samples: Parameters<typeof presentSample>[0][],
  bundle: { url: string; expiresAt: Date },
) {
  return {
    operation: 'embed_voice',
    operation_key: `${v.workflowId}/embed/${generation}`,
    voice: { id: v.id, name: v.name, partner: partnerName },
    tts_type: ttsType,
    samples: samples.map(presentSample),
    preferred_sample_index: v.preferredSampleIndex,
    samples_bundle_url: bundle.url,
    samples_bundle_expires_at: bundle.expiresAt.toISOString(),
    sample_format: { codec: 'opus', container: 'ogg', bitrate_kbps: 96, channels: 1, sample_rate: 48000 },
    test_sentences: testSentences.map((text, i) => ({ sentence_index: i, text })),
  };
}

export type SubmitOutcome = { kind: 'submitted'; jobId: string } | { kind: 'superseded' } | { kind: 'gone' };

export async function submitVoiceGpuJob(deps: VoiceJobDeps, voiceId: string, generation: number, signal?: AbortSignal): Promise<SubmitOutcome> {
  const v = await deps.db.voice.findUnique({ where: { id: voiceId }, include: { samples: { orderBy: { index: 'asc' } }, partner: { select: { name: true } } } });
  if (!v) return { kind: 'gone' };
  if (v.embedGeneration !== generation || v.embeddingStatus !== 'in_progress') return { kind: 'superseded' };
  // Submitted before (this activity is being retried): the same job, never a second one.
  if (v.gpuJobId && v.gpuJobGeneration === generation) return { kind: 'submitted', jobId: v.gpuJobId };
  if (v.samples.length === 0) throw new VoiceInputError('the voice has no samples to embed');
  const service = gpuJobService(deps.config);
  const bundle = jobSamplesBundleUrl(deps.config, v.id, deps.config.voices.gpuJobTimeoutSeconds + 3600);
  let jobId: string;
  try {
    jobId = (await service.run(gpuJobInput(v, v.partner.name, generation, latestTtsTypeOf(v), v.samples, bundle), signal)).id;
  } catch (err) {
    throw final(err, 'the GPU job service refused the embedding job');
  }
  const recorded = await deps.db.voice.updateMany({
    where: { id: voiceId, embedGeneration: generation, embeddingStatus: 'in_progress' },
    data: { gpuJobId: jobId, gpuJobGeneration: generation, gpuJobSubmittedAt: new Date() },
  });
  if (recorded.count === 0) {
    await service.cancel(jobId).catch(() => undefined);
    return (await deps.db.voice.count({ where: { id: voiceId } })) ? { kind: 'superseded' } : { kind: 'gone' };
  }
  deps.log.info('voice GPU job submitted', { voice_id: voiceId, generation, gpu_job_id: jobId });
  return { kind: 'submitted', jobId };
}

const isRecord = (x: unknown): x is Record<string, unknown> => !!x && typeof x === 'object' && !Array.isArray(x);
const isIndex = (x: unknown): x is number => Number.isInteger(x) && (x as number) >= 0;

/** The COMPLETED job's output, checked: a malformed output fails the embedding with what is wrong. */
export function parseGpuOutput(output: unknown): GpuEmbeddingOutput {
  const bad = (what: string) => new VoiceGpuJobFailed(`the GPU job's output ${what}`);
  if (!isRecord(output)) throw bad('is not an object');
  if (typeof output.embedding_url !== 'string' || !output.embedding_url) throw bad('has no embedding_url (the location of the embedding artefact)');
  const scores = output.sample_scores ?? [];
  if (!Array.isArray(scores) || !scores.every((s) => isRecord(s) && isIndex(s.sample_index) && typeof s.score === 'number' && Number.isFinite(s.score))) {
    throw bad('has sample_scores that are not [{sample_index, score}]');
  }
  const tests = output.test_samples ?? [];
  if (
    !Array.isArray(tests) ||
    !tests.every((t) => isRecord(t) && (t.sample_index === null || t.sample_index === undefined || isIndex(t.sample_index)) && isIndex(t.sentence_index) && (t.sentence_index as number) < testSentences.length && typeof t.url === 'string')
  ) {
    throw bad(`has test_samples that are not [{sample_index, sentence_index (0-${testSentences.length - 1}), url}]`);
  }
  if (output.voice_id !== undefined && output.voice_id !== null && typeof output.voice_id !== 'string') throw bad('has a voice_id that is not a string');
  return {
    embeddingUrl: output.embedding_url,
    sampleScores: (scores as Array<{ sample_index: number; score: number }>).map((s) => ({ sampleIndex: s.sample_index, score: s.score })),
    testSamples: (tests as Array<{ sample_index?: number | null; sentence_index: number; url: string }>).map((t) => ({ sampleIndex: t.sample_index ?? null, sentenceIndex: t.sentence_index, url: t.url })),
    remoteVoiceId: (output.voice_id as string | undefined) || null,
  };
}

export interface AwaitOptions {
  timeoutSeconds: number;
  signal?: AbortSignal;
}

/**
 * Polls the job every VOICE_JOB_POLL_INTERVAL_MS until it ends. Before each poll the voice is read:
 * deleted or re-embedded, the job is cancelled on the service (`gone` / `superseded`). Past the
 * time bound (from submission, so a resumed worker keeps the original deadline) it is cancelled
 * and the embedding fails. An outage of the service is waited out until the deadline.
 */
export async function awaitVoiceGpuJob(deps: VoiceJobDeps, voiceId: string, generation: number, jobId: string, options: AwaitOptions): Promise<GpuJobOutcome> {
  const service = gpuJobService(deps.config);
  const cancel = async (why: string) => {
    deps.log.info('cancelling voice GPU job', { voice_id: voiceId, gpu_job_id: jobId, why });
    await service.cancel(jobId).catch((err: unknown) => deps.log.warn('cancelling a voice GPU job failed', { gpu_job_id: jobId, err }));
  };
  try {
    for (;;) {
      const v = await deps.db.voice.findUnique({ where: { id: voiceId }, select: { embedGeneration: true, embeddingStatus: true, gpuJobSubmittedAt: true, gpuJobId: true } });
      if (!v) {
        await cancel('the voice was deleted');
        return { kind: 'gone' };
      }
      if (v.embedGeneration !== generation || v.embeddingStatus !== 'in_progress') {
        await cancel('the voice was re-embedded');
        return { kind: 'superseded' };
      }
      const deadline = (v.gpuJobId === jobId && v.gpuJobSubmittedAt ? v.gpuJobSubmittedAt.getTime() : Date.now()) + options.timeoutSeconds * 1000;
      if (Date.now() > deadline) {
        await cancel('past VOICE_JOB_TIMEOUT_SECONDS');
        throw new VoiceGpuJobFailed(`the GPU job ${jobId} did not finish within ${options.timeoutSeconds} s (VOICE_JOB_TIMEOUT_SECONDS); it was cancelled`);
      }
      let state;
      try {
        state = await service.status(jobId, options.signal);
      } catch (err) {
        if (options.signal?.aborted) throw err;
        if (err instanceof GpuJobError && err.kind === 'refused') {
          throw new VoiceGpuJobFailed(err.httpStatus === 404 ? `the GPU job ${jobId} is unknown to the service (it may have expired)` : `the GPU job service refused the status request: ${err.message}`);
        }
        deps.log.warn('voice GPU job status unavailable; polling on', { gpu_job_id: jobId, err });
        state = null;
      }
      if (state?.status === 'COMPLETED') return { kind: 'completed', output: parseGpuOutput(state.output) };
      if (state?.status === 'FAILED') throw new VoiceGpuJobFailed(`the GPU job ${jobId} failed: ${state.error ?? 'no error message'}`);
      if (state?.status === 'CANCELLED') throw new VoiceGpuJobFailed(`the GPU job ${jobId} was cancelled on the GPU job service`);
      if (state?.status === 'TIMED_OUT') throw new VoiceGpuJobFailed(`the GPU job ${jobId} timed out on the GPU job service (TIMED_OUT)`);
      await sleep(deps.config.voices.gpuJobPollIntervalMs, undefined, { signal: options.signal });
    }
  } catch (err) {
    // Cancelled by the workflow (the voice's job was cancelled): the GPU job stops too.
    if (options.signal?.aborted) await cancel('the voice job was cancelled');
    throw err;
  }
}

const extensionOf: Record<string, string> = { mp3: 'mp3', wav: 'wav', ogg: 'opus', flac: 'flac', 'iso-media': 'm4a', webm: 'webm', matroska: 'mka' };
const contentTypeOf: Record<string, string> = { mp3: 'audio/mpeg', wav: 'audio/wav', ogg: 'audio/ogg', flac: 'audio/flac', 'iso-media': 'audio/mp4', webm: 'audio/webm', matroska: 'audio/x-matroska' };
/** The media types a test sample made by the GPU job service may have (served as stored). */
export const gpuSampleContentTypes: readonly string[] = [...new Set(Object.values(contentTypeOf))];

/** Downloads what the finished job made (artefact, test samples), then commits the embedding. */
export async function storeVoiceGpuResult(deps: VoiceJobDeps, voiceId: string, generation: number, output: GpuEmbeddingOutput, signal?: AbortSignal): Promise<VoiceStepOutcome> {
  const v = await deps.db.voice.findUnique({ where: { id: voiceId }, include: { samples: { orderBy: { index: 'asc' } } } });
  if (!v) return 'gone';
  if (v.embedGeneration !== generation || v.embeddingStatus !== 'in_progress') return 'superseded';
  const service = gpuJobService(deps.config);
  const download = async (url: string, max: number) => {
    try {
      return await service.download(url, max, signal);
    } catch (err) {
      throw final(err, "the GPU job's output could not be downloaded");
    }
  };
  const artefact = await download(output.embeddingUrl, 512 * 1024 * 1024);
  const ttsType = latestTtsTypeOf(v);
  const testSamples: EmbeddingResult['testSamples'] = [];
  for (const t of output.testSamples) {
    // One test sample per (sample, sentence): a repeated pair keeps its first file.
    if (testSamples.some((x) => x.sampleIndex === t.sampleIndex && x.sentenceIndex === t.sentenceIndex)) continue;
    const audio = await download(t.url, 64 * 1024 * 1024);
    const container = sniffAudioContainer(audio.subarray(0, 64 * 1024));
    if (!container) throw new VoiceGpuJobFailed(`the GPU job's test sample ${t.url} is not audio this service recognises`);
    testSamples.push({
      filename: `${t.sampleIndex ?? 'voice'}_${t.sentenceIndex}.${extensionOf[container]}`,
      sampleIndex: t.sampleIndex,
      sentenceIndex: t.sentenceIndex,
      sentence: testSentences[t.sentenceIndex]!,
      contentType: contentTypeOf[container]!,
      durationSeconds: null,
      audio,
    });
  }
  // Local speech still needs the nearest built-in voice: the local voice print finds it.
  const summary = await printVoiceSamples(deps.storage, v, v.samples.map((s) => s.index), signal);
  const indexes = new Set(v.samples.map((s) => s.index));
  return commitEmbedding(deps, voiceId, generation, {
    engine: GPU_ENGINE,
    ttsType,
    sampleScores: output.sampleScores.filter((s) => indexes.has(s.sampleIndex)).map((s) => ({ sample_index: s.sampleIndex, score: s.score })),
    builtInVoice: summary?.builtIn[0]?.name ?? null,
    remoteVoiceId: output.remoteVoiceId,
    artefact,
    testSamples,
  });
}

/** Asks the service to stop a job (the workflow's cleanup when it is cancelled). */
export async function cancelVoiceGpuJob(deps: VoiceJobDeps, jobId: string): Promise<void> {
  await gpuJobService(deps.config).cancel(jobId);
}
