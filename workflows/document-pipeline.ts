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
  upsertSearchAttributes,
} from '@temporalio/workflow';
import type { Activities } from '../activities/index.js';
import type { PipelineStep } from '../activities/documents.js';
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

/** How long a budget-blocked step waits for a `budgetChanged` signal before checking again anyway. */
const BUDGET_RECHECK = '5 minutes';

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
  const ref = { documentId: input.documentId };
  const operationKey = (step: PipelineStep) => `${workflowInfo().workflowId}/${workflowInfo().runId}/${step}/${++attempt}`;

  const setBudgetBlocked = (blocked: boolean) => {
    upsertSearchAttributes([{ key: searchAttributes.budgetBlocked, value: blocked }]);
    setStatus(blocked ? 'budget_blocked' : 'running');
  };

  /**
   * Digitization under the character budget: extract once (cached), reserve the characters the new
   * text adds, and wait for capacity while blocked; the extraction is never repeated.
   */
  async function digitize() {
    await heavy.extractText(ref);
    for (;;) {
      budgetChanged = false;
      const { characters, knowledgeBaseId } = await quick.digitizationBound(ref);
      const key = operationKey('digitize');
      const admission = await quick.reserveBudget({
        knowledgeBaseId,
        operationKey: key,
        workflowId: workflowInfo().workflowId,
        documentId: input.documentId,
        category: 'digitization',
        bound: { characters },
        requestCharacterLimit: input.requestCharacterLimit ?? null,
      });
      if (admission.admitted) {
        if (progress.status === 'budget_blocked') setBudgetBlocked(false);
        try {
          await heavy.acceptDigitizedText({ ...ref, operationKey: key });
        } catch (err) {
          await quick.releaseBudget({ operationKey: key, note: 'digitization failed' });
          throw err;
        }
        return;
      }
      if (admission.reason === 'request_character_limit') throw new StepFailure(`QUOTA_EXCEEDED:knowledge_chars (${admission.detail})`);
      await quick.markBudgetBlocked({ ...ref, reason: admission.reason, detail: admission.detail });
      setBudgetBlocked(true);
      await condition(() => budgetChanged, BUDGET_RECHECK);
    }
  }

  const runStep = (step: PipelineStep): Promise<unknown> =>
    step === 'digitize' ? digitize() : step === 'finalize_original' ? heavy.saveOriginalAsRewritten(ref) : heavy.embedDocument(ref);

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
