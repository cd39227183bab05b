import os from 'node:os';
import path from 'node:path';
import { hasControlCharacters, trimEndOf } from './text.js';
import { redactSecrets } from './redact.js';

/**
 * Every setting the processes read, validated once at start-up. A missing or malformed value stops
 * the process with a message naming the variable, rather than failing later inside a request.
 */
export interface Config {
  databaseUrl: string;
  temporalAddress: string;
  temporalNamespace: string;
  temporalTaskQueue: string;
  weaviateUrl: string;
  /** WEAVIATE_TIMEOUT_SECONDS: a Weaviate request unanswered this long counts as Weaviate unavailable. */
  weaviateTimeoutMs: number;
  /** WEAVIATE_REPLICATION_FACTOR, WEAVIATE_WRITE_CONSISTENCY, WEAVIATE_READ_CONSISTENCY (README, deployment and scaling). */
  weaviateReplication: { factor: number; write: WeaviateConsistency; read: WeaviateConsistency };
  port: number;
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
  logLevel: 'debug' | 'info' | 'warn' | 'error';
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
  /** Dense embeddings (README, "Embedding and retrieval"): null model embeds locally. */
  embedding: EmbeddingSettings;
  /** Fusion defaults and the optional re-ranker of retrieval (README, "Embedding and retrieval"). */
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
  /** Video-channel sources (README, "Video-channel sources"). */
  channels: ChannelSettings;
  /** List prices per model, USD per million tokens; a model missing here is unpriced. */
  modelPrices: Record<string, ModelPrice>;
  digitization: DigitizationSettings;
  dialogAnalysis: DialogAnalysisSettings;
  /** The voice interface, /api/voices (README, "Voices"). */
  voices: VoiceSettings;
  /** Prometheus metrics at /metrics (README, "Operator guide", "Metrics"). */
  metrics: MetricsSettings;
  /** Abuse resistance: request rates per key, request bodies, extraction and child-process bounds (README, "Abuse resistance"). */
  limits: AbuseLimits;
}

/** An S3-compatible object store (README, "Configuration"). */
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

/** The interfaces whose requests are rate-limited per key (README, "Abuse resistance"). */
export const rateLimitedInterfaces = ['knowledge-base', 'messaging', 'transcription', 'speech', 'dialog-analysis', 'voices'] as const;
export type RateLimitedInterface = (typeof rateLimitedInterfaces)[number];

/** Abuse resistance (README, "Abuse resistance"). */
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

/** The voice interface (README, "Voices"). */
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

/** Digitization (README, "Digitization"). */
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

/** Dialog analysis, /v2/dialog_analyses (README, "Dialog analysis"). */
export interface DialogAnalysisSettings {
  /** Model at OPENAI_BASE_URL; without OPENAI_BASE_URL analyses fail at once, saying so. */
  model: string;
  /** First response mode of every analysis; `auto`: structured outputs when the schemas allow it. */
  responseFormat: 'auto' | 'json_schema' | 'json_object' | 'prompt';
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
  /** TRANSCRIPTION_MODEL: an OpenAI-compatible transcription model; null: local PocketSphinx (English only). */
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

/** Messaging interface (README, "Messaging"). */
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

/** Retrieval (README, "Embedding and retrieval"). */
export interface RetrievalConfig {
  /** RETRIEVAL_FUSION: `score` (normalised scores) or `rrf` (reciprocal ranks). */
  fusion: 'score' | 'rrf';
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

/** Defaults that make a fresh clone run against the embedded servers that `scripts/start` launches. */
const configDefaults = {
  DATABASE_URL: 'postgresql://postgres@127.0.0.1:5432/dwb_dev',
  TEMPORAL_ADDRESS: '127.0.0.1:7233',
  TEMPORAL_NAMESPACE: 'default',
  TEMPORAL_TASK_QUEUE: 'knowledge',
  WEAVIATE_URL: 'http://127.0.0.1:8080',
  WEAVIATE_TIMEOUT_SECONDS: '30',
  WEAVIATE_REPLICATION_FACTOR: '1',
  WEAVIATE_WRITE_CONSISTENCY: 'QUORUM',
  WEAVIATE_READ_CONSISTENCY: 'QUORUM',
  PORT: '3000',
  TRUST_PROXY: 'false',
  STORAGE_DIR: '.data/storage',
  S3_REGION: 'us-east-1',
  MAX_UPLOAD_BYTES: String(100 * 1024 * 1024),
  PARTNER_KEY_CACHE_SECONDS: '5',
  LOG_LEVEL: 'info',
  WORKER_MAX_ACTIVITIES: '32',
  BUDGET_SWEEP_INTERVAL_SECONDS: '60',
  BUDGET_SWEEP_GRACE_SECONDS: '300',
  BUDGET_RECHECK_INTERVAL_MS: '300000',
  RECONCILE_INTERVAL_SECONDS: '60',
  RECONCILE_GRACE_SECONDS: '60',
  MESSAGING_DEFAULT_OUTPUT_TOKENS: '4096',
  MESSAGING_SSE_KEEPALIVE_MS: '15000',
  MESSAGING_UPSTREAM_TIMEOUT_SECONDS: '600',
  LEGACY_COMPLETION_MODEL: 'gpt-4.1-mini',
  LEGACY_COMPLETION_RETENTION_SECONDS: '1200',
  MESSAGING_KEY_CACHE_SECONDS: '5',
  MESSAGING_UPSTREAM_MAX_SOCKETS: '256',
  MESSAGING_SERVER_TIMING: 'false',
  MESSAGING_CALL_DURING_ADMISSION_SECONDS: '10',
  VIDEO_PLATFORM_BASE_URL: 'https://www.youtube.com',
  REWRITE_MODEL_STANDARD: 'gpt-4.1',
  REWRITE_MODEL_ECONOMY: 'gpt-4.1-mini',
  REWRITE_MAX_OUTPUT_TOKENS: '16384',
  REWRITE_PART_TOKENS: '6000',
  REWRITE_OVERLAP_TOKENS: '200',
  REWRITE_TIMEOUT_SECONDS: '600',
  REWRITE_MAX_OUTAGE_SECONDS: '86400',
  PDF_OCR_MAX_PAGES: '100',
  PDF_OCR_CONCURRENCY: '2',
  PDF_OCR_DPI: '300',
  LIBREOFFICE_TIMEOUT_SECONDS: '120',
  DIGITIZATION_MAX_OUTAGE_SECONDS: '3600',
  VENDOR_SYNC_MAX_OUTAGE_SECONDS: '3600',
  DIALOG_ANALYSIS_MODEL: 'gpt-4.1-mini',
  DIALOG_ANALYSIS_RESPONSE_FORMAT: 'auto',
  DIALOG_ANALYSIS_MAX_ATTEMPTS: '3',
  DIALOG_ANALYSIS_MAX_OUTPUT_TOKENS: '4096',
  DIALOG_ANALYSIS_TIMEOUT_SECONDS: '300',
  DIALOG_ANALYSIS_MAX_OUTAGE_SECONDS: '1800',
  DIALOG_ANALYSIS_RETENTION_SECONDS: '86400',
  DIALOG_ANALYSIS_RATE_LIMIT_PER_MINUTE: '60',
  DIALOG_ANALYSIS_VALIDATION_TIMEOUT_MS: '5000',
  VIDEO_DATA_API_BASE_URL: 'https://www.googleapis.com/youtube/v3',
  VIDEO_DATA_API_TIMEOUT_SECONDS: '30',
  CHANNEL_SCAN_INTERVAL_SECONDS: '86400',
  CHANNEL_RETRY_INITIAL_SECONDS: '60',
  CHANNEL_RETRY_MAX_SECONDS: '3600',
  CHANNEL_IMPORT_CONCURRENCY: '4',
  TRANSCRIPTION_TIMEOUT_SECONDS: '600',
  TRANSCRIPTION_RATE_LIMIT_PER_MINUTE: '30',
  TRANSCRIPTION_CONCURRENCY_LIMIT: '5',
  TRANSCRIPT_RETENTION_SECONDS: String(30 * 86400),
  TRANSCRIPT_UPLOAD_RETENTION_SECONDS: '86400',
  TRANSCRIPT_PENDING_UPLOADS_PER_PARTNER: '20',
  TRANSCRIPT_SEGMENT_SECONDS: '120',
  TRANSCRIPT_SEGMENT_CONCURRENCY: '1',
  TRANSCRIPT_MAX_AUDIO_SECONDS: '14400',
  TRANSCRIPT_AUDIO_FETCH_TIMEOUT_SECONDS: '300',
  TRANSCRIPT_AUDIO_FETCH_MAX_BYTES: String(100 * 1024 * 1024),
  TRANSCRIPT_HEARTBEAT_TIMEOUT_SECONDS: '30',
  AUDIO_WORKER_MAX_ACTIVITIES: '2',
  SPEECH_REMOTE_VOICES: 'alloy,ash,ballad,coral,echo,fable,onyx,nova,sage,shimmer,verse,marin,cedar',
  SPEECH_TIMEOUT_SECONDS: '60',
  SPEECH_MAX_CONCURRENT: '2',
  VOICE_JOB_POLL_INTERVAL_MS: '5000',
  VOICE_JOB_TIMEOUT_SECONDS: '3600',
  VOICE_MAX_UPLOAD_BYTES: String(100 * 1024 * 1024),
  VOICE_MAX_ORIGINAL_SECONDS: '3600',
  VOICE_HEARTBEAT_TIMEOUT_SECONDS: '30',
  VOICE_RETRY_WINDOW_SECONDS: String(7 * 86400),
  VOICE_RATE_LIMIT_PER_MINUTE: '30',
  METRICS_CACHE_SECONDS: '15',
  METRICS_CLOSED_WINDOW_SECONDS: '3600',
  REQUESTS_PER_MINUTE_KNOWLEDGE_BASE: '1200',
  REQUESTS_PER_MINUTE_MESSAGING: '600',
  REQUESTS_PER_MINUTE_TRANSCRIPTION: '600',
  REQUESTS_PER_MINUTE_SPEECH: '300',
  REQUESTS_PER_MINUTE_DIALOG_ANALYSIS: '600',
  REQUESTS_PER_MINUTE_VOICES: '600',
  REQUESTS_PER_MINUTE_ANONYMOUS: '0',
  RATE_LIMIT_TARPIT_MS: '1000',
  REQUESTS_IN_FLIGHT_PER_KEY: '4',
  REQUESTS_BURST_PER_KEY: '20',
  JSON_BODY_MAX_BYTES: String(16 * 1024 * 1024),
  FORM_TEXT_FIELD_MAX_BYTES: String(16 * 1024 * 1024),
  BATCH_UPLOAD_MAX_BYTES: String(1024 * 1024 * 1024),
  TOOL_MAX_MEMORY_MB: '2048',
  TOOL_MAX_FILE_MB: '2048',
  EXTRACT_ZIP_MAX_ENTRIES: '10000',
  EXTRACT_ZIP_MAX_INFLATED_MB: '256',
  EXTRACT_MAX_HEAP_MB: '1024',
  EXTRACT_MAX_THREADS: String(os.availableParallelism()),
  EXTRACT_TIMEOUT_SECONDS: '300',
  EXTRACT_TOOL_TIMEOUT_SECONDS: '120',
  DOCUMENT_MAX_MEDIA_SECONDS: '14400',
} as const;

type Env = Record<string, string | undefined>;

function read(env: Env, name: keyof typeof configDefaults): string {
  const value = env[name];
  return value === undefined || value === '' ? configDefaults[name] : value;
}

function urlSetting(name: string, value: string, protocols: string[]): string {
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
export type WeaviateConsistency = 'ONE' | 'QUORUM' | 'ALL';
const consistencyLevels: readonly WeaviateConsistency[] = ['ONE', 'QUORUM', 'ALL'];

function consistencySetting(name: string, value: string): WeaviateConsistency {
  const level = value.toUpperCase() as WeaviateConsistency;
  if (!consistencyLevels.includes(level)) throw new ConfigError(`${name} must be one of ${consistencyLevels.join(', ')}, got ${JSON.stringify(value)}`);
  return level;
}

function booleanSetting(name: string, value: string | undefined): boolean {
  if (value === undefined || value === '') return false;
  if (['true', '1', 'yes'].includes(value.toLowerCase())) return true;
  if (['false', '0', 'no'].includes(value.toLowerCase())) return false;
  throw new ConfigError(`${name} must be true or false, got ${JSON.stringify(value)}`);
}

function modelPricesSetting(value: string | undefined): Record<string, ModelPrice> {
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
  if (!env.SCRAPER_BASE_URL) return null;
  const cost = Number(env.SCRAPER_COST_PER_CREDIT_USD ?? '0.001');
  if (!Number.isFinite(cost) || cost < 0) throw new ConfigError(`SCRAPER_COST_PER_CREDIT_USD must be a non-negative number, got ${JSON.stringify(env.SCRAPER_COST_PER_CREDIT_USD)}`);
  return {
    baseUrl: urlSetting('SCRAPER_BASE_URL', env.SCRAPER_BASE_URL, ['http:', 'https:']),
    apiKey: env.SCRAPER_API_KEY || null,
    name: env.SCRAPER_NAME || 'firecrawl',
    costPerCreditUsd: cost,
    creditsPerPage: integerSetting('SCRAPER_CREDITS_PER_PAGE', env.SCRAPER_CREDITS_PER_PAGE || '5', 1, 1_000_000),
    timeoutMs: 1000 * integerSetting('SCRAPER_TIMEOUT_SECONDS', env.SCRAPER_TIMEOUT_SECONDS || '120', 1, 3600),
  };
}

function videoDataApiSettings(env: Env): VideoDataApiSettings {
  const price = env.VIDEO_DATA_API_UNIT_PRICE_USD;
  if (price && !/^\d{1,12}(?:\.\d{1,8})?$/.test(price)) {
    throw new ConfigError(`VIDEO_DATA_API_UNIT_PRICE_USD must be a non-negative decimal with at most 8 decimal places, got ${JSON.stringify(price)}`);
  }
  return {
    baseUrl: urlSetting('VIDEO_DATA_API_BASE_URL', read(env, 'VIDEO_DATA_API_BASE_URL'), ['http:', 'https:']),
    apiKey: env.VIDEO_DATA_API_KEY || null,
    timeoutMs: 1000 * integerSetting('VIDEO_DATA_API_TIMEOUT_SECONDS', read(env, 'VIDEO_DATA_API_TIMEOUT_SECONDS'), 1, 600),
    unitPriceUsd: price || null,
  };
}

function channelSettings(env: Env): ChannelSettings {
  const retryInitialSeconds = integerSetting('CHANNEL_RETRY_INITIAL_SECONDS', read(env, 'CHANNEL_RETRY_INITIAL_SECONDS'), 1, 86400);
  const retryMaxSeconds = integerSetting('CHANNEL_RETRY_MAX_SECONDS', read(env, 'CHANNEL_RETRY_MAX_SECONDS'), 1, 7 * 86400);
  if (retryMaxSeconds < retryInitialSeconds) throw new ConfigError('CHANNEL_RETRY_MAX_SECONDS must not be less than CHANNEL_RETRY_INITIAL_SECONDS');
  return {
    scanIntervalSeconds: integerSetting('CHANNEL_SCAN_INTERVAL_SECONDS', read(env, 'CHANNEL_SCAN_INTERVAL_SECONDS'), 1, 31_536_000),
    retryInitialSeconds,
    retryMaxSeconds,
    importConcurrency: integerSetting('CHANNEL_IMPORT_CONCURRENCY', read(env, 'CHANNEL_IMPORT_CONCURRENCY'), 1, 100),
  };
}

/** A model API of its own (`<PREFIX>_BASE_URL`, `<PREFIX>_API_KEY`), else the shared OPENAI_* one. */
function modelEndpoint(env: Env, prefix: 'TRANSCRIPTION' | 'SPEECH', openaiBaseUrl: string | null) {
  const own = env[`${prefix}_BASE_URL`];
  const baseUrl = own ? urlSetting(`${prefix}_BASE_URL`, own, ['http:', 'https:']) : openaiBaseUrl;
  const model = env[`${prefix}_MODEL`] || null;
  if (model && !baseUrl) throw new ConfigError(`${prefix}_MODEL needs ${prefix}_BASE_URL or OPENAI_BASE_URL (the OpenAI-compatible API that serves it)`);
  return { model, baseUrl, apiKey: env[`${prefix}_API_KEY`] || env.OPENAI_API_KEY || null };
}

/** Segments one transcript may have: its workflow's history grows by about six events a segment. */
const maxTranscriptSegments = 2_000;

function transcriptionSettings(env: Env, openaiBaseUrl: string | null, temporalTaskQueue: string): TranscriptionSettings {
  const int = (name: keyof typeof configDefaults, min: number, max: number) => integerSetting(name, read(env, name), min, max);
  const segments = Math.ceil(int('TRANSCRIPT_MAX_AUDIO_SECONDS', 1, 7 * 86400) / int('TRANSCRIPT_SEGMENT_SECONDS', 5, 3600));
  if (segments > maxTranscriptSegments) {
    throw new ConfigError(`TRANSCRIPT_MAX_AUDIO_SECONDS / TRANSCRIPT_SEGMENT_SECONDS allows ${segments} segments a transcript; at most ${maxTranscriptSegments} keep a transcript's workflow history bounded`);
  }
  return {
    ...modelEndpoint(env, 'TRANSCRIPTION', openaiBaseUrl),
    timeoutSeconds: int('TRANSCRIPTION_TIMEOUT_SECONDS', 1, 86400),
    rateLimitPerMinute: int('TRANSCRIPTION_RATE_LIMIT_PER_MINUTE', 0, 1_000_000),
    concurrencyLimit: int('TRANSCRIPTION_CONCURRENCY_LIMIT', 0, 1_000_000),
    retentionSeconds: int('TRANSCRIPT_RETENTION_SECONDS', 1, 10 * 365 * 86400),
    uploadRetentionSeconds: int('TRANSCRIPT_UPLOAD_RETENTION_SECONDS', 1, 30 * 86400),
    pendingUploadsLimit: int('TRANSCRIPT_PENDING_UPLOADS_PER_PARTNER', 0, 1_000_000),
    segmentSeconds: int('TRANSCRIPT_SEGMENT_SECONDS', 5, 3600),
    segmentConcurrency: int('TRANSCRIPT_SEGMENT_CONCURRENCY', 1, 64),
    maxAudioSeconds: int('TRANSCRIPT_MAX_AUDIO_SECONDS', 1, 7 * 86400),
    audioFetchTimeoutSeconds: int('TRANSCRIPT_AUDIO_FETCH_TIMEOUT_SECONDS', 1, 86400),
    audioFetchMaxBytes: int('TRANSCRIPT_AUDIO_FETCH_MAX_BYTES', 1024, 100 * 1024 * 1024),
    audioTaskQueue: env.TEMPORAL_AUDIO_TASK_QUEUE || `${temporalTaskQueue}-audio`,
    audioWorkerMaxActivities: int('AUDIO_WORKER_MAX_ACTIVITIES', 1, 1000),
    heartbeatTimeoutSeconds: int('TRANSCRIPT_HEARTBEAT_TIMEOUT_SECONDS', 5, 3600),
  };
}

function speechSettings(env: Env, openaiBaseUrl: string | null): SpeechSettings {
  const languageField = env.SPEECH_LANGUAGE_FIELD || null;
  if (languageField && !/^[A-Z_][\w.-]{0,63}$/i.test(languageField)) throw new ConfigError(`SPEECH_LANGUAGE_FIELD must be a JSON field name, got ${JSON.stringify(languageField)}`);
  const remoteVoices = read(env, 'SPEECH_REMOTE_VOICES').split(',').map((v) => v.trim()).filter(Boolean);
  return {
    ...modelEndpoint(env, 'SPEECH', openaiBaseUrl),
    remoteVoices,
    languageField,
    timeoutSeconds: integerSetting('SPEECH_TIMEOUT_SECONDS', read(env, 'SPEECH_TIMEOUT_SECONDS'), 1, 3600),
    maxConcurrent: integerSetting('SPEECH_MAX_CONCURRENT', read(env, 'SPEECH_MAX_CONCURRENT'), 1, 1000),
  };
}

function rewriteSettings(env: Env): RewriteSettings {
  const partTokens = integerSetting('REWRITE_PART_TOKENS', read(env, 'REWRITE_PART_TOKENS'), 100, 1_000_000);
  const overlapTokens = integerSetting('REWRITE_OVERLAP_TOKENS', read(env, 'REWRITE_OVERLAP_TOKENS'), 0, 100_000);
  if (overlapTokens >= partTokens / 2) throw new ConfigError('REWRITE_OVERLAP_TOKENS must be less than half of REWRITE_PART_TOKENS');
  return {
    models: { standard: read(env, 'REWRITE_MODEL_STANDARD'), economy: read(env, 'REWRITE_MODEL_ECONOMY') },
    fallbackModel: env.REWRITE_FALLBACK_MODEL || null,
    maxOutputTokens: integerSetting('REWRITE_MAX_OUTPUT_TOKENS', read(env, 'REWRITE_MAX_OUTPUT_TOKENS'), 16, 1_000_000),
    partTokens,
    overlapTokens,
    timeoutSeconds: integerSetting('REWRITE_TIMEOUT_SECONDS', read(env, 'REWRITE_TIMEOUT_SECONDS'), 1, 86400),
    maxOutageSeconds: integerSetting('REWRITE_MAX_OUTAGE_SECONDS', read(env, 'REWRITE_MAX_OUTAGE_SECONDS'), 1, 7 * 86400),
  };
}

function voiceSettings(env: Env, port: number): VoiceSettings {
  const int = (name: keyof typeof configDefaults, min: number, max: number) => integerSetting(name, read(env, name), min, max);
  if (env.VOICE_JOB_API_KEY && !env.VOICE_JOB_BASE_URL) throw new ConfigError('VOICE_JOB_API_KEY needs VOICE_JOB_BASE_URL (the GPU job service it is the key of)');
  return {
    gpuJobs: env.VOICE_JOB_BASE_URL ? { baseUrl: urlSetting('VOICE_JOB_BASE_URL', env.VOICE_JOB_BASE_URL, ['http:', 'https:']), apiKey: env.VOICE_JOB_API_KEY || null } : null,
    gpuJobPollIntervalMs: int('VOICE_JOB_POLL_INTERVAL_MS', 50, 600_000),
    gpuJobTimeoutSeconds: int('VOICE_JOB_TIMEOUT_SECONDS', 1, 7 * 86400),
    jobFilesBaseUrl: urlSetting('VOICE_JOB_FILES_BASE_URL', env.VOICE_JOB_FILES_BASE_URL || `http://127.0.0.1:${port || 3000}`, ['http:', 'https:']),
    maxUploadBytes: int('VOICE_MAX_UPLOAD_BYTES', 1, 10 * 1024 ** 3),
    maxOriginalSeconds: int('VOICE_MAX_ORIGINAL_SECONDS', 5, 7 * 86400),
    heartbeatTimeoutSeconds: int('VOICE_HEARTBEAT_TIMEOUT_SECONDS', 5, 3600),
    retryWindowSeconds: int('VOICE_RETRY_WINDOW_SECONDS', 1, 365 * 86400),
    rateLimitPerMinute: int('VOICE_RATE_LIMIT_PER_MINUTE', 0, 1_000_000),
  };
}

const responseFormats = ['auto', 'json_schema', 'json_object', 'prompt'] as const;

function dialogAnalysisSettings(env: Env): DialogAnalysisSettings {
  const model = read(env, 'DIALOG_ANALYSIS_MODEL');
  if (model.length > 200 || hasControlCharacters(model)) throw new ConfigError(`DIALOG_ANALYSIS_MODEL must be a model name of at most 200 characters, got ${JSON.stringify(model.slice(0, 40))}`);
  const responseFormat = read(env, 'DIALOG_ANALYSIS_RESPONSE_FORMAT');
  if (!(responseFormats as readonly string[]).includes(responseFormat)) {
    throw new ConfigError(`DIALOG_ANALYSIS_RESPONSE_FORMAT must be one of ${responseFormats.join(', ')}, got ${JSON.stringify(responseFormat)}`);
  }
  return {
    model,
    responseFormat: responseFormat as DialogAnalysisSettings['responseFormat'],
    maxAttempts: integerSetting('DIALOG_ANALYSIS_MAX_ATTEMPTS', read(env, 'DIALOG_ANALYSIS_MAX_ATTEMPTS'), 1, 10),
    maxOutputTokens: integerSetting('DIALOG_ANALYSIS_MAX_OUTPUT_TOKENS', read(env, 'DIALOG_ANALYSIS_MAX_OUTPUT_TOKENS'), 16, 1_000_000),
    timeoutSeconds: integerSetting('DIALOG_ANALYSIS_TIMEOUT_SECONDS', read(env, 'DIALOG_ANALYSIS_TIMEOUT_SECONDS'), 1, 600),
    maxOutageSeconds: integerSetting('DIALOG_ANALYSIS_MAX_OUTAGE_SECONDS', read(env, 'DIALOG_ANALYSIS_MAX_OUTAGE_SECONDS'), 1, 21_600),
    retentionSeconds: integerSetting('DIALOG_ANALYSIS_RETENTION_SECONDS', read(env, 'DIALOG_ANALYSIS_RETENTION_SECONDS'), 1, 30 * 86400),
    rateLimitPerMinute: integerSetting('DIALOG_ANALYSIS_RATE_LIMIT_PER_MINUTE', read(env, 'DIALOG_ANALYSIS_RATE_LIMIT_PER_MINUTE'), 0, 1_000_000),
    validationTimeoutMs: integerSetting('DIALOG_ANALYSIS_VALIDATION_TIMEOUT_MS', read(env, 'DIALOG_ANALYSIS_VALIDATION_TIMEOUT_MS'), 100, 60_000),
  };
}

export function loadConfig(env: Env = process.env): Config {
  const adminApiKey = env.ADMIN_API_KEY ?? '';
  if (adminApiKey.length === 0) throw new ConfigError('ADMIN_API_KEY is required (the administrator key for /api)');
  if (adminApiKey.length < 16) throw new ConfigError('ADMIN_API_KEY must be at least 16 characters');

  const { address: temporalAddress } = temporalConnection(env);
  const openaiBaseUrl = env.OPENAI_BASE_URL ? urlSetting('OPENAI_BASE_URL', env.OPENAI_BASE_URL, ['http:', 'https:']) : null;
  const logLevel = read(env, 'LOG_LEVEL');
  if (!['debug', 'info', 'warn', 'error'].includes(logLevel)) {
    throw new ConfigError(`LOG_LEVEL must be one of debug, info, warn, error, got ${JSON.stringify(logLevel)}`);
  }

  return {
    databaseUrl: urlSetting('DATABASE_URL', read(env, 'DATABASE_URL'), ['postgresql:', 'postgres:']),
    temporalAddress,
    temporalNamespace: read(env, 'TEMPORAL_NAMESPACE'),
    temporalTaskQueue: read(env, 'TEMPORAL_TASK_QUEUE'),
    weaviateUrl: urlSetting('WEAVIATE_URL', read(env, 'WEAVIATE_URL'), ['http:', 'https:']),
    weaviateTimeoutMs: integerSetting('WEAVIATE_TIMEOUT_SECONDS', read(env, 'WEAVIATE_TIMEOUT_SECONDS'), 1, 3600) * 1000,
    weaviateReplication: {
      factor: integerSetting('WEAVIATE_REPLICATION_FACTOR', read(env, 'WEAVIATE_REPLICATION_FACTOR'), 1, 100),
      write: consistencySetting('WEAVIATE_WRITE_CONSISTENCY', read(env, 'WEAVIATE_WRITE_CONSISTENCY')),
      read: consistencySetting('WEAVIATE_READ_CONSISTENCY', read(env, 'WEAVIATE_READ_CONSISTENCY')),
    },
    port: integerSetting('PORT', read(env, 'PORT'), 0, 65535),
    trustProxy: trustProxySetting(read(env, 'TRUST_PROXY')),
    adminApiKey,
    openaiBaseUrl,
    openaiApiKey: env.OPENAI_API_KEY || null,
    storageDir: path.resolve(read(env, 'STORAGE_DIR')),
    objectStore: objectStoreSettings(env),
    maxUploadBytes: integerSetting('MAX_UPLOAD_BYTES', read(env, 'MAX_UPLOAD_BYTES'), 1, 10 * 1024 ** 3),
    partnerKeyCacheSeconds: integerSetting('PARTNER_KEY_CACHE_SECONDS', read(env, 'PARTNER_KEY_CACHE_SECONDS'), 0, 3600),
    logLevel: logLevel as Config['logLevel'],
    workflowBundlePath: env.WORKFLOW_BUNDLE_PATH ? path.resolve(env.WORKFLOW_BUNDLE_PATH) : null,
    workerMaxActivities: integerSetting('WORKER_MAX_ACTIVITIES', read(env, 'WORKER_MAX_ACTIVITIES'), 1, 1000),
    budgetSweepIntervalSeconds: integerSetting('BUDGET_SWEEP_INTERVAL_SECONDS', read(env, 'BUDGET_SWEEP_INTERVAL_SECONDS'), 1, 86400),
    transcription: transcriptionSettings(env, openaiBaseUrl, read(env, 'TEMPORAL_TASK_QUEUE')),
    speech: speechSettings(env, openaiBaseUrl),
    embedding: embeddingSettings(env, openaiBaseUrl),
    retrieval: retrievalSettings(env),
    vendorSync: vendorSyncSettings(env, openaiBaseUrl),
    urlFetchAllowPrivate: booleanSetting('URL_FETCH_ALLOW_PRIVATE', env.URL_FETCH_ALLOW_PRIVATE),
    urlFetchAllowLoopback: booleanSetting('URL_FETCH_ALLOW_LOOPBACK', env.URL_FETCH_ALLOW_LOOPBACK),
    budgetSweepGraceSeconds: integerSetting('BUDGET_SWEEP_GRACE_SECONDS', read(env, 'BUDGET_SWEEP_GRACE_SECONDS'), 0, 7 * 86400),
    budgetRecheckIntervalMs: integerSetting('BUDGET_RECHECK_INTERVAL_MS', read(env, 'BUDGET_RECHECK_INTERVAL_MS'), 10, 86_400_000),
    reconcileIntervalSeconds: integerSetting('RECONCILE_INTERVAL_SECONDS', read(env, 'RECONCILE_INTERVAL_SECONDS'), 0, 86400),
    reconcileGraceSeconds: integerSetting('RECONCILE_GRACE_SECONDS', read(env, 'RECONCILE_GRACE_SECONDS'), 0, 86400),
    messaging: {
      defaultOutputTokenBound: integerSetting('MESSAGING_DEFAULT_OUTPUT_TOKENS', read(env, 'MESSAGING_DEFAULT_OUTPUT_TOKENS'), 1, 10_000_000),
      sseKeepAliveMs: integerSetting('MESSAGING_SSE_KEEPALIVE_MS', read(env, 'MESSAGING_SSE_KEEPALIVE_MS'), 10, 3_600_000),
      upstreamTimeoutSeconds: integerSetting('MESSAGING_UPSTREAM_TIMEOUT_SECONDS', read(env, 'MESSAGING_UPSTREAM_TIMEOUT_SECONDS'), 1, 86400),
      legacyModel: read(env, 'LEGACY_COMPLETION_MODEL'),
      legacyRetentionSeconds: integerSetting('LEGACY_COMPLETION_RETENTION_SECONDS', read(env, 'LEGACY_COMPLETION_RETENTION_SECONDS'), 1, 30 * 86400),
      keyCacheSeconds: integerSetting('MESSAGING_KEY_CACHE_SECONDS', read(env, 'MESSAGING_KEY_CACHE_SECONDS'), 0, 3600),
      upstreamMaxSockets: integerSetting('MESSAGING_UPSTREAM_MAX_SOCKETS', read(env, 'MESSAGING_UPSTREAM_MAX_SOCKETS'), 1, 100_000),
      serverTiming: booleanSetting('MESSAGING_SERVER_TIMING', read(env, 'MESSAGING_SERVER_TIMING')),
      callDuringAdmissionSeconds: integerSetting('MESSAGING_CALL_DURING_ADMISSION_SECONDS', read(env, 'MESSAGING_CALL_DURING_ADMISSION_SECONDS'), 0, 3600),
    },
    rewrite: rewriteSettings(env),
    scraper: scraperSettings(env),
    videoPlatformBaseUrl: urlSetting('VIDEO_PLATFORM_BASE_URL', read(env, 'VIDEO_PLATFORM_BASE_URL'), ['http:', 'https:']),
    videoDataApi: videoDataApiSettings(env),
    channels: channelSettings(env),
    modelPrices: modelPricesSetting(env.MODEL_PRICES),
    digitization: {
      pdfOcrMaxPages: integerSetting('PDF_OCR_MAX_PAGES', read(env, 'PDF_OCR_MAX_PAGES'), 0, 100_000),
      pdfOcrConcurrency: integerSetting('PDF_OCR_CONCURRENCY', read(env, 'PDF_OCR_CONCURRENCY'), 1, 64),
      pdfOcrDpi: integerSetting('PDF_OCR_DPI', read(env, 'PDF_OCR_DPI'), 72, 1200),
      libreOfficeTimeoutSeconds: integerSetting('LIBREOFFICE_TIMEOUT_SECONDS', read(env, 'LIBREOFFICE_TIMEOUT_SECONDS'), 5, 3600),
      maxOutageSeconds: integerSetting('DIGITIZATION_MAX_OUTAGE_SECONDS', read(env, 'DIGITIZATION_MAX_OUTAGE_SECONDS'), 1, 86_400),
    },
    dialogAnalysis: dialogAnalysisSettings(env),
    voices: voiceSettings(env, integerSetting('PORT', read(env, 'PORT'), 0, 65535)),
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
  const url = env.STORAGE_URL ?? '';
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
  const endpoint = env.S3_ENDPOINT ? urlSetting('S3_ENDPOINT', env.S3_ENDPOINT, ['http:', 'https:']) : null;
  const region = read(env, 'S3_REGION');
  if (!/^[a-z0-9][\w.-]{0,62}$/i.test(region)) throw new ConfigError(`S3_REGION must be a region name (e.g. us-east-1), got ${JSON.stringify(region)}`);
  const { AWS_ACCESS_KEY_ID: accessKeyId, AWS_SECRET_ACCESS_KEY: secretAccessKey, AWS_SESSION_TOKEN: sessionToken } = env;
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
    forcePathStyle: env.S3_FORCE_PATH_STYLE ? booleanSetting('S3_FORCE_PATH_STYLE', env.S3_FORCE_PATH_STYLE) : endpoint !== null,
    credentials: accessKeyId && secretAccessKey ? { accessKeyId, secretAccessKey, ...(sessionToken ? { sessionToken } : {}) } : null,
  };
}

/** Where Temporal is: also what `npm run temporal` hands the Temporal CLI (scripts/temporal.ts). */
export function temporalConnection(env: Env = process.env): { address: string; namespace: string } {
  const address = read(env, 'TEMPORAL_ADDRESS');
  if (!/^[\w.:[\]-]+:\d+$/.test(address)) {
    throw new ConfigError(`TEMPORAL_ADDRESS must be host:port, got ${JSON.stringify(address)}`);
  }
  return { address, namespace: read(env, 'TEMPORAL_NAMESPACE') };
}

function abuseLimits(env: Env): AbuseLimits {
  const int = (name: keyof typeof configDefaults, min: number, max: number) => integerSetting(name, read(env, name), min, max);
  const perMinute = (name: keyof typeof configDefaults) => int(name, 0, 1_000_000);
  const mib = 1024 * 1024;
  return {
    requestsPerMinute: {
      'knowledge-base': perMinute('REQUESTS_PER_MINUTE_KNOWLEDGE_BASE'),
      messaging: perMinute('REQUESTS_PER_MINUTE_MESSAGING'),
      transcription: perMinute('REQUESTS_PER_MINUTE_TRANSCRIPTION'),
      speech: perMinute('REQUESTS_PER_MINUTE_SPEECH'),
      'dialog-analysis': perMinute('REQUESTS_PER_MINUTE_DIALOG_ANALYSIS'),
      voices: perMinute('REQUESTS_PER_MINUTE_VOICES'),
    },
    anonymousRequestsPerMinute: perMinute('REQUESTS_PER_MINUTE_ANONYMOUS'),
    tarpitMs: int('RATE_LIMIT_TARPIT_MS', 0, 60_000),
    inFlightPerKey: int('REQUESTS_IN_FLIGHT_PER_KEY', 0, 100_000),
    burstPerKey: int('REQUESTS_BURST_PER_KEY', 0, 100_000),
    jsonBodyMaxBytes: int('JSON_BODY_MAX_BYTES', 1024, 1024 * mib),
    formTextFieldMaxBytes: int('FORM_TEXT_FIELD_MAX_BYTES', 1024, 1024 * mib),
    // Never more than the batch limit of lib/knowledge/documents.ts, which checks the sum again.
    batchUploadMaxBytes: int('BATCH_UPLOAD_MAX_BYTES', 1024, 1024 * mib),
    tools: { maxMemoryBytes: int('TOOL_MAX_MEMORY_MB', 64, 1024 * 1024) * mib, maxFileBytes: int('TOOL_MAX_FILE_MB', 1, 1024 * 1024) * mib },
    extraction: {
      zipMaxEntries: int('EXTRACT_ZIP_MAX_ENTRIES', 1, 1_000_000),
      zipMaxInflatedBytes: int('EXTRACT_ZIP_MAX_INFLATED_MB', 1, 64 * 1024) * mib,
      maxHeapMb: int('EXTRACT_MAX_HEAP_MB', 64, 64 * 1024),
      maxThreads: int('EXTRACT_MAX_THREADS', 1, 1024),
      timeoutMs: int('EXTRACT_TIMEOUT_SECONDS', 1, 86400) * 1000,
      toolTimeoutMs: int('EXTRACT_TOOL_TIMEOUT_SECONDS', 1, 86400) * 1000,
      maxMediaSeconds: int('DOCUMENT_MAX_MEDIA_SECONDS', 1, 7 * 86400),
    },
  };
}

function metricsSettings(env: Env, adminApiKey: string): MetricsSettings {
  const apiKey = env.METRICS_API_KEY || null;
  if (apiKey !== null && (apiKey.length < 16 || /\s/.test(apiKey))) throw new ConfigError('METRICS_API_KEY must be at least 16 characters, without spaces');
  if (apiKey === adminApiKey) throw new ConfigError('METRICS_API_KEY must differ from ADMIN_API_KEY (it is the key that can read /metrics and nothing else)');
  return {
    apiKey,
    cacheSeconds: integerSetting('METRICS_CACHE_SECONDS', read(env, 'METRICS_CACHE_SECONDS'), 0, 3600),
    closedWindowSeconds: integerSetting('METRICS_CLOSED_WINDOW_SECONDS', read(env, 'METRICS_CLOSED_WINDOW_SECONDS'), 1, 7 * 86400),
  };
}

function retrievalSettings(env: Env): RetrievalConfig {
  const fusion = env.RETRIEVAL_FUSION || 'score';
  if (fusion !== 'score' && fusion !== 'rrf') throw new ConfigError(`RETRIEVAL_FUSION must be score or rrf, got ${JSON.stringify(fusion)}`);
  const weight = (name: string) => {
    const value = env[name];
    if (!value) return null;
    if (!/^\d+(?:\.\d+)?$/.test(value) || Number(value) > 1000) throw new ConfigError(`${name} must be a non-negative number (at most 1000), got ${JSON.stringify(value)}`);
    return Number(value);
  };
  let reranker: RerankerSettings | null = null;
  if (env.RERANK_BASE_URL) {
    if (!env.RERANK_MODEL) throw new ConfigError('RERANK_BASE_URL needs RERANK_MODEL (the re-ranking model the server serves)');
    const price = env.RERANK_PRICE_USD_PER_MILLION_TOKENS;
    if (price && !/^\d+(?:\.\d+)?$/.test(price)) throw new ConfigError(`RERANK_PRICE_USD_PER_MILLION_TOKENS must be a non-negative number, got ${JSON.stringify(price)}`);
    reranker = {
      baseUrl: urlSetting('RERANK_BASE_URL', env.RERANK_BASE_URL, ['http:', 'https:']),
      apiKey: env.RERANK_API_KEY || null,
      model: env.RERANK_MODEL,
      candidates: integerSetting('RERANK_CANDIDATES', env.RERANK_CANDIDATES || '30', 1, 200),
      timeoutMs: 1000 * integerSetting('RERANK_TIMEOUT_SECONDS', env.RERANK_TIMEOUT_SECONDS || '10', 1, 600),
      priceUsdPerMillionTokens: price ? Number(price) : null,
    };
  } else if (env.RERANK_MODEL || env.RERANK_API_KEY) {
    throw new ConfigError('RERANK_MODEL and RERANK_API_KEY need RERANK_BASE_URL (the server speaking the /rerank protocol)');
  }
  const rescoring = env.RETRIEVAL_RESCORING || 'on';
  if (rescoring !== 'on' && rescoring !== 'off') throw new ConfigError(`RETRIEVAL_RESCORING must be on or off, got ${JSON.stringify(rescoring)}`);
  return {
    fusion,
    weights: { dense: weight('RETRIEVAL_WEIGHT_DENSE'), sparse: weight('RETRIEVAL_WEIGHT_SPARSE'), bm25: weight('RETRIEVAL_WEIGHT_BM25') },
    rescoring: rescoring === 'on',
    reranker,
  };
}

function vendorSyncSettings(env: Env, openaiBaseUrl: string | null): Config['vendorSync'] {
  const maxOutageSeconds = integerSetting('VENDOR_SYNC_MAX_OUTAGE_SECONDS', read(env, 'VENDOR_SYNC_MAX_OUTAGE_SECONDS'), 1, 86_400);
  if (env.VENDOR_SYNC_BASE_URL) return { baseUrl: urlSetting('VENDOR_SYNC_BASE_URL', env.VENDOR_SYNC_BASE_URL, ['http:', 'https:']), apiKey: env.VENDOR_SYNC_API_KEY || env.OPENAI_API_KEY || null, maxOutageSeconds };
  return openaiBaseUrl ? { baseUrl: openaiBaseUrl, apiKey: env.OPENAI_API_KEY || null, maxOutageSeconds } : null;
}

/** Entry points call this: a bad setting ends the process with one readable line. */
function embeddingSettings(env: Env, openaiBaseUrl: string | null): EmbeddingSettings {
  const model = env.EMBEDDING_MODEL || null;
  if (model && !openaiBaseUrl) throw new ConfigError('EMBEDDING_MODEL needs OPENAI_BASE_URL (the OpenAI-compatible API that serves it)');
  const price = env.EMBEDDING_PRICE_USD_PER_MILLION_TOKENS;
  if (price && !/^\d+(?:\.\d+)?$/.test(price)) throw new ConfigError(`EMBEDDING_PRICE_USD_PER_MILLION_TOKENS must be a non-negative number, got ${JSON.stringify(price)}`);
  return {
    model,
    dimensions: env.EMBEDDING_DIMENSIONS ? integerSetting('EMBEDDING_DIMENSIONS', env.EMBEDDING_DIMENSIONS, 1, 16384) : null,
    priceUsdPerMillionTokens: price ? Number(price) : null,
    localThreads: integerSetting('EMBEDDING_LOCAL_THREADS', env.EMBEDDING_LOCAL_THREADS || String(os.availableParallelism()), 0, 64),
    batchChunks: integerSetting('EMBEDDING_BATCH_CHUNKS', env.EMBEDDING_BATCH_CHUNKS || '64', 1, 1024),
    maxOutageSeconds: integerSetting('EMBEDDING_MAX_OUTAGE_SECONDS', env.EMBEDDING_MAX_OUTAGE_SECONDS || '86400', 1, 7 * 86400),
  };
}

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
