/**
 * Retrieval quality on held-out data (issue #21): nDCG@10, MRR and recall@50 of each stream and of
 * the fused ranking, for every evaluation set of scripts/retrieval-eval-sets.ts, on its tuning part
 * and on its held-out part.
 *
 *   npm run eval:retrieval
 *
 * Measured through the system's own path (bench/support/retrieval-harness.ts): documents are
 * chunked and indexed by lib/retrieval/indexing.ts into a Weaviate this script starts (or
 * WEAVIATE_URL), with the local sentence encoder (vectors cached in ~/.cache/dwb-eval, so a second
 * run embeds nothing), and every query is searched by searchKnowledgeBase, the search code of
 * /api/rag-test/search, with the production defaults.
 *
 * How the defaults are chosen (run on every evaluation, printed, and written to bench/RESULTS.md):
 * a grid over the fusion method and the stream weights is scored on the TUNING parts only (mean
 * nDCG@10 over the sets, each set counting once), by fusing the streams every tuning query
 * already retrieved with the same fusion function the search uses. The held-out parts are never
 * looked at to choose anything; their numbers are reported for the defaults in the code and for the
 * previous defaults (weighted RRF, dense 1.2, sparse 0.3, BM25 0.8, k 15) on the same streams.
 *
 * Environment: WEAVIATE_URL, RETRIEVAL_EVAL_CACHE_DIR, RETRIEVAL_EVAL_WRITE=0 (do not write
 * bench/RESULTS.md); EMBEDDING_MODEL, OPENAI_BASE_URL, OPENAI_API_KEY, EMBEDDING_DIMENSIONS measure
 * another embedding model instead of the local encoder (its calls are paid; its grid tells what dense
 * weight it earns). Replaces its section of bench/RESULTS.md.
 */
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { VectorIndex } from '../lib/providers/vector-index.js';
import { embedderFromConfig } from '../lib/providers/embeddings.js';
import { fuseVariants, retrievalDefaults, streamNames, type FusionMethod, type StreamName } from '../lib/retrieval/hybrid-search.js';
import { freePort, startWeaviate, type ManagedProcess } from '../scripts/stack.js';
import { buildEvalSets, type EvalSet } from '../scripts/retrieval-eval-sets.js';
import { CachedEmbeddings } from './support/embedding-cache.js';
import { indexPart, itemMetrics, meanMetrics, rankedDocuments, runQueries, type IndexedPart, type Metrics, type QueryRun } from './support/retrieval-harness.js';

const benchDir = path.dirname(fileURLToPath(import.meta.url));

export interface FusionConfig {
  fusion: FusionMethod;
  weights: Record<StreamName, number>;
  rrfK: number;
}

export const previousDefaults: FusionConfig = { fusion: 'rrf', weights: { dense: 1.2, sparse: 0.3, bm25: 0.8 }, rrfK: 15 };
export const currentDefaults: FusionConfig = { fusion: retrievalDefaults.fusion, weights: retrievalDefaults.weights, rrfK: retrievalDefaults.rrfK };

/** Mean metrics of a fusion applied to the streams the queries already retrieved (the search's own fusion function). */
export function fusedMetrics(runs: QueryRun[], indexed: IndexedPart, config: FusionConfig): Metrics {
  return meanMetrics(
    runs.map((r) => {
      const ranked = fuseVariants(r.outcome.variants, config.weights, config.rrfK, Number.MAX_SAFE_INTEGER, config.fusion);
      return itemMetrics(rankedDocuments(ranked, indexed.documentIds), r.relevant);
    }),
  );
}

export function streamMetrics(runs: QueryRun[], indexed: IndexedPart, stream: StreamName): Metrics {
  return meanMetrics(runs.map((r) => itemMetrics(rankedDocuments(r.outcome.variants[0]!.streams[stream], indexed.documentIds), r.relevant)));
}

/** The grid the defaults are chosen from (bm25 fixes the scale: both fusions are linear in the weights). */
export function fusionGrid(): FusionConfig[] {
  const out: FusionConfig[] = [];
  const dense = [0, 0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.8, 1, 1.2];
  const sparse = [0, 0.2, 0.4, 0.6, 0.8, 1, 1.2];
  for (const fusion of ['score', 'rrf'] as const) {
    for (const rrfK of fusion === 'rrf' ? [5, 15, 30, 60] : [retrievalDefaults.rrfK]) {
      for (const d of dense) for (const s of sparse) out.push({ fusion, rrfK, weights: { dense: d, sparse: s, bm25: 1 } });
    }
  }
  return out;
}

const describe = (c: FusionConfig) => `${c.fusion}${c.fusion === 'rrf' ? ` k ${c.rrfK}` : ''}, dense ${c.weights.dense}, sparse ${c.weights.sparse}, bm25 ${c.weights.bm25}`;
const same = (a: FusionConfig, b: FusionConfig) =>
  a.fusion === b.fusion && (a.fusion === 'score' || a.rrfK === b.rrfK) && streamNames.every((s) => Math.abs(a.weights[s] / a.weights.bm25 - b.weights[s] / b.weights.bm25) < 1e-9);

interface PartResult {
  set: EvalSet;
  part: 'tuning' | 'heldout';
  indexed: IndexedPart;
  runs: QueryRun[];
}

async function main() {
  const sets = buildEvalSets();
  let weaviate: ManagedProcess | null = null;
  let url = process.env.WEAVIATE_URL;
  const dataDir = fs.mkdtempSync(path.join(os.tmpdir(), 'retrieval-eval-'));
  if (!url) {
    const port = await freePort();
    weaviate = await startWeaviate({ port, dataDir, logFile: path.join(dataDir, 'weaviate.log') });
    url = `http://127.0.0.1:${port}`;
  }
  const started = Date.now();
  const index = new VectorIndex(url);
  // The configured model: the local encoder, or EMBEDDING_MODEL at OPENAI_BASE_URL (paid calls, cached too).
  const env = process.env;
  const embedder = new CachedEmbeddings(
    embedderFromConfig({
      openaiBaseUrl: env.OPENAI_BASE_URL || null,
      openaiApiKey: env.OPENAI_API_KEY || null,
      embedding: { model: env.EMBEDDING_MODEL || null, dimensions: env.EMBEDDING_DIMENSIONS ? Number(env.EMBEDDING_DIMENSIONS) : null, priceUsdPerMillionTokens: null },
    }),
  );
  const deps = { index, embedder };
  const results: PartResult[] = [];
  try {
    for (const set of sets) {
      for (const part of ['tuning', 'heldout'] as const) {
        const t = Date.now();
        const indexed = await indexPart(deps, `${set.name}:${part}:${process.pid}`, set[part]);
        const runs = await runQueries(deps, indexed, set[part], retrievalDefaults);
        process.stderr.write(`${set.name} ${part}: ${set[part].documents.length} documents (${indexed.chunkCount} chunks), ${runs.length} queries, ${((Date.now() - t) / 1000).toFixed(0)} s\n`);
        results.push({ set, part, indexed, runs });
      }
    }
  } finally {
    await weaviate?.stop();
    fs.rmSync(dataDir, { recursive: true, force: true });
  }

  // Choosing the defaults: tuning parts only.
  const tuning = results.filter((r) => r.part === 'tuning');
  const scored = fusionGrid().map((config) => {
    const perSet = tuning.map((r) => fusedMetrics(r.runs, r.indexed, config).ndcg10);
    return { config, perSet, mean: perSet.reduce((a, b) => a + b, 0) / perSet.length };
  });
  scored.sort((a, b) => b.mean - a.mean);
  const best = scored[0]!;
  const inCode = scored.find((s) => same(s.config, currentDefaults));

  const f = (x: number) => x.toFixed(3);
  const lines: string[] = [];
  for (const set of sets) {
    lines.push(`**${set.name}** (${set.kind}). ${set.description}`, '');
    lines.push('| part | documents / queries | ranking | nDCG@10 | MRR | recall@50 |', '|---|---|---|---:|---:|---:|');
    for (const part of ['tuning', 'heldout'] as const) {
      const r = results.find((x) => x.set === set && x.part === part)!;
      const label = `${part === 'tuning' ? 'tuning' : '**held-out**'}`;
      const size = `${set[part].documents.length} / ${set[part].queries.length}`;
      const rows: Array<[string, Metrics]> = [
        ...streamNames.map((s) => [`${s} stream`, streamMetrics(r.runs, r.indexed, s)] as [string, Metrics]),
        [`fused, defaults (${describe(currentDefaults)})`, fusedMetrics(r.runs, r.indexed, currentDefaults)],
        [`fused, previous defaults (${describe(previousDefaults)})`, fusedMetrics(r.runs, r.indexed, previousDefaults)],
      ];
      const bestStream = Math.max(...rows.slice(0, 3).map(([, m]) => m.ndcg10));
      for (const [name, m] of rows) lines.push(`| ${label} | ${size} | ${name} | ${f(m.ndcg10)} | ${f(m.mrr)} | ${f(m.recall50)} |`);
      const gain = rows[3]![1].ndcg10 - bestStream;
      lines.push(`| ${label} | | fused (defaults) − best stream | ${gain >= 0 ? '+' : ''}${f(gain)} | | |`);
    }
    lines.push('');
  }

  const section = [
    '<!-- retrieval-quality:start -->',
    '## Retrieval quality (`npm run eval:retrieval`)',
    '',
    `Run ${new Date().toISOString().slice(0, 10)} on ${os.cpus().length} × ${os.cpus()[0]?.model.trim()}, Weaviate 1.39, embedding profile ${embedder.profile.name}; ${((Date.now() - started) / 1000).toFixed(0)} s (embeddings cached: ${embedder.hits} hits, ${embedder.misses} computed).`,
    `Sets built by \`scripts/retrieval-eval-sets.ts\` from ${sets[0]!.source}; nothing of them is committed. Known-item search: one relevant document per query;`,
    'a document counts at the rank of its first chunk. Streams: the original query\'s candidate lists (top_k 12 × search_multiplier 6 = 72 chunks each);',
    'fused: the whole fused candidate list (`combined_results` is its first 12). Each part is its own knowledge base.',
    '',
    ...lines,
    '**How the defaults were chosen.** Only on the tuning parts: each tuning query\'s three streams were fused with every configuration of a grid',
    `(${fusionGrid().length} configurations: fusion \`score\` or \`rrf\` with k 5, 15, 30 or 60; dense weight 0-1.2, sparse weight 0-1.2, BM25 weight 1),`,
    'scored by mean nDCG@10 over the sets (each set once), and the best was written into `retrievalDefaults` (lib/retrieval/hybrid-search.ts).',
    'The held-out parts were not used for any choice; they are split from the tuning parts by top-level Python module, so no module\'s text is in both.',
    'Best five on the tuning parts in this run:',
    '',
    '| configuration | ' + tuning.map((r) => `${r.set.name} tuning nDCG@10`).join(' | ') + ' | mean |',
    '|---|' + tuning.map(() => '---:').join('|') + '|---:|',
    ...scored.slice(0, 5).map((s) => `| ${describe(s.config)} | ${s.perSet.map(f).join(' | ')} | ${f(s.mean)} |`),
    '',
    inCode && same(best.config, currentDefaults)
      ? `The defaults in the code are this run's best configuration on the tuning parts (${describe(currentDefaults)}).`
      : `The defaults in the code (${describe(currentDefaults)}) score ${inCode ? f(inCode.mean) : 'n/a'} on the tuning parts; this run's best is ${describe(best.config)} at ${f(best.mean)}.`,
    '<!-- retrieval-quality:end -->',
  ].join('\n');
  process.stdout.write(`${section}\n`);
  if (process.env.RETRIEVAL_EVAL_WRITE !== '0') {
    const file = path.join(benchDir, 'RESULTS.md');
    const existing = fs.existsSync(file) ? fs.readFileSync(file, 'utf8') : '';
    const marker = /<!-- retrieval-quality:start -->[\s\S]*<!-- retrieval-quality:end -->/;
    fs.writeFileSync(file, marker.test(existing) ? existing.replace(marker, section) : `${existing.trimEnd()}\n\n${section}\n`);
  }
}

if (process.argv[1] && path.resolve(process.argv[1]) === fileURLToPath(import.meta.url)) {
  main().catch((err) => {
    console.error(err);
    process.exit(1);
  });
}
