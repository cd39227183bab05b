import type { Db } from '../platform/db.js';
import type { FileStorage } from '../platform/storage.js';
import { documentFiles } from '../platform/storage.js';
import { countCharacters } from '../platform/text.js';
import { countTokensInTurns } from '../platform/tokens.js';
import { queueOfStep, type DocumentPipelineInput } from '../contracts/document-pipeline.js';
import { refreshKnowledgeBaseEmbeddingStatus } from './embedding-queue.js';
import { moveQueueMarkers } from './queue-markers.js';

/**
 * Steps of the document pipeline that more than one activity runs (activities/pipeline-steps.ts on
 * their own, activities/digitization.ts inside the one activity of a whole digitization).
 */

/**
 * A new run (not a continuation) takes its document over: the markers become its first step's
 * queue (a replaced run's leftovers go), and its request is recorded for the reconciler.
 */
export async function beginPipelineRun(db: Db, request: DocumentPipelineInput): Promise<void> {
  await db.document.updateMany({
    where: { id: request.documentId },
    data: { inQueues: [queueOfStep[request.steps[0]!]], pipelineRequest: request as unknown as object },
  });
}

/**
 * use_original_as_rewritten: the digitized text becomes the final rewritten content, no LLM; the
 * document moves from the digitize queue to the embedding queue. Idempotent.
 */
export async function finalizeOriginalAsRewritten(db: Db, storage: FileStorage, doc: { id: string; knowledgeBaseId: string }): Promise<{ charCount: number }> {
  const text = await storage.readText(documentFiles.digitized(doc.id));
  await storage.write(documentFiles.rewritten(doc.id), text);
  const charCount = countCharacters(text);
  const inputFileTokens = await countTokensInTurns(text);
  await db.$transaction([
    db.document.update({
      where: { id: doc.id },
      data: { fileRewritten: 'rewritten.md', finalRewriteCharCount: charCount, inputFileTokens, embeddingStatus: 'pending', embeddingError: null },
      select: { id: true },
    }),
    moveQueueMarkers(db, doc.id, { remove: ['digitize'], add: ['embedding'] }),
  ]);
  await refreshKnowledgeBaseEmbeddingStatus(db, doc.knowledgeBaseId);
  return { charCount };
}
