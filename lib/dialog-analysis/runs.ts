import type { Services } from '../services.js';
import { classifyLlmError, isResponseFormatRejection, type ChatCallResult, type ChatResponseFormat } from '../providers/llm.js';
import {
  dialogAnalysisOperationKey,
  type CallInput,
  type CallOutcome,
  type FailInput,
  type PrepareOutcome,
} from '../contracts/dialog-analysis.js';
import { normalizeCallerSchema, type CallerSchema } from './caller-schema.js';
import { judgeAnswer } from './answer.js';
import { analysisMessages } from './prompt.js';
import type { DialogAnalysisRequest } from './request.js';
import type { SchemaSandbox } from './schema-sandbox.js';
import { structuredOutput } from './strict-schema.js';

/**
 * The worker side of dialog analysis: what the activities of the `dialogAnalysis` workflow do.
 * Each function is idempotent, because Temporal retries activities. The model call is keyed by
 * its operation key (`dialog-analysis-<id>/<generation>/<seq>`) in `dialog_analysis_calls`:
 * an answer that was received is stored before it is judged and never requested again, and a call
 * that was in flight when its worker died is recorded as interrupted (the provider may have done
 * and billed it) before the next call is made.
 */
export interface RunDeps extends Pick<Services, 'db' | 'config' | 'chatModel' | 'log'> {
  sandbox: SchemaSandbox;
}

export interface CallContext {
  heartbeat(): void;
  signal: AbortSignal;
}

const maxReasonChars = 2000;

type Row = NonNullable<Awaited<ReturnType<Services['db']['dialogAnalysis']['findUnique']>>>;

function schemasOf(input: DialogAnalysisRequest): { profile: CallerSchema; feedback: CallerSchema } {
  const one = (where: string, raw: Record<string, unknown>) => {
    const n = normalizeCallerSchema(where, raw);
    // Checked when the analysis was accepted; a stored input cannot fail here.
    if ('errors' in n) throw new Error(`stored schema ${where} is invalid: ${n.errors.map((e) => `${e.field} ${e.message}`).join('; ')}`);
    return n.schema;
  };
  return { profile: one('input.profile_schema', input.profile_schema), feedback: one('input.feedback_schema', input.feedback_schema) };
}

const notConfigured = (deps: RunDeps) =>
  `no model is configured for dialog analysis: set OPENAI_BASE_URL (and OPENAI_API_KEY) for the workers; the model is DIALOG_ANALYSIS_MODEL=${deps.config.dialogAnalysis.model}. The request is kept: send the workflow the signal "retry" once a model is configured`;

const finishedState = (row: Row) => ({ state: row.state as 'completed' | 'failed', expiresAt: (row.expiresAt ?? new Date()).toISOString() });

/** Marks the run started and picks its first response mode. */
export async function prepareAnalysis(deps: RunDeps, { id, generation }: { id: string; generation: number }): Promise<PrepareOutcome> {
  const row = await deps.db.dialogAnalysis.findUnique({ where: { id } });
  if (!row || row.generation !== generation) return { status: 'gone' };
  if (row.state !== 'in-progress') return { status: 'finished', ...finishedState(row) };
  await deps.db.dialogAnalysis.updateMany({ where: { id, startedAt: null }, data: { startedAt: new Date() } });
  if (!deps.chatModel) return { status: 'not_configured', reason: notConfigured(deps) };
  const configured = deps.config.dialogAnalysis.responseFormat;
  if (configured === 'json_object' || configured === 'prompt') return { status: 'ready', mode: configured };
  const schemas = schemasOf(JSON.parse(row.input) as DialogAnalysisRequest);
  const structured = structuredOutput(schemas.profile, schemas.feedback);
  if (!structured.representable) deps.log.info('dialog analysis schemas need JSON mode', { id, reason: structured.reason });
  return { status: 'ready', mode: structured.representable ? 'json_schema' : 'json_object' };
}

/** One model call, judged. See the module comment for how it stays idempotent. */
export async function callModel(deps: RunDeps, call: CallInput, ctx: CallContext): Promise<CallOutcome> {
  const { db, config } = deps;
  const { id, generation, seq, mode } = call;
  const row = await db.dialogAnalysis.findUnique({ where: { id } });
  if (!row || row.generation !== generation) return { outcome: 'gone' };
  if (row.state !== 'in-progress') return { outcome: 'finished', ...finishedState(row) };
  const input = JSON.parse(row.input) as DialogAnalysisRequest;
  const schemas = schemasOf(input);
  const structured = structuredOutput(schemas.profile, schemas.feedback);
  const operationKey = dialogAnalysisOperationKey(id, generation, seq);

  let answer: { content: string | null; refusal: string | null; finishReason: string | null; model: string };
  const earlier = await db.dialogAnalysisCall.findUnique({ where: { operationKey } });
  if (earlier) {
    switch (earlier.status) {
      case 'answered':
        if (earlier.valid === false) return { outcome: 'invalid', errors: earlier.verdict ?? 'the answer did not conform' };
        answer = { content: earlier.content, refusal: earlier.refusal, finishReason: earlier.finishReason, model: earlier.model };
        break;
      case 'failed':
        return storedFailure(earlier.failureKind, earlier.error ?? 'the model call failed');
      case 'started':
        // The attempt that made this call died while it was in flight (its worker was lost).
        await db.dialogAnalysisCall.updateMany({ where: { operationKey, status: 'started' }, data: { status: 'interrupted', finishedAt: new Date() } });
        return { outcome: 'interrupted', message: 'the worker was lost during the model call; its usage is unknown', retryAfterMs: null };
      default:
        return { outcome: 'interrupted', message: 'the worker was lost during the model call; its usage is unknown', retryAfterMs: null };
    }
  } else {
    if (!deps.chatModel) return { outcome: 'not_configured', message: notConfigured(deps) };
    const rejected = await db.dialogAnalysisCall.findMany({ where: { analysisId: id, generation, valid: false, seq: { lt: seq } }, orderBy: { seq: 'asc' } });
    const shown = { profile: schemas.profile.schema, feedback: schemas.feedback.schema };
    const messages = analysisMessages(input, shown, rejected.map((r) => ({ answer: r.content || r.refusal || '', errors: r.verdict ?? '' })));
    const model = config.dialogAnalysis.model;
    const responseFormat: ChatResponseFormat | undefined =
      mode === 'json_schema' && structured.representable ? structured.responseFormat : mode === 'prompt' ? undefined : { type: 'json_object' };
    await db.dialogAnalysisCall.create({ data: { operationKey, analysisId: id, generation, seq, model, responseMode: mode, status: 'started' } });
    const beat = setInterval(() => ctx.heartbeat(), 2_000);
    let result: ChatCallResult;
    try {
      result = await deps.chatModel.complete({
        model,
        messages,
        maxOutputTokens: config.dialogAnalysis.maxOutputTokens,
        timeoutMs: config.dialogAnalysis.timeoutSeconds * 1000,
        responseFormat,
        signal: ctx.signal,
      });
    } catch (err) {
      const failure = classifyLlmError(err);
      const kind = isResponseFormatRejection(failure) ? 'response_format' : failure.kind;
      await db.dialogAnalysisCall.updateMany({
        where: { operationKey, status: 'started' },
        data: { status: 'failed', failureKind: kind, error: failure.message.slice(0, maxReasonChars), finishedAt: new Date() },
      });
      return storedFailure(kind, failure.message, failure.retryAfterMs);
    } finally {
      clearInterval(beat);
    }
    const stored = await db.dialogAnalysisCall.updateMany({
      where: { operationKey, status: 'started' },
      data: {
        status: 'answered',
        content: result.content,
        refusal: result.refusal ?? null,
        finishReason: result.finishReason,
        model: result.model,
        promptTokens: result.usage?.promptTokens ?? null,
        completionTokens: result.usage?.outputTokens ?? null,
        finishedAt: new Date(),
      },
    });
    // Another attempt already gave this call up as interrupted (this one was presumed lost): drop it.
    if (stored.count === 0) return { outcome: 'interrupted', message: 'the call was given up as lost before it answered', retryAfterMs: null };
    answer = { content: result.content, refusal: result.refusal ?? null, finishReason: result.finishReason, model: result.model };
  }

  const beat = setInterval(() => ctx.heartbeat(), 2_000);
  let judgement;
  try {
    judgement = await judgeAnswer(deps.sandbox, answer, schemas, {
      optional: mode === 'json_schema' && structured.representable ? structured.optional : null,
      maxOutputTokens: config.dialogAnalysis.maxOutputTokens,
      validationTimeoutMs: config.dialogAnalysis.validationTimeoutMs,
    });
  } finally {
    clearInterval(beat);
  }
  const attempts = (await db.dialogAnalysisCall.count({ where: { analysisId: id, generation, valid: { not: null }, seq: { not: seq } } })) + 1;
  if (!judgement.valid) {
    await db.$transaction([
      db.dialogAnalysisCall.update({ where: { operationKey }, data: { valid: false, verdict: judgement.errors } }),
      db.dialogAnalysis.updateMany({ where: { id, state: 'in-progress', generation }, data: { attempts } }),
    ]);
    return { outcome: 'invalid', errors: judgement.errors };
  }
  const finishedAt = new Date();
  await db.$transaction([
    db.dialogAnalysisCall.update({ where: { operationKey }, data: { valid: true, verdict: null } }),
    db.dialogAnalysis.updateMany({
      where: { id, state: 'in-progress', generation },
      data: {
        state: 'completed',
        output: judgement.output,
        model: answer.model,
        responseMode: mode,
        attempts,
        finishedAt,
        expiresAt: new Date(finishedAt.getTime() + call.retentionSeconds * 1000),
      },
    }),
  ]);
  const after = await db.dialogAnalysis.findUnique({ where: { id } });
  if (!after) return { outcome: 'gone' };
  if (after.state === 'completed') return { outcome: 'valid', expiresAt: after.expiresAt!.toISOString() };
  return { outcome: 'finished', ...finishedState(after) };
}

function storedFailure(kind: string | null, message: string, retryAfterMs: number | null = null): CallOutcome {
  switch (kind) {
    case 'response_format':
      return { outcome: 'response_format_unsupported', message };
    case 'rate_limited':
    case 'unavailable':
    case 'ambiguous':
      return { outcome: kind, message, retryAfterMs };
    default:
      return { outcome: 'permanent', message };
  }
}

/** Records the failure (once per generation) and when the analysis expires. */
export async function failAnalysis(deps: RunDeps, { id, generation, reason, retentionSeconds }: FailInput): Promise<{ expiresAt: string | null }> {
  const finishedAt = new Date();
  await deps.db.dialogAnalysis.updateMany({
    where: { id, state: 'in-progress', generation },
    data: { state: 'failed', error: reason.slice(0, maxReasonChars), finishedAt, expiresAt: new Date(finishedAt.getTime() + retentionSeconds * 1000) },
  });
  const row = await deps.db.dialogAnalysis.findUnique({ where: { id } });
  return { expiresAt: row?.expiresAt?.toISOString() ?? null };
}

/** A failed analysis back to in-progress as the next generation (the operator's `retry`). */
export async function reopenAnalysis(deps: RunDeps, { id, generation }: { id: string; generation: number }): Promise<{ reopened: boolean }> {
  await deps.db.dialogAnalysis.updateMany({
    where: { id, state: 'failed', generation },
    data: { state: 'in-progress', generation: generation + 1, attempts: 0, error: null, output: null, finishedAt: null, expiresAt: null },
  });
  const row = await deps.db.dialogAnalysis.findUnique({ where: { id } });
  return { reopened: row?.state === 'in-progress' && row.generation === generation + 1 };
}

/**
 * Deletes the analysis and its calls at the end of retention; also up to 100 expired ones left
 * behind by workflows an operator terminated.
 */
export async function deleteAnalysis(deps: RunDeps, { id }: { id: string }): Promise<void> {
  await deps.db.dialogAnalysis.deleteMany({ where: { id } });
  await deps.db.$executeRaw`
    DELETE FROM dialog_analyses WHERE id IN (
      SELECT id FROM dialog_analyses WHERE "expiresAt" < now() - interval '1 hour' LIMIT 100)`;
}
