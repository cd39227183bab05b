import type { Client } from '@temporalio/client';
import type { Db } from '../platform/db.js';
import { conflict } from '../platform/errors.js';
import { releaseDocumentCharacters, resolveUncertain } from './ledger.js';
import { wakeBudgetBlockedWork } from './wake.js';

export interface ResolveOperationRequest {
  operation_key: string;
  used: boolean;
  characters?: number;
  input_tokens?: number;
  output_tokens?: number;
  cost_usd?: string;
  model?: string;
}

export async function listUncertainOperations(db: Db, knowledgeBaseId: string) {
  const rows = await db.budgetReservation.findMany({ where: { knowledgeBaseId, status: 'uncertain' }, orderBy: { createdAt: 'asc' } });
  return rows.map((r) => ({
    operation_key: r.operationKey,
    workflow_id: r.workflowId,
    document_id: r.documentId,
    category: r.category,
    bound: { characters: Number(r.characters), tokens: Number(r.tokens), dollars: Number(r.dollars.toString()) },
    created_at: r.createdAt.toISOString(),
    note: r.note,
  }));
}

/** Operator resolution of an uncertain operation (docs/operations.md, "Budget operations"). */
export async function resolveOperation(db: Db, temporal: Client, knowledgeBaseId: string, req: ResolveOperationRequest): Promise<void> {
  const r = await db.budgetReservation.findUnique({ where: { operationKey: req.operation_key } });
  if (!r || r.knowledgeBaseId !== knowledgeBaseId || r.status !== 'uncertain') {
    throw conflict(`operation ${JSON.stringify(req.operation_key)} is not an uncertain operation of this knowledge base`);
  }
  const outcome = await resolveUncertain(
    db,
    req.operation_key,
    req.used
      ? { used: true, characters: req.characters, inputTokens: req.input_tokens ?? 0, outputTokens: req.output_tokens ?? 0, costUsd: req.cost_usd ?? null, model: req.model ?? null }
      : { used: false },
  );
  if (outcome !== 'resolved') throw conflict(`operation ${JSON.stringify(req.operation_key)} was resolved meanwhile`);
  await wakeBudgetBlockedWork(db, temporal, knowledgeBaseId);
}

/**
 * Frees a document's accepted characters (its content is being deleted) and wakes work that waits
 * for character capacity. Tokens and dollars are lifetime and stay consumed.
 */
export async function freeDocumentCharacters(db: Db, temporal: Client, documentId: string): Promise<void> {
  const doc = await db.document.findUnique({ where: { id: documentId }, select: { knowledgeBaseId: true } });
  if (!doc) return;
  await releaseDocumentCharacters(db, documentId);
  await wakeBudgetBlockedWork(db, temporal, doc.knowledgeBaseId);
}
