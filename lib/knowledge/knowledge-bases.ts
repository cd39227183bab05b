import type { Db } from '../platform/db.js';
import { Prisma } from '../platform/db.js';
import { badRequest, conflict } from '../platform/errors.js';
import { findKnowledgeBase } from './lookup.js';
import { findPartner } from '../partners/partners.js';
import { ocrLanguagesSetting } from '../digitization/ocr.js';
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
  ocr_languages?: string;
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
        ocrLanguages: ocrLanguagesSetting.parse(input.ocr_languages),
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

/** A regular folder (a `video_channel` folder comes with its channel source: lib/channels/sources.ts). */
export async function createFolder(db: Db, partner: string, kbName: string, input: { name: string; channel_url?: string }) {
  const { kb } = await findKnowledgeBase(db, partner, kbName);
  if (input.channel_url !== undefined) throw badRequest('form.channel_url is only accepted for video_channel folders');
  try {
    return await db.folder.create({ data: { knowledgeBaseId: kb.id, name: input.name, type: 'regular' } });
  } catch (err) {
    if ((err as { code?: string }).code === 'P2002') throw conflict(`folder ${JSON.stringify(input.name)} already exists`);
    throw err;
  }
}

export async function listFolders(db: Db, partner: string, kbName: string) {
  const { kb } = await findKnowledgeBase(db, partner, kbName);
  return db.folder.findMany({ where: { knowledgeBaseId: kb.id, deletionRequestedAt: null }, orderBy: { name: 'asc' } });
}
