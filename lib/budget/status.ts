import type { Db } from '../platform/db.js';
import { Prisma } from '../platform/db.js';

/** The KB budget status object of spec 2.3, read from the ledger. */
const num = (v: { toString(): string } | null) => (v === null ? null : Number(v.toString()));

/** Usage aggregates, computed from settled usage events. */
export interface UsageTotals {
  event_count: number;
  priced_event_count: number;
  unpriced_event_count: number;
  cost_usd_total: number;
  rewrite_event_count: number;
  digitization_event_count: number;
}


export async function budgetStatus(db: Db, knowledgeBaseId: string) {
  const [kb, held, uncertain, unknownTokenEvents] = await Promise.all([
    db.knowledgeBase.findUniqueOrThrow({ where: { id: knowledgeBaseId } }),
    db.budgetReservation.aggregate({ where: { knowledgeBaseId, status: { in: ['pending', 'uncertain'] } }, _sum: { characters: true, tokens: true, dollars: true } }),
    db.budgetReservation.count({ where: { knowledgeBaseId, status: 'uncertain' } }),
    db.usageEvent.count({ where: { knowledgeBaseId, category: { not: 'digitization' }, OR: [{ inputTokens: null }, { outputTokens: null }] } }),
  ]);
  const dimension = (limit: { toString(): string } | null, consumed: { toString(): string }, reserved: { toString(): string }, unknown: number) => {
    const l = limit === null ? null : new Prisma.Decimal(limit.toString());
    const remaining = l === null ? null : Prisma.Decimal.max(l.minus(consumed.toString()).minus(reserved.toString()), 0);
    return { limit: num(l), consumed: num(consumed), reserved: num(reserved), remaining: num(remaining), unknown_events: unknown };
  };
  const characters = dimension(kb.characterLimit, kb.charactersConsumed, held._sum.characters ?? 0n, 0);
  const tokens = dimension(kb.tokenLimit, kb.tokensConsumed, held._sum.tokens ?? 0n, unknownTokenEvents);
  const dollars = dimension(kb.dollarLimitUsd, kb.dollarsConsumed, held._sum.dollars ?? new Prisma.Decimal(0), unknownTokenEvents);

  const blocking_reasons: Array<{ type: string; dimension?: string; detail: string }> = [];
  for (const [name, d] of [['characters', characters], ['tokens', tokens], ['dollars', dollars]] as const) {
    if (d.limit !== null && d.remaining === 0) blocking_reasons.push({ type: 'limit_exhausted', dimension: name, detail: `${name} limit ${d.limit} is used up` });
  }
  for (const [name, d] of [['tokens', tokens], ['dollars', dollars]] as const) {
    if (d.limit !== null && d.unknown_events > 0) blocking_reasons.push({ type: 'unknown_historical_usage', dimension: name, detail: `${d.unknown_events} usage event(s) with unknown usage` });
  }
  const capped = characters.limit !== null || tokens.limit !== null || dollars.limit !== null;
  if (capped && uncertain > 0) blocking_reasons.push({ type: 'unresolved_provider_outcome', detail: `${uncertain} operation(s) await resolution` });

  return {
    limits: { character_limit: characters.limit, token_limit: tokens.limit, dollar_limit_usd: dollars.limit },
    characters,
    tokens,
    dollars,
    uncertain_operations: uncertain,
    blocking_reasons,
    blocked: blocking_reasons.length > 0,
  };
}

/** lifetime_usage (2.2 / 2.5) from settled usage events only. */
export async function usageTotals(db: Db, where: { knowledgeBaseId?: string; documentId?: string }): Promise<UsageTotals> {
  const rows = await db.usageEvent.groupBy({
    by: ['category'],
    where,
    _count: { _all: true, costUsd: true },
    _sum: { costUsd: true },
  });
  const totals: UsageTotals = { event_count: 0, priced_event_count: 0, unpriced_event_count: 0, cost_usd_total: 0, rewrite_event_count: 0, digitization_event_count: 0 };
  let cost = new Prisma.Decimal(0);
  for (const r of rows) {
    totals.event_count += r._count._all;
    totals.priced_event_count += r._count.costUsd;
    totals.unpriced_event_count += r._count._all - r._count.costUsd;
    cost = cost.plus(r._sum.costUsd ?? 0);
    if (r.category === 'rewrite') totals.rewrite_event_count += r._count._all;
    if (r.category === 'digitization') totals.digitization_event_count += r._count._all;
  }
  totals.cost_usd_total = Number(cost.toFixed(8));
  return totals;
}

/** rewrite_usage and digitization_usage compatibility fields (2.2), from settled events. */
async function compatibilityUsage(db: Db, knowledgeBaseId: string) {
  const [rewrite, digitization] = await Promise.all([
    db.usageEvent.findMany({ where: { knowledgeBaseId, category: 'rewrite' }, select: { rejected: true, fallback: true, inputTokens: true, outputTokens: true, costUsd: true } }),
    db.usageEvent.aggregate({ where: { knowledgeBaseId, category: 'digitization' }, _count: { _all: true, costUsd: true }, _sum: { costUsd: true } }),
  ]);
  const sum = (xs: Array<bigint | null>) => Number(xs.reduce<bigint>((a, b) => a + (b ?? 0n), 0n));
  const primary = rewrite.filter((e) => !e.fallback);
  const fallback = rewrite.filter((e) => e.fallback);
  const complete = (e: { inputTokens: bigint | null; outputTokens: bigint | null }) => e.inputTokens !== null && e.outputTokens !== null;
  return {
    rewrite_usage: [
      {
        model: null,
        rewritten_count: rewrite.length,
        rejected_count: rewrite.filter((e) => e.rejected).length,
        complete_usage_count: rewrite.filter(complete).length,
        complete_cost_count: rewrite.filter((e) => e.costUsd !== null).length,
        cost_usd_total: Number(rewrite.reduce((a, e) => a.plus(e.costUsd ?? 0), new Prisma.Decimal(0)).toFixed(8)),
        input_tokens_total: sum(primary.map((e) => e.inputTokens)),
        output_tokens_total: sum(primary.map((e) => e.outputTokens)),
        fallback_complete_usage_count: fallback.filter(complete).length,
        fallback_input_tokens_total: sum(fallback.map((e) => e.inputTokens)),
        fallback_output_tokens_total: sum(fallback.map((e) => e.outputTokens)),
      },
    ],
    digitization_usage: {
      scraper_document_count: digitization._count._all,
      complete_cost_count: digitization._count.costUsd,
      cost_usd_total: Number(new Prisma.Decimal(digitization._sum.costUsd ?? 0).toFixed(8)),
    },
  };
}

export async function knowledgeBaseUsage(db: Db, knowledgeBaseId: string) {
  const [lifetime, compat] = await Promise.all([usageTotals(db, { knowledgeBaseId }), compatibilityUsage(db, knowledgeBaseId)]);
  return { lifetime, ...compat };
}
