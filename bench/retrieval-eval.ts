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
 * on the TUNING parts only, a linear model of each candidate's five inputs (its min-max
 * normalised dense, sparse and BM25 scores, and the re-scoring features name_match and
 * lead_match of lib/retrieval/rescoring.ts, computed by the search's own functions) is fitted
 * to put each query's relevant document first (fitRankingModel); its weights, scaled to BM25 = 1,
 * are the default stream weights (retrievalDefaults) and re-scoring weights (learnedFeatureWeights).
 * Within the tuning parts, the same fit on half of the Python modules is scored on the other half,
 * as a check that the model holds on modules it was not fitted on. The held-out parts are never
 * looked at to choose anything; their numbers are reported for the defaults in the code, for the
 * same weights without re-scoring, and for the previous defaults (score fusion, dense 0.4, sparse
 * 0.6, BM25 1, no re-scoring) on the same streams.
 *
 * Environment: WEAVIATE_URL, RETRIEVAL_EVAL_CACHE_DIR, RETRIEVAL_EVAL_WRITE=0 (do not write
 * bench/RESULTS.md); EMBEDDING_MODEL, OPENAI_BASE_URL, OPENAI_API_KEY, EMBEDDING_DIMENSIONS measure
 * another embedding model instead of the local encoder (its calls are paid; the fit tells what dense
 * weight it earns). Replaces its section of bench/RESULTS.md.
 */
import crypto from 'node:crypto';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { VectorIndex } from '../lib/providers/vector-index.js';
import { embedderFromConfig } from '../lib/providers/embeddings.js';
import { fuseVariants, fusionUnit, queryLanguages, rescore, retrievalDefaults, streamNames, type FusedHit, type FusionMethod, type StreamName } from '../lib/retrieval/hybrid-search.js';
import { featureValues, rescoringFeatures, type FeatureValues } from '../lib/retrieval/rescoring.js';
import { startWeaviate, type WeaviateProcess } from '../scripts/stack.js';
import { buildEvalSets, type EvalSet } from '../scripts/retrieval-eval-sets.js';
import { CachedEmbeddings } from './support/embedding-cache.js';
import { indexPart, itemMetrics, meanMetrics, rankedDocuments, runQueries, type IndexedPart, type Metrics, type QueryRun } from './support/retrieval-harness.js';

const benchDir = path.dirname(fileURLToPath(import.meta.url));

/** A ranking of a query's candidates: a fusion of the streams, then the learned re-scoring when `rescoring` is set. */
export interface RankingConfig {
  fusion: FusionMethod;
  weights: Record<StreamName, number>;
  rrfK: number;
  rescoring: FeatureValues | null;
}

export const currentDefaults: RankingConfig = { fusion: retrievalDefaults.fusion, weights: retrievalDefaults.weights, rrfK: retrievalDefaults.rrfK, rescoring: retrievalDefaults.rescoring };
/** The defaults before the learned re-scoring: score fusion, weights chosen by a grid on the tuning parts. */
export const previousDefaults: RankingConfig = { fusion: 'score', weights: { dense: 0.4, sparse: 0.6, bm25: 1 }, rrfK: 15, rescoring: null };

/** The whole ranking the search gives a query's retrieved streams under `config` (the search's own functions). */
export function rankFor(run: QueryRun, indexed: IndexedPart, config: RankingConfig): FusedHit[] {
  const fused = fuseVariants(run.outcome.variants, config.weights, config.rrfK, Number.MAX_SAFE_INTEGER, config.fusion);
  return config.rescoring ? rescore(fused, run.outcome.variants, config.rescoring, fusionUnit(config.fusion, config.rrfK), queryLanguages(indexed)) : fused;
}

export function fusedMetrics(runs: QueryRun[], indexed: IndexedPart, config: RankingConfig): Metrics {
  return meanMetrics(runs.map((r) => itemMetrics(rankedDocuments(rankFor(r, indexed, config), indexed.documentIds), r.relevant)));
}

export function streamMetrics(runs: QueryRun[], indexed: IndexedPart, stream: StreamName): Metrics {
  return meanMetrics(runs.map((r) => itemMetrics(rankedDocuments(r.outcome.variants[0]!.streams[stream], indexed.documentIds), r.relevant)));
}

/** The ranking model's inputs, in this order: the normalised stream scores, then the re-scoring features. */
const modelInputs = [...streamNames, ...rescoringFeatures];
type ModelWeights = Record<(typeof modelInputs)[number], number>;

const configOf = (w: ModelWeights): RankingConfig => ({
  fusion: 'score',
  rrfK: retrievalDefaults.rrfK,
  weights: { dense: w.dense, sparse: w.sparse, bm25: w.bm25 },
  rescoring: Object.fromEntries(rescoringFeatures.map((f) => [f, w[f]])) as FeatureValues,
});

/** One tuning query as the ranking model sees it: every candidate's inputs, and which are chunks of the relevant document. */
export interface TrainingQuery {
  /** Index of the evaluation set: each set counts once in the fit, however many queries it has. */
  set: number;
  inputs: number[][];
  relevant: boolean[];
}

export function trainingQuery(run: QueryRun, indexed: IndexedPart, set: number): TrainingQuery {
  // Score fusion with every weight 1 of the original query alone: each contribution is the normalised score.
  const variant = { ...run.outcome.variants[0]!, weight: 1 };
  const candidates = fuseVariants([variant], { dense: 1, sparse: 1, bm25: 1 }, retrievalDefaults.rrfK, Number.MAX_SAFE_INTEGER, 'score');
  const features = featureValues(variant.analysed, candidates, queryLanguages(indexed));
  return {
    set,
    inputs: candidates.map((c, i) => [...streamNames.map((s) => c.contributions.original?.[s] ?? 0), ...rescoringFeatures.map((f) => features[i]![f])]),
    relevant: candidates.map((c) => indexed.documentIds.get(c.documentId) === run.relevant),
  };
}

/**
 * Fits the linear ranking model: score = Σ w_i · input_i, trained so that each query's relevant
 * document gets the softmax's mass over its candidates (listwise, temperature 0.1: the cross-entropy
 * of "the relevant chunks come first"), with an L2 penalty of 0.01 on the weights; full-batch Adam
 * (rate 0.02, 400 steps) from the previous defaults, each evaluation set weighing as much as the
 * other. Deterministic. Weights are returned scaled to BM25 = 1 and rounded to two decimals.
 */
export function fitRankingModel(queries: TrainingQuery[]): ModelWeights {
  const TEMPERATURE = 0.1;
  const L2 = 0.01;
  const RATE = 0.02;
  const STEPS = 400;
  const usable = queries.filter((q) => q.relevant.some(Boolean));
  const sets = [...new Set(usable.map((q) => q.set))];
  const perSet = new Map(sets.map((s) => [s, usable.filter((q) => q.set === s).length]));
  const start: ModelWeights = { ...previousDefaults.weights, name_match: 0, lead_match: 0 };
  const w = modelInputs.map((k) => start[k]);
  const m = w.map(() => 0);
  const v = w.map(() => 0);
  for (let step = 1; step <= STEPS; step++) {
    const grad = w.map((x) => L2 * x);
    for (const q of usable) {
      const logits = q.inputs.map((x) => x.reduce((sum, xi, k) => sum + xi * w[k]!, 0) / TEMPERATURE);
      const top = Math.max(...logits);
      const e = logits.map((l) => Math.exp(l - top));
      const all = e.reduce((a, b) => a + b, 0);
      const rel = e.reduce((a, x, i) => a + (q.relevant[i] ? x : 0), 0);
      const weight = 1 / (sets.length * perSet.get(q.set)!);
      q.inputs.forEach((x, i) => {
        const coef = (weight * (e[i]! / all - (q.relevant[i] ? e[i]! / rel : 0))) / TEMPERATURE;
        x.forEach((xi, k) => (grad[k]! += coef * xi));
      });
    }
    grad.forEach((g, k) => {
      m[k] = 0.9 * m[k]! + 0.1 * g;
      v[k] = 0.999 * v[k]! + 0.001 * g * g;
      w[k]! -= (RATE * (m[k]! / (1 - 0.9 ** step))) / (Math.sqrt(v[k]! / (1 - 0.999 ** step)) + 1e-8);
    });
  }
  const bm25 = w[modelInputs.indexOf('bm25')]!;
  return Object.fromEntries(modelInputs.map((k, i) => [k, Math.round((100 * w[i]!) / bm25) / 100])) as ModelWeights;
}

/** Half of the Python modules (by a stable hash of the relevant entry's top-level name). */
const moduleHalf = (run: QueryRun) => crypto.createHash('sha256').update(`fold:${run.relevant.split('.')[0]}`).digest()[0]! % 2;

const describe = (c: RankingConfig) =>
  `${c.fusion}${c.fusion === 'rrf' ? ` k ${c.rrfK}` : ''}, dense ${c.weights.dense}, sparse ${c.weights.sparse}, bm25 ${c.weights.bm25}` +
  (c.rescoring ? `; re-scoring ${rescoringFeatures.map((f) => `${f} ${c.rescoring![f]}`).join(', ')}` : '; no re-scoring');
/**
 * Whether two fitted models agree to within `tolerance` in every weight. A fit with the held-out
 * parts indexed differs from one without them in the second decimal: BM25's term statistics are
 * those of the whole Weaviate class (every knowledge base in it, as in production), not of one part.
 */
const sameModel = (a: RankingConfig, b: RankingConfig, tolerance: number) =>
  a.fusion === b.fusion &&
  streamNames.every((s) => Math.abs(a.weights[s] - b.weights[s]) <= tolerance) &&
  rescoringFeatures.every((f) => a.rescoring !== null && b.rescoring !== null && Math.abs(a.rescoring[f] - b.rescoring[f]) <= tolerance);

interface PartResult {
  set: EvalSet;
  part: 'tuning' | 'heldout';
  indexed: IndexedPart;
  runs: QueryRun[];
}

async function main() {
  const sets = buildEvalSets();
  // RETRIEVAL_EVAL_PARTS=tuning fits the defaults without searching the held-out parts at all.
  const evaluatedParts = process.env.RETRIEVAL_EVAL_PARTS === 'tuning' ? (['tuning'] as const) : (['tuning', 'heldout'] as const);
  let weaviate: WeaviateProcess | null = null;
  let url = process.env.WEAVIATE_URL;
  const dataDir = fs.mkdtempSync(path.join(os.tmpdir(), 'retrieval-eval-'));
  if (!url) {
    weaviate = await startWeaviate({ dataDir, logFile: path.join(dataDir, 'weaviate.log') });
    url = weaviate.url;
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
      for (const part of evaluatedParts) {
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
  const examples = tuning.flatMap((r, set) => r.runs.map((run) => ({ half: moduleHalf(run), query: trainingQuery(run, r.indexed, set) })));
  const fitted = configOf(fitRankingModel(examples.map((e) => e.query)));
  process.stderr.write(`fitted on the tuning parts: ${describe(fitted)}\n`);
  // The same fit on half of each tuning part's modules, scored on the other half (and the other way round).
  const halves = [0, 1].map((half) => {
    const model = configOf(fitRankingModel(examples.filter((e) => e.half !== half).map((e) => e.query)));
    return tuning.map((r) => {
      const held = r.runs.filter((run) => moduleHalf(run) === half);
      return { n: held.length, before: fusedMetrics(held, r.indexed, previousDefaults).ndcg10, after: fusedMetrics(held, r.indexed, model).ndcg10 };
    });
  });
  const crossFit = tuning.map((r, i) => {
    const [a, b] = [halves[0]![i]!, halves[1]![i]!];
    const mean = (k: 'before' | 'after') => (a[k] * a.n + b[k] * b.n) / (a.n + b.n);
    return { set: r.set.name, before: mean('before'), after: mean('after') };
  });

  const f = (x: number) => x.toFixed(3);
  const signed = (x: number) => `${x >= 0 ? '+' : ''}${f(x)}`;
  const lines: string[] = [];
  const parts = [...new Set(results.map((r) => r.part))];
  for (const set of sets) {
    lines.push(`**${set.name}** (${set.kind}). ${set.description}`, '');
    lines.push('| part | documents / queries | ranking | nDCG@10 | MRR | recall@50 |', '|---|---|---|---:|---:|---:|');
    for (const part of parts) {
      const r = results.find((x) => x.set === set && x.part === part)!;
      const label = `${part === 'tuning' ? 'tuning' : '**held-out**'}`;
      const size = `${set[part].documents.length} / ${set[part].queries.length}`;
      const withoutRescoring = { ...currentDefaults, rescoring: null };
      const rows: Array<[string, Metrics]> = [
        ...streamNames.map((s) => [`${s} stream`, streamMetrics(r.runs, r.indexed, s)] as [string, Metrics]),
        [`fused, defaults (${describe(currentDefaults)})`, fusedMetrics(r.runs, r.indexed, currentDefaults)],
        [`fused, the same without re-scoring`, fusedMetrics(r.runs, r.indexed, withoutRescoring)],
        [`fused, previous defaults (${describe(previousDefaults)})`, fusedMetrics(r.runs, r.indexed, previousDefaults)],
      ];
      const bestStream = Math.max(...rows.slice(0, 3).map(([, m]) => m.ndcg10));
      for (const [name, m] of rows) lines.push(`| ${label} | ${size} | ${name} | ${f(m.ndcg10)} | ${f(m.mrr)} | ${f(m.recall50)} |`);
      lines.push(`| ${label} | | fused (defaults) − best stream | ${signed(rows[3]![1].ndcg10 - bestStream)} | | |`);
      lines.push(`| ${label} | | fused (previous defaults) − best stream | ${signed(rows[5]![1].ndcg10 - bestStream)} | | |`);
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
    'fused: the whole ranked candidate list (`combined_results` is its first 12). Each part is its own knowledge base.',
    '',
    ...lines,
    '**How the defaults were chosen.** Only on the tuning parts: every candidate of every tuning query was described by five inputs, its',
    'min-max normalised dense, sparse and BM25 scores and the re-scoring features `name_match` and `lead_match` (lib/retrieval/rescoring.ts,',
    'computed by the search\'s own functions), and a linear model of them was fitted to put the relevant document first (`fitRankingModel`:',
    'listwise softmax cross-entropy, temperature 0.1, L2 0.01, each set weighing once). Its weights, scaled to BM25 = 1, are the default stream',
    'weights (`retrievalDefaults`) and the re-scoring weights (`learnedFeatureWeights`). The held-out parts were not used for any choice; they are',
    'split from the tuning parts by top-level Python module, so no module\'s text is in both.',
    '',
    `This run's fit: ${describe(fitted)}.`,
    sameModel(fitted, currentDefaults, 0)
      ? 'The defaults in the code are this fit.'
      : sameModel(fitted, currentDefaults, 0.02)
        ? `The defaults in the code (${describe(currentDefaults)}) are the fit of a run on the tuning parts alone (RETRIEVAL_EVAL_PARTS=tuning), within 0.02 of this one in every weight: BM25's term statistics are those of the whole Weaviate class, which here holds the held-out parts too.`
        : `The defaults in the code differ: ${describe(currentDefaults)}.`,
    '',
    'Within the tuning parts, fitted on the queries of half of the Python modules and scored on the other half (both ways round),',
    'nDCG@10 of the previous defaults → the fitted model:',
    ...crossFit.map((c) => `${c.set} ${f(c.before)} → ${f(c.after)} (${signed(c.after - c.before)})${c === crossFit.at(-1) ? '.' : ';'}`),
    '<!-- retrieval-quality:end -->',
  ].join('\n');
  process.stdout.write(`${section}\n`);
  if (process.env.RETRIEVAL_EVAL_WRITE !== '0' && parts.includes('heldout')) {
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
