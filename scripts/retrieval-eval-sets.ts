/**
 * Builds the retrieval evaluation sets (docs/benchmarks.md, "Retrieval quality";
 * bench/retrieval-eval.ts) from public text that Debian ships, on this machine, at run time
 * (nothing of it is committed):
 *
 * - `python-api` (known item, same author): the API entries of Python's library reference (Debian
 *   `python3-doc`, the reStructuredText sources under /usr/share/doc/python3.*\/html/_sources/library).
 *   Query: the first sentence of an entry's description (its one-line summary). Document: the
 *   entry's signature as a heading and the rest of its description, without that first sentence,
 *   so that the query is nowhere in the document verbatim.
 * - `python-docstrings` (paraphrase, another author): the same entries' docstrings, read from
 *   Debian's own `python3` of the same version. Query: the docstring's first sentence, kept only
 *   when it is not the reference's own first sentence. Document: the reference entry, whole.
 *   Docstrings and the reference are written separately, so a query and its document say the same
 *   thing in other words ("Join two or more pathname components" / "Join one or more path
 *   segments intelligently").
 *
 * Each set is split by top-level module (a stable hash of its name) into a tuning part and a
 * held-out part, so that near-duplicate entries (str.split / bytes.split) never straddle the split;
 * each part keeps up to MAX_DOCUMENTS documents and MAX_QUERIES queries, chosen by a stable hash.
 * Defaults may be chosen on the tuning parts only (bench/RESULTS.md says how they were).
 *
 *   node --import tsx scripts/retrieval-eval-sets.ts [output directory]   # writes <set>.json files
 */
import { execFileSync } from 'node:child_process';
import crypto from 'node:crypto';
import fs from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

export interface EvalDocument {
  id: string;
  /** The document's name (as a knowledge base would hold it: the API name). */
  name: string;
  /** Markdown, as final rewritten content. */
  text: string;
}

export interface EvalQuery {
  id: string;
  text: string;
  /** The one relevant document (known-item search). */
  relevant: string;
}

export interface EvalPart {
  documents: EvalDocument[];
  queries: EvalQuery[];
}

export interface EvalSet {
  name: string;
  kind: string;
  description: string;
  source: string;
  tuning: EvalPart;
  heldout: EvalPart;
}

export const MAX_DOCUMENTS = 1000;
export const MAX_QUERIES = 400;

const apiDirectives = new Set([
  'function', 'method', 'classmethod', 'staticmethod', 'class', 'exception', 'decorator', 'decoratormethod',
  'attribute', 'data', 'coroutinefunction', 'coroutinemethod', 'abstractmethod', 'awaitablefunction', 'awaitablemethod',
]);
/** Directives whose content is not description text (version notes, indexes, examples' set-up). */
const droppedDirectives = new Set([
  'versionadded', 'versionchanged', 'deprecated', 'deprecated-removed', 'index', 'seealso', 'sectionauthor', 'moduleauthor',
  'testsetup', 'testcleanup', 'testoutput', 'tabularcolumns', 'highlight', 'impl-detail', 'availability', 'audit-event',
  'literalinclude', 'include', 'toctree', 'image', 'figure', 'only', 'raw',
]);

interface ApiEntry {
  module: string;
  name: string;
  signature: string;
  /** Plain text paragraphs of the description. */
  paragraphs: string[];
}

const stableHash = (s: string) => crypto.createHash('sha256').update(s).digest().readUInt32BE(0);

/** Inline reStructuredText to plain text: roles, literals, emphasis, escapes. */
/** The visible text of a role's or link's content: "~os.path.join" -> "os.path.join", "text <target>" -> "text". */
function roleText(content: string): string {
  const open = content.indexOf('<');
  const visible = open > 0 && content.endsWith('>') ? content.slice(0, open) : content;
  return visible.trim().replace(/^[.!~]{1,3}/, '');
}

export function plainInline(text: string): string {
  return text
    .replace(/:([A-Z]{1,20})(?::[A-Z]{1,20})?:`([^`]{0,300})`/gi, (_, role: string, t: string) => (/^(?:rfc|pep)$/i.test(role) ? `${role.toUpperCase()} ${roleText(t)}` : roleText(t)))
    .replace(/``([^`]{1,300})``/g, '$1')
    .replace(/`([^`]{1,300})`_{0,2}/g, (_, t: string) => roleText(t))
    .replace(/\*\*([^*]+)\*\*/g, '$1')
    .replace(/\*([^*\s][^*]*)\*/g, '$1')
    .replace(/\\(.)/g, '$1')
    .replace(/\|(\w+)\|/g, '$1')
    .replace(/\s+/g, ' ')
    .trim();
}

const indentOf = (line: string) => line.length - line.trimStart().length;

/** The API entries of one reStructuredText file of the library reference. */
export function parseLibraryFile(source: string, fileModule: string): ApiEntry[] {
  const lines = source.replace(/\r\n?/g, '\n').split('\n');
  const entries: ApiEntry[] = [];
  let module = fileModule;
  // Enclosing classes by indentation, for methods and attributes.
  const classStack: Array<{ indent: number; name: string }> = [];

  for (let i = 0; i < lines.length; i++) {
    const line = lines[i]!;
    const m = /^(\s*)\.\. ([\w-]+):: ?(.*)$/.exec(line);
    if (!m) continue;
    const indent = m[1]!.length;
    const directive = m[2]!;
    if (directive === 'module' || directive === 'currentmodule') {
      module = m[3]!.trim();
      classStack.length = 0;
      continue;
    }
    if (!apiDirectives.has(directive)) continue;
    while (classStack.length && classStack[classStack.length - 1]!.indent >= indent) classStack.pop();

    const signature = m[3]!.trim();
    // Further signatures on the following lines, then options (:noindex:, :module: ...).
    let j = i + 1;
    while (j < lines.length && lines[j]!.trim() && !lines[j]!.trim().startsWith(':')) j++;
    let options = '';
    while (j < lines.length && lines[j]!.trim().startsWith(':')) options += lines[j++]!;
    const bareName = (/^([\w.]+)/.exec(signature)?.[1] ?? '').replace(/^.*\./, (p) => p);
    const explicitModule = /:module:\s*(\S+)/.exec(options)?.[1];
    if (!bareName) continue;
    const owner = classStack.length ? classStack[classStack.length - 1]!.name : null;
    const qualified = bareName.includes('.') && !owner
      ? (bareName.startsWith(`${module}.`) ? bareName : module ? `${module}.${bareName}` : bareName)
      : owner
        ? `${owner}.${bareName}`
        : explicitModule !== undefined
          ? (explicitModule ? `${explicitModule}.${bareName}` : bareName)
          : module
            ? `${module}.${bareName}`
            : bareName;
    if (directive === 'class' || directive === 'exception') classStack.push({ indent, name: qualified });

    // The body: lines indented deeper than the directive, up to the first nested API directive.
    const body: string[] = [];
    let k = j;
    for (; k < lines.length; k++) {
      const l = lines[k]!;
      if (l.trim() && indentOf(l) <= indent) break;
      const nested = /^\s*\.\. ([\w-]+)::/.exec(l);
      if (nested && apiDirectives.has(nested[1]!)) break;
      body.push(l);
    }
    entries.push({ module: (explicitModule ?? module) || qualified.split('.')[0]!, name: qualified, signature: qualifiedSignature(qualified, signature), paragraphs: paragraphsOf(body) });
  }
  return entries;
}

function qualifiedSignature(qualified: string, signature: string): string {
  const open = signature.indexOf('(');
  const args = open >= 0 ? signature.slice(open) : '';
  return `${qualified}${args}`;
}

/** Paragraphs of plain text from a directive body: dropped directives and doctest output removed. */
function paragraphsOf(body: string[]): string[] {
  const paragraphs: string[] = [];
  let current: string[] = [];
  let skipIndent = -1;
  let literalIndent = -1;
  const flush = () => {
    const text = current.join('\n').trim();
    if (text) paragraphs.push(text);
    current = [];
  };
  for (const line of body) {
    const indent = indentOf(line);
    if (skipIndent >= 0) {
      if (!line.trim() || indent > skipIndent) continue;
      skipIndent = -1;
    }
    if (literalIndent >= 0) {
      if (!line.trim() || indent > literalIndent) {
        if (line.trim()) current.push(line.trim());
        continue;
      }
      literalIndent = -1;
      flush();
    }
    const directive = /^\s*\.\. ([\w-]+)::(.*)$/.exec(line);
    if (directive) {
      flush();
      const name = directive[1]!;
      if (droppedDirectives.has(name)) {
        skipIndent = indent;
        continue;
      }
      if (['code-block', 'doctest', 'testcode', 'productionlist', 'code'].includes(name)) {
        literalIndent = indent;
        continue;
      }
      // note, warning, important, describe, ...: keep their text as an ordinary paragraph.
      if (directive[2]!.trim() && !['describe', 'rubric'].includes(name)) current.push(`${name[0]!.toUpperCase()}${name.slice(1)}: ${directive[2]}`);
      continue;
    }
    if (/^\s*\.\. /.test(line)) {
      // A comment or a link target.
      flush();
      skipIndent = indent;
      continue;
    }
    if (!line.trim()) {
      flush();
      continue;
    }
    const t = line.trim();
    if (t.startsWith('>>>') || t.startsWith('...')) {
      current.push(t);
      continue;
    }
    if (t.endsWith('::')) {
      current.push(t === '::' ? '' : `${t.slice(0, -2).trimEnd()}:`);
      flush();
      literalIndent = indent;
      continue;
    }
    if (/^[=\-~^+*#]{3,}$/.test(t)) continue;
    current.push(t);
  }
  flush();
  return paragraphs.map((p) => (p.split('\n').every((l) => l.startsWith('>>>') || l.startsWith('...')) ? p : plainInline(p))).filter(Boolean);
}

/**
 * The first sentence of a text: up to the first full stop (or ! / ?) followed by a space and a
 * capital letter, an opening parenthesis or the end; abbreviations like "e.g." do not end one.
 */
export function firstSentence(text: string): { sentence: string; rest: string } {
  const re = /[.!?](?=\s+(?:[A-Z(`"']|$)|$)/g;
  for (let m = re.exec(text); m; m = re.exec(text)) {
    const before = text.slice(0, m.index + 1);
    if (/\b(?:e\.g|i\.e|etc|vs|cf|approx|resp)\.$/i.test(before)) continue;
    return { sentence: before.trim(), rest: text.slice(m.index + 1).trim() };
  }
  return { sentence: text.trim(), rest: '' };
}

export function pythonDocDirectory(): string | null {
  const base = '/usr/share/doc';
  if (!fs.existsSync(base)) return null;
  const dirs = fs.readdirSync(base).filter((d) => /^python3\.\d+$/.test(d)).sort();
  for (const d of dirs.reverse()) {
    const lib = path.join(base, d, 'html/_sources/library');
    if (fs.existsSync(lib)) return lib;
  }
  return null;
}

/** Every API entry of the library reference, deduplicated by qualified name (first wins). */
export function libraryEntries(libraryDir: string): ApiEntry[] {
  const seen = new Set<string>();
  const out: ApiEntry[] = [];
  for (const file of fs.readdirSync(libraryDir).filter((f) => f.endsWith('.rst.txt')).sort()) {
    const fileModule = '';
    for (const e of parseLibraryFile(fs.readFileSync(path.join(libraryDir, file), 'utf8'), fileModule)) {
      if (seen.has(e.name) || !e.paragraphs.length) continue;
      seen.add(e.name);
      out.push(e);
    }
  }
  return out;
}

const wordCount = (s: string) => s.split(/\s+/).filter(Boolean).length;
const normalise = (s: string) => s.toLowerCase().replace(/[^a-z0-9]+/g, ' ').trim();
const topModule = (e: ApiEntry) => e.module.split('.')[0]!;
/** Tuning or held-out, by a stable hash of the top-level module. */
const partOf = (e: ApiEntry): 'tuning' | 'heldout' => (stableHash(`split:${topModule(e)}`) % 2 === 0 ? 'tuning' : 'heldout');

const markdown = (heading: string, paragraphs: string[]) => `# ${heading}\n\n${paragraphs.join('\n\n')}`;

/** Splits documents and queries into the two parts, each cut to its size by a stable hash. */
function splitParts(items: Array<{ entry: ApiEntry; document: EvalDocument; query: EvalQuery | null }>, salt: string): Pick<EvalSet, 'tuning' | 'heldout'> {
  const parts = { tuning: { documents: [], queries: [] } as EvalPart, heldout: { documents: [], queries: [] } as EvalPart };
  for (const part of ['tuning', 'heldout'] as const) {
    const mine = items.filter((i) => partOf(i.entry) === part);
    // Queries first (so each kept query keeps its document), then other documents as distractors.
    const withQuery = mine.filter((i) => i.query).sort((a, b) => stableHash(`${salt}:${a.entry.name}`) - stableHash(`${salt}:${b.entry.name}`));
    const chosen = withQuery.slice(0, MAX_QUERIES);
    const chosenNames = new Set(chosen.map((c) => c.entry.name));
    const distractors = mine.filter((i) => !chosenNames.has(i.entry.name)).sort((a, b) => stableHash(`${salt}:d:${a.entry.name}`) - stableHash(`${salt}:d:${b.entry.name}`));
    const docs = [...chosen, ...distractors].slice(0, MAX_DOCUMENTS);
    parts[part].documents = docs.map((d) => d.document).sort((a, b) => a.id.localeCompare(b.id));
    parts[part].queries = chosen.map((c) => c.query!).sort((a, b) => a.id.localeCompare(b.id));
  }
  return parts;
}

/** Set 1: summary -> rest of the description (the summary itself removed from the document). */
export function pythonApiSet(entries: ApiEntry[], source: string): EvalSet {
  const items = entries.flatMap((entry) => {
    const [first, ...more] = entry.paragraphs;
    const { sentence, rest } = firstSentence(first!);
    const remaining = [rest, ...more].filter(Boolean);
    if (wordCount(sentence) < 4 || sentence.length > 300 || remaining.join(' ').length < 120) return [];
    return [{ entry, summary: sentence, document: { id: entry.name, name: entry.name, text: markdown(entry.signature, remaining) } }];
  });
  // A summary shared by several entries ("Return a copy of the string ...") names no single one.
  const counts = new Map<string, number>();
  for (const i of items) counts.set(normalise(i.summary), (counts.get(normalise(i.summary)) ?? 0) + 1);
  return {
    name: 'python-api',
    kind: 'known item: one-line summary -> the rest of its description',
    description: "Python library reference API entries. Query: an entry's first sentence. Document: its signature as heading and the rest of its description (the first sentence removed).",
    source,
    ...splitParts(
      items.map((i) => ({ entry: i.entry, document: i.document, query: counts.get(normalise(i.summary)) === 1 ? { id: `q:${i.entry.name}`, text: i.summary, relevant: i.entry.name } : null })),
      'python-api',
    ),
  };
}

/** Modules whose import has effects (opens windows or a browser, prints) or that need what Debian's python3 lacks. */
const unsafeModules = /^(?:antigravity|this|turtle|turtledemo|tkinter|idlelib|ensurepip|msilib|winreg|winsound|msvcrt|_winapi|__main__|lib2to3|test|pydoc_data|venv|webbrowser|curses|dbm\.ndbm|readline)(?:\.|$)/;

const docstringScript = `
import importlib, inspect, json, sys, warnings, io, contextlib
warnings.simplefilter('ignore')
names = json.load(sys.stdin)
out = {}
mods = {}
for name in names:
    parts = name.split('.')
    obj = None
    for i in range(len(parts) - 1, 0, -1):
        modname = '.'.join(parts[:i])
        if modname not in mods:
            try:
                with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):
                    mods[modname] = importlib.import_module(modname)
            except BaseException:
                mods[modname] = None
        mod = mods[modname]
        if mod is None:
            continue
        try:
            obj = mod
            for attr in parts[i:]:
                obj = getattr(obj, attr)
            break
        except AttributeError:
            obj = None
    if obj is None and len(parts) >= 1:
        import builtins
        try:
            obj = builtins
            for attr in parts:
                obj = getattr(obj, attr)
        except AttributeError:
            obj = None
    if obj is None or isinstance(obj, (int, float, str, bytes, tuple, list, dict, set, frozenset, bool, type(None))):
        continue
    doc = getattr(obj, '__doc__', None)
    if isinstance(doc, str) and doc.strip():
        out[name] = inspect.cleandoc(doc)
json.dump(out, sys.stdout)
`;

/** Docstrings of the named objects, from Debian's python3 (the version the reference documents). */
export function docstrings(names: string[], python = '/usr/bin/python3'): Record<string, string> {
  const safe = names.filter((n) => !unsafeModules.test(n));
  const out = execFileSync(python, ['-I', '-c', docstringScript], { input: JSON.stringify(safe), maxBuffer: 256 * 1024 * 1024, env: { PATH: '/usr/bin:/bin', HOME: '/nonexistent' } });
  return JSON.parse(out.toString('utf8')) as Record<string, string>;
}

/** Set 2: the docstring's first sentence -> the whole reference entry, when they are worded differently. */
export function pythonDocstringSet(entries: ApiEntry[], docs: Record<string, string>, source: string): EvalSet {
  const items = entries.flatMap((entry) => {
    if (entry.paragraphs.join(' ').length < 80) return [];
    const document = { id: entry.name, name: entry.name, text: markdown(entry.signature, entry.paragraphs) };
    const doc = docs[entry.name];
    let query: string | null = null;
    if (doc) {
      const para = plainInline(doc.split(/\n\s*\n/)[0]!);
      const { sentence } = firstSentence(para);
      const looksLikeSignature = /^[\w.]+\(.*\)\s*(?:->|-->|$)/.test(sentence) || /-->|->/.test(sentence);
      // Not a paraphrase: the reference says it in the same words.
      const verbatim = normalise(entry.paragraphs.join(' ')).includes(normalise(sentence));
      if (!looksLikeSignature && !verbatim && wordCount(sentence) >= 4 && sentence.length <= 300) query = sentence;
    }
    return [{ entry, document, query }];
  });
  const counts = new Map<string, number>();
  for (const i of items) if (i.query) counts.set(normalise(i.query), (counts.get(normalise(i.query)) ?? 0) + 1);
  return {
    name: 'python-docstrings',
    kind: "paraphrase: another author's summary -> the reference entry",
    description: "Query: an object's docstring summary (Debian's python3), kept when it differs from the reference's own first sentence. Document: the library reference entry, whole.",
    source,
    ...splitParts(
      items.map((i) => ({ entry: i.entry, document: i.document, query: i.query && counts.get(normalise(i.query)) === 1 ? { id: `q:${i.entry.name}`, text: i.query, relevant: i.entry.name } : null })),
      'python-docstrings',
    ),
  };
}

/** Both sets, built from the installed python3-doc and python3; throws with a hint when one is missing. */
export function buildEvalSets(): EvalSet[] {
  const dir = pythonDocDirectory();
  if (!dir) throw new Error('Python library reference sources not found: install Debian python3-doc (scripts/dev-packages.txt)');
  const version = path.basename(path.dirname(path.dirname(path.dirname(dir))));
  const entries = libraryEntries(dir);
  const source = `Debian python3-doc (${version}, ${dir})`;
  const docs = docstrings(entries.map((e) => e.name));
  return [pythonApiSet(entries, source), pythonDocstringSet(entries, docs, `${source} and the docstrings of Debian's /usr/bin/python3`)];
}

if (process.argv[1] && path.resolve(process.argv[1]) === fileURLToPath(import.meta.url)) {
  const outDir = path.resolve(process.argv[2] ?? '.data/retrieval-eval');
  fs.mkdirSync(outDir, { recursive: true });
  for (const set of buildEvalSets()) {
    fs.writeFileSync(path.join(outDir, `${set.name}.json`), JSON.stringify(set, null, 1));
    const size = (p: EvalPart) => `${p.documents.length} documents, ${p.queries.length} queries`;
    process.stdout.write(`${set.name}: tuning ${size(set.tuning)}; held-out ${size(set.heldout)} -> ${path.join(outDir, `${set.name}.json`)}\n`);
  }
}
