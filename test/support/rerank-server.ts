import http from 'node:http';
import type { AddressInfo } from 'node:net';

/**
 * A local server speaking the Cohere-style `/rerank` protocol that Infinity, TEI and Jina serve:
 * `POST /rerank {model, query, documents, top_n, return_documents}` ->
 * `{id, model, results: [{index, relevance_score}], usage: {prompt_tokens, total_tokens}}`, best
 * first and cut to top_n. Its "cross-encoder" is deterministic: the share of the query's words
 * (three letters or more) that the document contains. Tests can replace the answer (errors,
 * hangs, no usage) and read every call.
 */
export interface RerankCall {
  headers: http.IncomingHttpHeaders;
  body: { model?: string; query?: string; documents?: string[]; top_n?: number; return_documents?: boolean };
}

export type RerankReply = { status?: number; json: unknown } | { hang: true } | 'default';

export interface RerankServer {
  /** RERANK_BASE_URL for this server. */
  baseUrl: string;
  calls: RerankCall[];
  respond(responder: (call: RerankCall) => RerankReply): void;
  close(): Promise<void>;
}

const words = (s: string) => s.toLowerCase().match(/\p{L}{3,}/gu) ?? [];

/** Tokens the server reports for one call: query words + document words, per document (whitespace-separated). */
export const rerankTokens = (query: string, documents: string[]) =>
  documents.reduce((sum, d) => sum + query.split(/\s+/).filter(Boolean).length + d.split(/\s+/).filter(Boolean).length, 0);

export function overlapScore(query: string, document: string): number {
  const q = new Set(words(query));
  if (q.size === 0) return 0;
  const d = new Set(words(document));
  return [...q].filter((w) => d.has(w)).length / q.size;
}

export function defaultRerankAnswer(body: RerankCall['body']) {
  const documents = body.documents ?? [];
  const query = body.query ?? '';
  const results = documents
    .map((d, index) => ({ index, relevance_score: overlapScore(query, d) }))
    .sort((a, b) => b.relevance_score - a.relevance_score || a.index - b.index)
    .slice(0, body.top_n ?? documents.length);
  const tokens = rerankTokens(query, documents);
  return { id: `rerank-${Date.now()}`, model: body.model, results, usage: { prompt_tokens: tokens, total_tokens: tokens } };
}

export async function startRerankServer(): Promise<RerankServer> {
  const calls: RerankCall[] = [];
  let responder: (call: RerankCall) => RerankReply = () => 'default';
  const sockets = new Set<import('node:net').Socket>();
  const server = http.createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      if (req.method !== 'POST' || req.url !== '/rerank') {
        res.writeHead(404, { 'content-type': 'application/json' }).end(JSON.stringify({ error: 'not found' }));
        return;
      }
      let body: RerankCall['body'];
      try {
        body = JSON.parse(Buffer.concat(chunks).toString('utf8'));
      } catch {
        res.writeHead(400, { 'content-type': 'application/json' }).end(JSON.stringify({ error: 'invalid JSON' }));
        return;
      }
      const call = { headers: req.headers, body };
      calls.push(call);
      const reply = responder(call);
      if (reply !== 'default' && 'hang' in reply) return;
      if (!Array.isArray(body.documents) || typeof body.query !== 'string') {
        res.writeHead(422, { 'content-type': 'application/json' }).end(JSON.stringify({ error: 'query and documents are required' }));
        return;
      }
      const status = reply === 'default' ? 200 : (reply.status ?? 200);
      const json = reply === 'default' ? defaultRerankAnswer(body) : reply.json;
      res.writeHead(status, { 'content-type': 'application/json' }).end(JSON.stringify(json));
    });
  });
  server.on('connection', (s) => {
    sockets.add(s);
    s.on('close', () => sockets.delete(s));
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as AddressInfo;
  return {
    baseUrl: `http://127.0.0.1:${port}`,
    calls,
    respond(r) {
      responder = r;
    },
    async close() {
      for (const s of sockets) s.destroy();
      await new Promise((resolve) => server.close(resolve));
    },
  };
}
