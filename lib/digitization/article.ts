/**
 * Readable text of a fetched URL document (issue "URL documents"): the article, not the menus,
 * headers, footers and sidebars around it, as Markdown-ish plain text, plus its title as the
 * document's default name.
 *
 * HTML is parsed with linkedom and the article found by Mozilla Readability (the Firefox Reader
 * View algorithm); the article's DOM is then written out as text: headings as `#`, paragraphs
 * separated by blank lines, list items as `- `, block quotes as `> `, preformatted text fenced.
 */
import { Readability } from '@mozilla/readability';
import { parseHTML } from 'linkedom';

export interface ExtractedArticle {
  title: string | null;
  text: string;
}

/** A response whose content type is neither HTML nor plain text; the caller decides what to do. */
export class UnsupportedContentType extends Error {
  override name = 'UnsupportedContentType';

  constructor(readonly contentType: string, readonly url: string) {
    super(`Cannot extract text from ${url}: content type ${contentType || '(none)'} is neither HTML nor plain text`);
  }
}

/** Elements never part of the readable text. */
const noiseSelector = [
  'script', 'style', 'noscript', 'template', 'iframe', 'object', 'embed', 'svg', 'canvas',
  'form', 'button', 'input', 'select', 'textarea', 'dialog',
  'nav', 'aside', 'footer', 'menu',
  '[role="navigation"]', '[role="banner"]', '[role="contentinfo"]', '[role="complementary"]',
  '[role="menu"]', '[role="menubar"]', '[role="search"]', '[role="dialog"]', '[aria-hidden="true"]',
].join(',');

const blockTags = new Set([
  'address', 'article', 'body', 'center', 'dd', 'details', 'div', 'dl', 'dt', 'fieldset', 'figcaption',
  'figure', 'header', 'hgroup', 'html', 'li', 'main', 'p', 'section', 'summary', 'tbody', 'thead', 'tfoot', 'tr',
]);
const skipTags = new Set([
  'script', 'style', 'noscript', 'template', 'iframe', 'object', 'embed', 'svg', 'canvas', 'img', 'picture',
  'video', 'audio', 'source', 'track', 'map', 'head', 'title', 'meta', 'link', 'form', 'button', 'input',
  'select', 'textarea', 'nav', 'aside', 'footer', 'menu', 'dialog',
]);

const TEXT_NODE = 3;
const ELEMENT_NODE = 1;
/** Stands for a <br> inside inline text until whitespace has been collapsed. */
const LINE_BREAK = '\uE000';

const clean = (s: string | null | undefined) => {
  const t = (s ?? '').replace(/\s+/g, ' ').trim();
  return t === '' ? null : t;
};

/** Collapses whitespace like a browser; <br> stays a line break. */
function normalizeInline(s: string): string {
  return s
    .replace(/\s+/g, ' ')
    .split(LINE_BREAK)
    .map((line) => line.trim())
    .filter((line, i, all) => line !== '' || (i > 0 && i < all.length - 1 && all[i - 1] !== ''))
    .join('\n')
    .trim();
}

function inlineText(el: Element): string {
  return renderBlocks(el).join(' ').replace(/\n+/g, ' ').replace(/\s+/g, ' ').trim();
}

/** The children of `parent` as Markdown-ish blocks, to be joined by blank lines. */
function renderBlocks(parent: Node): string[] {
  const blocks: string[] = [];
  let inline = '';
  const flush = () => {
    const t = normalizeInline(inline);
    if (t) blocks.push(t);
    inline = '';
  };
  const visit = (node: Node) => {
    if (node.nodeType === TEXT_NODE) {
      inline += node.textContent ?? '';
      return;
    }
    if (node.nodeType !== ELEMENT_NODE) return;
    const el = node as Element;
    const tag = el.tagName.toLowerCase();
    if (skipTags.has(tag)) return;
    if (tag === 'br') {
      inline += LINE_BREAK;
      return;
    }
    const heading = /^h([1-6])$/.exec(tag);
    if (heading) {
      flush();
      const t = inlineText(el);
      if (t) blocks.push(`${'#'.repeat(Number(heading[1]))} ${t}`);
      return;
    }
    if (tag === 'ul' || tag === 'ol') {
      flush();
      const items: string[] = [];
      for (const child of Array.from(el.children)) {
        const inner = child.tagName.toLowerCase() === 'li' ? renderBlocks(child) : renderBlocks({ childNodes: [child] } as unknown as Node);
        const lines = inner.join('\n').split('\n').filter((l) => l.trim() !== '');
        if (lines.length === 0) continue;
        items.push(lines.map((l, i) => (i === 0 ? `- ${l}` : `  ${l}`)).join('\n'));
      }
      if (items.length) blocks.push(items.join('\n'));
      return;
    }
    if (tag === 'pre') {
      flush();
      const t = (el.textContent ?? '').replace(/^\n/, '').trimEnd();
      if (t.trim()) blocks.push('```\n' + t + '\n```');
      return;
    }
    if (tag === 'blockquote') {
      flush();
      const inner = renderBlocks(el).join('\n\n');
      if (inner) blocks.push(inner.split('\n').map((l) => (l ? `> ${l}` : '>')).join('\n'));
      return;
    }
    if (tag === 'table') {
      flush();
      const rows: string[] = [];
      for (const tr of Array.from(el.querySelectorAll('tr'))) {
        const cells = Array.from(tr.children)
          .filter((c) => /^t[dh]$/i.test(c.tagName))
          .map((c) => inlineText(c));
        if (cells.some((c) => c !== '')) rows.push(cells.join(' | '));
      }
      if (rows.length) blocks.push(rows.join('\n'));
      return;
    }
    if (tag === 'hr') {
      flush();
      return;
    }
    if (blockTags.has(tag)) {
      flush();
      el.childNodes.forEach((c) => visit(c as Node));
      flush();
      return;
    }
    el.childNodes.forEach((c) => visit(c as Node)); // inline element: a, span, em, strong, code, ...
  };
  Array.from(parent.childNodes).forEach((c) => visit(c as Node));
  flush();
  return blocks;
}

function toText(root: Node): string {
  return renderBlocks(root).join('\n\n').trim();
}

/**
 * The readable article of an HTML page. `title`: Readability's title, else `<title>`, else the first
 * `<h1>`, else null. `url` is the page's (final) address, used as the base of relative links.
 */
export function extractArticle(html: string, url: string): ExtractedArticle {
  const { document } = parseHTML(html);
  const doc = document as unknown as Document;
  const htmlTitle = clean(doc.querySelector('title')?.textContent);
  const firstH1 = clean(doc.querySelector('h1')?.textContent);

  // Page chrome goes first, so that neither Readability nor the fallback can keep it. A <header>
  // inside the article or main content (its title, byline) stays; the site's header goes.
  for (const el of Array.from(doc.querySelectorAll(noiseSelector))) el.remove();
  for (const el of Array.from(doc.querySelectorAll('header'))) {
    if (!el.parentElement?.closest('article, main, [role="main"]')) el.remove();
  }

  let title: string | null = null;
  let text = '';
  try {
    const reader = new Readability(doc, { serializer: (el: Node) => el, keepClasses: false });
    const article = reader.parse() as { title?: string | null; content?: unknown } | null;
    title = clean(article?.title);
    if (article?.content && typeof (article.content as Node).childNodes !== 'undefined') {
      text = toText(article.content as Node);
    }
  } catch {
    // Readability failed on an odd page: fall back to the cleaned body below.
  }
  if (!text) {
    // Readability found no article (or threw): the page body, chrome already removed. Parse again,
    // since Readability changes the document it reads.
    const { document: again } = parseHTML(html);
    const fresh = again as unknown as Document;
    for (const el of Array.from(fresh.querySelectorAll(noiseSelector))) el.remove();
    for (const el of Array.from(fresh.querySelectorAll('header'))) {
      if (!el.parentElement?.closest('article, main, [role="main"]')) el.remove();
    }
    const root = fresh.querySelector('article') ?? fresh.querySelector('main, [role="main"]') ?? fresh.body;
    text = root ? toText(root) : '';
  }
  void url;
  return { title: title ?? htmlTitle ?? firstH1, text };
}

// ---- whole responses --------------------------------------------------------------------------

export type PageKind = 'html' | 'text';

/** Which kind of page a Content-Type (and, without one, the body) says this is; null: neither. */
function pageKind(contentType: string, body: Buffer): PageKind | null {
  const mime = (contentType.split(';')[0] ?? '').trim().toLowerCase();
  if (mime === 'text/html' || mime === 'application/xhtml+xml') return 'html';
  if (mime === 'text/plain' || mime === 'text/markdown' || mime === 'text/x-markdown') return 'text';
  if (mime === '') {
    const head = body.subarray(0, 1024).toString('latin1').replace(/^\uFEFF|^\xEF\xBB\xBF/, '').trimStart().toLowerCase();
    if (head.startsWith('<!doctype html') || head.startsWith('<html') || head.startsWith('<head') || head.startsWith('<body')) {
      return 'html';
    }
  }
  return null;
}

/** Text of a body: BOM, then Content-Type charset, then (HTML) `<meta charset>`, else UTF-8. */
export function decodeBody(body: Buffer, contentType: string, kind: PageKind): string {
  let label: string | undefined;
  if (body[0] === 0xef && body[1] === 0xbb && body[2] === 0xbf) label = 'utf-8';
  else if (body[0] === 0xff && body[1] === 0xfe) label = 'utf-16le';
  else if (body[0] === 0xfe && body[1] === 0xff) label = 'utf-16be';
  label ??= /charset\s*=\s*"?([\w.:-]+)/i.exec(contentType)?.[1];
  if (!label && kind === 'html') {
    const head = body.subarray(0, 2048).toString('latin1');
    label = /<meta\s[^>]*?charset\s*=[\s"']*([\w.:-]+)/i.exec(head)?.[1];
  }
  try {
    return new TextDecoder(label ?? 'utf-8').decode(body);
  } catch {
    return new TextDecoder('utf-8').decode(body);
  }
}

/**
 * The readable text of a fetched page: HTML through `extractArticle`, plain text as is (title null).
 * Any other content type throws `UnsupportedContentType`.
 */
export function extractPage(page: { contentType: string; body: Buffer; finalUrl: string }): ExtractedArticle & { kind: PageKind } {
  const kind = pageKind(page.contentType, page.body);
  if (!kind) throw new UnsupportedContentType(page.contentType, page.finalUrl);
  const source = decodeBody(page.body, page.contentType, kind);
  if (kind === 'text') return { kind, title: null, text: source.replace(/\r\n?/g, '\n').trim() };
  return { kind, ...extractArticle(source, page.finalUrl) };
}
