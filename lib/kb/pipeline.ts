import type { Client } from '@temporalio/client';
import { TypedSearchAttributes } from '@temporalio/common';
import { workflowIds } from '../temporal.js';
import { searchAttributes } from '../search-attributes.js';
import type { DocumentPipelineInput } from '../../workflows/document-pipeline.js';

/** Starts the processing workflow of one document; its ID is `document-<uuid>`. */
export async function startDocumentPipeline(temporal: Client, taskQueue: string, input: DocumentPipelineInput): Promise<string> {
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
