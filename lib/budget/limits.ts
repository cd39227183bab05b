import type { Client } from '@temporalio/client';
import type { Db } from '../platform/db.js';
import { Prisma } from '../platform/db.js';
import { lockKnowledgeBase } from './ledger.js';
import { wakeBudgetBlockedWork } from './wake.js';

export interface LimitsPatch {
  character_limit?: number | null;
  token_limit?: number | null;
  dollar_limit_usd?: string | number | null;
}

/**
 * PATCH semantics of spec 4.1: an omitted property is kept, null removes the limit, any value is
 * accepted (lowering below usage blocks new spending at once). Taken under the KB lock so that it
 * orders with admissions. Waiting work is woken after every change; it re-checks its admission.
 */
export async function updateLimits(db: Db, temporal: Client, knowledgeBaseId: string, patch: LimitsPatch): Promise<void> {
  await db.$transaction(async (tx) => {
    await lockKnowledgeBase(tx, knowledgeBaseId);
    await tx.knowledgeBase.update({
      where: { id: knowledgeBaseId },
      data: {
        ...('character_limit' in patch ? { characterLimit: patch.character_limit === null ? null : BigInt(patch.character_limit!) } : {}),
        ...('token_limit' in patch ? { tokenLimit: patch.token_limit === null ? null : BigInt(patch.token_limit!) } : {}),
        ...('dollar_limit_usd' in patch ? { dollarLimitUsd: patch.dollar_limit_usd === null ? null : new Prisma.Decimal(String(patch.dollar_limit_usd)) } : {}),
      },
    });
  });
  await wakeBudgetBlockedWork(db, temporal, knowledgeBaseId);
}
