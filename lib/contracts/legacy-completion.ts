/**
 * Contract of the `legacyCompletion` workflow (ID `legacy-completion-<uuid>`): one legacy
 * /v2/completions operation, generated, kept for the retention period, then deleted.
 */
export const legacyCompletionWorkflowType = 'legacyCompletion';
export const legacyCompletionWorkflowId = (id: string) => `legacy-completion-${id}`;

export interface LegacyCompletionInput {
  id: string;
  retentionSeconds: number;
}
