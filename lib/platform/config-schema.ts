import os from 'node:os';
import path from 'node:path';

/**
 * Every environment variable any of our processes reads, declared once: its type, default,
 * allowed values, meaning and readers. lib/platform/config.ts parses and validates the service's
 * settings from it, scripts/config-docs.ts writes docs/configuration.md from it, and
 * test/unit/config-schema.test.ts fails when code reads a variable declared nowhere here.
 */

/**
 * The processes that use a variable: the API, the worker, the operator scripts, the benchmarks,
 * the tests. The API and the worker validate every service setting at start-up all the same.
 */
export type Reader = 'api' | 'worker' | 'scripts' | 'bench' | 'test';

export type SettingType = 'integer' | 'number' | 'boolean' | 'string' | 'url' | 'enum' | 'list' | 'json';

export interface SettingSpec {
  type: SettingType;
  readBy: readonly Reader[];
  description: string;
  /** The value an unset or empty variable takes; neither this nor defaultFrom: unset (null). */
  default?: string;
  /** A default computed at start-up (from the machine or another setting's value). */
  defaultFrom?: (setting: (name: string) => unknown) => string;
  /** How the documentation shows a default that is not a fixed value (or a fixed one, explained). */
  defaultText?: string;
  required?: boolean;
  /** integer: inclusive bounds; number: upper bound (never negative). */
  min?: number;
  max?: number;
  /** enum: the values allowed; upperCase: compared after upper-casing what is given. */
  values?: readonly string[];
  upperCase?: boolean;
  /** url: the schemes allowed. */
  protocols?: readonly string[];
  /** string: a value must match, else "<NAME> must be <mustBe>, got ...". */
  pattern?: RegExp;
  mustBe?: string;
  /** What the documentation says a value may be, where the fields above do not say it all. */
  allowed?: string;
}

const web = ['http:', 'https:'] as const;
const postgres = ['postgresql:', 'postgres:'] as const;
const mib = 1024 * 1024;
const cores = { defaultFrom: () => String(os.availableParallelism()), defaultText: 'the number of cores' } as const;

/** The main table of docs/configuration.md. */
const general = {
  DATABASE_URL: { type: 'url', protocols: postgres, default: 'postgresql://postgres@127.0.0.1:5432/dwb_dev', readBy: ['api', 'worker'], description: 'Postgres (system of record)' },
  TEMPORAL_ADDRESS: {
    type: 'string', pattern: /^[\w.:[\]-]+:\d+$/, mustBe: 'host:port', default: '127.0.0.1:7233', readBy: ['api', 'worker'],
    description: 'Temporal frontend. When set, `scripts/start` does not start its own server',
  },
  TEMPORAL_NAMESPACE: { type: 'string', default: 'default', readBy: ['api', 'worker'], description: 'Temporal namespace of every workflow' },
  TEMPORAL_TASK_QUEUE: { type: 'string', default: 'knowledge', readBy: ['api', 'worker'], description: 'Task queue of the worker(s)' },
  WEAVIATE_URL: { type: 'url', protocols: web, default: 'http://127.0.0.1:8080', readBy: ['api', 'worker'], description: 'Weaviate. When set, `scripts/start` does not start its own Weaviate' },
  WEAVIATE_TIMEOUT_SECONDS: {
    type: 'integer', min: 1, max: 3600, default: '30', readBy: ['api', 'worker'],
    description: "A Weaviate request unanswered this long counts as Weaviate unavailable: a search answers 503 with `Retry-After`, a document's embedding waits it out like a refused connection (`EMBEDDING_MAX_OUTAGE_SECONDS`). Without it a hung (not down) Weaviate would hold each request for the HTTP client's own 5 minutes",
  },
  WEAVIATE_REPLICATION_FACTOR: {
    type: 'integer', min: 1, max: 100, default: '1', readBy: ['worker'],
    description: "Copies of each chunk class over a Weaviate cluster, set when the class is made (a class keeps its factor; changing it later needs Weaviate's replica movement). The cluster profile and the compose file use `3`",
  },
  WEAVIATE_WRITE_CONSISTENCY: {
    type: 'enum', values: ['ONE', 'QUORUM', 'ALL'], upperCase: true, default: 'QUORUM', readBy: ['api', 'worker'],
    description: 'How many replicas must answer a batch write or delete. QUORUM here and in `WEAVIATE_READ_CONSISTENCY` at a factor of 3 reads every acknowledged write (2 + 2 > 3) and keeps working with one node down (see [Production-like deployment and scaling](deployment.md#production-like-deployment-and-scaling))',
  },
  WEAVIATE_READ_CONSISTENCY: {
    type: 'enum', values: ['ONE', 'QUORUM', 'ALL'], upperCase: true, default: 'QUORUM', readBy: ['api', 'worker'],
    description: 'How many replicas must answer a search or chunk count (see `WEAVIATE_WRITE_CONSISTENCY`)',
  },
  PORT: { type: 'integer', min: 0, max: 65535, default: '3000', readBy: ['api'], description: 'API port' },
  HTTP_KEEP_ALIVE_SECONDS: {
    type: 'integer', min: 1, max: 3600, default: '65', readBy: ['api'],
    description: "How long the API keeps an idle client connection open for its next request (announced in each answer's `Keep-Alive: timeout=`). Longer than the idle timeout of the load balancers in front of it (60 s on the common ones), so that they close an idle connection first: a request sent on a connection the API closes at that moment fails. Node's own default, 5 s, made clients with keep-alive pools reconnect after every pause",
  },
  TRUST_PROXY: {
    type: 'string', default: 'false', readBy: ['api'],
    allowed: '`false`, `true`, a number of hops (0-100), or a comma-separated list of addresses/subnets (`loopback`, `linklocal`, `uniquelocal` too)',
    description: "Proxies in front of the API whose `X-Forwarded-For`/`-Proto`/`-Host` are believed: `false`, `true` (any: only when nothing reaches the API except through them), a number of hops, or a comma-separated list of addresses/subnets, as Express's `trust proxy`. Gives the anonymous rate limit the client's address and the voice links (`embedding_zip_url`, test samples) the client's scheme and host",
  },
  ADMIN_API_KEY: {
    type: 'string', required: true, allowed: 'at least 16 characters', readBy: ['api', 'worker'],
    description: 'Administrator key. `scripts/start` generates one into `.data/admin-api-key` if unset',
  },
  OPENAI_BASE_URL: {
    type: 'url', protocols: web, readBy: ['api', 'worker'],
    description: 'OpenAI-compatible model API (rewriting, transcription, messaging). Without it, a rewrite fails with a `processing_error` that says so and waits for `retry`',
  },
  OPENAI_API_KEY: { type: 'string', readBy: ['api', 'worker'], description: 'Key of `OPENAI_BASE_URL`' },
  REWRITE_MODEL_STANDARD: { type: 'string', default: 'gpt-4.1', readBy: ['worker'], description: 'Rewrite model of `model_tier` `standard`' },
  REWRITE_MODEL_ECONOMY: { type: 'string', default: 'gpt-4.1-mini', readBy: ['worker'], description: 'Rewrite model of `model_tier` `economy`' },
  REWRITE_FALLBACK_MODEL: { type: 'string', readBy: ['worker'], description: "Tried when the tier's model fails for good or its output is rejected" },
  REWRITE_MAX_OUTPUT_TOKENS: { type: 'integer', min: 16, max: 1_000_000, default: '16384', readBy: ['worker'], description: '`max_completion_tokens` of every rewrite call (and part of its budget bound)' },
  REWRITE_PART_TOKENS: { type: 'integer', min: 100, max: 1_000_000, default: '6000', readBy: ['worker'], description: 'Longer digitized texts are rewritten in parts of this many source tokens' },
  REWRITE_OVERLAP_TOKENS: {
    type: 'integer', min: 0, max: 100_000, default: '200', readBy: ['worker'], allowed: 'less than half of `REWRITE_PART_TOKENS`',
    description: 'Each part after the first gets this many tokens of its predecessor as context',
  },
  REWRITE_TIMEOUT_SECONDS: { type: 'integer', min: 1, max: 86400, default: '600', readBy: ['worker'], description: 'A rewrite call unanswered after this is abandoned; its usage becomes uncertain' },
  REWRITE_MAX_OUTAGE_SECONDS: {
    type: 'integer', min: 1, max: 7 * 86400, default: '86400', readBy: ['worker'],
    description: 'How long every model of a part may be unavailable (5xx, refused connections) before the rewrite step fails; tried again 2 s ... 5 min apart meanwhile',
  },
  MODEL_PRICES: {
    type: 'json', readBy: ['api', 'worker'], defaultText: 'built-in list prices of common OpenAI models', allowed: 'JSON `{"<model>": {"input": <USD per 1M tokens>, "output": <USD per 1M>}}`',
    description: 'Model prices, added to / overriding the built-in table; a model in neither is unpriced',
  },
  VIDEO_PLATFORM_BASE_URL: {
    type: 'url', protocols: web, default: 'https://www.youtube.com', readBy: ['worker'],
    description: 'Where transcripts of video URL documents are read (timedtext + oEmbed endpoints), and the channel pages that name `/c/` channels',
  },
  VIDEO_DATA_API_BASE_URL: {
    type: 'url', protocols: web, default: 'https://www.googleapis.com/youtube/v3', readBy: ['api', 'worker'],
    description: 'The YouTube Data API v3 (or a server speaking its protocol) that channel sources scan',
  },
  VIDEO_DATA_API_KEY: { type: 'string', readBy: ['worker'], description: 'Its API key, sent as `key=`; unset sends none (Google then refuses and sources show `error`)' },
  VIDEO_DATA_API_TIMEOUT_SECONDS: { type: 'integer', min: 1, max: 600, default: '30', readBy: ['worker'], description: 'A Data API request unanswered after this fails (retried with backoff)' },
  VIDEO_DATA_API_UNIT_PRICE_USD: {
    type: 'string', pattern: /^\d{1,12}(?:\.\d{1,8})?$/, mustBe: 'a non-negative decimal with at most 8 decimal places', readBy: ['api', 'worker'],
    description: "Dollars per quota unit: discovery's admission bound and charge. Unset: discovery is unpriced (its units are still counted)",
  },
  CHANNEL_SCAN_INTERVAL_SECONDS: { type: 'integer', min: 1, max: 31_536_000, default: '86400', readBy: ['worker'], description: 'Time between the starts of two complete scans of a channel' },
  CHANNEL_RETRY_INITIAL_SECONDS: { type: 'integer', min: 1, max: 86400, default: '60', readBy: ['worker'], description: 'First backoff after a quota, 5xx or timeout failure of the Data API; it doubles up to `CHANNEL_RETRY_MAX_SECONDS`' },
  CHANNEL_RETRY_MAX_SECONDS: {
    type: 'integer', min: 1, max: 7 * 86400, default: '3600', readBy: ['worker'], allowed: 'not less than `CHANNEL_RETRY_INITIAL_SECONDS`',
    description: 'Longest backoff after a quota, 5xx or timeout failure of the Data API',
  },
  CHANNEL_IMPORT_CONCURRENCY: { type: 'integer', min: 1, max: 100, default: '4', readBy: ['worker'], description: 'Documents of one channel source digitizing at once' },
  SCRAPER_BASE_URL: {
    type: 'url', protocols: web, readBy: ['api', 'worker'],
    description: 'A scraping provider speaking the Firecrawl v1 `/v1/scrape` protocol. Set: every (non-video) URL document is scraped through it instead of fetched directly',
  },
  SCRAPER_API_KEY: { type: 'string', readBy: ['worker'], description: 'Key of `SCRAPER_BASE_URL`' },
  SCRAPER_NAME: { type: 'string', default: 'firecrawl', readBy: ['api', 'worker'], description: 'Recorded as `digitization_provider`' },
  SCRAPER_COST_PER_CREDIT_USD: { type: 'number', default: '0.001', readBy: ['api', 'worker'], description: 'Cost = reported credits × this price' },
  SCRAPER_CREDITS_PER_PAGE: {
    type: 'integer', min: 1, max: 1_000_000, default: '5', readBy: ['api', 'worker'],
    description: 'Credits one page may cost: the admission bound, and the charge when the provider reports none',
  },
  SCRAPER_TIMEOUT_SECONDS: { type: 'integer', min: 1, max: 3600, default: '120', readBy: ['worker'], description: 'A scrape unanswered after this is ambiguous (its cost becomes uncertain)' },
  STORAGE_DIR: {
    type: 'string', default: '.data/storage', readBy: ['api', 'worker'],
    description: 'Originals, content versions, samples and audio when `STORAGE_URL` is unset (the local storage). Uploads wait in its `uploads/` while their request runs; files there that a killed API process left (untouched for an hour) are removed by every API process at start and every 10 minutes. With `STORAGE_URL` it is only that local scratch: no stored file is kept there',
  },
  STORAGE_URL: {
    type: 'string', readBy: ['api', 'worker'], allowed: '`s3://<bucket>` or `s3://<bucket>/<prefix>`',
    description: 'Every stored file in an S3-compatible object store, under that prefix (see [File storage in an object store](deployment.md#file-storage-in-an-object-store)). Unset: the local `STORAGE_DIR` (what `scripts/start` uses). Anything else is a configuration error',
  },
  S3_ENDPOINT: {
    type: 'url', protocols: web, readBy: ['api', 'worker'], defaultText: "unset: AWS's endpoint of `S3_REGION`",
    description: "The object store's URL, e.g. `http://127.0.0.1:7070` (Versity's gateway, SeaweedFS, Ceph RGW, Cloudflare R2, ...). An `S3_*` setting without `STORAGE_URL` is a configuration error (the files would silently stay local)",
  },
  S3_REGION: { type: 'string', pattern: /^[a-z0-9][\w.-]{0,62}$/i, mustBe: 'a region name (e.g. us-east-1)', default: 'us-east-1', readBy: ['api', 'worker'], description: 'Region the requests are signed for' },
  S3_FORCE_PATH_STYLE: {
    type: 'boolean', readBy: ['api', 'worker'], defaultText: '`true` with `S3_ENDPOINT`, else `false`',
    description: "`true`: the bucket in the path (`http://host/bucket/key`), what a server of one's own usually needs; `false`: in the host name (`bucket.host`), AWS's preference",
  },
  AWS_ACCESS_KEY_ID: {
    type: 'string', readBy: ['api', 'worker'],
    description: "The object store's credentials, with `AWS_SECRET_ACCESS_KEY` (both or neither). Neither: the AWS SDK's default chain (profile, web identity, instance or task role)",
  },
  AWS_SECRET_ACCESS_KEY: { type: 'string', readBy: ['api', 'worker'], description: 'The secret of `AWS_ACCESS_KEY_ID` (never logged)' },
  AWS_SESSION_TOKEN: { type: 'string', readBy: ['api', 'worker'], description: 'A session token of temporary credentials, only with both of the above (never logged)' },
  TMPDIR: {
    type: 'string', default: '/tmp', readBy: ['api', 'worker'],
    description: "Where working files go (a decoded recording, a converted document, OCR pages; ~460 MB for a 4-hour recording): each process's under `$TMPDIR/kb-scratch/<pid>-<random>/`, removed when its work ends. What a process killed outright (SIGKILL, out of memory) left there is removed by the next API or worker process to start on the machine (any folder whose process no longer runs). Read by Node's `os.tmpdir()`",
  },
  PDF_OCR_MAX_PAGES: {
    type: 'integer', min: 0, max: 100_000, default: '100', readBy: ['worker'],
    description: 'Most pages without a text layer one PDF may have OCR\'d; more fail the document with a readable `processing_error`',
  },
  PDF_OCR_CONCURRENCY: { type: 'integer', min: 1, max: 64, default: '2', readBy: ['worker'], description: "Scanned PDF pages rendered and OCR'd at once per document" },
  PDF_OCR_DPI: { type: 'integer', min: 72, max: 1200, default: '300', readBy: ['worker'], description: "Resolution scanned PDF pages are rendered at for OCR" },
  LIBREOFFICE_TIMEOUT_SECONDS: { type: 'integer', min: 5, max: 3600, default: '120', readBy: ['worker'], description: 'Time one LibreOffice conversion of a `.doc`/`.xls`/`.ppt` may take' },
  DIGITIZATION_MAX_OUTAGE_SECONDS: {
    type: 'integer', min: 1, max: 86_400, default: '3600', readBy: ['worker'],
    description: "How long a document's digitization waits out an unavailable scraping provider, video platform or transcription API (refused connections, 408, 429, 5xx) before the step fails; tried again 2 s ... 5 min apart meanwhile. Shorter than the embedding and rewrite windows: a service that fails one page or video every time must not hold that document for a day",
  },
  MAX_UPLOAD_BYTES: { type: 'integer', min: 1, max: 10 * 1024 ** 3, default: String(100 * mib), defaultText: '`104857600` (100 MiB)', readBy: ['api'], description: 'Largest accepted upload file' },
  PARTNER_KEY_CACHE_SECONDS: {
    type: 'integer', min: 0, max: 3600, default: '5', readBy: ['api'],
    description: "How long an API process serves a partner key it has looked up (0: every request looks it up): bounds how late a key regenerated, or a partner renamed or deleted, through another API replica is noticed by this one (through this one: at once). Creations check the partner's row themselves, so nothing is added to a partner being deleted whatever this is",
  },
  LOG_LEVEL: { type: 'enum', values: ['debug', 'info', 'warn', 'error'], default: 'info', readBy: ['api', 'worker'], description: 'Least level logged; logs are JSON lines with `request_id`' },
  WORKER_MAX_ACTIVITIES: {
    type: 'integer', min: 1, max: 1000, default: '32', readBy: ['worker'],
    description: "Concurrent activities per worker process (most of them wait on the encoder's batcher, Weaviate or a provider, not on the CPU; see [Ingestion throughput](architecture.md#ingestion-throughput))",
  },
  EMBEDDING_LOCAL_THREADS: { type: 'integer', min: 0, max: 64, ...cores, readBy: ['api', 'worker'], description: 'Worker threads of the local sentence encoder (one model each, ~180 MB); `0` runs it on the event loop' },
  EMBEDDING_BATCH_CHUNKS: { type: 'integer', min: 1, max: 1024, default: '64', readBy: ['worker'], description: 'Chunks, across the documents embedding at the same moment, per local encoder call and Weaviate batch' },
  EMBEDDING_MAX_OUTAGE_SECONDS: {
    type: 'integer', min: 1, max: 7 * 86400, default: '86400', readBy: ['worker'],
    description: "How long a document's embedding waits out an unavailable embeddings API or vector index (refused or broken connections, 5xx, 429) before the `embed` step fails; tried again 2 s ... 5 min apart meanwhile",
  },
  WORKFLOW_BUNDLE_PATH: { type: 'string', readBy: ['worker'], description: 'Prebuilt workflow bundle; unset bundles `workflows/` at worker start' },
  BUDGET_SWEEP_INTERVAL_SECONDS: { type: 'integer', min: 1, max: 86400, default: '60', readBy: ['worker'], description: 'How often the `budget-sweeper` workflow looks for holds of closed workflows' },
  BUDGET_SWEEP_GRACE_SECONDS: { type: 'integer', min: 0, max: 7 * 86400, default: '300', readBy: ['worker'], description: 'Only holds older than this are examined' },
  BUDGET_RECHECK_INTERVAL_MS: {
    type: 'integer', min: 10, max: 86_400_000, default: '300000', defaultText: '`300000` (5 min)', readBy: ['worker'],
    description: 'How long budget-blocked work (a document step, a channel source) waits for a `budgetChanged` signal before it checks again by itself',
  },
  RECONCILE_INTERVAL_SECONDS: {
    type: 'integer', min: 0, max: 86400, default: '60', readBy: ['worker'],
    description: 'How often the `reconciler` workflow looks for work whose workflow is gone (`0`: no reconciler); see [Long waits, lost workflows and the reconciler](operations.md#long-waits-lost-workflows-and-the-reconciler)',
  },
  RECONCILE_GRACE_SECONDS: { type: 'integer', min: 0, max: 86400, default: '60', readBy: ['worker'], description: "The reconciler's periodic scan looks only at rows untouched this long (work named by `reconcileNow` at once)" },
  EMBEDDING_MODEL: {
    type: 'string', readBy: ['api', 'worker'],
    description: 'Embedding model at `OPENAI_BASE_URL` (OpenAI-compatible `/embeddings`); unset: the local sentence encoder. Changing it re-embeds every KB (see [Embedding and retrieval](api/retrieval.md))',
  },
  EMBEDDING_DIMENSIONS: { type: 'integer', min: 1, max: 16384, readBy: ['api', 'worker'], description: 'Requested vector size for models that can shorten their vectors' },
  EMBEDDING_PRICE_USD_PER_MILLION_TOKENS: { type: 'number', readBy: ['api', 'worker'], description: 'List price of the embedding model; unset: embedding usage is recorded in tokens only' },
  RETRIEVAL_FUSION: {
    type: 'enum', values: ['score', 'rrf'], default: 'score', readBy: ['api'],
    description: "Default fusion of the three retrieval streams: `score` (each stream's scores min-max normalised over its candidates, weighted, summed) or `rrf` (weighted reciprocal ranks); a rag-test request may choose with `fusion`",
  },
  RETRIEVAL_WEIGHT_DENSE: {
    type: 'number', max: 1000, readBy: ['api'], defaultText: 'built-in `0.28`',
    description: 'Default weight of the dense stream (learned for the local sentence encoder on the tuning parts of the evaluation sets, see [Embedding and retrieval](api/retrieval.md)); with another `EMBEDDING_MODEL`, measure it with `npm run eval:retrieval` and set the dense weight its fit gives',
  },
  RETRIEVAL_WEIGHT_SPARSE: { type: 'number', max: 1000, readBy: ['api'], defaultText: 'built-in `0.42`', description: 'Default weight of the sparse stream (see `RETRIEVAL_WEIGHT_DENSE`)' },
  RETRIEVAL_WEIGHT_BM25: { type: 'number', max: 1000, readBy: ['api'], defaultText: 'built-in `1`', description: 'Default weight of the BM25 stream (see `RETRIEVAL_WEIGHT_DENSE`)' },
  RETRIEVAL_RESCORING: {
    type: 'enum', values: ['on', 'off'], default: 'on', readBy: ['api'],
    description: 'The learned re-scoring after fusion (`name_match`, `lead_match`; see [Embedding and retrieval](api/retrieval.md))',
  },
  RERANK_BASE_URL: {
    type: 'url', protocols: web, readBy: ['api'],
    description: 'A cross-encoder re-ranker speaking the Cohere-style `/rerank` protocol (Infinity, TEI, Jina, Cohere): `POST <url>/rerank`. Unset: no re-ranking',
  },
  RERANK_MODEL: { type: 'string', readBy: ['api'], defaultText: 'none (required with `RERANK_BASE_URL`)', description: 'The re-ranking model name sent' },
  RERANK_API_KEY: { type: 'string', readBy: ['api'], description: 'A key sent to the re-ranker as `Authorization: Bearer`' },
  RERANK_CANDIDATES: { type: 'integer', min: 1, max: 200, default: '30', readBy: ['api'], description: 'The first this many fused results are re-ranked' },
  RERANK_TIMEOUT_SECONDS: { type: 'integer', min: 1, max: 600, default: '10', readBy: ['api'], description: 'A re-ranking call unanswered after this is abandoned (the search answers in fused order)' },
  RERANK_PRICE_USD_PER_MILLION_TOKENS: {
    type: 'number', readBy: ['api'],
    description: 'Set: each re-ranking call is admitted through the KB budget (tokens and dollars) and settled with the reported usage; unset: a self-hosted re-ranker, not admitted',
  },
  VENDOR_SYNC_BASE_URL: { type: 'url', protocols: web, readBy: ['api', 'worker'], defaultText: '`OPENAI_BASE_URL`', description: "Vendor sync's vector-store API (OpenAI vector-store files protocol)" },
  VENDOR_SYNC_API_KEY: { type: 'string', readBy: ['api', 'worker'], defaultText: '`OPENAI_API_KEY`', description: 'Key of `VENDOR_SYNC_BASE_URL`' },
  VENDOR_SYNC_MAX_OUTAGE_SECONDS: {
    type: 'integer', min: 1, max: 86_400, default: '3600', readBy: ['worker'],
    description: 'How long a vendor sync waits out an unavailable vector-store API (refused connections, 408, 429, 5xx) before the document shows `failed`; tried again 2 s ... 5 min apart meanwhile',
  },
  URL_FETCH_ALLOW_PRIVATE: { type: 'boolean', default: 'false', readBy: ['api', 'worker'], description: 'Let URL documents fetch from private addresses' },
  URL_FETCH_ALLOW_LOOPBACK: { type: 'boolean', default: 'false', readBy: ['api', 'worker'], description: 'Let URL documents fetch from loopback addresses (the tests allow loopback for their own servers)' },
  DIALOG_ANALYSIS_MODEL: {
    type: 'string', default: 'gpt-4.1-mini', allowed: 'a model name of at most 200 characters', readBy: ['worker'],
    description: 'Model of dialog analysis at `OPENAI_BASE_URL`. Without `OPENAI_BASE_URL` every analysis fails at once with a reason that says so (and can be retried by the operator)',
  },
  DIALOG_ANALYSIS_RESPONSE_FORMAT: {
    type: 'enum', values: ['auto', 'json_schema', 'json_object', 'prompt'], default: 'auto', readBy: ['worker'],
    description: 'First response mode: `auto` (structured outputs, `json_schema`, when the schemas allow it, else `json_object`), `json_schema`, `json_object` or `prompt` (no `response_format`). A provider that refuses the mode is asked with the next one',
  },
  DIALOG_ANALYSIS_MAX_ATTEMPTS: { type: 'integer', min: 1, max: 10, default: '3', readBy: ['worker'], description: 'Answers judged against the schemas before an analysis is `failed`' },
  DIALOG_ANALYSIS_MAX_OUTPUT_TOKENS: { type: 'integer', min: 16, max: 1_000_000, default: '4096', readBy: ['worker'], description: '`max_completion_tokens` of each dialog-analysis call' },
  DIALOG_ANALYSIS_TIMEOUT_SECONDS: { type: 'integer', min: 1, max: 600, default: '300', readBy: ['worker'], description: 'One dialog-analysis model call' },
  DIALOG_ANALYSIS_MAX_OUTAGE_SECONDS: {
    type: 'integer', min: 1, max: 21_600, default: '1800', readBy: ['worker'],
    description: 'How long transient provider failures in a row (429, 5xx, timeouts, a lost worker) are waited out before an analysis is `failed`',
  },
  DIALOG_ANALYSIS_RETENTION_SECONDS: {
    type: 'integer', min: 1, max: 30 * 86400, default: '86400', readBy: ['api', 'worker'],
    description: 'How long a finished (completed or failed) analysis can be read; then it is deleted and answers 404',
  },
  DIALOG_ANALYSIS_RATE_LIMIT_PER_MINUTE: {
    type: 'integer', min: 0, max: 1_000_000, default: '60', readBy: ['api'],
    description: 'Creations per partner per minute (a schedule shared by all API replicas, a refused client booked its turn); `0` turns it off. The administrator key is not limited',
  },
  DIALOG_ANALYSIS_VALIDATION_TIMEOUT_MS: {
    type: 'integer', min: 100, max: 60_000, default: '5000', readBy: ['api', 'worker'],
    description: "Time bound for compiling a caller's schema (API) or validating an answer against it (worker), in a worker thread",
  },
  VOICE_JOB_BASE_URL: {
    type: 'url', protocols: web, readBy: ['worker'],
    description: 'The GPU job service (RunPod serverless queue protocol, e.g. `https://api.runpod.ai/v2/<endpoint id>`). Unset: the local voice print',
  },
  VOICE_JOB_API_KEY: { type: 'string', readBy: ['worker'], allowed: 'only with `VOICE_JOB_BASE_URL`', description: 'Key of the GPU job service' },
  VOICE_JOB_POLL_INTERVAL_MS: { type: 'integer', min: 50, max: 600_000, default: '5000', readBy: ['worker'], description: 'Time between two status requests of a running GPU job' },
  VOICE_JOB_TIMEOUT_SECONDS: { type: 'integer', min: 1, max: 7 * 86400, default: '3600', readBy: ['worker'], description: 'A GPU job unfinished this long after submission is cancelled and the embedding fails' },
  VOICE_JOB_FILES_BASE_URL: {
    type: 'url', protocols: web, readBy: ['worker'], defaultText: '`http://127.0.0.1:<PORT>`',
    defaultFrom: (setting) => `http://127.0.0.1:${Number(setting('PORT')) || 3000}`,
    description: "This API's address as the GPU job service reaches it (the signed samples link it downloads); set it on the workers: the default suits only a service on the same machine",
  },
  VOICE_MAX_UPLOAD_BYTES: { type: 'integer', min: 1, max: 10 * 1024 ** 3, default: String(100 * mib), defaultText: '`104857600` (100 MiB)', readBy: ['api'], description: 'Largest recording or sample upload (413 above)' },
  VOICE_MAX_ORIGINAL_SECONDS: { type: 'integer', min: 5, max: 7 * 86400, default: '3600', readBy: ['api', 'worker'], description: 'Longest recording accepted and split' },
  VOICE_HEARTBEAT_TIMEOUT_SECONDS: { type: 'integer', min: 5, max: 3600, default: '30', readBy: ['worker'], description: "How soon a lost worker's split or embedding goes to another worker" },
  VOICE_RETRY_WINDOW_SECONDS: {
    type: 'integer', min: 1, max: 365 * 86400, default: String(7 * 86400), defaultText: '`604800` (7 days)', readBy: ['worker'],
    description: "How long a failed job's workflow waits for the `retry` signal; later, `POST split` / `embed` start it again",
  },
  VOICE_RATE_LIMIT_PER_MINUTE: { type: 'integer', min: 0, max: 1_000_000, default: '30', readBy: ['api'], description: 'Uploads and job requests per partner per minute (0: no limit)' },
  METRICS_API_KEY: {
    type: 'string', readBy: ['api'], allowed: 'at least 16 characters without spaces, not `ADMIN_API_KEY`',
    description: 'A key that can read `/metrics` and nothing else: the one to give Prometheus. Unset: `/metrics` takes the administrator key only (see [Metrics](operations.md#metrics))',
  },
  METRICS_CACHE_SECONDS: {
    type: 'integer', min: 0, max: 3600, default: '15', readBy: ['api'],
    description: "How long the Postgres and Temporal readings behind `/metrics`' gauges are reused (0: read on every scrape, concurrent scrapes still share one reading)",
  },
  METRICS_CLOSED_WINDOW_SECONDS: {
    type: 'integer', min: 1, max: 7 * 86400, default: '3600', readBy: ['api'],
    description: 'How far back `dwb_workflow_executions` counts closed executions; open ones are always counted. A reading visits every execution it counts, so a longer window costs more',
  },
  REQUESTS_PER_MINUTE_KNOWLEDGE_BASE: {
    type: 'integer', min: 0, max: 1_000_000, default: '1200', readBy: ['api'],
    description: 'Requests per key per minute to the knowledge-base API (and the quota-key administration); `0`: no limit. The administrator key is never limited. See [Abuse resistance](abuse-resistance.md)',
  },
  REQUESTS_PER_MINUTE_MESSAGING: { type: 'integer', min: 0, max: 1_000_000, default: '600', readBy: ['api'], description: 'The same per quota key for `/v3` and `/v2/completions`' },
  REQUESTS_PER_MINUTE_TRANSCRIPTION: {
    type: 'integer', min: 0, max: 1_000_000, default: '600', readBy: ['api'],
    description: 'The same per partner key for `/v2/transcript` (polling included; `TRANSCRIPTION_RATE_LIMIT_PER_MINUTE` still bounds submissions)',
  },
  REQUESTS_PER_MINUTE_SPEECH: { type: 'integer', min: 0, max: 1_000_000, default: '300', readBy: ['api'], description: 'The same per quota key for `/v2/audio/*`' },
  REQUESTS_PER_MINUTE_DIALOG_ANALYSIS: {
    type: 'integer', min: 0, max: 1_000_000, default: '600', readBy: ['api'],
    description: 'The same per partner key for `/v2/dialog_analyses` (creations also bounded by `DIALOG_ANALYSIS_RATE_LIMIT_PER_MINUTE`)',
  },
  REQUESTS_PER_MINUTE_VOICES: {
    type: 'integer', min: 0, max: 1_000_000, default: '600', readBy: ['api'],
    description: 'The same per partner key for `/api/voices` (uploads and jobs also bounded by `VOICE_RATE_LIMIT_PER_MINUTE`)',
  },
  REQUESTS_PER_MINUTE_ANONYMOUS: {
    type: 'integer', min: 0, max: 1_000_000, default: '0', defaultText: '`0` (off)', readBy: ['api'],
    description: "Requests without a valid key (no key, an unknown key, `/health`, `/api/content_types`) per client address per minute. Off by default: behind a load balancer every client has the balancer's address unless `TRUST_PROXY` names the balancer",
  },
  RATE_LIMIT_TARPIT_MS: {
    type: 'integer', min: 0, max: 60_000, default: '1000', readBy: ['api'],
    description: "A request of a client this process already refuses (it asked before its booked turn) is held this long (never longer than its `Retry-After`; at most 1,024 held at once) before its 429 is sent: a client looping as fast as it is answered slows to a crawl (`0`: answer at once)",
  },
  REQUESTS_IN_FLIGHT_PER_KEY: {
    type: 'integer', min: 0, max: 100_000, default: '4', readBy: ['api'],
    description: 'Requests of one key handled at once by one API process on the knowledge-base, voice, transcription and dialog-analysis interfaces; more wait their turn in order (at most 256 waiting, then 429). `0`: no limit. Not for messaging and speech, whose answers stream for minutes',
  },
  REQUESTS_BURST_PER_KEY: {
    type: 'integer', min: 0, max: 100_000, default: '20', readBy: ['api'],
    description: "Requests of one key that start at once on those interfaces (under half of the count's allowance per window); further ones start evenly spread so that burst and spread together fit one window's allowance with two to spare (at 1,200 a minute: 20 at once, then one every 56.2 ms, 178 per 10 s), in order (at most 256 waiting, then 429). A key whose window allowance fits in one burst (120 a minute or less at 20) is not spread. `0`: not spread",
  },
  JSON_BODY_MAX_BYTES: {
    type: 'integer', min: 1024, max: 1024 * mib, default: String(16 * mib), defaultText: '`16777216` (16 MiB)', readBy: ['api'],
    description: 'Largest JSON (or urlencoded) request body; 413 above, counted while it streams',
  },
  FORM_TEXT_FIELD_MAX_BYTES: {
    type: 'integer', min: 1024, max: 1024 * mib, default: String(16 * mib), defaultText: '`16777216` (16 MiB)', readBy: ['api'],
    description: "Largest form field that has no length bound of its own (a content version sent as text); other fields are bounded by their schema's `maxLength`",
  },
  BATCH_UPLOAD_MAX_BYTES: {
    type: 'integer', min: 1024, max: 1024 * mib, default: String(1024 * mib), defaultText: '`1073741824` (1 GiB)', readBy: ['api'],
    description: 'Largest sum of the files of one batch upload (never more than 1 GiB), enforced while the body streams',
  },
  TOOL_MAX_MEMORY_MB: {
    type: 'integer', min: 64, max: 1024 * 1024, default: '2048', readBy: ['api', 'worker'],
    description: "Address space of every child process (ffmpeg, tesseract, poppler, LibreOffice, the speech engines), set with `prlimit`; CPU time is bounded by each call's own time bound",
  },
  TOOL_MAX_FILE_MB: { type: 'integer', min: 1, max: 1024 * 1024, default: '2048', readBy: ['api', 'worker'], description: 'Largest file a child process may write (a decoded WAV, a rendered page)' },
  EXTRACT_ZIP_MAX_ENTRIES: { type: 'integer', min: 1, max: 1_000_000, default: '10000', readBy: ['worker'], description: 'Entries a DOCX/XLSX/PPTX/EPUB may have' },
  EXTRACT_ZIP_MAX_INFLATED_MB: {
    type: 'integer', min: 1, max: 64 * 1024, default: '256', readBy: ['worker'],
    description: 'What the parts read from one DOCX/XLSX/PPTX/EPUB may inflate to, all together (counted as they inflate, whatever the headers claim)',
  },
  EXTRACT_MAX_HEAP_MB: {
    type: 'integer', min: 64, max: 64 * 1024, default: '1024', readBy: ['worker'],
    description: 'JavaScript heap of the thread that reads one in-process format (Office Open XML, EPUB, HTML, CSV, JSON, XML, YAML)',
  },
  EXTRACT_MAX_THREADS: { type: 'integer', min: 1, max: 1024, ...cores, readBy: ['worker'], description: 'Such threads in one worker process (kept and reused, ~100 MB each); further documents wait for one' },
  EXTRACT_TIMEOUT_SECONDS: { type: 'integer', min: 1, max: 86400, default: '300', readBy: ['worker'], description: 'Wall time of reading one in-process format' },
  EXTRACT_TOOL_TIMEOUT_SECONDS: {
    type: 'integer', min: 1, max: 86400, default: '120', readBy: ['worker'],
    description: 'Wall (and CPU) time of each PDF tool run: `pdftotext`, `pdfinfo`, `pdftoppm`, tesseract',
  },
  DOCUMENT_MAX_MEDIA_SECONDS: {
    type: 'integer', min: 1, max: 7 * 86400, default: '14400', defaultText: '`14400` (4 h)', readBy: ['worker'],
    description: 'Longest audio/video document transcribed (by its header, before decoding; decoding stops there too)',
  },
} as const satisfies Record<string, SettingSpec>;

/** Messaging (docs/api/messaging.md). */
const messaging = {
  MESSAGING_DEFAULT_OUTPUT_TOKENS: { type: 'integer', min: 1, max: 10_000_000, default: '4096', readBy: ['api'], description: 'Output tokens held for a request without an output limit' },
  MESSAGING_SSE_KEEPALIVE_MS: { type: 'integer', min: 10, max: 3_600_000, default: '15000', readBy: ['api'], description: 'Quiet time before an SSE keep-alive comment' },
  MESSAGING_UPSTREAM_TIMEOUT_SECONDS: { type: 'integer', min: 1, max: 86400, default: '600', readBy: ['api', 'worker'], description: 'Provider call timeout (then `fallback_model`, else 504)' },
  MESSAGING_UPSTREAM_MAX_SOCKETS: {
    type: 'integer', min: 1, max: 100_000, default: '256', readBy: ['api'],
    description: 'Connections to the provider kept per API process (kept alive, reused; more concurrent calls wait for one)',
  },
  MESSAGING_KEY_CACHE_SECONDS: {
    type: 'integer', min: 0, max: 3600, default: '5', readBy: ['api'],
    description: 'How long a process serves a quota key it has looked up or admitted in the database (0: every request looks it up); bounds how late a revocation on another replica reaches a request that admits nothing or is lent from an escrow slice',
  },
  MESSAGING_CALL_DURING_ADMISSION_SECONDS: {
    type: 'integer', min: 0, max: 3600, default: '10', readBy: ['api'],
    description: 'The provider call starts while the quota hold is made when this process heard less than this long ago that the key has room for the request (0: always after the hold); a refused hold aborts the call',
  },
  MESSAGING_QUOTA_ESCROW_SECONDS: {
    type: 'integer', min: 0, max: 3600, default: '10', readBy: ['api'],
    description: "How long an API process lends holds from its escrow slice of a busy quota key before it gives back what is left (0: one database hold per request); the slice is at most a sixteenth of the key's room (docs/adr/0003-quota-escrow.md)",
  },
  MESSAGING_SERVER_TIMING: {
    type: 'boolean', default: 'false', readBy: ['api'],
    description: "Answer `/v3` requests with a `Server-Timing` header: where the time before the provider's first byte went",
  },
  LEGACY_COMPLETION_MODEL: { type: 'string', default: 'gpt-4.1-mini', readBy: ['api'], description: 'Model of `/v2/completions`' },
  LEGACY_COMPLETION_RETENTION_SECONDS: { type: 'integer', min: 1, max: 30 * 86400, default: '1200', readBy: ['api', 'worker'], description: 'How long a finished legacy result can be read' },
} as const satisfies Record<string, SettingSpec>;

/** Transcription (docs/api/voices-transcription-speech-dialog.md, "Transcription"). */
const transcription = {
  TRANSCRIPTION_MODEL: {
    type: 'string', readBy: ['worker'], allowed: 'needs `TRANSCRIPTION_BASE_URL` or `OPENAI_BASE_URL`',
    description: 'OpenAI-compatible transcription model (e.g. `whisper-1`); unset: the local Moonshine engine (English only). Also transcribes audio/video documents',
  },
  TRANSCRIPTION_BASE_URL: { type: 'url', protocols: web, readBy: ['worker'], defaultText: '`OPENAI_BASE_URL`', description: 'Where that model is served' },
  TRANSCRIPTION_API_KEY: { type: 'string', readBy: ['worker'], defaultText: '`OPENAI_API_KEY`', description: 'Key of `TRANSCRIPTION_BASE_URL`' },
  TRANSCRIPTION_TIMEOUT_SECONDS: { type: 'integer', min: 1, max: 86400, default: '600', readBy: ['worker'], description: 'One call of that model (one segment, at most 10 minutes of audio)' },
  TRANSCRIPTION_RATE_LIMIT_PER_MINUTE: { type: 'integer', min: 0, max: 1_000_000, default: '30', readBy: ['api'], description: 'Submissions per partner per minute (0: no limit)' },
  TRANSCRIPTION_CONCURRENCY_LIMIT: { type: 'integer', min: 0, max: 1_000_000, default: '5', readBy: ['api'], description: 'Transcripts `queued` or `processing` per partner (0: no limit)' },
  TRANSCRIPT_RETENTION_SECONDS: {
    type: 'integer', min: 1, max: 10 * 365 * 86400, default: String(30 * 86400), defaultText: '`2592000` (30 days)', readBy: ['api', 'worker'],
    description: 'How long a finished transcript can be read',
  },
  TRANSCRIPT_UPLOAD_RETENTION_SECONDS: {
    type: 'integer', min: 1, max: 30 * 86400, default: '86400', defaultText: '`86400` (24 h)', readBy: ['api', 'worker'],
    description: 'How long a file sent to `POST /v2/upload` can be submitted; then the reconciler removes it',
  },
  TRANSCRIPT_PENDING_UPLOADS_PER_PARTNER: {
    type: 'integer', min: 0, max: 1_000_000, default: '20', readBy: ['api'],
    description: 'Files sent to `POST /v2/upload` a partner holds at once, not yet submitted (0: no limit); the next is a 429',
  },
  TRANSCRIPT_SEGMENT_SECONDS: {
    type: 'integer', min: 5, max: 3600, default: '120', readBy: ['worker'], allowed: 'at most 2,000 segments in `TRANSCRIPT_MAX_AUDIO_SECONDS`',
    description: 'Target segment length (cut in pauses, at most 1.5×)',
  },
  TRANSCRIPT_SEGMENT_CONCURRENCY: { type: 'integer', min: 1, max: 64, default: '1', readBy: ['worker'], description: 'Segments of one transcript in flight' },
  TRANSCRIPT_MAX_AUDIO_SECONDS: { type: 'integer', min: 1, max: 7 * 86400, default: '14400', readBy: ['worker'], description: 'Longer audio ends in `error`' },
  TRANSCRIPT_AUDIO_FETCH_TIMEOUT_SECONDS: { type: 'integer', min: 1, max: 86400, default: '300', readBy: ['worker'], description: 'Bound on downloading an `audio_url`' },
  TRANSCRIPT_AUDIO_FETCH_MAX_BYTES: {
    type: 'integer', min: 1024, max: 100 * mib, default: String(100 * mib), defaultText: '`104857600` (100 MiB)', readBy: ['worker'],
    description: 'Largest `audio_url` download; a larger one ends in `error`',
  },
  TRANSCRIPT_HEARTBEAT_TIMEOUT_SECONDS: { type: 'integer', min: 5, max: 3600, default: '30', readBy: ['worker'], description: "How soon a lost worker's segment goes to another worker" },
  TEMPORAL_AUDIO_TASK_QUEUE: {
    type: 'string', readBy: ['api', 'worker'], defaultText: '`<TEMPORAL_TASK_QUEUE>-audio`', defaultFrom: (setting) => `${String(setting('TEMPORAL_TASK_QUEUE'))}-audio`,
    description: 'Task queue of the CPU-heavy audio activities (every worker polls it)',
  },
  AUDIO_WORKER_MAX_ACTIVITIES: { type: 'integer', min: 1, max: 1000, default: '2', readBy: ['worker'], description: 'Audio activities at once per worker process (about one per core)' },
  TRANSCRIPTION_LOCAL_MODEL_DIR: {
    type: 'string', readBy: ['worker'], defaultText: '`$DWB_TOOLS_DIR/moonshine-base-0.1.15`',
    // The tools cache of scripts/build-tools.sh and scripts/fetch-models.sh, keyed by the weights' version.
    defaultFrom: (setting) => path.join(String(setting('DWB_TOOLS_DIR')), 'moonshine-base-0.1.15'),
    description: 'Where `scripts/fetch-models.sh` put the ONNX weights of the local speech-to-text engine (Moonshine base)',
  },
  TRANSCRIPTION_LOCAL_THREADS: { type: 'integer', min: 1, max: 64, default: '1', readBy: ['worker'], description: 'CPU threads of one run of the local speech-to-text model' },
  TRANSCRIPTION_LOCAL_CONCURRENCY: {
    type: 'integer', min: 1, max: 64, default: '2', readBy: ['worker'],
    description: 'Runs of the local speech-to-text model at once in one process (they share one loaded model)',
  },
} as const satisfies Record<string, SettingSpec>;

/** Speech (docs/api/voices-transcription-speech-dialog.md, "Speech"). */
const speech = {
  SPEECH_MODEL: { type: 'string', readBy: ['api'], allowed: 'needs `SPEECH_BASE_URL` or `OPENAI_BASE_URL`', description: 'OpenAI-compatible speech model; unset: local engines only' },
  SPEECH_BASE_URL: { type: 'url', protocols: web, readBy: ['api'], defaultText: '`OPENAI_BASE_URL`', description: 'Where it is served' },
  SPEECH_API_KEY: { type: 'string', readBy: ['api'], defaultText: '`OPENAI_API_KEY`', description: 'Key of `SPEECH_BASE_URL`' },
  SPEECH_REMOTE_VOICES: { type: 'list', default: 'alloy,ash,ballad,coral,echo,fable,onyx,nova,sage,shimmer,verse,marin,cedar', readBy: ['api'], description: 'Voice names sent to that model (comma-separated)' },
  SPEECH_LANGUAGE_FIELD: {
    type: 'string', pattern: /^[A-Z_][\w.-]{0,63}$/i, mustBe: 'a JSON field name', readBy: ['api'],
    description: 'Body field that carries the language to that model',
  },
  SPEECH_TIMEOUT_SECONDS: { type: 'integer', min: 1, max: 3600, default: '60', readBy: ['api'], description: 'Bound on a remote call and on each local engine run' },
  SPEECH_MAX_CONCURRENT: { type: 'integer', min: 1, max: 1000, default: '2', readBy: ['api'], description: 'Syntheses at once per API process; more wait up to 10 s, then 503' },
} as const satisfies Record<string, SettingSpec>;

/**
 * Read by operator scripts, benchmarks and tests only, never by the API or a worker; each reads
 * its own (defaults in the file that reads it, since several benchmarks differ).
 */
const tooling = {
  TEMPORAL_UI_PORT: { type: 'integer', min: 1, max: 65535, default: '8233', readBy: ['scripts'], description: "Port of the Temporal dev server's Web UI that `scripts/start` launches" },
  DWB_TOOLS_DIR: {
    type: 'string', readBy: ['worker', 'scripts', 'bench', 'test'], defaultText: '`$XDG_CACHE_HOME/dwb-tools`',
    defaultFrom: (setting) => path.join(String(setting('XDG_CACHE_HOME')), 'dwb-tools'),
    description: 'Where the servers built from Go modules (Temporal, Weaviate, the S3 gateway) are kept, outside the clone',
  },
  XDG_CACHE_HOME: {
    type: 'string', readBy: ['worker', 'scripts', 'bench', 'test'], defaultText: '`~/.cache`', defaultFrom: () => path.join(os.homedir(), '.cache'),
    description: "The user's cache directory (tools, evaluation embeddings)",
  },
  GOGC: { type: 'string', default: '200', readBy: ['scripts'], description: "Go's garbage-collection target of the Temporal dev server `scripts/start` runs" },
  PGUSER: { type: 'string', readBy: ['scripts'], description: 'Postgres user of the offline schema engine when `DATABASE_URL` names none' },
  PRISMA_SCHEMA_ENGINE_SHIM_DEBUG: { type: 'boolean', default: 'false', readBy: ['scripts'], description: "Logs the offline schema engine's JSON-RPC traffic (scripts/prisma-schema-engine.mjs)" },
  PRISMA_SCHEMA_ENGINE_WASM: { type: 'string', readBy: ['scripts'], defaultText: "`@prisma/schema-engine-wasm`'s file", description: 'The WebAssembly schema engine the offline shim loads' },
  PATH: { type: 'string', readBy: ['test'], description: 'Handed to the processes a test starts with an environment of its own' },
  HOME: { type: 'string', readBy: ['test'], description: 'Handed to the processes a test starts with an environment of its own' },
  TEST_DATABASE_BASE_URL: { type: 'url', protocols: postgres, default: 'postgresql://postgres@127.0.0.1:5432', readBy: ['scripts', 'bench', 'test'], description: 'The Postgres server where tests and benchmarks make their throw-away databases' },
  TEST_POSTGRES_ADMIN_URL: { type: 'url', protocols: postgres, readBy: ['test'], description: 'A Postgres superuser connection for tests that manage roles and connections' },
  DATABASE_BASE_URL: { type: 'url', protocols: postgres, default: 'postgresql://postgres@127.0.0.1:5432', readBy: ['bench'], description: 'The Postgres server where the admission and messaging benchmarks make their databases' },
  TEST_LANES_AT_ONCE: { type: 'integer', readBy: ['test'], defaultText: 'every lane', description: 'Test lanes `scripts/test` runs at once' },
  TEST_FILE_TIMES: { type: 'string', readBy: ['test'], description: "A file where a test run writes the time each test file took (the lane runner's summary of the slowest)" },
  RECORD_WORKFLOW_HISTORIES: { type: 'boolean', default: 'false', readBy: ['test'], description: 'Tests save the histories of the workflows they run as replay fixtures (`npm run record:histories`)' },
  FUZZ_RUNS: { type: 'integer', readBy: ['test'], description: 'Cases of the property tests' },
  FUZZ_SEED: { type: 'integer', readBy: ['test'], description: 'Seed of the property tests (to replay a failure)' },
  FUZZ_STATS: { type: 'boolean', readBy: ['test'], description: 'The property tests print what they generated' },
  RETRIEVAL_EVAL_CACHE_DIR: { type: 'string', readBy: ['bench'], defaultText: '`$XDG_CACHE_HOME/dwb-eval`', description: 'Cache of the evaluation sets\' embeddings' },
  RETRIEVAL_EVAL_PARTS: { type: 'enum', values: ['tuning'], readBy: ['bench'], defaultText: 'tuning and held-out', description: '`tuning`: evaluate the tuning parts only' },
  RETRIEVAL_EVAL_WRITE: { type: 'boolean', default: 'true', readBy: ['bench'], description: '`0`: the retrieval evaluation does not rewrite its results file' },
  BENCH_NO_WRITE: { type: 'boolean', readBy: ['bench'], description: 'A benchmark does not write bench/RESULTS data' },
  BENCH_RUNS: { type: 'integer', readBy: ['bench'], defaultText: 'per benchmark', description: 'Measured runs (speech, transcription, messaging)' },
  BENCH_ROUNDS: { type: 'integer', readBy: ['bench'], defaultText: 'per benchmark', description: 'Interleaved rounds (messaging, flood)' },
  BENCH_SECONDS: { type: 'integer', readBy: ['bench'], defaultText: 'per benchmark', description: 'Measured seconds (admission, flood)' },
  BENCH_WARMUP_SECONDS: { type: 'number', default: '1', readBy: ['bench'], description: 'Warm-up before the admission benchmark measures' },
  BENCH_POOL_SIZE: { type: 'integer', min: 1, max: 1000, default: '10', readBy: ['bench'], description: 'Database connections of the admission benchmark' },
  BENCH_SUMMARY_FILE: { type: 'string', readBy: ['bench'], description: 'The admission benchmark also writes its summary here (JSON)' },
  BENCH_DOCUMENTS: { type: 'integer', min: 1, max: 10_000_000, default: '1000', readBy: ['bench'], description: 'Documents of the ingestion and cluster benchmarks' },
  BENCH_CLIENTS: { type: 'integer', min: 1, max: 10_000, default: '32', readBy: ['bench'], description: 'Concurrent clients of the ingestion and cluster benchmarks' },
  BENCH_CREATE_SECONDS: { type: 'integer', min: 1, max: 86400, default: '30', readBy: ['bench'], description: 'Length of the creation phase of the ingestion and cluster benchmarks' },
  BENCH_PACED_RATE: { type: 'integer', min: 1, max: 100_000, default: '300', readBy: ['bench'], description: 'Paced creations per second of the ingestion and cluster benchmarks' },
  BENCH_LISTED: { type: 'integer', min: 1, max: 10_000_000, default: '10000', readBy: ['bench'], description: 'Documents listed by the ingestion benchmark' },
  BENCH_ONLY: { type: 'enum', values: ['system', 'creation'], readBy: ['bench'], description: 'Runs one part of the ingestion benchmark only' },
  BENCH_API_CPU_PROF: { type: 'string', readBy: ['bench'], description: "Directory for the API's CPU profile during the ingestion benchmark" },
  BENCH_WORKER_CPU_PROF: { type: 'string', readBy: ['bench'], description: "Directory for the worker's CPU profile during the ingestion benchmark" },
  BENCH_SLOW_TRACE: { type: 'boolean', readBy: ['bench'], description: '`1`: the ingestion benchmark traces its slowest creations' },
  BENCH_CPU_PROFILE: { type: 'boolean', readBy: ['bench'], description: 'The messaging benchmark profiles the API' },
  BENCH_SKIP_ADMISSIONS: { type: 'boolean', readBy: ['bench'], description: 'The messaging benchmark skips its admission measurements' },
  BENCH_TOKENS: { type: 'integer', min: 1, max: 100_000, default: '20', readBy: ['bench'], description: 'Tokens of each answer of the fake model provider' },
  BENCH_TOKEN_MS: { type: 'integer', min: 0, max: 60_000, default: '20', readBy: ['bench'], description: 'Time between two tokens of the fake model provider' },
  BENCH_PROVIDER_URL: { type: 'url', readBy: ['bench'], description: 'The model provider the bare proxy of the messaging benchmark relays to' },
  BENCH_LEVELS: { type: 'list', default: '1,50,200', readBy: ['bench'], description: 'Concurrency levels the messaging benchmark runs (the goals table needs 1 and 200)' },
  BENCH_KEEP: { type: 'boolean', readBy: ['bench'], description: "The messaging benchmark keeps its API processes' logs and profiles" },
  BENCH_FLOOR: { type: 'enum', values: ['express', 'relay', 'lean'], readBy: ['bench'], description: 'Which floor gateway bench/support/floor-gateways.ts serves' },
  BENCH_FLOOR_LOG: { type: 'string', readBy: ['bench'], description: 'Where a floor gateway writes its log lines (default /dev/null; bench:messaging gives each floor a file, as the API has)' },
  BENCH_MEMORY_ROWS: { type: 'string', readBy: ['bench'], description: 'Rows of the engine-memory benchmark to run (label substrings separated by `|`)' },
  BENCH_MEMORY_CHILD: { type: 'string', readBy: ['bench'], description: 'Internal: the row a child process of the engine-memory benchmark measures' },
  BENCH_PIECES: { type: 'integer', min: 1, max: 1_000_000, default: '256', readBy: ['bench'], description: 'Texts embedded by the encoder-runtime benchmark' },
  BENCH_QUERIES: { type: 'integer', min: 1, max: 1_000_000, default: '300', readBy: ['bench'], description: 'Queries per setting of the search benchmark' },
  BENCH_SIZES: { type: 'list', default: '10000,100000', readBy: ['bench'], description: 'Chunk counts of the search benchmark' },
  BENCH_SENTENCES: { type: 'integer', default: '45', readBy: ['bench'], description: 'Sentences of the transcription benchmark\'s recording' },
  BENCH_RATE: { type: 'integer', min: 1, max: 100_000, default: '15', readBy: ['bench'], description: "A well-behaved client's requests per second in the flood benchmark" },
  BENCH_FLOOD_CONNECTIONS: { type: 'integer', min: 1, max: 100_000, default: '32', readBy: ['bench'], description: 'Connections of the flooding client' },
  FAULT_DOCUMENTS: { type: 'integer', min: 1, max: 10_000_000, default: '400', readBy: ['bench'], description: 'Documents of the cluster fault benchmark' },
  FAULT_LOAD_SECONDS: { type: 'integer', min: 1, max: 86400, default: '110', readBy: ['bench'], description: 'Load phase of the cluster fault benchmark' },
  FAULT_DEADLINE_SECONDS: { type: 'integer', min: 1, max: 86400, default: '900', readBy: ['bench'], description: 'How long the cluster fault benchmark waits for every document' },
} as const satisfies Record<string, SettingSpec>;

/** The sections of docs/configuration.md, in order, with the settings of each. */
export const sections = [
  { title: 'Service settings', settings: general },
  { title: 'Messaging', settings: messaging },
  { title: 'Transcription', settings: transcription },
  { title: 'Speech', settings: speech },
  { title: 'Scripts, benchmarks and tests', settings: tooling },
] as const;

export const settings = { ...general, ...messaging, ...transcription, ...speech, ...tooling } as const;
type Settings = typeof settings;
export type SettingName = keyof Settings;

type ValueOf<S> = S extends { type: 'integer' | 'number' }
  ? number
  : S extends { type: 'boolean' }
    ? boolean
    : S extends { type: 'list' }
      ? string[]
      : S extends { type: 'enum'; values: readonly (infer V)[] }
        ? V
        : string;

/** The parsed value of a setting: null when it is unset and has no default. */
export type SettingValue<N extends SettingName> = Settings[N] extends { default: string } | { defaultFrom: unknown } | { required: true }
  ? ValueOf<Settings[N]>
  : ValueOf<Settings[N]> | null;
