import assert from 'node:assert/strict';
import { bm25Document, bm25Query, supportedBm25Languages } from '../../lib/retrieval/language-analysis.js';
import { detectLanguage } from '../../lib/platform/language-detection.js';
import { sparseVector } from '../../lib/retrieval/sparse-vector.js';
import { chunkText } from '../../lib/retrieval/chunking.js';
import { buildManifest, nestSections } from '../../lib/retrieval/toc.js';

const cosine = (a: number[], b: number[]) => a.reduce((s, x, i) => s + x * b[i]!, 0);

describe('per-language analysis for BM25 and the sparse vector', () => {
  it('detects the language of a chunk and stems with that language', () => {
    assert.equal(detectLanguage('The configuration of the servers is read when the service starts.'), 'eng');
    assert.equal(detectLanguage('Die Konfiguration der Server wird beim Start des Dienstes gelesen.'), 'deu');
    assert.equal(detectLanguage('short'), 'und');
    assert.equal(bm25Document('Configurations are running', 'eng'), 'configur run');
    // German stemming folds plural and inflected forms onto one term; accents are folded after stemming.
    assert.equal(bm25Document('Kündigungen', 'deu'), bm25Document('Kündigung', 'deu'));
  });

  it('analyses the query with every language the KB holds', () => {
    const q = bm25Query('Kündigungen configurations', ['eng', 'deu']).split(' ');
    assert.ok(q.includes('configur'), 'English stem');
    assert.ok(q.includes(bm25Document('Kündigung', 'deu')), 'German stem');
  });

  it('indexes Chinese and Japanese as character bigrams', () => {
    assert.deepEqual(bm25Document('数据库备份', 'cmn').split(' '), ['数据', '据库', '库备', '备份']);
    assert.ok(supportedBm25Languages.some((l) => l.code === 'jpn' && l.analysis === 'cjk_bigrams'));
    assert.ok(supportedBm25Languages.some((l) => l.code === 'deu' && l.analysis === 'snowball'));
  });

  it('the n-gram sparse vector matches word parts that whole-term BM25 does not', () => {
    const doc = sparseVector('The autoscaler adds worker nodes under load', 'eng');
    const related = sparseVector('autoscaling', 'eng');
    const unrelated = sparseVector('espresso descaling tablets', 'eng');
    assert.ok(cosine(doc, related) > cosine(doc, unrelated) + 0.05, `${cosine(doc, related)} vs ${cosine(doc, unrelated)}`);
    assert.ok(Math.abs(Math.hypot(...doc) - 1) < 1e-9, 'unit length');
    // BM25 terms differ: "autoscal" vs "autoscal" would match only if the stems agree.
    assert.notEqual(bm25Document('autoscaler', 'eng'), bm25Document('autoscaling', 'eng'));
  });
});

describe('embedding manifest and table of contents', () => {
  it('records each heading with the chunk range under it, nested by level', () => {
    const text = 'Preamble text.\n\n# Guide\n\nIntro.\n\n## Install\n\nSteps.\n\n## Configure\n\nSettings.\n\n# FAQ\n\nAnswers.';
    const chunks = chunkText(text);
    const manifest = buildManifest(chunks, chunks.map(() => 'eng'), 'local');
    assert.equal(manifest.chunk_count, chunks.length);
    assert.equal(manifest.preamble_chunks, 1);
    const toc = nestSections(manifest.sections);
    assert.deepEqual(toc.map((n) => n.title), ['Guide', 'FAQ']);
    assert.deepEqual(toc[0]!.children.map((n) => n.title), ['Install', 'Configure']);
    assert.equal(toc[0]!.chunk_start, 1);
    assert.equal(toc[0]!.chunk_end, toc[0]!.children[1]!.chunk_end, 'a section spans its subsections');
    assert.equal(toc[1]!.chunk_start, chunks.length - 1);
  });
});
