import crypto from 'node:crypto';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import express from 'express';
import multer from 'multer';

/**
 * A local server speaking the OpenAI vector-store files API (the subset vendor sync uses):
 * POST /v1/files (multipart, purpose=assistants), POST /v1/vector_stores,
 * POST /v1/vector_stores/{id}/files, DELETE /v1/vector_stores/{id}/files/{file_id},
 * DELETE /v1/files/{id}. State is in memory so tests can assert on what the store holds.
 * `failUploads` answers 500 to file uploads (a provider outage); `uploadCalls` counts them all.
 */
export interface VectorStoreUpstream {
  baseUrl: string;
  stores: Map<string, { name: string; metadata: Record<string, string>; files: Map<string, Record<string, string>> }>;
  files: Map<string, { filename: string; content: string }>;
  failUploads: boolean;
  uploadCalls: number;
  close(): Promise<void>;
}

export async function startVectorStoreUpstream(): Promise<VectorStoreUpstream> {
  const state: VectorStoreUpstream = { baseUrl: '', stores: new Map(), files: new Map(), failUploads: false, uploadCalls: 0, close: async () => undefined };
  const app = express();
  const upload = multer({ storage: multer.memoryStorage() });
  const now = () => Math.floor(Date.now() / 1000);
  const notFound = (res: express.Response, what: string) => void res.status(404).json({ error: { message: `No such ${what}`, type: 'invalid_request_error' } });

  app.post('/v1/files', upload.single('file'), (req, res) => {
    state.uploadCalls++;
    if (state.failUploads) return void res.status(500).json({ error: { message: 'upstream outage', type: 'server_error' } });
    if (!req.file || req.body.purpose !== 'assistants') return void res.status(400).json({ error: { message: 'file and purpose=assistants required', type: 'invalid_request_error' } });
    const id = `file-${crypto.randomUUID()}`;
    state.files.set(id, { filename: req.file.originalname, content: req.file.buffer.toString('utf8') });
    res.json({ id, object: 'file', bytes: req.file.size, created_at: now(), filename: req.file.originalname, purpose: 'assistants', status: 'processed' });
  });
  app.delete('/v1/files/:id', (req, res) => {
    if (!state.files.delete(req.params.id)) return notFound(res, 'file');
    res.json({ id: req.params.id, object: 'file', deleted: true });
  });
  app.post('/v1/vector_stores', express.json(), (req, res) => {
    const id = `vs_${crypto.randomUUID().replace(/-/g, '')}`;
    state.stores.set(id, { name: req.body.name, metadata: req.body.metadata ?? {}, files: new Map() });
    res.json({ id, object: 'vector_store', created_at: now(), name: req.body.name, metadata: req.body.metadata ?? {}, status: 'completed', file_counts: { in_progress: 0, completed: 0, failed: 0, cancelled: 0, total: 0 }, usage_bytes: 0 });
  });
  app.post('/v1/vector_stores/:id/files', express.json(), (req, res) => {
    const store = state.stores.get(req.params.id);
    if (!store) return notFound(res, 'vector store');
    if (!state.files.has(req.body.file_id)) return notFound(res, 'file');
    store.files.set(req.body.file_id, req.body.attributes ?? {});
    res.json({ id: req.body.file_id, object: 'vector_store.file', created_at: now(), vector_store_id: req.params.id, status: 'completed', usage_bytes: 0, last_error: null, attributes: req.body.attributes ?? {} });
  });
  app.delete('/v1/vector_stores/:id/files/:fileId', (req, res) => {
    const store = state.stores.get(req.params.id);
    if (!store || !store.files.delete(req.params.fileId)) return notFound(res, 'vector store file');
    res.json({ id: req.params.fileId, object: 'vector_store.file.deleted', deleted: true });
  });

  const server = http.createServer(app).listen(0, '127.0.0.1');
  await new Promise((resolve) => server.once('listening', resolve));
  state.baseUrl = `http://127.0.0.1:${(server.address() as AddressInfo).port}/v1`;
  state.close = async () => {
    server.closeAllConnections();
    await new Promise((resolve) => server.close(resolve));
  };
  return state;
}
