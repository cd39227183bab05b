/**
 * Contract of the `deletion` workflow: deletes the documents the API marked (`deletionRequestedAt`)
 * in a document, folder, knowledge base or partner, then the folder, knowledge base or partner
 * itself. IDs: `delete-document-<id>`, `delete-folder-<id>`, `delete-knowledge-base-<id>`,
 * `delete-partner-<id>`.
 *
 * It never receives a list of documents: it reads them from Postgres a page at a time and continues
 * as new before its history reaches `deletionHistoryEventsLimit`, so a deletion of any size runs
 * with a bounded history and a bounded input.
 */
export const deletionWorkflowType = 'deletion';

export const deletionWorkflowId = {
  document: (documentId: string) => `delete-document-${documentId}`,
  folder: (folderId: string) => `delete-folder-${folderId}`,
  knowledgeBase: (knowledgeBaseId: string) => `delete-knowledge-base-${knowledgeBaseId}`,
  partner: (partnerId: string) => `delete-partner-${partnerId}`,
};

export type DeletionTarget =
  | { kind: 'document'; documentId: string }
  | { kind: 'folder'; folderId: string }
  | { kind: 'knowledgeBase'; knowledgeBaseId: string }
  | { kind: 'partner'; partnerId: string };

export function deletionWorkflowIdOf(target: DeletionTarget): string {
  switch (target.kind) {
    case 'document':
      return deletionWorkflowId.document(target.documentId);
    case 'folder':
      return deletionWorkflowId.folder(target.folderId);
    case 'knowledgeBase':
      return deletionWorkflowId.knowledgeBase(target.knowledgeBaseId);
    case 'partner':
      return deletionWorkflowId.partner(target.partnerId);
  }
}

export interface DeletionInput {
  target: DeletionTarget;
  /** Set by a continued run: what earlier runs did. */
  carry?: { purgedDocuments: number; sourcesStopped: boolean };
}

export interface DeletionResult {
  deletedDocuments: number;
}

/** Documents purged at once (one page); the worker's activity slots bound the real concurrency. */
export const deletionPageSize = 50;
/** A run continues as new at a page boundary once its history has this many events. */
export const deletionHistoryEventsLimit = 2_000;
