import type { Client } from '@temporalio/client';
import type { Config } from './platform/config.js';
import { createDb, type Db } from './platform/db.js';
import { LocalFileStorage, type FileStorage } from './platform/storage.js';
import { VectorIndex } from './providers/vector-index.js';
import { S3FileStorage } from './providers/object-storage.js';
import { embedderFromConfig, type EmbeddingProvider } from './providers/embeddings.js';
import { OpenAiVectorStore, type VendorVectorStore } from './providers/vector-store.js';
import { createLogger, type Logger } from './platform/logger.js';
import { answeredWithin } from './platform/deadline.js';
import { OpenAiChatModel, type ChatModel } from './providers/llm.js';
import { YouTubeTranscripts, type VideoTranscriptSource } from './providers/video-transcripts.js';
import { Scraper } from './providers/scraper.js';
import { speechToTextFromSettings, type SpeechToTextEngine } from './providers/speech-to-text.js';
import { redactSecrets, registerSecret, registerUrlPassword } from './platform/redact.js';
import { configureToolLimits } from './platform/child-process.js';

/**
 * The composition root: the long-lived clients a process (API or worker) shares, built once from
 * the configuration, and the check that each dependency answers.
 */
export interface Services {
  config: Config;
  db: Db;
  storage: FileStorage;
  index: VectorIndex;
  embedder: EmbeddingProvider;
  /** Vendor sync's external vector store; null when no vector-store API is configured. */
  vendorStore: VendorVectorStore | null;
  log: Logger;
  /** The OpenAI-compatible model API (OPENAI_BASE_URL); null when none is configured. */
  chatModel: ChatModel | null;
  /** Transcripts of video URL documents (VIDEO_PLATFORM_BASE_URL). */
  videoTranscripts: VideoTranscriptSource;
  /** The scraping provider for URL documents (SCRAPER_BASE_URL); null fetches pages directly. */
  scraper: Scraper | null;
  /** Speech to text of transcripts and audio/video documents: TRANSCRIPTION_MODEL, else local PocketSphinx. */
  speechToText: SpeechToTextEngine;
}

/** Every secret of a configuration, so that no log line shows one (lib/platform/redact.ts). */
export function registerConfigSecrets(config: Config): void {
  for (const secret of [
    config.adminApiKey,
    config.openaiApiKey,
    config.metrics.apiKey,
    config.scraper?.apiKey,
    config.videoDataApi.apiKey,
    config.transcription.apiKey,
    config.speech.apiKey,
    config.vendorSync?.apiKey,
    config.voices.gpuJobs?.apiKey,
    config.retrieval.reranker?.apiKey,
    config.objectStore?.credentials?.secretAccessKey,
    config.objectStore?.credentials?.sessionToken,
  ]) {
    registerSecret(secret);
  }
  registerUrlPassword(config.databaseUrl);
}

export function createServices(config: Config, component: string): Services {
  registerConfigSecrets(config);
  // Every child process of this process is bounded in memory and in the size of what it writes.
  configureToolLimits(config.limits.tools);
  const log = createLogger({ component }, config.logLevel);
  return {
    config,
    db: createDb(config.databaseUrl, undefined, log),
    // STORAGE_URL: the object store; unset: the local directory.
    storage: config.objectStore ? new S3FileStorage(config.objectStore) : new LocalFileStorage(config.storageDir),
    index: new VectorIndex(config.weaviateUrl, config.weaviateTimeoutMs, config.weaviateReplication),
    embedder: embedderFromConfig(config),
    vendorStore: config.vendorSync ? new OpenAiVectorStore(config.vendorSync) : null,
    log,
    videoTranscripts: new YouTubeTranscripts({ baseUrl: config.videoPlatformBaseUrl }),
    scraper: config.scraper ? new Scraper(config.scraper, { allowPrivate: config.urlFetchAllowPrivate, allowLoopback: config.urlFetchAllowLoopback }) : null,
    speechToText: speechToTextFromSettings(config.transcription),
    chatModel: config.openaiBaseUrl ? new OpenAiChatModel({ baseURL: config.openaiBaseUrl, apiKey: config.openaiApiKey }) : null,
  };
}

export interface CheckResult {
  ok: boolean;
  latency_ms: number;
  error?: string;
}

async function timed(check: () => Promise<unknown>, timeoutMs = 3000): Promise<CheckResult> {
  const started = performance.now();
  try {
    await answeredWithin(check(), timeoutMs, () => new Error(`no answer within ${timeoutMs} ms`));
    return { ok: true, latency_ms: Math.round(performance.now() - started) };
  } catch (err) {
    return { ok: false, latency_ms: Math.round(performance.now() - started), error: (err as Error).message };
  }
}

type HealthDeps = { db: Db; temporal: Client; index: VectorIndex; storage: FileStorage };

/** One round trip to each dependency the service cannot work without. */
export async function checkDependencies(deps: HealthDeps) {
  const [postgres, temporal, weaviate, storage] = await Promise.all([
    timed(() => deps.db.$queryRaw`SELECT 1`),
    timed(() => deps.temporal.connection.workflowService.getSystemInfo({})),
    timed(async () => {
      if (!(await deps.index.ready())) throw new Error('Weaviate is not ready');
    }),
    // A key that is never written: the object store (or directory) answers "not there", or fails.
    timed(() => deps.storage.exists('.health-probe')),
  ]);
  return { postgres, temporal, weaviate, storage };
}

type DependencyChecks = Awaited<ReturnType<typeof checkDependencies>>;

/** The last anonymous reading of each process's dependencies, shared by concurrent callers and reused for a moment (a flood of /health/deep costs one check a second). */
const anonymousReadings = new WeakMap<object, { at: number; checks: Promise<DependencyChecks> }>();
const ANONYMOUS_READING_MS = 1000;

/**
 * GET /health/deep (docs/abuse-resistance.md, "Health and secrets"). Without the administrator key
 * it says only whether each dependency answers (`{ok}`): no latency, no error text (an error can
 * name hosts, users, versions), and the reading is shared by concurrent callers and reused for a
 * second, so the endpoint cannot be used to hammer Postgres, Temporal and Weaviate. The
 * administrator key gets a fresh reading with `latency_ms` and the error (secrets removed).
 */
export async function deepHealth(deps: HealthDeps, administrator: boolean) {
  let checks: DependencyChecks;
  if (administrator) checks = await checkDependencies(deps);
  else {
    let reading = anonymousReadings.get(deps.db);
    if (!reading || Date.now() - reading.at > ANONYMOUS_READING_MS) anonymousReadings.set(deps.db, (reading = { at: Date.now(), checks: checkDependencies(deps) }));
    checks = await reading.checks;
  }
  const ok = Object.values(checks).every((c) => c.ok);
  const shown = Object.fromEntries(
    Object.entries(checks).map(([name, c]) => [name, administrator ? { ...c, ...(c.error ? { error: redactSecrets(c.error) } : {}) } : { ok: c.ok }]),
  );
  return { status: ok ? 200 : 503, body: { status: ok ? 'ok' : 'degraded', checks: shown } };
}
