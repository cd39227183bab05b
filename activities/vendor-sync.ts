import { ApplicationFailure } from '@temporalio/activity';
import type { Db } from '../lib/platform/db.js';
import type { FileStorage } from '../lib/platform/storage.js';
import { documentFiles } from '../lib/platform/storage.js';
import type { VendorVectorStore } from '../lib/providers/vector-store.js';
import { vendorSyncRefused, type VendorSyncInput } from '../lib/contracts/vendor-sync.js';
import { serviceFailureOf } from './service-failures.js';

export interface VendorSyncActivityDeps {
  db: Db;
  storage: FileStorage;
  /** Null when no vector-store API is configured: every sync fails with a clear error. */
  vendorStore: VendorVectorStore | null;
  config: { vendorSync: { maxOutageSeconds: number } | null };
}

/** Vendor sync's side effects (workflows/vendor-sync.ts). */
export function createVendorSyncActivities({ db, storage, vendorStore, config }: VendorSyncActivityDeps) {
  /** The KB's store, created once; a lost race adopts the winner's store and drops its own. */
  async function storeOf(kb: { id: string; name: string; partnerId: string; vendorVectorStoreId: string | null }, store: VendorVectorStore): Promise<string> {
    if (kb.vendorVectorStoreId) return kb.vendorVectorStoreId;
    const created = await store.createStore(`kb-${kb.id}`, { knowledge_base_id: kb.id, partner_id: kb.partnerId });
    const won = await db.knowledgeBase.updateMany({ where: { id: kb.id, vendorVectorStoreId: null }, data: { vendorVectorStoreId: created } });
    if (won.count === 1) return created;
    return (await db.knowledgeBase.findUniqueOrThrow({ where: { id: kb.id } })).vendorVectorStoreId!;
  }

  return {
    /**
     * Uploads the newest final rewritten content, attaches it, then removes the previous file, so
     * the store holds one current file per document. Skips documents that are gone or whose
     * partner has sync switched off.
     */
    async syncDocumentToVendor({ documentId }: VendorSyncInput): Promise<{ status: string }> {
      const doc = await db.document.findUnique({ where: { id: documentId }, include: { knowledgeBase: { include: { partner: true } } } });
      if (!doc || doc.deletionRequestedAt || doc.knowledgeBase.deletionRequestedAt) return { status: 'skipped' };
      if (!doc.knowledgeBase.partner.vendorSyncEnabled) {
        await db.document.update({ where: { id: documentId }, data: { vendorSyncStatus: null } });
        return { status: 'skipped' };
      }
      if (!vendorStore) throw ApplicationFailure.nonRetryable('no vector-store API is configured (VENDOR_SYNC_BASE_URL or OPENAI_BASE_URL)', vendorSyncRefused);
      if (!doc.fileRewritten) throw ApplicationFailure.nonRetryable('the document has no final rewritten content', vendorSyncRefused);
      const text = await storage.readText(documentFiles.rewritten(documentId));
      let fileId: string;
      try {
        const storeId = await storeOf(doc.knowledgeBase, vendorStore);
        fileId = await vendorStore.putDocument(storeId, `${documentId}.md`, text, { document_id: documentId, document_name: doc.name.slice(0, 512) });
        if (doc.vendorFileId && doc.vendorFileId !== fileId) await vendorStore.removeDocument(storeId, doc.vendorFileId);
      } catch (err) {
        // An outage is waited out by the workflow (VENDOR_SYNC_MAX_OUTAGE_SECONDS); a refusal is final.
        // vendorStore exists only when config.vendorSync does (lib/services.ts).
        throw serviceFailureOf(err, config.vendorSync!.maxOutageSeconds, vendorSyncRefused);
      }
      await db.document.update({ where: { id: documentId }, data: { vendorSyncStatus: 'synced', vendorSyncError: null, vendorFileId: fileId, vendorSyncedAt: new Date() } });
      return { status: 'synced' };
    },

    async markVendorSyncFailed({ documentId, message }: { documentId: string; message: string }): Promise<void> {
      await db.document.updateMany({ where: { id: documentId }, data: { vendorSyncStatus: 'failed', vendorSyncError: message.slice(0, 2000) } });
    },
  };
}
