import {
  ActivityFailure,
  ApplicationFailure,
  type ActivityOptions,
  type RetryPolicy,
  condition,
  isCancellation,
  makeContinueAsNewFunc,
  patched,
  workflowInfo,
  proxyActivities,
  proxyLocalActivities,
  setHandler,
  sleep,
  upsertSearchAttributes,
} from '@temporalio/workflow';
import type { Activities } from '../activities/index.js';
import {
  budgetChangedSignal,
  historyEventsLimit,
  pauseSignal,
  pipelineFailure,
  progressQuery,
  resumeSignal,
  retrySignal,
  supersedeSignal,
  type AdmissionBound,
  type DocumentPipelineInput,
  type DocumentPipelineProgress,
  type EmbedResume,
  type PipelineCarry,
  type PipelineStatus,
  type PipelineStep,
  type RewriteCallOutcome,
  type RewritePlan,
} from '../lib/contracts/document-pipeline.js';
import type { Category } from '../lib/contracts/budget-admission.js';
import { searchAttributes } from '../lib/contracts/search-attributes.js';
import { activityFailureMessage, outageWaitMs, serviceOutageOf } from '../lib/contracts/activity-failure.js';

/**
 * One execution per processing request of one document (contract: lib/contracts/document-pipeline.ts).
 * Steps run as activities; a step that fails for good is recorded on the document and the workflow
 * waits for a `retry` signal, then resumes from that step. `pause` / `resume` hold the pipeline
 * between steps. `budgetChanged` wakes work that waits for budget capacity; `supersede` ends a
 * waiting run that a new processing request replaces.
 *
 * History bound: a run continues as new at its next waiting point (a budget re-check, a retry, a
 * pause) or between two model calls of a rewrite once its history reaches `historyEventsLimit`
 * events, carrying what it has done (PipelineCarry), so a document can wait blocked or failed for
 * months and a rewrite may have any number of parts. Versioning: change this
 * code only behind `patched()` (docs/operations.md, "Workflow versioning");
 * test/workflows/replay.test.ts replays recorded histories of every kind of run against it.
 */
const quick = proxyActivities<Activities>({
  startToCloseTimeout: '2 minutes',
  retry: { initialInterval: '1s', backoffCoefficient: 2, maximumInterval: '1 minute', maximumAttempts: 10 },
});

/**
 * Admission (bounds, reserve, the block shown on the document): short database steps run as local
 * activities in the worker that runs the workflow, so a blocked document's re-check costs no task
 * queue round trips and two history events, not six.
 */
const local = proxyLocalActivities<Activities>({
  startToCloseTimeout: '1 minute',
  retry: { initialInterval: '1s', backoffCoefficient: 2, maximumInterval: '1 minute', maximumAttempts: 10 },
});

const heavyOptions: ActivityOptions & { retry: RetryPolicy & { nonRetryableErrorTypes: string[] } } = {
  startToCloseTimeout: '1 hour',
  // A worker that dies mid-step is noticed within this time and the step is retried elsewhere.
  heartbeatTimeout: '20 seconds',
  retry: { initialInterval: '2s', backoffCoefficient: 2, maximumInterval: '2 minutes', maximumAttempts: 8, nonRetryableErrorTypes: [pipelineFailure.permanent, pipelineFailure.documentGone] },
};
/** Runs started before the patch `pipeline-waits-out-outages`: an outage is retried like any failure. */
const heavyBeforeOutageWindow = proxyActivities<Activities>(heavyOptions);
/** A service outage (`ServiceUnavailable`) comes back at once: the workflow waits it out itself. */
const heavyWithOutageWindow = proxyActivities<Activities>({
  ...heavyOptions,
  retry: { ...heavyOptions.retry, nonRetryableErrorTypes: [...heavyOptions.retry.nonRetryableErrorTypes, pipelineFailure.unavailable] },
});

/**
 * Planning a rewrite: splitting and counting the text of a large document takes a while (about a
 * second a megabyte here); a lost worker is noticed by the missing heartbeat.
 */
const planning = proxyActivities<Activities>({
  startToCloseTimeout: '30 minutes',
  heartbeatTimeout: '20 seconds',
  retry: { initialInterval: '1s', backoffCoefficient: 2, maximumInterval: '1 minute', maximumAttempts: 10 },
});

/** Model calls: one attempt may take long; a lost worker is noticed by the missing heartbeat. */
const llm = proxyActivities<Activities>({
  startToCloseTimeout: '2 hours',
  heartbeatTimeout: '30 seconds',
  retry: { initialInterval: '2s', backoffCoefficient: 2, maximumInterval: '1 minute', maximumAttempts: 5, nonRetryableErrorTypes: [pipelineFailure.permanent, pipelineFailure.documentGone] },
});

/** A blocked step's wait before it checks again anyway, when the worker does not say (BUDGET_RECHECK_INTERVAL_MS). */
const DEFAULT_BUDGET_RECHECK_MS = 5 * 60_000;

/**
 * Provider failures: 429s are retried for as long as they last (a rate-limit storm delays a
 * document, never fails it); a model that is down (5xx, timeouts) is given this many tries before
 * the fallback model, or the step fails with the provider's message.
 */
const MAX_UNAVAILABLE_TRIES = 5;
const backoffMs = (n: number, hint: number | null) => Math.min(Math.max(hint ?? 1000 * 2 ** n, 100), 5 * 60_000);
/** The outage window of rewrite plans made before REWRITE_MAX_OUTAGE_SECONDS (and of outage failures without one). */
const DEFAULT_MAX_OUTAGE_SECONDS = 86_400;
/** The scraping provider's outage window, when the worker's answer has none (DIGITIZATION_MAX_OUTAGE_SECONDS). */
const DEFAULT_DIGITIZATION_MAX_OUTAGE_SECONDS = 3600;
/**
 * A model that is down: it answered 5xx or refused the connection, so it did no work. A timed-out
 * call (ambiguous) is not: the provider may have done and billed it, and a model too slow for a
 * part would be paid again every round.
 */
const isOutage = (r: RewriteCallOutcome) => r.outcome === 'unavailable';

/** A step that could not run for a reason retrying will not fix; the message goes to the document. */
class StepFailure extends Error {}
/** The history is long: the run continues as new from where it stands. */
class ContinueAsNewNeeded extends Error {}
/** A new processing request replaced this waiting run. */
class Superseded extends Error {}

/** Temporal suggests a new run, or the history has reached the bound. */
const historyIsLong = () => {
  const info = workflowInfo();
  return info.continueAsNewSuggested || info.historyLength >= historyEventsLimit;
};

const failureMessage = (err: unknown): string => (err instanceof StepFailure ? err.message : activityFailureMessage(err));

const isDocumentGone = (err: unknown) =>
  err instanceof ActivityFailure && err.cause instanceof ApplicationFailure && err.cause.type === pipelineFailure.documentGone;

export async function documentPipeline(input: DocumentPipelineInput): Promise<DocumentPipelineProgress> {
  const carry = input.carry;
  // Heavy steps hand a service outage back to be waited out here (docs/operations.md,
  // "Workflow versioning").
  const waitsOutOutages = patched('pipeline-waits-out-outages');
  const heavy = waitsOutOutages ? heavyWithOutageWindow : heavyBeforeOutageWindow;
  /** Since when the current step has found a service unavailable (workflow time, ms), and how many times. */
  let outageSince = carry?.outageSince ?? null;
  let outageRounds = 0;
  /** Where the embed step stopped when its service went down: its next try continues there. */
  let embedResume: EmbedResume | null = null;
  const progress: DocumentPipelineProgress = {
    status: 'running',
    generation: carry?.generation ?? 1,
    budgetRechecks: carry?.budgetRechecks ?? 0,
    currentStep: null,
    completedSteps: [...(carry?.completedSteps ?? [])],
    lastError: null,
  };
  let paused = carry?.paused ?? false;
  let retryRequested = false;
  let superseded = false;

  const setStatus = (status: PipelineStatus) => {
    if (progress.status === status) return;
    progress.status = status;
    upsertSearchAttributes([{ key: searchAttributes.pipelineStatus, value: status }]);
  };

  let budgetChanged = false;
  let attempt = 0;
  let rewriteAttempts = carry?.rewriteAttempts ?? 0;
  /** The rewrite attempt under way (carried into a continued run), or null. */
  let rewriteState: PipelineCarry['rewrite'] = carry?.rewrite ?? null;
  /** The block last shown on the document: a re-check that finds the same block writes nothing. */
  let shownBlock: string | null = null;
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
  async function admit(step: PipelineStep, category: Category, boundOf: () => Promise<AdmissionBound>): Promise<string> {
    for (;;) {
      if (superseded) throw new Superseded();
      budgetChanged = false;
      const { knowledgeBaseId, bound } = await boundOf();
      const key = operationKey(step);
      const admission = await local.reserveBudget({
        knowledgeBaseId,
        operationKey: key,
        workflowId: workflowInfo().workflowId,
        documentId: input.documentId,
        category,
        bound,
        requestCharacterLimit: input.requestCharacterLimit ?? null,
      });
      if (admission.admitted) {
        shownBlock = null;
        if (progress.status === 'budget_blocked') setBudgetBlocked(false);
        return key;
      }
      if (admission.reason === 'request_character_limit') throw new StepFailure(`QUOTA_EXCEEDED:knowledge_chars (${admission.detail})`);
      const block = `${admission.reason}: ${admission.detail}`;
      if (block !== shownBlock) {
        await local.markBudgetBlocked({ ...ref, reason: admission.reason, detail: admission.detail });
        shownBlock = block;
      }
      if (progress.status !== 'budget_blocked') setBudgetBlocked(true);
      const recheckMs = 'recheckAfterMs' in admission ? admission.recheckAfterMs : DEFAULT_BUDGET_RECHECK_MS;
      await condition(() => budgetChanged || superseded, recheckMs);
      if (superseded) throw new Superseded();
      progress.budgetRechecks++;
      if (historyIsLong()) throw new ContinueAsNewNeeded();
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
      const { characters, knowledgeBaseId } = await local.digitizationBound(ref);
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
   * Digitization in one activity (patch `digitize-in-one-activity`): the activity records the new
   * run, extracts, admits the characters under this step's operation key, accepts the text and,
   * when finalize_original comes next, saves it as the final content too (and, when embed follows
   * that, embeds it with the local encoder: `embed-with-digitize`). The workflow takes over only
   * what needs waiting: a page to scrape first, or a budget block (its admission loop, then the
   * acceptance, as in `digitize`). Returns how many of the steps after digitize were done with it.
   */
  async function digitizeInOne(finalizeOriginal: boolean, embedNext: boolean): Promise<number> {
    const key = operationKey('digitize');
    let result;
    try {
      const request = {
        ...ref,
        begin: runNotRecorded ? input : null,
        operationKey: key,
        workflowId: workflowInfo().workflowId,
        requestCharacterLimit: input.requestCharacterLimit ?? null,
        finalizeOriginal,
      };
      // Patch `embed-with-digitize`: when the original becomes the final content and embedding
      // follows, one activity does both if the encoder is local (activities/ingestion.ts).
      result = finalizeOriginal && embedNext && patched('embed-with-digitize') ? await heavy.digitizeAndEmbedDocument(request) : await heavy.digitizeDocument(request);
    } catch (err) {
      if (!isCancellation(err)) await quick.releaseBudget({ operationKey: key, note: 'digitization failed' });
      throw err;
    }
    runNotRecorded = false;
    if (result.outcome === 'accepted') {
      embeddingIsPaid = result.paidEmbedding;
      return !result.finalized ? 0 : 'embedded' in result && result.embedded ? 2 : 1;
    }
    if (result.outcome === 'request_limit') throw new StepFailure(`QUOTA_EXCEEDED:knowledge_chars (${result.detail})`);
    if (result.outcome === 'scrape') {
      await scrapePage(result.bound);
      await heavy.extractText(ref);
    }
    // The extraction is cached (by the activity, or just now): admit its characters, waiting while blocked.
    const admitted = await admit('digitize', 'digitization', async () => {
      const { characters, knowledgeBaseId } = await local.digitizationBound(ref);
      return { knowledgeBaseId, bound: { characters } };
    });
    try {
      await heavy.acceptDigitizedText({ ...ref, operationKey: admitted });
    } catch (err) {
      await quick.releaseBudget({ operationKey: admitted, note: 'digitization failed' });
      throw err;
    }
    return 0;
  }

  /**
   * A URL page through the scraping provider, admitted by its dollar bound. An outage is waited out
   * for the provider's window (DIGITIZATION_MAX_OUTAGE_SECONDS), each try admitted afresh; an ambiguous
   * outcome (uncertain cost) is tried 5 times — on a capped KB it then waits for an operator's
   * resolution like every unresolved provider outcome.
   */
  async function scrapePage(bound: { knowledgeBaseId: string; dollars: string }) {
    let outageSince: number | null = null;
    for (let tries = 1, outageRound = 0; ; ) {
      const key = await admit('digitize', 'digitization', async () => ({ knowledgeBaseId: bound.knowledgeBaseId, bound: { dollars: bound.dollars } }));
      const result = await heavy.scrapeUrl({ ...ref, operationKey: key });
      if (result.outcome === 'scraped') return;
      if (result.outcome === 'refused') throw new StepFailure(result.message);
      let wait: number;
      if (result.outcome === 'unavailable' && waitsOutOutages) {
        // The provider is down: waited out for its window, 2 s ... 5 min apart.
        outageSince ??= Date.now();
        const lasted = Date.now() - outageSince;
        const windowMs = (result.maxOutageSeconds ?? DEFAULT_DIGITIZATION_MAX_OUTAGE_SECONDS) * 1000;
        if (lasted >= windowMs) throw new StepFailure(`${result.message} (unavailable for ${Math.round(lasted / 1000)} s)`);
        wait = outageWaitMs(outageRound++, lasted, windowMs);
      } else {
        if (tries >= MAX_UNAVAILABLE_TRIES) throw new StepFailure(result.message);
        wait = backoffMs(tries++ - 1, null);
      }
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
    const request = { ...ref, ...(embedResume ? { resume: embedResume } : {}) };
    // The one-activity digitization said the embedder is the local one: nothing to admit.
    if (embeddingIsPaid === false) return heavy.embedDocument(request);
    const bound = await local.embeddingBound(ref);
    if (!bound) return heavy.embedDocument(request);
    const key = await admit('embed', 'embedding', async () => bound);
    try {
      return await heavy.embedDocument({ ...request, operationKey: key });
    } catch (err) {
      if (!isCancellation(err)) await quick.closeEmbeddingOperation({ ...ref, operationKey: key });
      throw err;
    }
  }

  /** One part's call with one model: admitted, dispatched, and retried while the provider is busy or down. */
  async function callModel(plan: RewritePlan, attemptId: string, part: number, model: string, fallback: boolean): Promise<RewriteCallOutcome> {
    let tries = 0;
    for (;;) {
      // Between calls a long rewrite (thousands of parts, or days of 429s on one) continues as new,
      // its place carried in `rewriteState`: its history never reaches Temporal's hard limit.
      if (historyIsLong() && patched('rewrite-continues-as-new')) throw new ContinueAsNewNeeded();
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
    if (!rewriteState) {
      const attemptId = `${workflowInfo().runId}-${++rewriteAttempts}`;
      const plan = await planning.planRewrite({ ...ref, attemptId, contentType: input.rewrite?.contentType ?? 'auto', personName: input.rewrite?.personName ?? null });
      rewriteState = { attemptId, plan, part: 0, modelIndex: 0 };
    }
    // A continued run resumes at the call it had not made yet: parts already rewritten are kept.
    const state = rewriteState;
    const { plan, attemptId } = state;
    for (; state.part < plan.partCount; state.part++, state.modelIndex = 0) {
      let last: RewriteCallOutcome | null = null;
      for (let round = 0; ; round++) {
        let allDown = true;
        for (; state.modelIndex < plan.models.length; state.modelIndex++) {
          last = await callModel(plan, attemptId, state.part, plan.models[state.modelIndex]!, state.modelIndex > 0);
          if (last.outcome === 'accepted') break;
          allDown &&= isOutage(last);
        }
        // Every model is down: a provider outage delays the document rather than
        // failing it; the models are tried again until the outage has lasted the plan's window.
        if (!last || last.outcome === 'accepted' || !allDown || !patched('rewrite-waits-out-outage')) break;
        state.outageSince ??= Date.now();
        const lasted = Date.now() - state.outageSince;
        const windowMs = (plan.maxOutageSeconds ?? DEFAULT_MAX_OUTAGE_SECONDS) * 1000;
        if (lasted >= windowMs) {
          last = { ...last, message: `every model has been unavailable for ${Math.round(lasted / 1000)} s: ${last.message}` };
          break;
        }
        const wait = outageWaitMs(round, lasted, windowMs);
        progress.lastError = `every model is unavailable (${last.message}); trying again in ${Math.round(wait / 1000)} s`;
        await sleep(wait);
        progress.lastError = null;
        state.modelIndex = 0;
      }
      state.outageSince = null;
      if (last && last.outcome !== 'accepted') {
        rewriteState = null;
        const where = plan.partCount > 1 ? `part ${state.part + 1} of ${plan.partCount}: ` : '';
        if (last.outcome === 'rejected') {
          await quick.finishRewrite({ ...ref, attemptId, rejected: last.message });
          throw new StepFailure(`REWRITE_REJECTED: ${where}${last.message}`);
        }
        throw new StepFailure(`REWRITE_FAILED: ${where}${last.message}`);
      }
    }
    rewriteState = null;
    await quick.finishRewrite({ ...ref, attemptId });
  }

  const runStep = async (step: PipelineStep, next: PipelineStep | undefined, afterNext: PipelineStep | undefined): Promise<unknown> => {
    switch (step) {
      case 'digitize':
        if (!inOneActivity) return digitize();
        stepsDoneWithDigitize = await digitizeInOne(next === 'finalize_original', afterNext === 'embed');
        return;
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
  // Honoured only while the run waits, where it holds no budget and nothing is half done.
  setHandler(supersedeSignal, () => {
    if (progress.status === 'failed' || progress.status === 'budget_blocked') superseded = true;
  });

  // A new run that starts by digitizing does it in one activity, which also records the run
  // (docs/operations.md, "Workflow versioning": runs started before this code take the older path).
  const inOneActivity = !carry && input.steps[0] === 'digitize' && patched('digitize-in-one-activity');
  /** The new run's markers and request are still to be recorded (by the one-activity digitization). */
  let runNotRecorded = inOneActivity;
  /** Known from the one-activity digitization: the embedder is paid (admitted) or local; null: ask. */
  let embeddingIsPaid: boolean | null = null;
  /** How many of the steps after digitize the one-activity digitization did as well (finalize_original, then embed). */
  let stepsDoneWithDigitize = 0;
  // A new run takes the document's markers over and records its request; a continuation has both.
  if (!carry && !inOneActivity) await quick.beginPipelineRun({ request: input });

  const steps = input.steps;
  let stepIndex = 0;
  /** The current step's failure, waiting for `retry` (a continued run may start in this state). */
  let failure: string | null = carry?.failure ?? null;
  try {
    for (; stepIndex < steps.length; stepIndex++) {
      const step = steps[stepIndex]!;
      progress.currentStep = step;
      for (;;) {
        if (failure === null) {
          if (paused) {
            setStatus('paused');
            await condition(() => !paused || historyIsLong());
            if (paused) throw new ContinueAsNewNeeded();
            setStatus('running');
          }
          if (historyIsLong()) throw new ContinueAsNewNeeded();
          try {
            await runStep(step, steps[stepIndex + 1], steps[stepIndex + 2]);
            outageSince = null;
            outageRounds = 0;
            embedResume = null;
            break;
          } catch (err) {
            // A cancelled pipeline (the document is being deleted) stops here, after its running
            // activity has stopped: nothing is written after the deletion cleans up.
            if (err instanceof ContinueAsNewNeeded || err instanceof Superseded || isCancellation(err)) throw err;
            if (isDocumentGone(err)) {
              setStatus('cancelled');
              return progress;
            }
            const outage = waitsOutOutages ? serviceOutageOf(err, DEFAULT_MAX_OUTAGE_SECONDS) : null;
            if (outage) {
              // A service outage delays the document rather than failing it: the step runs again,
              // 2 s ... 5 min apart, until the outage has lasted the worker's window.
              outageSince ??= Date.now();
              const lasted = Date.now() - outageSince;
              const windowMs = outage.maxOutageSeconds * 1000;
              embedResume = step === 'embed' ? ((outage.resume as EmbedResume | undefined) ?? null) : null;
              if (lasted < windowMs) {
                const wait = outageWaitMs(outageRounds++, lasted, windowMs);
                progress.lastError = `${outage.message}; trying again in ${Math.round(wait / 1000)} s`;
                await sleep(wait);
                progress.lastError = null;
                continue;
              }
              failure = `${outage.message} (unavailable for ${Math.round(lasted / 1000)} s)`;
            } else {
              failure = failureMessage(err);
            }
            outageSince = null;
            outageRounds = 0;
            embedResume = null;
            rewriteState = null;
            await quick.recordStepFailure({ documentId: input.documentId, step, message: failure });
          }
        }
        progress.lastError = failure;
        setStatus('failed');
        await condition(() => retryRequested || superseded || historyIsLong());
        if (superseded) throw new Superseded();
        if (!retryRequested) throw new ContinueAsNewNeeded();
        retryRequested = false;
        failure = null;
        progress.lastError = null;
        await quick.requeueStep({ documentId: input.documentId, step });
        setStatus('running');
      }
      progress.completedSteps.push(step);
      for (; stepsDoneWithDigitize > 0; stepsDoneWithDigitize--) {
        stepIndex++;
        progress.completedSteps.push(steps[stepIndex]!);
      }
    }
  } catch (err) {
    if (err instanceof Superseded) {
      setStatus('superseded');
      return progress;
    }
    if (!(err instanceof ContinueAsNewNeeded)) throw err;
    const next: PipelineCarry = {
      generation: progress.generation + 1,
      completedSteps: progress.completedSteps,
      paused,
      failure,
      rewrite: rewriteState,
      rewriteAttempts,
      budgetRechecks: progress.budgetRechecks,
      ...(outageSince !== null ? { outageSince } : {}),
    };
    return makeContinueAsNewFunc<typeof documentPipeline>({ typedSearchAttributes: workflowInfo().typedSearchAttributes })({
      ...input,
      steps: steps.slice(stepIndex),
      carry: next,
    });
  }
  progress.currentStep = null;
  setStatus('completed');
  return progress;
}
