import assert from 'node:assert/strict';
import crypto from 'node:crypto';
import { ConfigError, loadConfig } from '../../lib/platform/config.js';
import { createServices, type Services } from '../../lib/services.js';
import type { SearchHit } from '../../lib/providers/vector-index.js';
import { chunkClassFor } from '../../lib/providers/vector-index.js';
import { fuseVariants, fusionUnit, rescore, retrievalDefaults, searchKnowledgeBase, type FusedHit, type Streams } from '../../lib/retrieval/hybrid-search.js';
import { configuredDefaults } from '../../lib/retrieval/rag-search.js';
import { analyseQuery, leadMatches, learnedFeatureWeights, nameLeaf, nameMatch, rescoringFeatures, type AnalysedQuery } from '../../lib/retrieval/rescoring.js';
import { systemEnv } from '../support/stack.js';
import { indexText } from '../support/retrieval.js';

/**
 * The learned re-scoring after fusion (lib/retrieval/rescoring.ts): its two features computed by
 * hand, the re-ordering they cause, their scale under either fusion and per query variant, the
 * switch, and one search through Weaviate in which it lifts the document the query names.
 */
const close = (a: number, b: number, what = '') => assert.ok(Math.abs(a - b) < 1e-9, `${what} ${a} ≠ ${b}`);
const hit = (id: string, documentName: string, text: string, score: number): SearchHit => ({ id, documentId: `doc-${id}`, documentName, chunkIndex: 0, text, score });
const words = (...w: string[]): AnalysedQuery => ({ bm25: w.join(' '), stems: w, words: w });
/** The score a hit's parts add up to: every stream's and every feature's contribution, over all variants. */
const sumOfParts = (h: FusedHit) =>
  [...Object.values(h.contributions), ...Object.values(h.featureContributions)].reduce((sum, parts) => sum + Object.values(parts ?? {}).reduce((a, b) => a + b, 0), 0);

describe('learned re-scoring', () => {
  it('name_match: the share of the name leaf\'s letters that query words of 3+ characters cover, either way round', () => {
    assert.equal(nameLeaf('os.path.join'), 'join');
    assert.equal(nameLeaf('Pump controller manual.md'), 'Pump controller manual', 'a file extension is dropped');
    assert.equal(nameLeaf('Release notes 1.2.pdf'), 'Release notes 1.2', 'a dot before a digit separates nothing');
    assert.equal(nameLeaf('docs/setup/install.md'), 'install');
    assert.equal(nameLeaf('enum.Flag.__contains__'), '__contains__');

    const q = ['set', 'default', 'content', 'type'];
    assert.equal(nameMatch('email.message.Message.set_default_type', q), 1, 'set + default + type = all 14 letters');
    close(nameMatch('email.message.Message.get_default_type', q), 11 / 14, 'default + type of getdefaulttype');
    // Query words inside a name written as one word.
    assert.equal(nameMatch('codecs.StreamReader.readline', ['read', 'line', 'input', 'stream']), 1);
    close(nameMatch('codecs.StreamReader.readlines', ['read', 'line', 'input', 'stream']), 8 / 9);
    // A name token inside a query word.
    assert.equal(nameMatch('bytes.hex', ['create', 'string', 'hexadecimal', 'bytes']), 1);
    assert.equal(nameMatch('bytes.fromhex', ['create', 'string', 'hexadecimal', 'bytes']), 0, '"fromhex" is neither inside a query word nor covered by one');
    close(nameMatch('Pump controller manual.md', ['calibrate', 'pump']), 4 / 20, 'pump of pumpcontrollermanual; the extension is not counted');
    assert.equal(nameMatch('Kündigung.md', ['kundigung']), 1, 'accents are folded on both sides');
    assert.equal(nameMatch('os.path.join', []), 0);
  });

  it('a query\'s words for names are its content words and BM25 terms of 3+ characters, without function words', () => {
    const q = analyseQuery('Set the default content type.', ['eng']);
    for (const w of ['set', 'default', 'content', 'type']) assert.ok(q.words.includes(w), w);
    assert.ok(!q.words.includes('the') && !q.stems.includes('the'), 'a function word of the KB\'s language is no query term');
    assert.ok(q.bm25.split(' ').includes('default'), 'the BM25 stream\'s query');
  });

  it('lead_match: the rarity-weighted share of the query terms that begin one of the chunk\'s first 15 content words', () => {
    const texts = [
      // The heading line is not the opening: "kettle" there does not count, and not for rarity either.
      '# Kettle care\nDescale it monthly with citric acid.',
      // "kettle" is its 3rd content word; "descale" its 21st, past the opening.
      'Boil water in the kettle, pour it over the tea leaves, wait three minutes, strain the leaves, add milk and sugar to taste, serve hot, and once a month descale.',
      'Nothing relevant here.',
    ];
    // n = 3; "descal" begins a word of the first two bodies: rarity ln(1 + 3/3) = ln 2; "kettl" only of the second: ln(1 + 3/2) = ln 2.5.
    const total = Math.log(2) + Math.log(2.5);
    const [first, second, third] = leadMatches(['descal', 'kettl'], texts, ['eng']);
    close(first!, Math.log(2) / total, 'first');
    close(second!, Math.log(2.5) / total, 'second');
    assert.equal(third, 0);
    assert.deepEqual(leadMatches([], texts, ['eng']), [0, 0, 0], 'no terms, no evidence');
  });

  it('moves the document the query names above the one the streams prefer, by the hand-computed scores', () => {
    // Query "Set the default content type."; streams without dense. Normalised (min-max):
    //   get: bm25 (10 - 2) / 8 = 1,        sparse (0.5 - 0.1) / 0.4 = 1        -> fused 1 + 0.42 = 1.42
    //   set: bm25 (9.5 - 2) / 8 = 0.9375,  sparse 0.375 / 0.4 = 0.9375         -> fused 1.42 · 0.9375 = 1.33125
    //   chdir: 0, 0                                                            -> fused 0
    const get = hit('g', 'email.message.Message.get_default_type', "Return the message's default type.", 0);
    const set = hit('s', 'email.message.Message.set_default_type', 'Set the default type.', 0);
    const chdir = hit('c', 'os.chdir', 'Change the working directory.', 0);
    const streams: Streams = {
      bm25: [{ ...get, score: 10 }, { ...set, score: 9.5 }, { ...chdir, score: 2 }],
      sparse: [{ ...get, score: 0.5 }, { ...set, score: 0.475 }, { ...chdir, score: 0.1 }],
    };
    const fused = fuseVariants([{ name: 'original', weight: 1, streams }], { dense: 0.28, sparse: 0.42, bm25: 1 }, 15, 10, 'score');
    assert.deepEqual(fused.map((h) => h.id), ['g', 's', 'c'], 'the streams prefer get_default_type');

    // lead_match over the 3 candidates: "set" opens 1 body (rarity ln 2.5), "default" 2 (ln 2), "content" none (ln 4), "type" 2 (ln 2).
    const total = Math.log(2.5) + Math.log(2) + Math.log(4) + Math.log(2);
    const lead = { g: (2 * Math.log(2)) / total, s: (Math.log(2.5) + 2 * Math.log(2)) / total, c: 0 };
    const name = { g: 11 / 14, s: 1, c: 0 };
    const weights = { name_match: 0.5, lead_match: 1 };
    const rescored = rescore(fused, [{ name: 'original', weight: 1, analysed: words('set', 'default', 'content', 'type') }], weights, fusionUnit('score', 15), ['eng']);
    const expected = { g: 1.42 + 0.5 * name.g + lead.g, s: 1.33125 + 0.5 * name.s + lead.s, c: 0 };
    assert.deepEqual(rescored.map((h) => h.id), ['s', 'g', 'c'], 'set_default_type comes first');
    for (const h of rescored) {
      const id = h.id as keyof typeof expected;
      close(h.score, expected[id], `score of ${id}`);
      close(h.features.original!.name_match, name[id], `name_match of ${id}`);
      close(h.features.original!.lead_match, lead[id], `lead_match of ${id}`);
      close(h.featureContributions.original!.lead_match, lead[id], 'weight 1 · value');
      close(sumOfParts(h), h.score, 'stream and feature contributions add up to the score');
    }
    assert.deepEqual(rescored.map((h) => h.rankWithoutRescoring), [2, 1, 3], 'where the streams alone put each');
    fused.forEach((h, i) => close(h.score, [1.42, 1.33125, 0][i]!, 'the fused list itself is left as it was'));
  });

  it('features are weighed in the fusion\'s unit (a weight-1 stream\'s first place) and by the query variant\'s weight', () => {
    const a = hit('a', 'Kettle.md', 'Descale the kettle monthly.', 0);
    const b = hit('b', 'Fridge.md', 'Defrost the freezer.', 0);
    const streams: Streams = { bm25: [{ ...b, score: 3 }, { ...a, score: 1 }] };
    const runs = [
      { name: 'original' as const, weight: 1, streams },
      { name: 'replaced' as const, weight: 0.5, streams },
    ];
    const fused = fuseVariants(runs, { dense: 0, sparse: 0, bm25: 1 }, 15, 10, 'rrf');
    // RRF: b = 1/16 + 0.5/16 = 0.09375; a = 1/17 + 0.5/17.
    close(fused[0]!.score, 1.5 / 16);
    const unit = fusionUnit('rrf', 15);
    close(unit, 1 / 16);
    const rescored = rescore(
      fused,
      [
        { name: 'original', weight: 1, analysed: words('kettle') },
        { name: 'replaced', weight: 0.5, analysed: words('fridge') },
      ],
      { name_match: 1, lead_match: 0 },
      unit,
      ['eng'],
    );
    const byId = Object.fromEntries(rescored.map((h) => [h.id, h]));
    // a: name_match 1 for "kettle" (original), 0 for "fridge"; b the other way round.
    close(byId.a!.featureContributions.original!.name_match, unit * 1 * 1);
    close(byId.a!.featureContributions.replaced!.name_match, 0);
    close(byId.b!.featureContributions.replaced!.name_match, unit * 0.5 * 1);
    close(byId.a!.score, 1.5 / 17 + 1 / 16);
    close(byId.b!.score, 1.5 / 16 + 0.5 / 16);
    assert.deepEqual(rescored.map((h) => h.id), ['a', 'b'], 'a: 0.1507 over b: 0.125');
  });

  it('RETRIEVAL_RESCORING turns the stage on (the default, with the learned weights) or off; other values are refused', () => {
    const base = systemEnv();
    assert.deepEqual(configuredDefaults(loadConfig(base)).rescoring, learnedFeatureWeights);
    assert.deepEqual(retrievalDefaults.rescoring, learnedFeatureWeights);
    assert.equal(configuredDefaults(loadConfig({ ...base, RETRIEVAL_RESCORING: 'off' })).rescoring, null);
    assert.deepEqual(configuredDefaults(loadConfig({ ...base, RETRIEVAL_RESCORING: 'on' })).rescoring, learnedFeatureWeights);
    assert.throws(() => loadConfig({ ...base, RETRIEVAL_RESCORING: 'yes' }), ConfigError);
    assert.deepEqual([...rescoringFeatures], ['name_match', 'lead_match']);
  });
});

describe('learned re-scoring in a search through Weaviate', function () {
  this.timeout(120_000);
  let services: Services;
  const knowledgeBaseId = crypto.randomUUID();
  const ids = new Map<string, string>();
  const docs: Record<string, string> = {
    'Kettle.md': '# Kettle\n\nDescale it every month with citric acid, then rinse it twice before boiling water again.',
    'Appliance care.md':
      '# Appliance care\n\nEmpty the crumb tray of the toaster every week, wipe the rubber seal of the oven door, clean the filter of the extractor hood ' +
      "and check the dishwasher's salt. A descaled kettle boils faster, so descale the kettle: kettle descaling keeps the kettle quiet, and a kettle " +
      'that was descaled lasts longer.',
    'Fridge.md': '# Fridge\n\nDefrost the freezer when the ice is thicker than five millimetres; keep the door closed meanwhile.',
  };

  before(async () => {
    services = createServices(loadConfig(systemEnv()), 'test');
    const className = chunkClassFor(services.embedder.profile.name);
    for (const [name, text] of Object.entries(docs)) {
      const documentId = crypto.randomUUID();
      ids.set(name, documentId);
      await indexText(services, { partnerId: 'rescoring-test', knowledgeBaseId, documentId, documentName: name }, text);
    }
    await services.index.waitForIndexing(60_000, undefined, [className]);
  });
  after(async () => {
    for (const id of ids.values()) await services.index.deleteDocumentChunks(id);
    await services.db.$disconnect();
  });

  it('the streams prefer the text that repeats the query\'s words; the re-scoring lifts the document the query names, and says why', async () => {
    const scope = { knowledgeBaseId, languages: ['eng'] };
    const query = 'how do I descale my kettle';
    const without = await searchKnowledgeBase(services, scope, query, { ...retrievalDefaults, rescoring: null });
    const withIt = await searchKnowledgeBase(services, scope, query, retrievalDefaults);
    const nameOf = (h: FusedHit) => [...ids].find(([, id]) => id === h.documentId)![0];
    assert.equal(nameOf(without.combined[0]!), 'Appliance care.md', `streams alone: ${without.combined.map(nameOf)}`);
    assert.equal(nameOf(withIt.combined[0]!), 'Kettle.md', `re-scored: ${withIt.combined.map((h) => `${nameOf(h)} ${h.score.toFixed(3)} ${JSON.stringify(h.features.original)}`)}`);

    const kettle = withIt.combined[0]!;
    assert.equal(kettle.rankWithoutRescoring, 2);
    assert.equal(kettle.features.original!.name_match, 1, '"kettle" covers the whole name "Kettle"');
    assert.equal(withIt.combined.find((h) => nameOf(h) === 'Appliance care.md')!.features.original!.name_match, 0);
    for (const h of withIt.combined) {
      close(sumOfParts(h), h.score, `parts of ${nameOf(h)}`);
      const plain = without.ranked.find((x) => x.id === h.id)!;
      close(h.score - plain.score, Object.values(h.featureContributions.original!).reduce((a, b) => a + b, 0), 'the features add to the fused score');
    }
    assert.equal(typeof withIt.timings_ms.rescore, 'number');
    assert.equal(without.timings_ms.rescore, undefined);
  });
});
