import { makeContinueAsNewFunc, proxyActivities, workflowInfo } from '@temporalio/workflow';
import type { Activities } from '../activities/index.js';
import { deletionHistoryEventsLimit, deletionPageSize, type DeletionInput, type DeletionResult } from '../lib/contracts/deletion.js';

/**
 * Deletes the marked documents of a document, folder, knowledge base or partner, then the folder,
 * knowledge base or partner (with its voices, transcripts, analyses and keys), leaving nothing behind (contract: lib/contracts/deletion.ts): the container's channel
 * sources are stopped first, and each document's processing workflow is cancelled and awaited, so
 * no activity can write documents, vectors or files after the cleanup. Documents are read a page
 * at a time; a long deletion continues as new between pages (history bound:
 * deletionHistoryEventsLimit plus one page, about 12 events a document).
 */
const acts = proxyActivities<Activities>({
  startToCloseTimeout: '10 minutes',
  heartbeatTimeout: '30 seconds',
  retry: { initialInterval: '1s', maximumInterval: '1 minute' },
});

export async function deletion(input: DeletionInput): Promise<DeletionResult> {
  const { target } = input;
  let purged = input.carry?.purgedDocuments ?? 0;
  // Discovery and imports stop first (the API already disabled the sources): no document of the
  // container can appear after this point.
  if (target.kind !== 'document' && !input.carry?.sourcesStopped) await acts.stopChannelSources({ target });
  for (;;) {
    const page = await acts.markedDocumentsPage({ target, limit: deletionPageSize });
    if (page.length === 0) break;
    await Promise.all(
      page.map(async (documentId) => {
        await acts.stopDocumentPipeline({ documentId });
        await acts.purgeDocument({ documentId });
      }),
    );
    purged += page.length;
    const info = workflowInfo();
    if (info.continueAsNewSuggested || info.historyLength >= deletionHistoryEventsLimit) {
      await makeContinueAsNewFunc<typeof deletion>()({ target, carry: { purgedDocuments: purged, sourcesStopped: true } });
    }
  }
  if (target.kind === 'folder') await acts.removeFolder({ folderId: target.folderId });
  if (target.kind === 'knowledgeBase') await acts.removeKnowledgeBase({ knowledgeBaseId: target.knowledgeBaseId });
  if (target.kind === 'partner') await acts.removePartner({ partnerId: target.partnerId });
  return { deletedDocuments: purged };
}
