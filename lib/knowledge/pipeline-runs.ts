import { WorkflowExecutionAlreadyStartedError, WorkflowNotFoundError, type Client } from '@temporalio/client';
import { TypedSearchAttributes } from '@temporalio/common';
import { conflict } from '../platform/errors.js';
import { waitUntilClosed } from '../platform/temporal.js';
import { searchAttributes } from '../contracts/search-attributes.js';
import {
  documentPipelineWorkflowType,
  documentWorkflowId,
  supersedeSignal,
  type DocumentPipelineInput,
  type PipelineStatus,
  type PipelineStep,
} from '../contracts/document-pipeline.js';

/**
 * Runs of a document's processing workflow. A run owns its document's `in_queues` markers: its
 * first activity sets them to its first step's queue and records its request (`pipelineRequest`),
 * and its steps move them on. A request also marks the queue itself just before it starts the run,
 * so the document shows it queued at once; a new document carries marker and request from its
 * insert on. A document left queued without a run (a crash between write and start, a terminated
 * run) is started again by the reconciler (lib/knowledge/reconcile.ts).
 */
export interface PipelineStartDeps {
  temporal: Client;
  taskQueue: string;
}

/** How long a request waits for the run it replaces (or that is closing) to close. */
const CLOSE_WAIT_MS = 15_000;
/** How long a run whose document already looks idle is given to close (a run between two steps can look idle too). */
const IDLE_CLOSE_WAIT_MS = 5_000;

/** Statuses of a run that has done all it will do; it closes on its own within moments. */
const finished: ReadonlySet<PipelineStatus> = new Set(['completed', 'cancelled', 'superseded']);
/** Statuses of a run that waits for something outside it: a retry, or budget capacity. */
const waiting: ReadonlySet<PipelineStatus> = new Set(['failed', 'budget_blocked']);

/** The steps that follow a successful digitization, from the document's own flags (use_original_as_rewritten wins). */
export function stepsAfterDigitizing(doc: { autoRewrite: boolean; useOriginalAsRewritten: boolean }): PipelineStep[] {
  if (doc.useOriginalAsRewritten) return ['finalize_original', 'embed'];
  if (doc.autoRewrite) return ['rewrite', 'embed'];
  return [];
}

/** The `pipelineRequest` column of a new row: the request the reconciler starts if its run never does. */
export const pipelineRequestData = (input: DocumentPipelineInput) => ({ pipelineRequest: input as unknown as object });

/**
 * Starts the processing workflow of one document (ID `document-<uuid>`). A previous run that has
 * done all its steps but not yet closed (the document already looks idle) is let close first; any
 * other running pipeline answers WorkflowExecutionAlreadyStartedError.
 */
export async function startDocumentPipeline(deps: PipelineStartDeps, input: DocumentPipelineInput): Promise<string> {
  const workflowId = documentWorkflowId(input.documentId);
  try {
    await start(deps, input);
  } catch (err) {
    if (!(err instanceof WorkflowExecutionAlreadyStartedError)) throw err;
    const status = await runStatus(deps.temporal, workflowId);
    if (!status || !finished.has(status) || !(await waitUntilClosed(deps.temporal, workflowId, CLOSE_WAIT_MS))) throw err;
    await start(deps, input);
  }
  return workflowId;
}

/** The status of the document's running run (from its search attribute: no worker needed), or null when none runs. */
async function runStatus(temporal: Client, workflowId: string): Promise<PipelineStatus | null> {
  try {
    const description = await temporal.workflow.getHandle(workflowId).describe();
    if (description.status.name !== 'RUNNING') return null;
    return (description.typedSearchAttributes.get(searchAttributes.pipelineStatus) as PipelineStatus | undefined) ?? 'running';
  } catch (err) {
    if (err instanceof WorkflowNotFoundError) return null;
    throw err;
  }
}

/**
 * Makes way for a new request of the user (new content, queue/process): a run that waits (failed
 * awaiting `retry`, or budget-blocked) holds no budget and has nothing half done, so it is told to
 * stand down (`supersede`) and awaited; a run that has finished is let close. A run that is working
 * or that an operator paused answers 409.
 */
export async function standDownWaitingRun(temporal: Client, documentId: string, document: { inQueues: string[]; processingState: string | null }): Promise<void> {
  const workflowId = documentWorkflowId(documentId);
  const status = await runStatus(temporal, workflowId);
  if (status === null) return;
  const busy = () => conflict(`document ${documentId} is being processed (pipeline status: ${status}); try again when it has finished`, { pipeline_status: status });
  // A document that shows no queued work and no error while its run still says running: the run has
  // done its last step and is closing (its status follows the document by a workflow task, longer
  // on a busy machine). It is let close rather than answered 409.
  const closing = status === 'running' && document.inQueues.length === 0 && document.processingState === null;
  if (closing) {
    if (await waitUntilClosed(temporal, workflowId, IDLE_CLOSE_WAIT_MS)) return;
    throw busy();
  }
  if (!finished.has(status) && !waiting.has(status)) throw busy();
  if (waiting.has(status)) await temporal.workflow.getHandle(workflowId).signal(supersedeSignal, 'a new request of the user replaces this run');
  if (!(await waitUntilClosed(temporal, workflowId, CLOSE_WAIT_MS))) throw busy();
}

async function start({ temporal, taskQueue }: PipelineStartDeps, input: DocumentPipelineInput): Promise<void> {
  await temporal.workflow.start(documentPipelineWorkflowType, {
    taskQueue,
    workflowId: documentWorkflowId(input.documentId),
    args: [input],
    typedSearchAttributes: new TypedSearchAttributes([
      { key: searchAttributes.partner, value: input.partner },
      { key: searchAttributes.knowledgeBaseId, value: input.knowledgeBaseId },
      { key: searchAttributes.documentId, value: input.documentId },
      { key: searchAttributes.pipelineStatus, value: 'running' },
      { key: searchAttributes.budgetBlocked, value: false },
    ]),
  });
}
