import crypto from 'node:crypto';
import { WorkflowExecutionAlreadyStartedError, WorkflowNotFoundError, type Client } from '@temporalio/client';
import { TypedSearchAttributes } from '@temporalio/common';
import type { Services } from '../services.js';
import type { Principal } from '../platform/api-keys.js';
import { AppError, notFound } from '../platform/errors.js';
import { consumeRateLimit } from '../platform/rate-limit.js';
import { searchAttributes } from '../contracts/search-attributes.js';
import {
  dialogAnalysisPath,
  dialogAnalysisWorkflowId,
  dialogAnalysisWorkflowType,
  type DialogAnalysisInput,
} from '../contracts/dialog-analysis.js';
import { validateDialogRequest, type RawDialogInput } from './request.js';
import type { SchemaSandbox } from './schema-sandbox.js';
import { idWithoutPath, isUuid } from '../platform/ids.js';

/**
 * The API side of dialog analysis (POST and GET /v2/dialog_analyses): admission, validation,
 * the row, the workflow start, and the answer. The analysis itself runs in the workflow
 * `dialog-analysis-<id>` (lib/dialog-analysis/runs.ts does its work).
 */
export interface DialogAnalysisDeps extends Services {
  temporal: Client;
}

type Row = NonNullable<Awaited<ReturnType<Services['db']['dialogAnalysis']['findUnique']>>>;

/** An in-progress analysis this old without a workflow was left behind by an API crash (between insert and start). */
const healAfterMs = 30_000;

function workflowInput(deps: DialogAnalysisDeps, id: string): DialogAnalysisInput {
  const { retentionSeconds, maxAttempts, maxOutageSeconds } = deps.config.dialogAnalysis;
  return { id, retentionSeconds, maxAttempts, maxOutageSeconds, generation: 1 };
}

async function startWorkflow(deps: DialogAnalysisDeps, id: string, partnerName: string | null): Promise<void> {
  await deps.temporal.workflow.start(dialogAnalysisWorkflowType, {
    taskQueue: deps.config.temporalTaskQueue,
    workflowId: dialogAnalysisWorkflowId(id),
    args: [workflowInput(deps, id)],
    typedSearchAttributes: new TypedSearchAttributes([
      ...(partnerName ? [{ key: searchAttributes.partner, value: partnerName }] : []),
      { key: searchAttributes.jobStatus, value: 'running' },
    ]),
  });
}

/** Partner keys are limited per partner (`client`: who asks, whose turn a 429 books); the administrator key is not. */
async function admit(deps: DialogAnalysisDeps, principal: Principal, client: string): Promise<void> {
  const limit = deps.config.dialogAnalysis.rateLimitPerMinute;
  if (principal.isAdmin || !principal.partnerId || limit === 0) return;
  const decision = await consumeRateLimit(deps.db, { key: `dialog-analysis-create:${principal.partnerId}`, limit, windowSeconds: 60, client });
  if (!decision.allowed) {
    throw new AppError(
      'rate_limited',
      `Too many dialog analyses: this partner may create ${limit} per minute. Try again in ${decision.retryAfterSeconds} second${decision.retryAfterSeconds === 1 ? '' : 's'}.`,
      { retryAfterSeconds: decision.retryAfterSeconds },
    );
  }
}

export async function createDialogAnalysis(deps: DialogAnalysisDeps, sandbox: SchemaSandbox, principal: Principal, raw: RawDialogInput, client: string) {
  await admit(deps, principal, client);
  const { input, inputChars } = await validateDialogRequest(sandbox, raw, deps.config.dialogAnalysis.validationTimeoutMs);
  const id = crypto.randomUUID();
  const row = await deps.db.dialogAnalysis.create({
    data: { id, partnerId: principal.isAdmin ? null : principal.partnerId, input: JSON.stringify(input), inputChars },
  });
  try {
    await startWorkflow(deps, id, principal.isAdmin ? null : principal.partnerName);
  } catch (err) {
    await deps.db.dialogAnalysis.deleteMany({ where: { id } });
    throw new AppError('unavailable', 'the analysis could not be started: the workflow service is unavailable; nothing was kept', { cause: (err as Error).message });
  }
  return { id: dialogAnalysisPath(id), state: row.state, created_at: row.createdAt.toISOString() };
}

function retentionText(seconds: number): string {
  if (seconds % 3600 === 0) return `${seconds / 3600} hour${seconds === 3600 ? '' : 's'}`;
  if (seconds % 60 === 0) return `${seconds / 60} minute${seconds === 60 ? '' : 's'}`;
  return `${seconds} second${seconds === 1 ? '' : 's'}`;
}

/**
 * Closes the gap an API crash between insert and start would leave: an old in-progress row whose
 * workflow Temporal does not know is started now; one whose workflow closed without finishing it
 * (an operator terminated it) is marked failed, so that it expires like any other.
 */
async function heal(deps: DialogAnalysisDeps, row: Row): Promise<Row> {
  if (row.state !== 'in-progress' || Date.now() - row.createdAt.getTime() < healAfterMs) return row;
  let status: string;
  try {
    status = (await deps.temporal.workflow.getHandle(dialogAnalysisWorkflowId(row.id)).describe()).status.name;
  } catch (err) {
    if (!(err instanceof WorkflowNotFoundError)) return row;
    const partner = row.partnerId ? await deps.db.partner.findUnique({ where: { id: row.partnerId } }) : null;
    await startWorkflow(deps, row.id, partner?.name ?? null).catch((e) => {
      if (!(e instanceof WorkflowExecutionAlreadyStartedError)) throw e;
    });
    deps.log.warn('dialog analysis without a workflow: started it', { id: row.id });
    return row;
  }
  if (status === 'RUNNING') return row;
  const finishedAt = new Date();
  await deps.db.dialogAnalysis.updateMany({
    where: { id: row.id, state: 'in-progress' },
    data: {
      state: 'failed',
      error: `the analysis workflow ended unexpectedly (${status})`,
      finishedAt,
      expiresAt: new Date(finishedAt.getTime() + deps.config.dialogAnalysis.retentionSeconds * 1000),
    },
  });
  return (await deps.db.dialogAnalysis.findUnique({ where: { id: row.id } })) ?? row;
}

/**
 * The analysis as the client sees it. Unknown ids, other partners' analyses and expired ones are
 * all 404 alike; the administrator key reads every analysis.
 */
export async function readDialogAnalysis(deps: DialogAnalysisDeps, principal: Principal, pathOrId: string) {
  const id = idWithoutPath(pathOrId, dialogAnalysisPath);
  const missing = () =>
    notFound(`Dialog analysis ${dialogAnalysisPath(id)} not found: unknown, or its result expired (results are kept for ${retentionText(deps.config.dialogAnalysis.retentionSeconds)} after completion).`);
  let row = isUuid(id) ? await deps.db.dialogAnalysis.findUnique({ where: { id: id.toLowerCase() } }) : null;
  if (!row || (!principal.isAdmin && row.partnerId !== principal.partnerId)) throw missing();
  if (row.expiresAt && row.expiresAt <= new Date()) throw missing();
  row = await heal(deps, row);
  const base = { id: dialogAnalysisPath(row.id), state: row.state, created_at: row.createdAt.toISOString() };
  if (row.state === 'completed' && row.output && row.finishedAt) {
    // The output is stored as text, so its members keep the order the model wrote them in.
    return { ...base, server_runtime: Math.round(row.finishedAt.getTime() - row.createdAt.getTime()) / 1000, output: JSON.parse(row.output) as unknown };
  }
  if (row.state === 'failed') return { ...base, error: row.error ?? 'the analysis failed' };
  return base;
}
