import crypto from 'node:crypto';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import type { EmbeddingProvider, EmbeddingResult } from '../../lib/providers/embeddings.js';

/**
 * An embedder that remembers every vector it has computed, keyed by (model profile, text), in a
 * file outside the repository (default ~/.cache/dwb-eval/, or RETRIEVAL_EVAL_CACHE_DIR), so that a
 * second evaluation run or a test run on the same machine does not embed thousands of chunks
 * again. Vectors are exactly the wrapped model's (stored as float32, which the model computes in).
 */
export class CachedEmbeddings implements EmbeddingProvider {
  readonly paid = false;
  readonly priceUsdPerMillionTokens = null;
  private readonly vectors = new Map<string, number[]>();
  private readonly file: string;
  hits = 0;
  misses = 0;

  constructor(private readonly inner: EmbeddingProvider, dir = process.env.RETRIEVAL_EVAL_CACHE_DIR ?? path.join(process.env.XDG_CACHE_HOME ?? path.join(os.homedir(), '.cache'), 'dwb-eval')) {
    fs.mkdirSync(dir, { recursive: true });
    this.file = path.join(dir, `embeddings-${inner.profile.name.replace(/[^\w.-]+/g, '_')}.jsonl`);
    if (fs.existsSync(this.file)) {
      for (const line of fs.readFileSync(this.file, 'utf8').split('\n')) {
        if (!line) continue;
        try {
          const { k, v } = JSON.parse(line) as { k: string; v: string };
          const buf = Buffer.from(v, 'base64');
          this.vectors.set(k, Array.from(new Float32Array(buf.buffer, buf.byteOffset, buf.byteLength / 4)));
        } catch {
          // A line cut short by an interrupted run: that vector is computed again.
        }
      }
    }
  }

  get profile() {
    return this.inner.profile;
  }

  private key(text: string) {
    return crypto.createHash('sha256').update(`${this.inner.profile.name}\0${text}`).digest('hex').slice(0, 40);
  }

  async embed(texts: string[]): Promise<number[][]> {
    const missing = [...new Set(texts.filter((t) => !this.vectors.has(this.key(t))))];
    this.hits += texts.length - missing.length;
    this.misses += missing.length;
    if (missing.length) {
      const computed = await this.inner.embed(missing);
      const lines: string[] = [];
      missing.forEach((t, i) => {
        const f32 = Float32Array.from(computed[i]!);
        this.vectors.set(this.key(t), Array.from(f32));
        lines.push(JSON.stringify({ k: this.key(t), v: Buffer.from(f32.buffer).toString('base64') }));
      });
      fs.appendFileSync(this.file, `${lines.join('\n')}\n`);
    }
    return texts.map((t) => this.vectors.get(this.key(t))!);
  }

  async embedWithUsage(texts: string[]): Promise<EmbeddingResult> {
    return { vectors: await this.embed(texts), inputTokens: 0 };
  }
}
