import {
  ActivityFailure,
  ApplicationFailure,
  condition,
  defineQuery,
  defineSignal,
  proxyActivities,
  setHandler,
  upsertSearchAttributes,
} from '@temporalio/workflow';
import type { DocumentActivities, PipelineStep } from '../activities/documents.js';
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

const quick = proxyActivities<DocumentActivities>({
  startToCloseTimeout: '2 minutes',
  retry: { initialInterval: '1s', backoffCoefficient: 2, maximumInterval: '1 minute', maximumAttempts: 10 },
});

const heavy = proxyActivities<DocumentActivities>({
  startToCloseTimeout: '1 hour',
  // A worker that dies mid-step is noticed within this time and the step is retried elsewhere.
  heartbeatTimeout: '20 seconds',
  retry: { initialInterval: '2s', backoffCoefficient: 2, maximumInterval: '2 minutes', maximumAttempts: 8, nonRetryableErrorTypes: ['PermanentProcessingError', 'DocumentGone'] },
});

const runStep: Record<PipelineStep, (ref: { documentId: string }) => Promise<unknown>> = {
  digitize: (ref) => heavy.digitizeDocument(ref),
  finalize_original: (ref) => heavy.saveOriginalAsRewritten(ref),
  embed: (ref) => heavy.embedDocument(ref),
};

function failureMessage(err: unknown): string {
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

  setHandler(progressQuery, () => progress);
  setHandler(pauseSignal, () => void (paused = true));
  setHandler(resumeSignal, () => void (paused = false));
  setHandler(retrySignal, () => void (retryRequested = true));
  // Budget admission arrives with the budget issue; the signal exists so operators and the API
  // already have one stable name to send.
  setHandler(budgetChangedSignal, () => undefined);

  for (const step of input.steps) {
    progress.currentStep = step;
    for (;;) {
      if (paused) {
        setStatus('paused');
        await condition(() => !paused);
        setStatus('running');
      }
      try {
        await runStep[step]({ documentId: input.documentId });
        break;
      } catch (err) {
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
