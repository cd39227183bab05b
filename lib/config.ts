import path from 'node:path';

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
  port: number;
  adminApiKey: string;
  openaiBaseUrl: string | null;
  openaiApiKey: string | null;
  storageDir: string;
  maxUploadBytes: number;
  logLevel: 'debug' | 'info' | 'warn' | 'error';
  /** A prebuilt workflow bundle (bundleWorkflowCode output); null bundles workflows/ at start. */
  workflowBundlePath: string | null;
  workerMaxActivities: number;
  /** How often the budget sweeper looks for holds of closed workflows, and how old a hold must be. */
  budgetSweepIntervalSeconds: number;
  budgetSweepGraceSeconds: number;
  /** URL documents: whether pages on private / loopback addresses may be fetched (default: no). */
  urlFetchAllowPrivate: boolean;
  urlFetchAllowLoopback: boolean;
  /** Speech-to-text model of the OpenAI-compatible API; null transcribes locally with PocketSphinx. */
  transcriptionModel: string | null;
  /** Dense embeddings (README, "Embedding and retrieval"): null model embeds locally. */
  embedding: EmbeddingSettings;
  /** Vendor sync's OpenAI-compatible vector-store API; null: sync fails with a clear error. */
  vendorSync: { baseUrl: string; apiKey: string | null } | null;
  messaging: MessagingSettings;
  rewrite: RewriteSettings;
  /** A scraping provider for URL documents; null fetches pages directly. */
  scraper: ScraperSettings | null;
  /** The video platform whose transcripts digitize video URL documents. */
  videoPlatformBaseUrl: string;
  /** List prices per model, USD per million tokens; a model missing here is unpriced. */
  modelPrices: Record<string, ModelPrice>;
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

export interface ModelPrice {
  input: number;
  output: number;
}

/**
 * Published list prices (USD per million input / output tokens) of common OpenAI models, the
 * default price table. MODEL_PRICES adds to or overrides it.
 */
export const defaultModelPrices: Record<string, ModelPrice> = {
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
}

export interface EmbeddingSettings {
  /** EMBEDDING_MODEL at OPENAI_BASE_URL; null: the local sentence encoder. */
  model: string | null;
  /** EMBEDDING_DIMENSIONS: requested size for models that can shorten their vectors. */
  dimensions: number | null;
  /** EMBEDDING_PRICE_USD_PER_MILLION_TOKENS; null: unpriced (tokens are still counted). */
  priceUsdPerMillionTokens: number | null;
}

export class ConfigError extends Error {
  override name = 'ConfigError';
}

/** Defaults that make a fresh clone run against the embedded servers that `scripts/start` launches. */
export const configDefaults = {
  DATABASE_URL: 'postgresql://postgres@127.0.0.1:5432/dwb_dev',
  TEMPORAL_ADDRESS: '127.0.0.1:7233',
  TEMPORAL_NAMESPACE: 'default',
  TEMPORAL_TASK_QUEUE: 'knowledge',
  WEAVIATE_URL: 'http://127.0.0.1:8080',
  PORT: '3000',
  STORAGE_DIR: '.data/storage',
  MAX_UPLOAD_BYTES: String(100 * 1024 * 1024),
  LOG_LEVEL: 'info',
  WORKER_MAX_ACTIVITIES: '8',
  BUDGET_SWEEP_INTERVAL_SECONDS: '60',
  BUDGET_SWEEP_GRACE_SECONDS: '300',
  MESSAGING_DEFAULT_OUTPUT_TOKENS: '4096',
  MESSAGING_SSE_KEEPALIVE_MS: '15000',
  MESSAGING_UPSTREAM_TIMEOUT_SECONDS: '600',
  LEGACY_COMPLETION_MODEL: 'gpt-4.1-mini',
  LEGACY_COMPLETION_RETENTION_SECONDS: '1200',
  VIDEO_PLATFORM_BASE_URL: 'https://www.youtube.com',
  REWRITE_MODEL_STANDARD: 'gpt-4.1',
  REWRITE_MODEL_ECONOMY: 'gpt-4.1-mini',
  REWRITE_MAX_OUTPUT_TOKENS: '16384',
  REWRITE_PART_TOKENS: '6000',
  REWRITE_OVERLAP_TOKENS: '200',
  REWRITE_TIMEOUT_SECONDS: '600',
} as const;

/** Variables that have no default: the operator must choose them. */
export const requiredWithoutDefault = ['ADMIN_API_KEY'] as const;

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
    throw new ConfigError(`${name} is not a valid URL: ${JSON.stringify(value)}`);
  }
  if (!protocols.includes(parsed.protocol)) {
    throw new ConfigError(`${name} must use ${protocols.join(' or ')}, got ${parsed.protocol}`);
  }
  return value.replace(/\/+$/, '');
}

function integerSetting(name: string, value: string, min: number, max: number): number {
  if (!/^\d+$/.test(value)) throw new ConfigError(`${name} must be a whole number, got ${JSON.stringify(value)}`);
  const n = Number(value);
  if (n < min || n > max) throw new ConfigError(`${name} must be between ${min} and ${max}, got ${n}`);
  return n;
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
  };
}

export function loadConfig(env: Env = process.env): Config {
  const adminApiKey = env.ADMIN_API_KEY ?? '';
  if (adminApiKey.length === 0) throw new ConfigError('ADMIN_API_KEY is required (the administrator key for /api)');
  if (adminApiKey.length < 16) throw new ConfigError('ADMIN_API_KEY must be at least 16 characters');

  const temporalAddress = read(env, 'TEMPORAL_ADDRESS');
  if (!/^[A-Za-z0-9.\-\[\]:]+:\d+$/.test(temporalAddress)) {
    throw new ConfigError(`TEMPORAL_ADDRESS must be host:port, got ${JSON.stringify(temporalAddress)}`);
  }
  const openaiBaseUrl = env.OPENAI_BASE_URL ? urlSetting('OPENAI_BASE_URL', env.OPENAI_BASE_URL, ['http:', 'https:']) : null;
  if (env.TRANSCRIPTION_MODEL && !openaiBaseUrl) throw new ConfigError('TRANSCRIPTION_MODEL needs OPENAI_BASE_URL (the OpenAI-compatible API that serves it)');
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
    port: integerSetting('PORT', read(env, 'PORT'), 0, 65535),
    adminApiKey,
    openaiBaseUrl,
    openaiApiKey: env.OPENAI_API_KEY || null,
    storageDir: path.resolve(read(env, 'STORAGE_DIR')),
    maxUploadBytes: integerSetting('MAX_UPLOAD_BYTES', read(env, 'MAX_UPLOAD_BYTES'), 1, 10 * 1024 ** 3),
    logLevel: logLevel as Config['logLevel'],
    workflowBundlePath: env.WORKFLOW_BUNDLE_PATH ? path.resolve(env.WORKFLOW_BUNDLE_PATH) : null,
    workerMaxActivities: integerSetting('WORKER_MAX_ACTIVITIES', read(env, 'WORKER_MAX_ACTIVITIES'), 1, 1000),
    budgetSweepIntervalSeconds: integerSetting('BUDGET_SWEEP_INTERVAL_SECONDS', read(env, 'BUDGET_SWEEP_INTERVAL_SECONDS'), 1, 86400),
    transcriptionModel: env.TRANSCRIPTION_MODEL || null,
    embedding: embeddingSettings(env, openaiBaseUrl),
    vendorSync: env.VENDOR_SYNC_BASE_URL
      ? { baseUrl: urlSetting('VENDOR_SYNC_BASE_URL', env.VENDOR_SYNC_BASE_URL, ['http:', 'https:']), apiKey: env.VENDOR_SYNC_API_KEY || env.OPENAI_API_KEY || null }
      : openaiBaseUrl
        ? { baseUrl: openaiBaseUrl, apiKey: env.OPENAI_API_KEY || null }
        : null,
    urlFetchAllowPrivate: booleanSetting('URL_FETCH_ALLOW_PRIVATE', env.URL_FETCH_ALLOW_PRIVATE),
    urlFetchAllowLoopback: booleanSetting('URL_FETCH_ALLOW_LOOPBACK', env.URL_FETCH_ALLOW_LOOPBACK),
    budgetSweepGraceSeconds: integerSetting('BUDGET_SWEEP_GRACE_SECONDS', read(env, 'BUDGET_SWEEP_GRACE_SECONDS'), 0, 7 * 86400),
    messaging: {
      defaultOutputTokenBound: integerSetting('MESSAGING_DEFAULT_OUTPUT_TOKENS', read(env, 'MESSAGING_DEFAULT_OUTPUT_TOKENS'), 1, 10_000_000),
      sseKeepAliveMs: integerSetting('MESSAGING_SSE_KEEPALIVE_MS', read(env, 'MESSAGING_SSE_KEEPALIVE_MS'), 10, 3_600_000),
      upstreamTimeoutSeconds: integerSetting('MESSAGING_UPSTREAM_TIMEOUT_SECONDS', read(env, 'MESSAGING_UPSTREAM_TIMEOUT_SECONDS'), 1, 86400),
      legacyModel: read(env, 'LEGACY_COMPLETION_MODEL'),
      legacyRetentionSeconds: integerSetting('LEGACY_COMPLETION_RETENTION_SECONDS', read(env, 'LEGACY_COMPLETION_RETENTION_SECONDS'), 1, 30 * 86400),
    },
    rewrite: rewriteSettings(env),
    scraper: scraperSettings(env),
    videoPlatformBaseUrl: urlSetting('VIDEO_PLATFORM_BASE_URL', read(env, 'VIDEO_PLATFORM_BASE_URL'), ['http:', 'https:']),
    modelPrices: modelPricesSetting(env.MODEL_PRICES),
  };
}

/** Entry points call this: a bad setting ends the process with one readable line. */
function embeddingSettings(env: Env, openaiBaseUrl: string | null): EmbeddingSettings {
  const model = env.EMBEDDING_MODEL || null;
  if (model && !openaiBaseUrl) throw new ConfigError('EMBEDDING_MODEL needs OPENAI_BASE_URL (the OpenAI-compatible API that serves it)');
  const price = env.EMBEDDING_PRICE_USD_PER_MILLION_TOKENS;
  if (price && !/^\d+(\.\d+)?$/.test(price)) throw new ConfigError(`EMBEDDING_PRICE_USD_PER_MILLION_TOKENS must be a non-negative number, got ${JSON.stringify(price)}`);
  return {
    model,
    dimensions: env.EMBEDDING_DIMENSIONS ? integerSetting('EMBEDDING_DIMENSIONS', env.EMBEDDING_DIMENSIONS, 1, 16384) : null,
    priceUsdPerMillionTokens: price ? Number(price) : null,
  };
}

export function loadConfigOrExit(env: Env = process.env): Config {
  try {
    return loadConfig(env);
  } catch (err) {
    if (err instanceof ConfigError) {
      process.stderr.write(`configuration error: ${err.message}\n`);
      process.exit(78); // EX_CONFIG
    }
    throw err;
  }
}
