import type { BudgetBlockReason, DocumentProcessingState } from '../../generated/prisma/client.js';
import type { Db, Prisma } from '../platform/db.js';
import { budgetBlockedMessage, type BlockReason } from '../contracts/budget-admission.js';
import { queueOfStep, type PipelineStep } from '../contracts/document-pipeline.js';
import { refreshKnowledgeBaseEmbeddingStatus } from './embedding-queue.js';
import { moveQueueMarkers } from './queue-markers.js';
import { nameFromTitle } from '../platform/text.js';
import { rewriteTotals, type RewritePass } from '../rewrite/usage.js';

/**
 * The state changes of documents (and of their knowledge base's embedding record) made by document
 * processing, in one place: the pipeline's activities call these and stay adapters.
 *
 * A document's processing may wait, which its typed columns say:
 * - `budget_blocked`: a step's budget admission was refused (`budgetBlockReason`, `budgetBlockDetail`);
 *   its workflow waits for `budgetChanged` or the periodic re-check. A budget block is not an error.
 * - `failed`: a step other than embedding failed (`failureMessage`); its workflow waits for `retry`.
 *   A failed embedding is the document's embedding_status `failed` with its embedding_error instead.
 * - null: nothing to wait on.
 * The API's `processing_error` is derived from them (processingErrorOf), with the strings clients
 * have always seen: `BUDGET_BLOCKED:<reason>: <detail>`, or the failure's message.
 */

type Tx = Prisma.TransactionClient;

/** The columns of a document's processing state; a trigger keeps them describing one state (migration typed_document_processing_state). */
export interface ProcessingState {
  processingState: DocumentProcessingState | null;
  budgetBlockReason: BudgetBlockReason | null;
  budgetBlockDetail: string | null;
  failureMessage: string | null;
}

/** The budget admission's reasons and the database enum are one list (a compile-time check). */
type Same<A, B> = [A] extends [B] ? ([B] extends [A] ? true : false) : false;
const reasonsAgree: Same<BlockReason, BudgetBlockReason> = true;
void reasonsAgree;

/** Selects the processing state of a document (Prisma `select`). */
export const processingStateColumns = { processingState: true, budgetBlockReason: true, budgetBlockDetail: true, failureMessage: true } as const;

/** The document's processing_error as the API answers it. */
export function processingErrorOf(doc: ProcessingState): string | null {
  switch (doc.processingState) {
    case 'budget_blocked':
      return budgetBlockedMessage(doc.budgetBlockReason!, doc.budgetBlockDetail!);
    case 'failed':
      return doc.failureMessage;
    default:
      return null;
  }
}

/** Data of a Prisma update for each state. */
export const notWaiting: ProcessingState = { processingState: null, budgetBlockReason: null, budgetBlockDetail: null, failureMessage: null };
const budgetBlocked = (reason: BlockReason, detail: string): ProcessingState => ({ ...notWaiting, processingState: 'budget_blocked', budgetBlockReason: reason, budgetBlockDetail: detail });
const failed = (message: string): ProcessingState => ({ ...notWaiting, processingState: 'failed', failureMessage: message });

export const isBudgetBlocked = (doc: Pick<ProcessingState, 'processingState'>) => doc.processingState === 'budget_blocked';

/** A `where` for documents that wait on budget capacity. */
const budgetBlockedDocuments = { processingState: 'budget_blocked' } as const;

/** The fields of a state worth keeping to put back (processingStateColumns of a read row). */
export const stateOf = (doc: ProcessingState): ProcessingState => ({
  processingState: doc.processingState,
  budgetBlockReason: doc.budgetBlockReason,
  budgetBlockDetail: doc.budgetBlockDetail,
  failureMessage: doc.failureMessage,
});

// ---- Waiting and failing ------------------------------------------------------------------------

/** Shows the block on the document while its workflow (or the one about to start) waits for capacity. */
export async function markBudgetBlocked(db: Pick<Db, 'document'>, documentId: string, reason: BlockReason, detail: string): Promise<void> {
  await db.document.updateMany({ where: { id: documentId }, data: budgetBlocked(reason, detail) });
}

/** Admitted: a block shown while the step waited for capacity is over (a failure shown stays). A PrismaPromise. */
export function clearBudgetBlock(db: Pick<Db, 'document'>, documentId: string) {
  return db.document.updateMany({ where: { id: documentId, ...budgetBlockedDocuments }, data: notWaiting });
}

/**
 * A request that started nothing: the document shows what it showed before, unless it has moved on
 * since. Returns a PrismaPromise, so it can join a `$transaction([...])`.
 */
export function restoreProcessingState(db: Pick<Db, 'document'>, documentId: string, previous: ProcessingState) {
  return db.document.updateMany({ where: { id: documentId, processingState: null }, data: stateOf(previous) });
}

/**
 * Makes a failed step visible on the document while its workflow waits for a retry signal. An
 * embedding failure is the document's embedding_error (embedding_status `failed`); the others are
 * its processing state `failed`, which spec 2.5 shows as processing_error for digitization and rewriting.
 */
export async function recordStepFailure(db: Db, documentId: string, step: PipelineStep, message: string): Promise<void> {
  const doc = await db.document.findUnique({ where: { id: documentId }, select: { knowledgeBaseId: true } });
  if (!doc) return;
  await db.$transaction([
    db.document.updateMany({ where: { id: documentId }, data: step === 'embed' ? { embeddingStatus: 'failed', embeddingError: message } : failed(message) }),
    moveQueueMarkers(db, documentId, { remove: [queueOfStep[step]] }),
  ]);
  await refreshKnowledgeBaseEmbeddingStatus(db, doc.knowledgeBaseId);
}

/** On retry: the step is queued again and its failure cleared. */
export async function requeueStep(db: Db, documentId: string, step: PipelineStep): Promise<void> {
  await db.$transaction([
    db.document.updateMany({ where: { id: documentId }, data: step === 'embed' ? { ...notWaiting, embeddingStatus: 'pending', embeddingError: null } : notWaiting }),
    moveQueueMarkers(db, documentId, { add: [queueOfStep[step]] }),
  ]);
  // A retried embedding makes its KB in_progress again at once (not `fail` until the retry ends).
  if (step === 'embed') {
    const doc = await db.document.findUnique({ where: { id: documentId }, select: { knowledgeBaseId: true } });
    if (doc) await refreshKnowledgeBaseEmbeddingStatus(db, doc.knowledgeBaseId);
  }
}

// ---- Digitization -------------------------------------------------------------------------------

/**
 * The source's title as the document's name, while the name is still the one taken from its URL or
 * file. Decided by the row, not by what the caller read before fetching: a client that renames the
 * document while its source is fetched keeps its name.
 */
export async function takeNameFromSource(db: Pick<Db, 'document'>, documentId: string, title: string | null | undefined): Promise<void> {
  const name = nameFromTitle(title);
  if (name) await db.document.updateMany({ where: { id: documentId, nameFromSource: true }, data: { name, nameFromSource: false } });
}

/** A fetched page, transcript or scrape is the document's original (stored as `file`), named by its title. */
export async function recordFetchedOriginal(
  db: Pick<Db, 'document'>,
  documentId: string,
  original: { file: string; extension: string; title: string | null | undefined; provider?: { name: string; costUsd: string } },
): Promise<void> {
  await db.document.update({
    where: { id: documentId },
    data: {
      fileOriginal: original.file,
      originalExtension: original.extension,
      ...(original.provider ? { digitizationProvider: original.provider.name, digitizationCostUsd: original.provider.costUsd } : {}),
    },
  });
  await takeNameFromSource(db, documentId, original.title);
}

// ---- Rewriting ----------------------------------------------------------------------------------

/** A rewrite attempt starts: its statistics start over (they describe the latest attempt) and the document is in the rewrite queue. */
export async function beginRewriteAttempt(db: Db, documentId: string): Promise<void> {
  await db.$transaction([
    db.document.update({
      where: { id: documentId },
      data: { ...notWaiting, rewriteInputTokensPasses: [], rewriteInputTokensTotal: null, rewriteOutputTokens: null, rewriteCostUsd: null, inputFileTokens: null },
    }),
    moveQueueMarkers(db, documentId, { add: ['rewrite'] }),
  ]);
}

/**
 * Appends a pass to the document's latest attempt once, under the document's row lock (a retried
 * activity, or a concurrent one, does not add it twice). `make` builds the pass from those recorded.
 */
export async function recordRewritePass(db: Db, documentId: string, make: (passes: RewritePass[]) => RewritePass): Promise<void> {
  await db.$transaction(async (tx: Tx) => {
    await tx.$queryRaw`SELECT id FROM documents WHERE id = ${documentId}::uuid FOR UPDATE`;
    const doc = await tx.document.findUnique({ where: { id: documentId }, select: { rewriteInputTokensPasses: true } });
    if (!doc) return;
    const passes = (doc.rewriteInputTokensPasses as unknown as RewritePass[]) ?? [];
    const pass = make(passes);
    if (passes.some((p) => p.operation_key === pass.operation_key)) return;
    const all = [...passes, pass];
    const totals = rewriteTotals(all);
    await tx.document.update({
      where: { id: documentId },
      data: { rewriteInputTokensPasses: all as never, rewriteInputTokensTotal: totals.rewriteInputTokensTotal, rewriteOutputTokens: totals.rewriteOutputTokens },
    });
  });
}

/**
 * A rewrite attempt ends. Accepted: the draft is the final content, which queues embedding. Rejected:
 * the draft is kept for inspection and the final content is left as it was. Either way the attempt's
 * figures are recorded (`record`: model, provider, totals, completion time).
 */
export async function finishRewriteAttempt(
  db: Db,
  doc: { id: string; knowledgeBaseId: string },
  outcome: { rejected: boolean; draft: { charCount: number } | null; record: Prisma.DocumentUpdateInput },
): Promise<void> {
  const { rejected, draft } = outcome;
  await db.$transaction([
    db.document.update({
      where: { id: doc.id },
      data: {
        ...(draft ? { fileRewrittenDraft: 'rewritten_draft.md', draftRewriteCharCount: draft.charCount } : {}),
        ...outcome.record,
        ...(rejected ? {} : { ...notWaiting, fileRewritten: 'rewritten.md', finalRewriteCharCount: draft?.charCount ?? 0, embeddingStatus: 'pending', embeddingError: null }),
      },
    }),
    moveQueueMarkers(db, doc.id, { remove: ['rewrite', 'embedding'], add: rejected ? [] : ['embedding'] }),
  ]);
  if (!rejected) await refreshKnowledgeBaseEmbeddingStatus(db, doc.knowledgeBaseId);
}

// ---- Embedding ----------------------------------------------------------------------------------

/** The embed step has started: the document shows in_progress and its KB the latest run (one statement). */
export async function markEmbeddingStarted(db: Db, doc: { id: string; knowledgeBaseId: string; embeddingStatus: string | null }): Promise<void> {
  await db.$executeRaw`
    WITH d AS (UPDATE "documents" SET "embeddingStatus" = 'in_progress', "embeddingError" = NULL, "updatedAt" = now() WHERE "id" = ${doc.id}::uuid RETURNING "knowledgeBaseId")
    UPDATE "knowledge_bases" kb SET "embeddingLastUpdateAt" = now(), "embeddingLastUpdateStatus" = 'in_progress', "updatedAt" = now() FROM d WHERE kb."id" = d."knowledgeBaseId"`;
  // A document that was pending kept the KB in_progress already.
  if (doc.embeddingStatus !== 'pending' && doc.embeddingStatus !== 'in_progress') await refreshKnowledgeBaseEmbeddingStatus(db, doc.knowledgeBaseId);
}

/** What a finished embedding wrote, as the document records it. */
export interface EmbeddedDocument {
  chunkCount: number;
  bm25LanguageCounts: Record<string, number>;
  profileId: number;
  manifest: object;
}

/**
 * Every chunk written and the leftovers removed: the document is embedded (a budget block it showed
 * while the step waited is over) and leaves the queue, and the KB records the run, in one
 * transaction; then the KB's status follows.
 */
export async function markEmbedded(db: Db, doc: { id: string; knowledgeBaseId: string; knowledgeBase: { embeddingProfileId: number | null } }, embedded: EmbeddedDocument): Promise<void> {
  await db.$transaction([
    clearBudgetBlock(db, doc.id),
    db.document.update({
      where: { id: doc.id },
      data: {
        embeddingStatus: 'success',
        embeddingError: null,
        embeddedAt: new Date(),
        embeddingChunkCount: embedded.chunkCount,
        embeddingDenseVectorCount: embedded.chunkCount,
        embeddingBm25LanguageCounts: embedded.bm25LanguageCounts,
        embeddingProfileId: embedded.profileId,
        embeddingManifest: embedded.manifest,
        vectorstoreDocumentId: doc.id,
      },
      select: { id: true },
    }),
    moveQueueMarkers(db, doc.id, { remove: ['embedding'] }),
    db.knowledgeBase.update({
      where: { id: doc.knowledgeBaseId },
      data: {
        embeddingLastUpdateAt: new Date(),
        embeddingLastUpdateStatus: 'success',
        embeddingLastError: null,
        // A KB without a profile adopts this one; a KB on another profile is being re-embedded
        // (kbReembed switched it already) and keeps what it has.
        ...(doc.knowledgeBase.embeddingProfileId === null ? { embeddingProfileId: embedded.profileId } : {}),
      },
      select: { id: true },
    }),
  ]);
  await refreshKnowledgeBaseEmbeddingStatus(db, doc.knowledgeBaseId);
}
