import {
  ActivityFailure,
  ApplicationFailure,
  condition,
  isCancellation,
  workflowInfo,
  defineQuery,
  defineSignal,
  proxyActivities,
  setHandler,
  sleep,
  upsertSearchAttributes,
} from '@temporalio/workflow';
import type { Activities } from '../activities/index.js';
import type { PipelineStep } from '../activities/documents.js';
import type { RewriteCallOutcome, RewritePlan, RewriteRequest } from '../activities/rewrite.js';
import type { Bound, Category } from '../lib/budget/ledger.js';
import { searchAttributes } from '../lib/search-attributes.js';

/**
 * One execution per processing request of one document (ID `document-<uuid>`). Steps run as
 * activities; a step that fails for good is recorded on the document and the workflow waits for a
 * `retry` signal, then resumes from that step. `pause` / `resume` hold the pipeline between steps.
 * `budgetChanged` wakes work that waits for budget capacity.
 */
export interface DocumentPipelineInput {
  documentId: string;
  knowledgeBaseId: string;
  partner: string;
  steps: PipelineStep[];
  /** Request-level cap on the KB's digitized characters (the smaller of it and the KB limit applies). */
  requestCharacterLimit?: number | null;
  /** Content type and person of the `rewrite` step (default: auto, no person). */
  rewrite?: RewriteRequest;
}

export type PipelineStatus = 'running' | 'paused' | 'failed' | 'budget_blocked' | 'completed' | 'cancelled';

export interface DocumentPipelineProgress {
  status: PipelineStatus;
  currentStep: PipelineStep | null;
  completedSteps: PipelineStep[];
  lastError: string | null;
}

export const retrySignal = defineSignal('retry');
export const pauseSignal = defineSignal('pause');
export const resumeSignal = defineSignal('resume');
export const budgetChangedSignal = defineSignal('budgetChanged');
export const progressQuery = defineQuery<DocumentPipelineProgress>('progress');

const quick = proxyActivities<Activities>({
  startToCloseTimeout: '2 minutes',
  retry: { initialInterval: '1s', backoffCoefficient: 2, maximumInterval: '1 minute', maximumAttempts: 10 },
});

const heavy = proxyActivities<Activities>({
  startToCloseTimeout: '1 hour',
  // A worker that dies mid-step is noticed within this time and the step is retried elsewhere.
  heartbeatTimeout: '20 seconds',
  retry: { initialInterval: '2s', backoffCoefficient: 2, maximumInterval: '2 minutes', maximumAttempts: 8, nonRetryableErrorTypes: ['PermanentProcessingError', 'DocumentGone'] },
});

/** Model calls: one attempt may take long; a lost worker is noticed by the missing heartbeat. */
const llm = proxyActivities<Activities>({
  startToCloseTimeout: '2 hours',
  heartbeatTimeout: '30 seconds',
  retry: { initialInterval: '2s', backoffCoefficient: 2, maximumInterval: '1 minute', maximumAttempts: 5, nonRetryableErrorTypes: ['PermanentProcessingError', 'DocumentGone'] },
});

/** How long a budget-blocked step waits for a `budgetChanged` signal before checking again anyway. */
const BUDGET_RECHECK = '5 minutes';

/**
 * Provider failures: 429s are retried for as long as they last (a rate-limit storm delays a
 * document, never fails it); a model that is down (5xx, timeouts) is given this many tries before
 * the fallback model, or the step fails with the provider's message.
 */
const MAX_UNAVAILABLE_TRIES = 5;
const backoffMs = (n: number, hint: number | null) => Math.min(Math.max(hint ?? 1000 * 2 ** n, 100), 5 * 60_000);

/** A step that could not run for a reason retrying will not fix; the message goes to the document. */
class StepFailure extends Error {}

function failureMessage(err: unknown): string {
  if (err instanceof StepFailure) return err.message;
  const cause = err instanceof ActivityFailure ? err.cause : err;
  return cause instanceof Error ? cause.message : String(cause);
}

const isDocumentGone = (err: unknown) =>
  err instanceof ActivityFailure && err.cause instanceof ApplicationFailure && err.cause.type === 'DocumentGone';

export async function documentPipeline(input: DocumentPipelineInput): Promise<DocumentPipelineProgress> {
  const progress: DocumentPipelineProgress = { status: 'running', currentStep: null, completedSteps: [], lastError: null };
  let paused = false;
  let retryRequested = false;

  const setStatus = (status: PipelineStatus) => {
    progress.status = status;
    upsertSearchAttributes([{ key: searchAttributes.pipelineStatus, value: status }]);
  };

  let budgetChanged = false;
  let attempt = 0;
  let rewriteAttempts = 0;
  const ref = { documentId: input.documentId };
  const operationKey = (step: PipelineStep) => `${workflowInfo().workflowId}/${workflowInfo().runId}/${step}/${++attempt}`;

  const setBudgetBlocked = (blocked: boolean) => {
    upsertSearchAttributes([{ key: searchAttributes.budgetBlocked, value: blocked }]);
    setStatus(blocked ? 'budget_blocked' : 'running');
  };

  /**
   * Budget admission of one bounded operation: reserve its bound, or mark the document
   * BUDGET_BLOCKED and wait for `budgetChanged` (or the periodic re-check), then try again with a
   * fresh bound. Returns the admitted operation's key.
   */
  async function admit(step: PipelineStep, category: Category, boundOf: () => Promise<{ knowledgeBaseId: string; bound: Bound }>): Promise<string> {
    for (;;) {
      budgetChanged = false;
      const { knowledgeBaseId, bound } = await boundOf();
      const key = operationKey(step);
      const admission = await quick.reserveBudget({
        knowledgeBaseId,
        operationKey: key,
        workflowId: workflowInfo().workflowId,
        documentId: input.documentId,
        category,
        bound,
        requestCharacterLimit: input.requestCharacterLimit ?? null,
      });
      if (admission.admitted) {
        if (progress.status === 'budget_blocked') setBudgetBlocked(false);
        return key;
      }
      if (admission.reason === 'request_character_limit') throw new StepFailure(`QUOTA_EXCEEDED:knowledge_chars (${admission.detail})`);
      await quick.markBudgetBlocked({ ...ref, reason: admission.reason, detail: admission.detail });
      setBudgetBlocked(true);
      await condition(() => budgetChanged, BUDGET_RECHECK);
    }
  }

  /**
   * Digitization under the character budget: extract once (cached), reserve the characters the new
   * text adds, and wait for capacity while blocked; the extraction is never repeated.
   */
  async function digitize() {
    const scrape = await quick.scrapeBound(ref);
    if (scrape) await scrapePage(scrape);
    await heavy.extractText(ref);
    const key = await admit('digitize', 'digitization', async () => {
      const { characters, knowledgeBaseId } = await quick.digitizationBound(ref);
      return { knowledgeBaseId, bound: { characters } };
    });
    try {
      await heavy.acceptDigitizedText({ ...ref, operationKey: key });
    } catch (err) {
      await quick.releaseBudget({ operationKey: key, note: 'digitization failed' });
      throw err;
    }
  }

  /**
   * A URL page through the scraping provider, admitted by its dollar bound; an outage is retried
   * with backoff, an ambiguous outcome (uncertain cost) too — on a capped KB it then waits for an
   * operator's resolution like every unresolved provider outcome.
   */
  async function scrapePage(bound: { knowledgeBaseId: string; dollars: string }) {
    for (let tries = 1; ; tries++) {
      const key = await admit('digitize', 'digitization', async () => ({ knowledgeBaseId: bound.knowledgeBaseId, bound: { dollars: bound.dollars } }));
      const result = await heavy.scrapeUrl({ ...ref, operationKey: key });
      if (result.outcome === 'scraped') return;
      if (result.outcome === 'refused' || tries >= MAX_UNAVAILABLE_TRIES) throw new StepFailure(result.message);
      const wait = backoffMs(tries - 1, null);
      progress.lastError = `${result.message}; trying again in ${Math.round(wait / 1000)} s`;
      await sleep(wait);
      progress.lastError = null;
    }
  }

  /**
   * Embedding. The local encoder costs nothing; a paid embedding API is admitted for the whole
   * document's bound first (waiting BUDGET_BLOCKED like any paid step), and settled with the
   * provider's usage by the activity, or by closeEmbeddingOperation when the step fails.
   */
  async function embed() {
    const bound = await quick.embeddingBound(ref);
    if (!bound) return heavy.embedDocument(ref);
    const key = await admit('embed', 'embedding', async () => bound);
    try {
      return await heavy.embedDocument({ ...ref, operationKey: key });
    } catch (err) {
      if (!isCancellation(err)) await quick.closeEmbeddingOperation({ ...ref, operationKey: key });
      throw err;
    }
  }

  /** One part's call with one model: admitted, dispatched, and retried while the provider is busy or down. */
  async function callModel(plan: RewritePlan, attemptId: string, part: number, model: string, fallback: boolean): Promise<RewriteCallOutcome> {
    let tries = 0;
    for (;;) {
      const key = await admit('rewrite', 'rewrite', async () => ({ knowledgeBaseId: plan.knowledgeBaseId, bound: plan.bounds[model]![part]! }));
      const result = await llm.callRewriteModel({ ...ref, attemptId, part, model, fallback, operationKey: key });
      if (result.outcome === 'accepted' || result.outcome === 'rejected' || result.outcome === 'permanent') return result;
      tries++;
      if (result.outcome !== 'rate_limited' && tries >= MAX_UNAVAILABLE_TRIES) return result;
      const wait = backoffMs(tries - 1, result.retryAfterMs);
      progress.lastError = `${model}: ${result.message}; trying again in ${Math.round(wait / 1000)} s`;
      await sleep(wait);
      progress.lastError = null;
    }
  }

  /**
   * LLM rewriting: each part of the digitized text is rewritten by the tier's model, or by the
   * fallback model when that fails for good or its output is rejected. A rejected attempt keeps
   * its draft and fails the step (`REWRITE_REJECTED:`); a provider that refuses the request fails
   * it (`REWRITE_FAILED:`). The retry signal starts a new attempt.
   */
  async function rewrite() {
    const attemptId = `${workflowInfo().runId}-${++rewriteAttempts}`;
    const plan = await quick.planRewrite({ ...ref, attemptId, contentType: input.rewrite?.contentType ?? 'auto', personName: input.rewrite?.personName ?? null });
    for (let part = 0; part < plan.partCount; part++) {
      let last: RewriteCallOutcome | null = null;
      for (const [i, model] of plan.models.entries()) {
        last = await callModel(plan, attemptId, part, model, i > 0);
        if (last.outcome === 'accepted') break;
      }
      if (last && last.outcome !== 'accepted') {
        const where = plan.partCount > 1 ? `part ${part + 1} of ${plan.partCount}: ` : '';
        if (last.outcome === 'rejected') {
          await quick.finishRewrite({ ...ref, attemptId, rejected: last.message });
          throw new StepFailure(`REWRITE_REJECTED: ${where}${last.message}`);
        }
        throw new StepFailure(`REWRITE_FAILED: ${where}${last.message}`);
      }
    }
    await quick.finishRewrite({ ...ref, attemptId });
  }

  const runStep = (step: PipelineStep): Promise<unknown> => {
    switch (step) {
      case 'digitize':
        return digitize();
      case 'finalize_original':
        return heavy.saveOriginalAsRewritten(ref);
      case 'rewrite':
        return rewrite();
      case 'embed':
        return embed();
    }
  };

  setHandler(progressQuery, () => progress);
  setHandler(pauseSignal, () => void (paused = true));
  setHandler(resumeSignal, () => void (paused = false));
  setHandler(retrySignal, () => void (retryRequested = true));
  setHandler(budgetChangedSignal, () => void (budgetChanged = true));

  for (const step of input.steps) {
    progress.currentStep = step;
    for (;;) {
      if (paused) {
        setStatus('paused');
        await condition(() => !paused);
        setStatus('running');
      }
      try {
        await runStep(step);
        break;
      } catch (err) {
        // A cancelled pipeline (the document is being deleted) stops here, after its running
        // activity has stopped: nothing is written after the deletion cleans up.
        if (isCancellation(err)) throw err;
        if (isDocumentGone(err)) {
          setStatus('cancelled');
          return progress;
        }
        progress.lastError = failureMessage(err);
        await quick.recordStepFailure({ documentId: input.documentId, step, message: progress.lastError });
        setStatus('failed');
        await condition(() => retryRequested);
        retryRequested = false;
        progress.lastError = null;
        await quick.requeueStep({ documentId: input.documentId, step });
        setStatus('running');
      }
    }
    progress.completedSteps.push(step);
  }
  progress.currentStep = null;
  setStatus('completed');
  return progress;
}
