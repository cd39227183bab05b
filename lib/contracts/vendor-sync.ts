/**
 * Contract of the `vendorSync` workflow (ID `vendor-sync-<document uuid>`): mirrors one document's
 * final rewritten content into its KB's external vector store.
 */
export const vendorSyncWorkflowType = 'vendorSync';
export const vendorSyncWorkflowId = (documentId: string) => `vendor-sync-${documentId}`;

export interface VendorSyncInput {
  documentId: string;
}

/** Raised by the upload when retrying cannot help (no vector-store API, no content). */
export const vendorSyncRefused = 'VendorSyncRefused';
