import crypto from 'node:crypto';
import type { Client } from '@temporalio/client';
import type { Services } from '../runtime.js';
import { AppError, notFound } from '../errors.js';
import type { QuotaKeyPrincipal } from './quota-keys.js';
import { estimateTokens, holdLifetimeMs, releaseQuota, reserveQuota, settleQuota } from './quota.js';
import { upstreamClient, withFallback } from './upstream.js';

/**
 * Legacy /v2/completions (deprecated): a completion is requested, runs as the Temporal workflow
 * `legacy-completion-<id>`, and is polled. The finished result is kept for the retention period
 * (LEGACY_COMPLETION_RETENTION_SECONDS, 20 minutes by default); then the workflow deletes the row
 * and the id answers 404.
 */
export const legacyCompletionWorkflowId = (id: string) => `legacy-completion-${id}`;
export const legacyOperationKey = (id: string) => `legacy-completion-${id}`;
export const legacyPath = (id: string) => `/v2/completions/${id}`;

export interface LegacyInput {
  messages: Array<{ role: 'user' | 'assistant' | 'system'; content: string }>;
  audio_files?: string[];
  character?: { name: string; prompt?: string } | string;
  character_params?: Record<string, string | number | boolean>;
}

/** `{{param}}` placeholders of the character prompt are filled from character_params. */
export function renderCharacterPrompt(input: LegacyInput): string | null {
  const c = input.character;
  if (!c) return null;
  const name = typeof c === 'string' ? c : c.name;
  const prompt = typeof c === 'string' ? null : c.prompt ?? null;
  const params: Record<string, unknown> = { name, ...(input.character_params ?? {}) };
  const base = prompt ?? `You are ${name}.`;
  return base.replace(/\{\{\s*([A-Za-z0-9_]+)\s*\}\}/g, (m, k: string) => (k in params ? String(params[k]) : m));
}

export function legacyMessages(input: LegacyInput) {
  const system = renderCharacterPrompt(input);
  return [...(system ? [{ role: 'system' as const, content: system }] : []), ...input.messages];
}

export async function requestLegacyCompletion(deps: Services & { temporal: Client }, key: QuotaKeyPrincipal, input: LegacyInput) {
  if (input.audio_files?.length) throw new AppError('bad_request', 'audio_files are not supported by this service; send the transcribed text as a user message', undefined, 501);
  const id = crypto.randomUUID();
  const bound = estimateTokens(JSON.stringify(legacyMessages(input))) + deps.config.messaging.defaultOutputTokenBound;
  await reserveQuota(deps.db, {
    quotaKeyId: key.id,
    operationKey: legacyOperationKey(id),
    endpoint: 'legacy',
    tokens: bound,
    holdMs: holdLifetimeMs(deps.config.messaging.upstreamTimeoutSeconds) + 30 * 60_000,
  });
  try {
    await deps.db.legacyCompletion.create({ data: { id, quotaKeyId: key.id, input: input as object } });
    await deps.temporal.workflow.start('legacyCompletion', {
      taskQueue: deps.config.temporalTaskQueue,
      workflowId: legacyCompletionWorkflowId(id),
      args: [{ id, retentionSeconds: deps.config.messaging.legacyRetentionSeconds }],
    });
  } catch (err) {
    await releaseQuota(deps.db, legacyOperationKey(id));
    await deps.db.legacyCompletion.deleteMany({ where: { id } });
    throw err;
  }
  return { id: legacyPath(id), state: 'in-progress' };
}

const uuid = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i;

/** Only the key that requested a completion may read it; expired and unknown ids are 404 alike. */
export async function readLegacyCompletion(deps: Services, key: QuotaKeyPrincipal, id: string) {
  const row = uuid.test(id) ? await deps.db.legacyCompletion.findUnique({ where: { id } }) : null;
  if (!row || row.quotaKeyId !== key.id || (row.expiresAt && row.expiresAt <= new Date())) {
    throw notFound(`completion ${legacyPath(id)} not found: unknown, or its result expired (results are kept ${Math.round(deps.config.messaging.legacyRetentionSeconds / 60)} minutes)`);
  }
  return {
    id: legacyPath(row.id),
    state: row.state,
    output: row.output ?? null,
    ...(row.state === 'failed' ? { error: row.error } : {}),
    created_at: row.createdAt.toISOString(),
    expires_at: row.expiresAt?.toISOString() ?? null,
  };
}

/** The activity's work: one provider call, the result stored, the quota settled. Idempotent. */
export async function generateLegacyCompletion(deps: Services, id: string, retentionSeconds: number): Promise<'completed' | 'failed'> {
  const row = await deps.db.legacyCompletion.findUnique({ where: { id } });
  if (!row) return 'failed';
  if (row.state !== 'in-progress') return row.state as 'completed' | 'failed';
  const input = row.input as unknown as LegacyInput;
  const finishedAt = new Date();
  const expiresAt = new Date(finishedAt.getTime() + retentionSeconds * 1000);
  try {
    const client = upstreamClient(deps.config);
    const { result, model } = await withFallback({ model: deps.config.messaging.legacyModel }, (m) =>
      client.chat.completions.create({ model: m, messages: legacyMessages(input), max_completion_tokens: deps.config.messaging.defaultOutputTokenBound }),
    );
    const output = { message: { role: 'assistant', content: result.choices[0]?.message?.content ?? '' }, model, usage: result.usage ?? null };
    await settleQuota(deps.db, legacyOperationKey(id), result.usage?.total_tokens ?? null);
    await deps.db.legacyCompletion.update({ where: { id }, data: { state: 'completed', output: JSON.parse(JSON.stringify(output)), finishedAt, expiresAt } });
    return 'completed';
  } catch (err) {
    await releaseQuota(deps.db, legacyOperationKey(id));
    await deps.db.legacyCompletion.update({ where: { id }, data: { state: 'failed', error: (err as Error).message, finishedAt, expiresAt } });
    return 'failed';
  }
}

export async function deleteLegacyCompletion(deps: Services, id: string): Promise<void> {
  await deps.db.legacyCompletion.deleteMany({ where: { id } });
}
