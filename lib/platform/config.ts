import path from 'node:path';
import { hasControlCharacters, trimEndOf } from './text.js';
import { redactSecrets } from './redact.js';
import { settings, type SettingName, type SettingSpec, type SettingValue } from './config-schema.js';

/**
 * Every setting the processes read, validated once at start-up. A missing or malformed value stops
 * the process with a message naming the variable, rather than failing later inside a request.
 * Names, types, defaults and bounds are declared in config-schema.ts; this is their shape in code.
 */
export interface Config {
  databaseUrl: string;
  temporalAddress: string;
  temporalNamespace: string;
  temporalTaskQueue: string;
  weaviateUrl: string;
  /** WEAVIATE_TIMEOUT_SECONDS: a Weaviate request unanswered this long counts as Weaviate unavailable. */
  weaviateTimeoutMs: number;
  /** WEAVIATE_REPLICATION_FACTOR, WEAVIATE_WRITE_CONSISTENCY, WEAVIATE_READ_CONSISTENCY (docs/deployment.md, "Production-like deployment and scaling"). */
  weaviateReplication: { factor: number; write: WeaviateConsistency; read: WeaviateConsistency };
  port: number;
  /** HTTP_KEEP_ALIVE_SECONDS: how long an idle client connection stays open. */
  httpKeepAliveMs: number;
  /**
   * Which proxies in front of the API are believed about the client (X-Forwarded-For, -Proto,
   * -Host): false (none), true (all), a number of hops, or addresses/subnets (Express's `trust proxy`).
   */
  trustProxy: boolean | number | string[];
  adminApiKey: string;
  openaiBaseUrl: string | null;
  openaiApiKey: string | null;
  /** Stored files: the local directory (no objectStore), else local scratch only (multer's uploads in flight). */
  storageDir: string;
  /** STORAGE_URL: an S3-compatible object store holds the stored files; null keeps them in storageDir. */
  objectStore: ObjectStoreSettings | null;
  maxUploadBytes: number;
  /** How long an API process reuses a partner key's lookup (0: never); creations check the partner's row anyway. */
  partnerKeyCacheSeconds: number;
  logLevel: SettingValue<'LOG_LEVEL'>;
  /** A prebuilt workflow bundle (bundleWorkflowCode output); null bundles workflows/ at start. */
  workflowBundlePath: string | null;
  workerMaxActivities: number;
  /** How often the budget sweeper looks for holds of closed workflows, and how old a hold must be. */
  budgetSweepIntervalSeconds: number;
  budgetSweepGraceSeconds: number;
  /** How long budget-blocked work waits for a `budgetChanged` signal before it checks again anyway. */
  budgetRecheckIntervalMs: number;
  /** How often the reconciler looks for work whose workflow is gone (0: no reconciler), and how old such work must be. */
  reconcileIntervalSeconds: number;
  reconcileGraceSeconds: number;
  /** URL documents: whether pages on private / loopback addresses may be fetched (default: no). */
  urlFetchAllowPrivate: boolean;
  urlFetchAllowLoopback: boolean;
  /** Transcription (/v2/transcript) and the speech-to-text engine of audio documents. */
  transcription: TranscriptionSettings;
  /** Text to speech (/v2/audio/speech). */
  speech: SpeechSettings;
  /** Dense embeddings (docs/api/retrieval.md): null model embeds locally. */
  embedding: EmbeddingSettings;
  /** Fusion defaults and the optional re-ranker of retrieval (docs/api/retrieval.md, "Fusion", "Re-ranking"). */
  retrieval: RetrievalConfig;
  /**
   * Vendor sync's OpenAI-compatible vector-store API, and how long a sync waits out its outage
   * (VENDOR_SYNC_MAX_OUTAGE_SECONDS); null: sync fails with a clear error.
   */
  vendorSync: { baseUrl: string; apiKey: string | null; maxOutageSeconds: number } | null;
  messaging: MessagingSettings;
  rewrite: RewriteSettings;
  /** A scraping provider for URL documents; null fetches pages directly. */
  scraper: ScraperSettings | null;
  /** The video platform whose transcripts digitize video URL documents (and whose channel pages name /c/ channels). */
  videoPlatformBaseUrl: string;
  /** The video platform's metadata API (YouTube Data API v3) that channel sources scan. */
  videoDataApi: VideoDataApiSettings;
  /** Video-channel sources (docs/api/knowledge-bases.md, "Video-channel sources"). */
  channels: ChannelSettings;
  /** List prices per model, USD per million tokens; a model missing here is unpriced. */
  modelPrices: Record<string, ModelPrice>;
  digitization: DigitizationSettings;
  dialogAnalysis: DialogAnalysisSettings;
  /** The voice interface, /api/voices (docs/api/voices-transcription-speech-dialog.md, "Voices"). */
  voices: VoiceSettings;
  /** Prometheus metrics at /metrics (docs/operations.md, "Metrics"). */
  metrics: MetricsSettings;
  /** Abuse resistance: request rates per key, request bodies, extraction and child-process bounds (docs/abuse-resistance.md). */
  limits: AbuseLimits;
}

/** An S3-compatible object store (docs/deployment.md, "File storage in an object store"). */
export interface ObjectStoreSettings {
  /** STORAGE_URL as given, for messages. */
  url: string;
  bucket: string;
  /** Every key is stored under `<prefix>/`; '' stores keys at the bucket's root. */
  prefix: string;
  /** S3_ENDPOINT; null: AWS's own endpoint of the region. */
  endpoint: string | null;
  region: string;
  /** Bucket in the path (http://host/bucket/key) rather than in the host name (http://bucket.host/key). */
  forcePathStyle: boolean;
  /** AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY, AWS_SESSION_TOKEN; null: the SDK's default chain (profiles, web identity, instance roles). */
  credentials: { accessKeyId: string; secretAccessKey: string; sessionToken?: string } | null;
}

/** The interfaces whose requests are rate-limited per key (docs/abuse-resistance.md, "Rate limits on every interface, per key"). */
export const rateLimitedInterfaces = ['knowledge-base', 'messaging', 'transcription', 'speech', 'dialog-analysis', 'voices'] as const;
export type RateLimitedInterface = (typeof rateLimitedInterfaces)[number];

/** Abuse resistance (docs/abuse-resistance.md). */
export interface AbuseLimits {
  /** Requests per key per rolling minute on each interface (0: no limit); the administrator key is not limited. */
  requestsPerMinute: Record<RateLimitedInterface, number>;
  /** Requests without a valid key per client address per rolling minute (0: no limit). */
  anonymousRequestsPerMinute: number;
  /** How long a request of a key already refused is held before its 429 is sent (0: at once). */
  tarpitMs: number;
  /** Requests of one key handled at once per API process on the non-streaming interfaces; more wait their turn (0: no limit). */
  inFlightPerKey: number;
  /** Requests of one key that start at once on the non-streaming interfaces before the rest are spread at the key's rate (0: not spread). */
  burstPerKey: number;
  /** Largest JSON (and urlencoded) request body. */
  jsonBodyMaxBytes: number;
  /** Largest form field without a length bound of its own (a content version sent as text). */
  formTextFieldMaxBytes: number;
  /** Largest sum of the files of one batch upload, enforced while the body streams. */
  batchUploadMaxBytes: number;
  /** Bounds of every child process (runTool, streamTool): address space and largest file written. */
  tools: { maxMemoryBytes: number; maxFileBytes: number };
  /** Bounds of extracting one document's text in the worker. */
  extraction: ExtractionLimits;
}

export interface ExtractionLimits {
  /** Entries a ZIP-based original (DOCX, XLSX, PPTX, EPUB) may have. */
  zipMaxEntries: number;
  /** Bytes the parts read from one ZIP-based original may inflate to, all together. */
  zipMaxInflatedBytes: number;
  /** JavaScript heap of the thread that reads the in-process formats (MiB). */
  maxHeapMb: number;
  /** Such threads running at once in one process (EXTRACT_MAX_THREADS); more documents wait. */
  maxThreads: number;
  /** Wall time of reading an in-process format. */
  timeoutMs: number;
  /** Wall time (and CPU time) of one PDF tool run on a document: pdftotext, pdfinfo, pdftoppm, tesseract. */
  toolTimeoutMs: number;
  /** Longest audio or video document transcribed. */
  maxMediaSeconds: number;
}

export interface MetricsSettings {
  /** A key that may read /metrics and nothing else (besides the administrator key); null: the administrator key only. */
  apiKey: string | null;
  /** How long a reading of Postgres or Temporal for the scrape-time gauges is reused. */
  cacheSeconds: number;
  /** How far back the workflow gauge counts closed executions (open ones are always counted). */
  closedWindowSeconds: number;
}

/** The voice interface (docs/api/voices-transcription-speech-dialog.md, "Voices"). */
export interface VoiceSettings {
  /** The GPU job service (RunPod serverless queue protocol) that embeds voices; null: the local voice print. */
  gpuJobs: { baseUrl: string; apiKey: string | null } | null;
  /** How often a running GPU job's status is asked for. */
  gpuJobPollIntervalMs: number;
  /** A GPU job not finished this long after it was submitted is cancelled and the embedding fails. */
  gpuJobTimeoutSeconds: number;
  /** The address of this API as the GPU job service reaches it (its signed link to the samples). */
  jobFilesBaseUrl: string;
  /** Largest original recording or sample upload. */
  maxUploadBytes: number;
  /** Longest original recording that can be split. */
  maxOriginalSeconds: number;
  /** How soon a lost worker's voice activity goes to another worker. */
  heartbeatTimeoutSeconds: number;
  /** How long a failed voice job waits for the `retry` signal before its workflow closes. */
  retryWindowSeconds: number;
  /** Job-starting requests (create with a file, split, embed, sample upload) per partner per minute; 0: no limit. */
  rateLimitPerMinute: number;
}

/** Digitization (docs/api/knowledge-bases.md, "Digitization"). */
export interface DigitizationSettings {
  /** Most PDF pages without a text layer that one document may have OCR'd. */
  pdfOcrMaxPages: number;
  /** Pages of one PDF rendered and OCR'd at the same time. */
  pdfOcrConcurrency: number;
  /** Resolution pages are rendered at for OCR. */
  pdfOcrDpi: number;
  /** Time one LibreOffice conversion of an Office 97-2003 file may take. */
  libreOfficeTimeoutSeconds: number;
  /** DIGITIZATION_MAX_OUTAGE_SECONDS: how long a document waits out an unavailable scraping provider, video platform or transcription API. */
  maxOutageSeconds: number;
}

/** Dialog analysis, /v2/dialog_analyses (docs/api/voices-transcription-speech-dialog.md, "Dialog analysis"). */
export interface DialogAnalysisSettings {
  /** Model at OPENAI_BASE_URL; without OPENAI_BASE_URL analyses fail at once, saying so. */
  model: string;
  /** First response mode of every analysis; `auto`: structured outputs when the schemas allow it. */
  responseFormat: SettingValue<'DIALOG_ANALYSIS_RESPONSE_FORMAT'>;
  /** Answers judged against the schemas before an analysis is `failed`. */
  maxAttempts: number;
  maxOutputTokens: number;
  /** One model call that has not answered in this time is abandoned. */
  timeoutSeconds: number;
  /** How long transient provider failures in a row are waited out before an analysis fails. */
  maxOutageSeconds: number;
  /** How long a finished (completed or failed) analysis can be read before it is deleted. */
  retentionSeconds: number;
  /** Creations per partner per minute (sliding window); 0: no limit. */
  rateLimitPerMinute: number;
  /** Bound on compiling a caller's schema or validating an answer against it (milliseconds). */
  validationTimeoutMs: number;
}

export interface TranscriptionSettings {
  /** TRANSCRIPTION_MODEL: an OpenAI-compatible transcription model; null: the local Moonshine engine (English only). */
  model: string | null;
  /** Where that model is served (TRANSCRIPTION_BASE_URL, else OPENAI_BASE_URL) and its key. */
  baseUrl: string | null;
  apiKey: string | null;
  /** One provider call (one segment). */
  timeoutSeconds: number;
  /** Submissions per partner per rolling minute; 0: no limit. */
  rateLimitPerMinute: number;
  /** Transcripts queued or processing per partner at once; 0: no limit. */
  concurrencyLimit: number;
  /** How long a finished transcript can be read (its audio is deleted when it finishes). */
  retentionSeconds: number;
  /** How long a file sent to POST /v2/upload can be given as an audio_url. */
  uploadRetentionSeconds: number;
  /** Files sent to POST /v2/upload a partner may hold at once, not yet submitted; 0: no limit. */
  pendingUploadsLimit: number;
  /** Target segment length: one engine call each, and what a crashed worker resumes from. */
  segmentSeconds: number;
  /** Segments of one transcript transcribed at once. */
  segmentConcurrency: number;
  /** Longer audio ends in `error`. */
  maxAudioSeconds: number;
  /** Bound on downloading an `audio_url`. */
  audioFetchTimeoutSeconds: number;
  /** Largest `audio_url` download (bytes); a larger one ends the transcript in `error`. */
  audioFetchMaxBytes: number;
  /** Task queue of the CPU-heavy audio activities, and how many of them one worker runs at once. */
  audioTaskQueue: string;
  audioWorkerMaxActivities: number;
  /** Heartbeat timeout of a segment: how soon a lost worker's segment is given to another. */
  heartbeatTimeoutSeconds: number;
  /** The local engine (Moonshine base, used when TRANSCRIPTION_MODEL is unset). */
  local: LocalSpeechToTextSettings;
}

export interface LocalSpeechToTextSettings {
  /** TRANSCRIPTION_LOCAL_MODEL_DIR: where scripts/fetch-models.sh put the ONNX weights. */
  modelDir: string;
  /** TRANSCRIPTION_LOCAL_THREADS: CPU threads of one model run. */
  threads: number;
  /** TRANSCRIPTION_LOCAL_CONCURRENCY: model runs at once in one process (they share one loaded model). */
  concurrency: number;
}

export interface SpeechSettings {
  /** SPEECH_MODEL: an OpenAI-compatible speech model; null: local engines only. */
  model: string | null;
  baseUrl: string | null;
  apiKey: string | null;
  /** Voice names sent to that model (when it is configured). */
  remoteVoices: string[];
  /** Body field that carries the language to the remote model; null: not sent. */
  languageField: string | null;
  /** Bound on one synthesis (remote call or local engines). */
  timeoutSeconds: number;
  /** Syntheses running at once in one API process; more wait up to 10 s, then 503. */
  maxConcurrent: number;
}

export interface RewriteSettings {
  /** Model per model_tier. */
  models: { standard: string; economy: string };
  /** Tried when the tier's model fails for good or its output is rejected; null: none. */
  fallbackModel: string | null;
  maxOutputTokens: number;
  /** Source tokens per provider call; longer inputs are split into parts of this size. */
  partTokens: number;
  /** Tokens of the previous part repeated at the start of the next, as context. */
  overlapTokens: number;
  /** A call that has not answered in this time is abandoned (its usage becomes uncertain). */
  timeoutSeconds: number;
  /** How long every model of a part may be unavailable before the rewrite step fails. */
  maxOutageSeconds: number;
}

export interface ScraperSettings {
  baseUrl: string;
  apiKey: string | null;
  /** Recorded as the document's digitization_provider. */
  name: string;
  costPerCreditUsd: number;
  /** Credits one page may cost at most: the admission bound, and the charge when none is reported. */
  creditsPerPage: number;
  timeoutMs: number;
}

export interface VideoDataApiSettings {
  baseUrl: string;
  /** Sent as `key=`; null sends none. */
  apiKey: string | null;
  timeoutMs: number;
  /** USD per quota unit, a decimal string (exact); null: discovery is unpriced (units are still counted). */
  unitPriceUsd: string | null;
}

export interface ChannelSettings {
  /** Time between the starts of two complete scans of a channel. */
  scanIntervalSeconds: number;
  /** Backoff after a quota, 5xx or timeout failure: doubling from the first to the second. */
  retryInitialSeconds: number;
  retryMaxSeconds: number;
  /** Documents of one source digitizing at once. */
  importConcurrency: number;
}

export interface ModelPrice {
  input: number;
  output: number;
}

/**
 * Published list prices (USD per million input / output tokens) of common OpenAI models, the
 * default price table. MODEL_PRICES adds to or overrides it.
 */
const defaultModelPrices: Record<string, ModelPrice> = {
  'gpt-4.1': { input: 2, output: 8 },
  'gpt-4.1-mini': { input: 0.4, output: 1.6 },
  'gpt-4.1-nano': { input: 0.1, output: 0.4 },
  'gpt-4o': { input: 2.5, output: 10 },
  'gpt-4o-mini': { input: 0.15, output: 0.6 },
  'gpt-5': { input: 1.25, output: 10 },
  'gpt-5-mini': { input: 0.25, output: 2 },
  'gpt-5-nano': { input: 0.05, output: 0.4 },
};

/** Messaging interface (docs/api/messaging.md). */
export interface MessagingSettings {
  /** Output tokens held for a request that sets no output limit of its own. */
  defaultOutputTokenBound: number;
  /** A streaming answer with no event for this long gets an SSE comment, so proxies keep it open. */
  sseKeepAliveMs: number;
  /** Model-provider calls that have not answered in this time fail (fallback_model is then tried). */
  upstreamTimeoutSeconds: number;
  /** Model of legacy /v2/completions (its request names none). */
  legacyModel: string;
  /** How long a finished legacy completion can be read before it is gone (404). */
  legacyRetentionSeconds: number;
  /** How long an API process reuses a quota key's lookup (0: never); admission re-checks revocation anyway. */
  keyCacheSeconds: number;
  /** Keep-alive connections one API process holds to the model provider. */
  upstreamMaxSockets: number;
  /** Answer /v3 requests with a Server-Timing header: where the time before the provider's first byte went. */
  serverTiming: boolean;
  /**
   * The provider call starts while the quota hold is being made when this process heard less than
   * this long ago that the key has room for it (0: always after the hold). A refused hold aborts the call.
   */
  callDuringAdmissionSeconds: number;
  /** How long a process lends holds from its escrow slice of a busy key (0: no escrow). */
  quotaEscrowSeconds: number;
}

export interface EmbeddingSettings {
  /** EMBEDDING_MODEL at OPENAI_BASE_URL; null: the local sentence encoder. */
  model: string | null;
  /** EMBEDDING_DIMENSIONS: requested size for models that can shorten their vectors. */
  dimensions: number | null;
  /** EMBEDDING_PRICE_USD_PER_MILLION_TOKENS; null: unpriced (tokens are still counted). */
  priceUsdPerMillionTokens: number | null;
  /** EMBEDDING_LOCAL_THREADS: worker threads of the local encoder (0: on the event loop); default the cores. */
  localThreads: number;
  /** EMBEDDING_BATCH_CHUNKS: chunks of concurrently embedded documents per model call and Weaviate batch. */
  batchChunks: number;
  /** EMBEDDING_MAX_OUTAGE_SECONDS: how long a document's embedding waits out an unavailable embeddings API or vector index. */
  maxOutageSeconds: number;
}

/** Retrieval (docs/api/retrieval.md). */
export interface RetrievalConfig {
  /** RETRIEVAL_FUSION: `score` (normalised scores) or `rrf` (reciprocal ranks). */
  fusion: SettingValue<'RETRIEVAL_FUSION'>;
  /** RETRIEVAL_WEIGHT_DENSE / _SPARSE / _BM25; null: the built-in default chosen on the evaluation sets. */
  weights: { dense: number | null; sparse: number | null; bm25: number | null };
  /** RETRIEVAL_RESCORING: the learned re-scoring after fusion (name and opening of each candidate) on or off. */
  rescoring: boolean;
  /** RERANK_BASE_URL and the rest; null: no cross-encoder re-ranking. */
  reranker: RerankerSettings | null;
}

/** A cross-encoder behind the Cohere-style `/rerank` protocol (Infinity, TEI, Jina, Cohere). */
export interface RerankerSettings {
  /** `POST {baseUrl}/rerank`. */
  baseUrl: string;
  apiKey: string | null;
  model: string;
  /** The first this many fused results are re-ranked. */
  candidates: number;
  timeoutMs: number;
  /** USD per million tokens; set: each call is admitted through the KB budget; null: not admitted (self-hosted). */
  priceUsdPerMillionTokens: number | null;
}

export class ConfigError extends Error {
  override name = 'ConfigError';
}

type Env = Record<string, string | undefined>;

/**
 * A setting's value as lib/platform/config-schema.ts declares it: the variable, else its default
 * (an empty value counts as unset), parsed and checked; null when unset without a default.
 */
export function setting<N extends SettingName>(env: Env, name: N): SettingValue<N> {
  const spec: SettingSpec = settings[name];
  const given = env[name];
  const value = given !== undefined && given !== '' ? given : (spec.default ?? spec.defaultFrom?.((other) => setting(env, other as SettingName)));
  return (value === undefined ? null : parseSetting(name, spec, value)) as SettingValue<N>;
}

function parseSetting(name: string, spec: SettingSpec, value: string): unknown {
  switch (spec.type) {
    case 'integer':
      return integerSetting(name, value, spec.min ?? 0, spec.max ?? Number.MAX_SAFE_INTEGER);
    case 'number':
      if (!/^\d+(?:\.\d+)?$/.test(value) || Number(value) > (spec.max ?? Infinity)) {
        throw new ConfigError(`${name} must be a non-negative number${spec.max === undefined ? '' : ` (at most ${spec.max})`}, got ${JSON.stringify(value)}`);
      }
      return Number(value);
    case 'boolean':
      return booleanSetting(name, value);
    case 'url':
      return urlSetting(name, value, spec.protocols ?? ['http:', 'https:']);
    case 'enum': {
      const values = spec.values ?? [];
      const given = spec.upperCase ? value.toUpperCase() : value;
      if (!values.includes(given)) throw new ConfigError(`${name} must be ${values.length === 2 ? values.join(' or ') : `one of ${values.join(', ')}`}, got ${JSON.stringify(value)}`);
      return given;
    }
    case 'list':
      return value.split(',').map((v) => v.trim()).filter(Boolean);
    case 'string':
      if (spec.pattern && !spec.pattern.test(value)) throw new ConfigError(`${name} must be ${spec.mustBe}, got ${JSON.stringify(value)}`);
      return value;
    case 'json':
      return value;
  }
}

function urlSetting(name: string, value: string, protocols: readonly string[]): string {
  let parsed: URL;
  try {
    parsed = new URL(value);
  } catch {
    throw new ConfigError(`${name} is not a valid URL: ${JSON.stringify(redactSecrets(value))}`);
  }
  if (!protocols.includes(parsed.protocol)) {
    throw new ConfigError(`${name} must use ${protocols.join(' or ')}, got ${parsed.protocol}`);
  }
  return trimEndOf(value, '/');
}

function integerSetting(name: string, value: string, min: number, max: number): number {
  if (!/^\d+$/.test(value)) throw new ConfigError(`${name} must be a whole number, got ${JSON.stringify(value)}`);
  const n = Number(value);
  if (n < min || n > max) throw new ConfigError(`${name} must be between ${min} and ${max}, got ${n}`);
  return n;
}

const proxyAddress = /^(?:loopback|linklocal|uniquelocal|[0-9a-fA-F.:]+(?:\/\d{1,3})?)$/;

function trustProxySetting(value: string): Config['trustProxy'] {
  const v = value.trim().toLowerCase();
  if (v === '' || v === 'false') return false;
  if (v === 'true') return true;
  if (/^\d+$/.test(v)) return integerSetting('TRUST_PROXY', v, 0, 100);
  const addresses = v.split(',').map((a) => a.trim());
  const bad = addresses.find((a) => !proxyAddress.test(a));
  if (bad !== undefined) {
    throw new ConfigError(`TRUST_PROXY must be true, false, a number of proxies, or a comma-separated list of addresses or subnets (or loopback, linklocal, uniquelocal); ${JSON.stringify(bad)} is none of these`);
  }
  return addresses;
}

/** How many of a Weaviate object's replicas must answer (weaviate-ts-client's ConsistencyLevel). */
export type WeaviateConsistency = SettingValue<'WEAVIATE_WRITE_CONSISTENCY'>;

function booleanSetting(name: string, value: string | undefined): boolean {
  if (value === undefined || value === '') return false;
  if (['true', '1', 'yes'].includes(value.toLowerCase())) return true;
  if (['false', '0', 'no'].includes(value.toLowerCase())) return false;
  throw new ConfigError(`${name} must be true or false, got ${JSON.stringify(value)}`);
}

function modelPricesSetting(value: string | null): Record<string, ModelPrice> {
  if (!value) return { ...defaultModelPrices };
  let parsed: unknown;
  try {
    parsed = JSON.parse(value);
  } catch {
    throw new ConfigError('MODEL_PRICES must be JSON: {"<model>": {"input": <USD per 1M tokens>, "output": <USD per 1M tokens>}}');
  }
  if (!parsed || typeof parsed !== 'object' || Array.isArray(parsed)) throw new ConfigError('MODEL_PRICES must be a JSON object keyed by model name');
  const prices = { ...defaultModelPrices };
  for (const [model, price] of Object.entries(parsed as Record<string, unknown>)) {
    const p = price as Partial<ModelPrice> | null;
    const valid = (n: unknown) => typeof n === 'number' && Number.isFinite(n) && n >= 0;
    if (!p || !valid(p.input) || !valid(p.output)) throw new ConfigError(`MODEL_PRICES.${model} needs non-negative numbers "input" and "output" (USD per million tokens)`);
    prices[model] = { input: p.input!, output: p.output! };
  }
  return prices;
}

function scraperSettings(env: Env): ScraperSettings | null {
  const baseUrl = setting(env, 'SCRAPER_BASE_URL');
  if (baseUrl === null) return null;
  return {
    baseUrl,
    apiKey: setting(env, 'SCRAPER_API_KEY'),
    name: setting(env, 'SCRAPER_NAME'),
    costPerCreditUsd: setting(env, 'SCRAPER_COST_PER_CREDIT_USD'),
    creditsPerPage: setting(env, 'SCRAPER_CREDITS_PER_PAGE'),
    timeoutMs: 1000 * setting(env, 'SCRAPER_TIMEOUT_SECONDS'),
  };
}

function videoDataApiSettings(env: Env): VideoDataApiSettings {
  return {
    baseUrl: setting(env, 'VIDEO_DATA_API_BASE_URL'),
    apiKey: setting(env, 'VIDEO_DATA_API_KEY'),
    timeoutMs: 1000 * setting(env, 'VIDEO_DATA_API_TIMEOUT_SECONDS'),
    unitPriceUsd: setting(env, 'VIDEO_DATA_API_UNIT_PRICE_USD'),
  };
}

function channelSettings(env: Env): ChannelSettings {
  const retryInitialSeconds = setting(env, 'CHANNEL_RETRY_INITIAL_SECONDS');
  const retryMaxSeconds = setting(env, 'CHANNEL_RETRY_MAX_SECONDS');
  if (retryMaxSeconds < retryInitialSeconds) throw new ConfigError('CHANNEL_RETRY_MAX_SECONDS must not be less than CHANNEL_RETRY_INITIAL_SECONDS');
  return {
    scanIntervalSeconds: setting(env, 'CHANNEL_SCAN_INTERVAL_SECONDS'),
    retryInitialSeconds,
    retryMaxSeconds,
    importConcurrency: setting(env, 'CHANNEL_IMPORT_CONCURRENCY'),
  };
}

/** A model API of its own (`<PREFIX>_BASE_URL`, `<PREFIX>_API_KEY`), else the shared OPENAI_* one. */
function modelEndpoint(env: Env, prefix: 'TRANSCRIPTION' | 'SPEECH', openaiBaseUrl: string | null) {
  const baseUrl = setting(env, `${prefix}_BASE_URL`) ?? openaiBaseUrl;
  const model = setting(env, `${prefix}_MODEL`);
  if (model && !baseUrl) throw new ConfigError(`${prefix}_MODEL needs ${prefix}_BASE_URL or OPENAI_BASE_URL (the OpenAI-compatible API that serves it)`);
  return { model, baseUrl, apiKey: setting(env, `${prefix}_API_KEY`) ?? setting(env, 'OPENAI_API_KEY') };
}

/** Segments one transcript may have: its workflow's history grows by about six events a segment. */
const maxTranscriptSegments = 2_000;

function transcriptionSettings(env: Env, openaiBaseUrl: string | null): TranscriptionSettings {
  const segments = Math.ceil(setting(env, 'TRANSCRIPT_MAX_AUDIO_SECONDS') / setting(env, 'TRANSCRIPT_SEGMENT_SECONDS'));
  if (segments > maxTranscriptSegments) {
    throw new ConfigError(`TRANSCRIPT_MAX_AUDIO_SECONDS / TRANSCRIPT_SEGMENT_SECONDS allows ${segments} segments a transcript; at most ${maxTranscriptSegments} keep a transcript's workflow history bounded`);
  }
  return {
    ...modelEndpoint(env, 'TRANSCRIPTION', openaiBaseUrl),
    timeoutSeconds: setting(env, 'TRANSCRIPTION_TIMEOUT_SECONDS'),
    rateLimitPerMinute: setting(env, 'TRANSCRIPTION_RATE_LIMIT_PER_MINUTE'),
    concurrencyLimit: setting(env, 'TRANSCRIPTION_CONCURRENCY_LIMIT'),
    retentionSeconds: setting(env, 'TRANSCRIPT_RETENTION_SECONDS'),
    uploadRetentionSeconds: setting(env, 'TRANSCRIPT_UPLOAD_RETENTION_SECONDS'),
    pendingUploadsLimit: setting(env, 'TRANSCRIPT_PENDING_UPLOADS_PER_PARTNER'),
    segmentSeconds: setting(env, 'TRANSCRIPT_SEGMENT_SECONDS'),
    segmentConcurrency: setting(env, 'TRANSCRIPT_SEGMENT_CONCURRENCY'),
    maxAudioSeconds: setting(env, 'TRANSCRIPT_MAX_AUDIO_SECONDS'),
    audioFetchTimeoutSeconds: setting(env, 'TRANSCRIPT_AUDIO_FETCH_TIMEOUT_SECONDS'),
    audioFetchMaxBytes: setting(env, 'TRANSCRIPT_AUDIO_FETCH_MAX_BYTES'),
    audioTaskQueue: setting(env, 'TEMPORAL_AUDIO_TASK_QUEUE'),
    audioWorkerMaxActivities: setting(env, 'AUDIO_WORKER_MAX_ACTIVITIES'),
    heartbeatTimeoutSeconds: setting(env, 'TRANSCRIPT_HEARTBEAT_TIMEOUT_SECONDS'),
    local: {
      modelDir: setting(env, 'TRANSCRIPTION_LOCAL_MODEL_DIR'),
      threads: setting(env, 'TRANSCRIPTION_LOCAL_THREADS'),
      concurrency: setting(env, 'TRANSCRIPTION_LOCAL_CONCURRENCY'),
    },
  };
}

function speechSettings(env: Env, openaiBaseUrl: string | null): SpeechSettings {
  return {
    ...modelEndpoint(env, 'SPEECH', openaiBaseUrl),
    remoteVoices: setting(env, 'SPEECH_REMOTE_VOICES'),
    languageField: setting(env, 'SPEECH_LANGUAGE_FIELD'),
    timeoutSeconds: setting(env, 'SPEECH_TIMEOUT_SECONDS'),
    maxConcurrent: setting(env, 'SPEECH_MAX_CONCURRENT'),
  };
}

function rewriteSettings(env: Env): RewriteSettings {
  const partTokens = setting(env, 'REWRITE_PART_TOKENS');
  const overlapTokens = setting(env, 'REWRITE_OVERLAP_TOKENS');
  if (overlapTokens >= partTokens / 2) throw new ConfigError('REWRITE_OVERLAP_TOKENS must be less than half of REWRITE_PART_TOKENS');
  return {
    models: { standard: setting(env, 'REWRITE_MODEL_STANDARD'), economy: setting(env, 'REWRITE_MODEL_ECONOMY') },
    fallbackModel: setting(env, 'REWRITE_FALLBACK_MODEL'),
    maxOutputTokens: setting(env, 'REWRITE_MAX_OUTPUT_TOKENS'),
    partTokens,
    overlapTokens,
    timeoutSeconds: setting(env, 'REWRITE_TIMEOUT_SECONDS'),
    maxOutageSeconds: setting(env, 'REWRITE_MAX_OUTAGE_SECONDS'),
  };
}

function voiceSettings(env: Env): VoiceSettings {
  const [baseUrl, apiKey] = [setting(env, 'VOICE_JOB_BASE_URL'), setting(env, 'VOICE_JOB_API_KEY')];
  if (apiKey && !baseUrl) throw new ConfigError('VOICE_JOB_API_KEY needs VOICE_JOB_BASE_URL (the GPU job service it is the key of)');
  return {
    gpuJobs: baseUrl ? { baseUrl, apiKey } : null,
    gpuJobPollIntervalMs: setting(env, 'VOICE_JOB_POLL_INTERVAL_MS'),
    gpuJobTimeoutSeconds: setting(env, 'VOICE_JOB_TIMEOUT_SECONDS'),
    jobFilesBaseUrl: setting(env, 'VOICE_JOB_FILES_BASE_URL'),
    maxUploadBytes: setting(env, 'VOICE_MAX_UPLOAD_BYTES'),
    maxOriginalSeconds: setting(env, 'VOICE_MAX_ORIGINAL_SECONDS'),
    heartbeatTimeoutSeconds: setting(env, 'VOICE_HEARTBEAT_TIMEOUT_SECONDS'),
    retryWindowSeconds: setting(env, 'VOICE_RETRY_WINDOW_SECONDS'),
    rateLimitPerMinute: setting(env, 'VOICE_RATE_LIMIT_PER_MINUTE'),
  };
}

function dialogAnalysisSettings(env: Env): DialogAnalysisSettings {
  const model = setting(env, 'DIALOG_ANALYSIS_MODEL');
  if (model.length > 200 || hasControlCharacters(model)) throw new ConfigError(`DIALOG_ANALYSIS_MODEL must be a model name of at most 200 characters, got ${JSON.stringify(model.slice(0, 40))}`);
  return {
    model,
    responseFormat: setting(env, 'DIALOG_ANALYSIS_RESPONSE_FORMAT'),
    maxAttempts: setting(env, 'DIALOG_ANALYSIS_MAX_ATTEMPTS'),
    maxOutputTokens: setting(env, 'DIALOG_ANALYSIS_MAX_OUTPUT_TOKENS'),
    timeoutSeconds: setting(env, 'DIALOG_ANALYSIS_TIMEOUT_SECONDS'),
    maxOutageSeconds: setting(env, 'DIALOG_ANALYSIS_MAX_OUTAGE_SECONDS'),
    retentionSeconds: setting(env, 'DIALOG_ANALYSIS_RETENTION_SECONDS'),
    rateLimitPerMinute: setting(env, 'DIALOG_ANALYSIS_RATE_LIMIT_PER_MINUTE'),
    validationTimeoutMs: setting(env, 'DIALOG_ANALYSIS_VALIDATION_TIMEOUT_MS'),
  };
}

export function loadConfig(env: Env = process.env): Config {
  const adminApiKey = setting(env, 'ADMIN_API_KEY') ?? '';
  if (adminApiKey.length === 0) throw new ConfigError('ADMIN_API_KEY is required (the administrator key for /api)');
  if (adminApiKey.length < 16) throw new ConfigError('ADMIN_API_KEY must be at least 16 characters');

  const { address: temporalAddress } = temporalConnection(env);
  const openaiBaseUrl = setting(env, 'OPENAI_BASE_URL');
  const workflowBundlePath = setting(env, 'WORKFLOW_BUNDLE_PATH');

  return {
    databaseUrl: setting(env, 'DATABASE_URL'),
    temporalAddress,
    temporalNamespace: setting(env, 'TEMPORAL_NAMESPACE'),
    temporalTaskQueue: setting(env, 'TEMPORAL_TASK_QUEUE'),
    weaviateUrl: setting(env, 'WEAVIATE_URL'),
    weaviateTimeoutMs: setting(env, 'WEAVIATE_TIMEOUT_SECONDS') * 1000,
    weaviateReplication: {
      factor: setting(env, 'WEAVIATE_REPLICATION_FACTOR'),
      write: setting(env, 'WEAVIATE_WRITE_CONSISTENCY'),
      read: setting(env, 'WEAVIATE_READ_CONSISTENCY'),
    },
    port: setting(env, 'PORT'),
    httpKeepAliveMs: setting(env, 'HTTP_KEEP_ALIVE_SECONDS') * 1000,
    trustProxy: trustProxySetting(setting(env, 'TRUST_PROXY')),
    adminApiKey,
    openaiBaseUrl,
    openaiApiKey: setting(env, 'OPENAI_API_KEY'),
    storageDir: path.resolve(setting(env, 'STORAGE_DIR')),
    objectStore: objectStoreSettings(env),
    maxUploadBytes: setting(env, 'MAX_UPLOAD_BYTES'),
    partnerKeyCacheSeconds: setting(env, 'PARTNER_KEY_CACHE_SECONDS'),
    logLevel: setting(env, 'LOG_LEVEL'),
    workflowBundlePath: workflowBundlePath ? path.resolve(workflowBundlePath) : null,
    workerMaxActivities: setting(env, 'WORKER_MAX_ACTIVITIES'),
    budgetSweepIntervalSeconds: setting(env, 'BUDGET_SWEEP_INTERVAL_SECONDS'),
    transcription: transcriptionSettings(env, openaiBaseUrl),
    speech: speechSettings(env, openaiBaseUrl),
    embedding: embeddingSettings(env, openaiBaseUrl),
    retrieval: retrievalSettings(env),
    vendorSync: vendorSyncSettings(env, openaiBaseUrl),
    urlFetchAllowPrivate: setting(env, 'URL_FETCH_ALLOW_PRIVATE'),
    urlFetchAllowLoopback: setting(env, 'URL_FETCH_ALLOW_LOOPBACK'),
    budgetSweepGraceSeconds: setting(env, 'BUDGET_SWEEP_GRACE_SECONDS'),
    budgetRecheckIntervalMs: setting(env, 'BUDGET_RECHECK_INTERVAL_MS'),
    reconcileIntervalSeconds: setting(env, 'RECONCILE_INTERVAL_SECONDS'),
    reconcileGraceSeconds: setting(env, 'RECONCILE_GRACE_SECONDS'),
    messaging: {
      defaultOutputTokenBound: setting(env, 'MESSAGING_DEFAULT_OUTPUT_TOKENS'),
      sseKeepAliveMs: setting(env, 'MESSAGING_SSE_KEEPALIVE_MS'),
      upstreamTimeoutSeconds: setting(env, 'MESSAGING_UPSTREAM_TIMEOUT_SECONDS'),
      legacyModel: setting(env, 'LEGACY_COMPLETION_MODEL'),
      legacyRetentionSeconds: setting(env, 'LEGACY_COMPLETION_RETENTION_SECONDS'),
      keyCacheSeconds: setting(env, 'MESSAGING_KEY_CACHE_SECONDS'),
      upstreamMaxSockets: setting(env, 'MESSAGING_UPSTREAM_MAX_SOCKETS'),
      serverTiming: setting(env, 'MESSAGING_SERVER_TIMING'),
      callDuringAdmissionSeconds: setting(env, 'MESSAGING_CALL_DURING_ADMISSION_SECONDS'),
      quotaEscrowSeconds: setting(env, 'MESSAGING_QUOTA_ESCROW_SECONDS'),
    },
    rewrite: rewriteSettings(env),
    scraper: scraperSettings(env),
    videoPlatformBaseUrl: setting(env, 'VIDEO_PLATFORM_BASE_URL'),
    videoDataApi: videoDataApiSettings(env),
    channels: channelSettings(env),
    modelPrices: modelPricesSetting(setting(env, 'MODEL_PRICES')),
    digitization: {
      pdfOcrMaxPages: setting(env, 'PDF_OCR_MAX_PAGES'),
      pdfOcrConcurrency: setting(env, 'PDF_OCR_CONCURRENCY'),
      pdfOcrDpi: setting(env, 'PDF_OCR_DPI'),
      libreOfficeTimeoutSeconds: setting(env, 'LIBREOFFICE_TIMEOUT_SECONDS'),
      maxOutageSeconds: setting(env, 'DIGITIZATION_MAX_OUTAGE_SECONDS'),
    },
    dialogAnalysis: dialogAnalysisSettings(env),
    voices: voiceSettings(env),
    metrics: metricsSettings(env, adminApiKey),
    limits: abuseLimits(env),
  };
}

/** S3 bucket names: 3-63 lower-case letters, digits, dots and hyphens, a letter or digit at each end. */
const bucketName = /^[a-z0-9][a-z0-9.-]{1,61}[a-z0-9]$/;

/**
 * STORAGE_URL (`s3://bucket` or `s3://bucket/prefix`) and the settings of its object store. Unset:
 * null, and an S3_* setting is refused, since the files would then go to STORAGE_DIR unnoticed.
 */
function objectStoreSettings(env: Env): ObjectStoreSettings | null {
  const url = setting(env, 'STORAGE_URL');
  if (!url) {
    const stray = (['S3_ENDPOINT', 'S3_REGION', 'S3_FORCE_PATH_STYLE'] as const).find((name) => env[name]);
    if (stray) throw new ConfigError(`${stray} is set but STORAGE_URL is not: stored files would go to the local STORAGE_DIR; set STORAGE_URL=s3://<bucket>[/<prefix>] to use the object store`);
    return null;
  }
  const [, bucket, rawPrefix = ''] = /^s3:\/\/([^/?#]*)(?:\/([^?#]*))?$/.exec(url) ?? [];
  if (bucket === undefined) throw new ConfigError(`STORAGE_URL must be s3://<bucket> or s3://<bucket>/<prefix> (unset: the local directory STORAGE_DIR), got ${JSON.stringify(redactSecrets(url))}`);
  if (bucket.includes('@')) throw new ConfigError('STORAGE_URL must not carry credentials: set AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY');
  if (!bucketName.test(bucket) || bucket.includes('..')) {
    throw new ConfigError(`STORAGE_URL names bucket ${JSON.stringify(bucket)}, not a valid bucket name (3-63 lower-case letters, digits, dots and hyphens, a letter or digit at each end)`);
  }
  const prefix = trimEndOf(rawPrefix, '/');
  if (prefix && (prefix.split('/').some((segment) => segment === '' || segment === '.' || segment === '..') || hasControlCharacters(prefix))) {
    throw new ConfigError(`STORAGE_URL's prefix must be path segments without empty, "." or ".." ones, got ${JSON.stringify(rawPrefix)}`);
  }
  const endpoint = setting(env, 'S3_ENDPOINT');
  const region = setting(env, 'S3_REGION');
  const [accessKeyId, secretAccessKey, sessionToken] = [setting(env, 'AWS_ACCESS_KEY_ID'), setting(env, 'AWS_SECRET_ACCESS_KEY'), setting(env, 'AWS_SESSION_TOKEN')];
  if (!accessKeyId !== !secretAccessKey) {
    throw new ConfigError(`${accessKeyId ? 'AWS_SECRET_ACCESS_KEY' : 'AWS_ACCESS_KEY_ID'} is required with ${accessKeyId ? 'AWS_ACCESS_KEY_ID' : 'AWS_SECRET_ACCESS_KEY'} (or set neither: the AWS SDK's default credentials then apply)`);
  }
  if (sessionToken && !accessKeyId) throw new ConfigError('AWS_SESSION_TOKEN needs AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY (the temporary credentials it belongs to)');
  return {
    url,
    bucket,
    prefix,
    endpoint,
    region,
    // A server of one's own (S3_ENDPOINT) rarely has a wildcard DNS name per bucket; AWS prefers the host style.
    forcePathStyle: setting(env, 'S3_FORCE_PATH_STYLE') ?? endpoint !== null,
    credentials: accessKeyId && secretAccessKey ? { accessKeyId, secretAccessKey, ...(sessionToken ? { sessionToken } : {}) } : null,
  };
}

/** Where Temporal is: also what `npm run temporal` hands the Temporal CLI (scripts/temporal.ts). */
export function temporalConnection(env: Env = process.env): { address: string; namespace: string } {
  const address = setting(env, 'TEMPORAL_ADDRESS');
  return { address, namespace: setting(env, 'TEMPORAL_NAMESPACE') };
}

function abuseLimits(env: Env): AbuseLimits {
  const mib = 1024 * 1024;
  return {
    requestsPerMinute: {
      'knowledge-base': setting(env, 'REQUESTS_PER_MINUTE_KNOWLEDGE_BASE'),
      messaging: setting(env, 'REQUESTS_PER_MINUTE_MESSAGING'),
      transcription: setting(env, 'REQUESTS_PER_MINUTE_TRANSCRIPTION'),
      speech: setting(env, 'REQUESTS_PER_MINUTE_SPEECH'),
      'dialog-analysis': setting(env, 'REQUESTS_PER_MINUTE_DIALOG_ANALYSIS'),
      voices: setting(env, 'REQUESTS_PER_MINUTE_VOICES'),
    },
    anonymousRequestsPerMinute: setting(env, 'REQUESTS_PER_MINUTE_ANONYMOUS'),
    tarpitMs: setting(env, 'RATE_LIMIT_TARPIT_MS'),
    inFlightPerKey: setting(env, 'REQUESTS_IN_FLIGHT_PER_KEY'),
    burstPerKey: setting(env, 'REQUESTS_BURST_PER_KEY'),
    jsonBodyMaxBytes: setting(env, 'JSON_BODY_MAX_BYTES'),
    formTextFieldMaxBytes: setting(env, 'FORM_TEXT_FIELD_MAX_BYTES'),
    // Never more than the batch limit of lib/knowledge/documents.ts, which checks the sum again.
    batchUploadMaxBytes: setting(env, 'BATCH_UPLOAD_MAX_BYTES'),
    tools: { maxMemoryBytes: setting(env, 'TOOL_MAX_MEMORY_MB') * mib, maxFileBytes: setting(env, 'TOOL_MAX_FILE_MB') * mib },
    extraction: {
      zipMaxEntries: setting(env, 'EXTRACT_ZIP_MAX_ENTRIES'),
      zipMaxInflatedBytes: setting(env, 'EXTRACT_ZIP_MAX_INFLATED_MB') * mib,
      maxHeapMb: setting(env, 'EXTRACT_MAX_HEAP_MB'),
      maxThreads: setting(env, 'EXTRACT_MAX_THREADS'),
      timeoutMs: setting(env, 'EXTRACT_TIMEOUT_SECONDS') * 1000,
      toolTimeoutMs: setting(env, 'EXTRACT_TOOL_TIMEOUT_SECONDS') * 1000,
      maxMediaSeconds: setting(env, 'DOCUMENT_MAX_MEDIA_SECONDS'),
    },
  };
}

function metricsSettings(env: Env, adminApiKey: string): MetricsSettings {
  const apiKey = setting(env, 'METRICS_API_KEY');
  if (apiKey !== null && (apiKey.length < 16 || /\s/.test(apiKey))) throw new ConfigError('METRICS_API_KEY must be at least 16 characters, without spaces');
  if (apiKey === adminApiKey) throw new ConfigError('METRICS_API_KEY must differ from ADMIN_API_KEY (it is the key that can read /metrics and nothing else)');
  return {
    apiKey,
    cacheSeconds: setting(env, 'METRICS_CACHE_SECONDS'),
    closedWindowSeconds: setting(env, 'METRICS_CLOSED_WINDOW_SECONDS'),
  };
}

function retrievalSettings(env: Env): RetrievalConfig {
  let reranker: RerankerSettings | null = null;
  const [baseUrl, model, apiKey] = [setting(env, 'RERANK_BASE_URL'), setting(env, 'RERANK_MODEL'), setting(env, 'RERANK_API_KEY')];
  if (baseUrl) {
    if (!model) throw new ConfigError('RERANK_BASE_URL needs RERANK_MODEL (the re-ranking model the server serves)');
    reranker = {
      baseUrl,
      apiKey,
      model,
      candidates: setting(env, 'RERANK_CANDIDATES'),
      timeoutMs: 1000 * setting(env, 'RERANK_TIMEOUT_SECONDS'),
      priceUsdPerMillionTokens: setting(env, 'RERANK_PRICE_USD_PER_MILLION_TOKENS'),
    };
  } else if (model || apiKey) {
    throw new ConfigError('RERANK_MODEL and RERANK_API_KEY need RERANK_BASE_URL (the server speaking the /rerank protocol)');
  }
  return {
    fusion: setting(env, 'RETRIEVAL_FUSION'),
    weights: { dense: setting(env, 'RETRIEVAL_WEIGHT_DENSE'), sparse: setting(env, 'RETRIEVAL_WEIGHT_SPARSE'), bm25: setting(env, 'RETRIEVAL_WEIGHT_BM25') },
    rescoring: setting(env, 'RETRIEVAL_RESCORING') === 'on',
    reranker,
  };
}

function vendorSyncSettings(env: Env, openaiBaseUrl: string | null): Config['vendorSync'] {
  const maxOutageSeconds = setting(env, 'VENDOR_SYNC_MAX_OUTAGE_SECONDS');
  const baseUrl = setting(env, 'VENDOR_SYNC_BASE_URL') ?? openaiBaseUrl;
  return baseUrl ? { baseUrl, apiKey: setting(env, 'VENDOR_SYNC_API_KEY') ?? setting(env, 'OPENAI_API_KEY'), maxOutageSeconds } : null;
}

function embeddingSettings(env: Env, openaiBaseUrl: string | null): EmbeddingSettings {
  const model = setting(env, 'EMBEDDING_MODEL');
  if (model && !openaiBaseUrl) throw new ConfigError('EMBEDDING_MODEL needs OPENAI_BASE_URL (the OpenAI-compatible API that serves it)');
  return {
    model,
    dimensions: setting(env, 'EMBEDDING_DIMENSIONS'),
    priceUsdPerMillionTokens: setting(env, 'EMBEDDING_PRICE_USD_PER_MILLION_TOKENS'),
    localThreads: setting(env, 'EMBEDDING_LOCAL_THREADS'),
    batchChunks: setting(env, 'EMBEDDING_BATCH_CHUNKS'),
    maxOutageSeconds: setting(env, 'EMBEDDING_MAX_OUTAGE_SECONDS'),
  };
}

/** Entry points call this: a bad setting ends the process with one readable line. */
export function loadConfigOrExit(env: Env = process.env): Config {
  try {
    return loadConfig(env);
  } catch (err) {
    exitOnConfigError(err);
  }
}

/**
 * A start-up step whose ConfigError stops the process as a bad setting does (the message on
 * stderr, exit code 78); e.g. the storage check of both entry points (FileStorage.verify).
 */
export async function orExitOnConfigError<T>(step: Promise<T>): Promise<T> {
  try {
    return await step;
  } catch (err) {
    exitOnConfigError(err);
  }
}

function exitOnConfigError(err: unknown): never {
  if (err instanceof ConfigError) {
    process.stderr.write(`configuration error: ${redactSecrets(err.message)}\n`);
    process.exit(78); // EX_CONFIG
  }
  throw err;
}
