/**
 * A deterministic corpus of short English documents for the throughput benchmarks: each has a
 * title, two or three sections and about 3-4 KB of prose made from a fixed vocabulary (seeded, so
 * every run ingests the same text). Nothing is committed but this generator.
 */
const nouns = ['system', 'library', 'worker', 'document', 'river', 'garden', 'engine', 'market', 'teacher', 'village', 'network', 'museum', 'harbour', 'kitchen', 'station', 'forest', 'council', 'bridge', 'letter', 'machine', 'archive', 'season', 'project', 'student', 'bakery', 'orchard', 'factory', 'journal', 'island', 'festival'];
const verbs = ['builds', 'measures', 'explains', 'repairs', 'collects', 'describes', 'protects', 'changes', 'follows', 'supports', 'records', 'shares', 'opens', 'teaches', 'prepares', 'improves', 'visits', 'counts', 'carries', 'plans'];
const adjectives = ['old', 'quiet', 'busy', 'small', 'careful', 'bright', 'local', 'modern', 'patient', 'simple', 'wooden', 'northern', 'famous', 'gentle', 'public', 'early', 'useful', 'narrow', 'green', 'steady'];
const adverbs = ['slowly', 'every morning', 'once a year', 'with great care', 'after the rain', 'before the winter', 'in the evening', 'without any help', 'for the whole town', 'at the same time'];

function rng(seed: number) {
  let s = seed >>> 0 || 1;
  return () => {
    s = (Math.imul(s, 1664525) + 1013904223) >>> 0;
    return s / 2 ** 32;
  };
}

export function generateCorpus(count: number, seed = 20): Array<{ name: string; text: string }> {
  const r = rng(seed);
  const pick = <T>(xs: readonly T[]) => xs[Math.floor(r() * xs.length)]!;
  const sentence = () => {
    const s = `The ${pick(adjectives)} ${pick(nouns)} ${pick(verbs)} the ${pick(adjectives)} ${pick(nouns)} ${pick(adverbs)}, and the ${pick(nouns)} ${pick(verbs)} a ${pick(nouns)} of the ${pick(nouns)}.`;
    return s;
  };
  const paragraph = () => Array.from({ length: 3 + Math.floor(r() * 4) }, sentence).join(' ');
  const docs: Array<{ name: string; text: string }> = [];
  for (let i = 0; i < count; i++) {
    const title = `The ${pick(adjectives)} ${pick(nouns)}, report ${i + 1}`;
    const parts = [`# ${title}`];
    let size = 0;
    const target = 3000 + Math.floor(r() * 1200);
    for (let section = 1; size < target; section++) {
      parts.push(`## Part ${section}: the ${pick(nouns)}`);
      for (let p = 0; p < 2 && size < target; p++) {
        const text = paragraph();
        parts.push(text);
        size += text.length;
      }
    }
    docs.push({ name: `report-${String(i + 1).padStart(4, '0')}`, text: `${parts.join('\n\n')}\n` });
  }
  return docs;
}
