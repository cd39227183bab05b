import { defineSearchAttributeKey, SearchAttributeType } from '@temporalio/common';

/**
 * Custom search attributes, so that an operator can filter the Temporal Web UI by partner, KB,
 * document, pipeline status and budget blocks (docs/operations.md, "Search attributes"). They are
 * registered on the embedded dev server at start (scripts/stack.ts) and by the admin-tools job of
 * docker-compose.temporal.yml. Imported by workflows, so only @temporalio/common here.
 */
export const searchAttributes = {
  partner: defineSearchAttributeKey('Partner', SearchAttributeType.KEYWORD),
  knowledgeBaseId: defineSearchAttributeKey('KnowledgeBaseId', SearchAttributeType.KEYWORD),
  documentId: defineSearchAttributeKey('DocumentId', SearchAttributeType.KEYWORD),
  pipelineStatus: defineSearchAttributeKey('PipelineStatus', SearchAttributeType.KEYWORD),
  budgetBlocked: defineSearchAttributeKey('BudgetBlocked', SearchAttributeType.BOOL),
  /**
   * The status of a job that is not a document pipeline (channel source, voice job, transcript,
   * dialog analysis), filtered together with WorkflowType: one shared key, because a Temporal
   * dev server holds at most ten custom Keyword attributes.
   */
  jobStatus: defineSearchAttributeKey('JobStatus', SearchAttributeType.KEYWORD),
};

/** Name=Type pairs in the form `temporal server start-dev --search-attribute` takes. */
export const searchAttributeDeclarations = Object.values(searchAttributes).map(
  (k) => `${k.name}=${k.type === SearchAttributeType.BOOL ? 'Bool' : 'Keyword'}`,
);
