import type { Db } from '../db.js';
import { Prisma } from '../db.js';
import { AppError, conflict } from '../errors.js';
import { findKnowledgeBase, findPartner } from './lookup.js';
import { presentKnowledgeBase } from './presenters.js';
import { knowledgeBaseUsage } from '../budget/status.js';
import type { KnowledgeBase } from '../../generated/prisma/client.js';

/** The KB object of spec 2.2, with usage aggregates from the ledger. */
export async function describeKnowledgeBase(db: Db, kb: KnowledgeBase) {
  return presentKnowledgeBase(kb, await knowledgeBaseUsage(db, kb.id));
}

export interface KnowledgeBaseInput {
  name: string;
  character_limit?: number;
  token_limit?: number;
  /** Decimal string with at most 8 decimal places; never converted through a float. */
  dollar_limit_usd?: string;
  expert_name?: string;
  user_email?: string;
}

export async function createKnowledgeBase(db: Db, partnerName: string, input: KnowledgeBaseInput) {
  const partner = await findPartner(db, partnerName);
  try {
    return await db.knowledgeBase.create({
      data: {
        partnerId: partner.id,
        name: input.name,
        expertName: input.expert_name ?? null,
        userEmail: input.user_email ?? null,
        characterLimit: input.character_limit ?? null,
        tokenLimit: input.token_limit ?? null,
        dollarLimitUsd: input.dollar_limit_usd !== undefined ? new Prisma.Decimal(input.dollar_limit_usd) : null,
      },
    });
  } catch (err) {
    if ((err as { code?: string }).code === 'P2002') throw conflict(`knowledge base ${JSON.stringify(input.name)} already exists`);
    throw err;
  }
}

export async function listKnowledgeBases(db: Db, partnerName: string) {
  const partner = await findPartner(db, partnerName);
  return db.knowledgeBase.findMany({ where: { partnerId: partner.id }, orderBy: { name: 'asc' } });
}

export async function createFolder(db: Db, partner: string, kbName: string, input: { name: string; type: string }) {
  const { kb } = await findKnowledgeBase(db, partner, kbName);
  if (input.type !== 'regular') {
    throw new AppError('bad_request', 'video_channel folders are not available yet in this deployment', undefined, 501);
  }
  try {
    return await db.folder.create({ data: { knowledgeBaseId: kb.id, name: input.name, type: input.type } });
  } catch (err) {
    if ((err as { code?: string }).code === 'P2002') throw conflict(`folder ${JSON.stringify(input.name)} already exists`);
    throw err;
  }
}

export async function listFolders(db: Db, partner: string, kbName: string) {
  const { kb } = await findKnowledgeBase(db, partner, kbName);
  return db.folder.findMany({ where: { knowledgeBaseId: kb.id, deletionRequestedAt: null }, orderBy: { name: 'asc' } });
}
