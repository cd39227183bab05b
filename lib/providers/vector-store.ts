import OpenAI, { toFile } from 'openai';
import { classifiedApiError } from './service-unavailable.js';

/**
 * Vendor sync's adapter: an external vector store reached through the OpenAI vector-store files
 * API (POST /files with purpose=assistants, POST /vector_stores, POST and DELETE
 * /vector_stores/{id}/files/{file_id}, DELETE /files/{id}). Any service that speaks it works;
 * the tests run it against a local server of that protocol (test/retrieval/vector-store-upstream.ts).
 */
export interface VendorVectorStore {
  createStore(name: string, metadata: Record<string, string>): Promise<string>;
  /** Uploads a document's text and attaches it to the store; returns the vendor's file ID. */
  putDocument(storeId: string, filename: string, text: string, attributes: Record<string, string>): Promise<string>;
  /** Detaches and deletes a file; a file that is already gone counts as deleted. */
  removeDocument(storeId: string, fileId: string): Promise<void>;
}

/** A failure of the vector-store API, classified: outages are waited out, refusals are final. */
const classified = (err: unknown) => classifiedApiError(err, 'the vector-store API');

export class OpenAiVectorStore implements VendorVectorStore {
  private readonly client: OpenAI;

  constructor(options: { baseUrl: string; apiKey: string | null }) {
    this.client = new OpenAI({ baseURL: options.baseUrl, apiKey: options.apiKey ?? 'unset', maxRetries: 2, timeout: 60_000 });
  }

  async createStore(name: string, metadata: Record<string, string>): Promise<string> {
    return (await this.client.vectorStores.create({ name, metadata }).catch((err) => Promise.reject(classified(err)))).id;
  }

  async putDocument(storeId: string, filename: string, text: string, attributes: Record<string, string>): Promise<string> {
    try {
      const file = await this.client.files.create({ file: await toFile(Buffer.from(text, 'utf8'), filename, { type: 'text/markdown' }), purpose: 'assistants' });
      await this.client.vectorStores.files.create(storeId, { file_id: file.id, attributes });
      return file.id;
    } catch (err) {
      throw classified(err);
    }
  }

  async removeDocument(storeId: string, fileId: string): Promise<void> {
    const ignoreMissing = (err: unknown) => {
      if (!(err instanceof OpenAI.NotFoundError)) throw classified(err);
    };
    await this.client.vectorStores.files.delete(fileId, { vector_store_id: storeId }).catch(ignoreMissing);
    await this.client.files.delete(fileId).catch(ignoreMissing);
  }
}
