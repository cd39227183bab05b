import crypto from 'node:crypto';
import type { Client } from '@temporalio/client';
import type { Services } from '../services.js';
import { legacyCompletionWorkflowId, legacyCompletionWorkflowType } from '../contracts/legacy-completion.js';
import { AppError, notFound } from '../platform/errors.js';
import type { QuotaKeyPrincipal } from './quota-keys.js';
import { estimateTokens, holdLifetimeMs, releaseQuota, reserveQuota, settleQuota, tokensUsed } from './quota.js';
import { providerCalls, UpstreamError, upstreamClient, withFallback, type ProviderUsage } from './upstream.js';
import { idWithoutPath, isUuid } from '../platform/ids.js';

/**
 * Legacy /v2/completions (deprecated): a completion is requested, runs as the Temporal workflow
 * `legacy-completion-<id>`, and is polled. The finished result is kept for the retention period
 * (LEGACY_COMPLETION_RETENTION_SECONDS, 20 minutes by default); then the workflow deletes the row
 * and the id answers 404.
 */
const legacyOperationKey = (id: string) => `legacy-completion-${id}`;
const legacyPath = (id: string) => `/v2/completions/${id}`;

export interface LegacyInput {
  messages: Array<{ role: 'user' | 'assistant' | 'system'; content: string }>;
  audio_files?: string[];
  character?: { name: string; prompt?: string } | string;
  character_params?: Record<string, string | number | boolean>;
}

/** `{{param}}` placeholders of the character prompt are filled from character_params. */
function renderCharacterPrompt(input: LegacyInput): string | null {
  const c = input.character;
  if (!c) return null;
  const name = typeof c === 'string' ? c : c.name;
  const prompt = typeof c === 'string' ? null : c.prompt ?? null;
  const params: Record<string, unknown> = { name, ...(input.character_params ?? {}) };
  const base = prompt ?? `You are ${name}.`;
  return base.replace(/\{\{\s*(\w+)\s*\}\}/g, (m, k: string) => (k in params ? String(params[k]) : m));
}

function legacyMessages(input: LegacyInput) {
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
    await deps.temporal.workflow.start(legacyCompletionWorkflowType, {
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

/** Only the key that requested a completion may read it; expired and unknown ids are 404 alike. */
export async function readLegacyCompletion(deps: Services, key: QuotaKeyPrincipal, pathOrId: string) {
  const id = idWithoutPath(pathOrId, legacyPath);
  const row = isUuid(id) ? await deps.db.legacyCompletion.findUnique({ where: { id } }) : null;
  if (!row || row.quotaKeyId !== key.id || (row.expiresAt && row.expiresAt <= new Date())) {
    throw notFound(`completion ${legacyPath(id)} not found: unknown, or its result expired (results are kept ${Math.round(deps.config.messaging.legacyRetentionSeconds / 60)} minutes)`);
  }
  return {
    id: legacyPath(row.id),
    state: row.state,
    output: row.state === 'completed' ? row.output : null,
    ...(row.state === 'failed' ? { error: row.error } : {}),
    created_at: row.createdAt.toISOString(),
    expires_at: row.expiresAt?.toISOString() ?? null,
  };
}

/**
 * The activity's work: one provider call, the answer stored, the quota settled, the state set.
 * Idempotent and crash-safe: the call is marked dispatched before it is sent and its answer stored
 * before anything else, so a retry after a crash finishes from the stored answer, and a retry that
 * finds the call dispatched but unanswered (the worker was lost mid-call) does not call again — the
 * provider may have done and billed the work — but fails the completion and charges the hold.
 * A provider that refuses or fails ends the completion `failed` with the quota released; any other
 * error (database, storage) is thrown, so Temporal retries the activity.
 */
export async function generateLegacyCompletion(deps: Services, id: string, retentionSeconds: number): Promise<'completed' | 'failed'> {
  const row = await deps.db.legacyCompletion.findUnique({ where: { id } });
  if (!row) return 'failed';
  if (row.state !== 'in-progress') return row.state as 'completed' | 'failed';
  const finish = async (data: { state: 'completed' | 'failed'; error?: string }) => {
    const finishedAt = new Date();
    await deps.db.legacyCompletion.update({ where: { id }, data: { ...data, finishedAt, expiresAt: new Date(finishedAt.getTime() + retentionSeconds * 1000) } });
    return data.state;
  };
  type Answer = { message: { role: string; content: string }; model: string; usage: ProviderUsage | null };

  if (row.output) {
    // Answered before a crash: settle and finish without calling again.
    await settleQuota(deps.db, { operationKey: legacyOperationKey(id) }, tokensUsed((row.output as unknown as Answer).usage));
    return finish({ state: 'completed' });
  }
  if (row.dispatchedAt) {
    await settleQuota(deps.db, { operationKey: legacyOperationKey(id) }, null);
    return finish({ state: 'failed', error: 'the worker was lost while the model call was in flight; it was not repeated (the provider may have done the work, so the hold was charged); request the completion again' });
  }

  await deps.db.legacyCompletion.update({ where: { id }, data: { dispatchedAt: new Date() } });
  const input = row.input as unknown as LegacyInput;
  let answer: Answer;
  try {
    const client = upstreamClient(deps.config);
    const { result, model } = await withFallback({ model: deps.config.messaging.legacyModel }, (m) =>
      providerCalls.chat(client, { model: m, messages: legacyMessages(input), max_completion_tokens: deps.config.messaging.defaultOutputTokenBound, stream: false }, new AbortController().signal),
    );
    const choice = (result.choices?.[0] ?? {}) as { message?: { content?: string | null } };
    answer = { message: { role: 'assistant', content: choice.message?.content ?? '' }, model, usage: result.usage ?? null };
  } catch (err) {
    // withFallback answers provider failures as UpstreamError; anything else is ours and retried.
    if (!(err instanceof UpstreamError)) throw err;
    await releaseQuota(deps.db, legacyOperationKey(id));
    return finish({ state: 'failed', error: err.message });
  }
  await deps.db.legacyCompletion.update({ where: { id }, data: { output: JSON.parse(JSON.stringify(answer)) } });
  await settleQuota(deps.db, { operationKey: legacyOperationKey(id) }, tokensUsed(answer.usage));
  return finish({ state: 'completed' });
}

export async function deleteLegacyCompletion(deps: Services, id: string): Promise<void> {
  await deps.db.legacyCompletion.deleteMany({ where: { id } });
}
