import { WorkflowExecutionAlreadyStartedError, type Client } from '@temporalio/client';
import { TypedSearchAttributes } from '@temporalio/common';
import { workflowIds } from '../temporal.js';
import { searchAttributes } from '../search-attributes.js';
import type { DocumentPipelineInput, DocumentPipelineProgress } from '../../workflows/document-pipeline.js';

/**
 * Starts the processing workflow of one document; its ID is `document-<uuid>`. A previous run that
 * has done all its steps but not yet closed (the document already looks idle to clients) is let
 * close first; any other running pipeline answers WorkflowExecutionAlreadyStartedError.
 */
export async function startDocumentPipeline(temporal: Client, taskQueue: string, input: DocumentPipelineInput): Promise<string> {
  try {
    return await start(temporal, taskQueue, input);
  } catch (err) {
    if (!(err instanceof WorkflowExecutionAlreadyStartedError)) throw err;
    const handle = temporal.workflow.getHandle(workflowIds.document(input.documentId));
    const progress = await handle.query<DocumentPipelineProgress>('progress').catch(() => null);
    if (progress?.status !== 'completed' && progress?.status !== 'cancelled') throw err;
    await handle.result().catch(() => undefined);
    return start(temporal, taskQueue, input);
  }
}

async function start(temporal: Client, taskQueue: string, input: DocumentPipelineInput): Promise<string> {
  const workflowId = workflowIds.document(input.documentId);
  await temporal.workflow.start('documentPipeline', {
    taskQueue,
    workflowId,
    args: [input],
    typedSearchAttributes: new TypedSearchAttributes([
      { key: searchAttributes.partner, value: input.partner },
      { key: searchAttributes.knowledgeBaseId, value: input.knowledgeBaseId },
      { key: searchAttributes.documentId, value: input.documentId },
      { key: searchAttributes.pipelineStatus, value: 'running' },
      { key: searchAttributes.budgetBlocked, value: false },
    ]),
  });
  return workflowId;
}
