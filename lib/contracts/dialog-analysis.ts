import { defineQuery, defineSignal } from '@temporalio/workflow';

/**
 * Contract of the `dialogAnalysis` workflow (ID `dialog-analysis-<uuid>`): one POST
 * /v2/dialog_analyses. It asks the model until an answer conforms to the caller's schemas (or the
 * attempts are used up), keeps the result for the retention period, then deletes it. Imported by
 * the API (start), the workflow and its activities.
 *
 * The dialog never passes through Temporal: activities take ids and return small outcomes; the
 * input, the answers and the output live in Postgres only, and are deleted at retention.
 */
export const dialogAnalysisWorkflowType = 'dialogAnalysis';
export const dialogAnalysisWorkflowId = (id: string) => `dialog-analysis-${id}`;
/** The analysis' id as the API shows it. */
export const dialogAnalysisPath = (id: string) => `/v2/dialog_analyses/${id}`;
/** One model call of one generation: the key that makes the call activity idempotent. */
export const dialogAnalysisOperationKey = (id: string, generation: number, seq: number) => `${dialogAnalysisWorkflowId(id)}/${generation}/${seq}`;

export type DialogAnalysisState = 'in-progress' | 'completed' | 'failed';
/** How the model is asked for JSON: structured outputs, JSON mode, or the prompt alone. */
export type ResponseMode = 'json_schema' | 'json_object' | 'prompt';

export interface DialogAnalysisInput {
  id: string;
  /** How long the finished analysis stays readable (the API's setting when it was created). */
  retentionSeconds: number;
  /** Answers judged against the schemas before the analysis fails. */
  maxAttempts: number;
  /**
   * How long transient provider failures in a row are waited out before the analysis fails
   * (DIALOG_ANALYSIS_MAX_OUTAGE_SECONDS); absent in runs started before it existed (30 minutes).
   */
  maxOutageSeconds?: number;
  /** 1, and one more for each operator `retry` of a failed analysis (a new run, continue-as-new). */
  generation: number;
}

export type DialogAnalysisStep = 'prepare' | 'call_model' | 'backoff' | 'finish' | 'retained' | 'delete';

export interface DialogAnalysisProgress {
  state: DialogAnalysisState;
  step: DialogAnalysisStep;
  generation: number;
  responseMode: ResponseMode | null;
  /** Answers judged in this generation, and the bound. */
  attempts: number;
  maxAttempts: number;
  /** Model calls made in this generation; those lost with a worker; transient provider failures. */
  calls: number;
  interruptedCalls: number;
  transientFailures: number;
  lastError: string | null;
  /** When the finished analysis is deleted (ISO 8601). */
  expiresAt: string | null;
}

export const progressQuery = defineQuery<DialogAnalysisProgress>('progress');
/** A failed analysis runs again from its stored input (e.g. after a model was configured). */
export const retrySignal = defineSignal('retry');

/** What preparing an analysis found. */
export type PrepareOutcome =
  | { status: 'ready'; mode: ResponseMode }
  /** No model API is configured: the analysis fails at once, saying so. */
  | { status: 'not_configured'; reason: string }
  /** The row is gone (its partner was deleted): the workflow ends quietly. */
  | { status: 'gone' }
  /** A resumed run whose analysis already finished. */
  | { status: 'finished'; state: 'completed' | 'failed'; expiresAt: string };

export interface CallInput {
  id: string;
  generation: number;
  seq: number;
  mode: ResponseMode;
  retentionSeconds: number;
}

/** The result of one model call, judged. Never carries the dialog or the answer itself. */
export type CallOutcome =
  /** The answer conforms; the analysis is completed (written by the activity). */
  | { outcome: 'valid'; expiresAt: string }
  /** The answer does not conform: what is wrong (paths and messages). Counts as an attempt. */
  | { outcome: 'invalid'; errors: string }
  /** The provider refused the response format: ask again with the next mode. */
  | { outcome: 'response_format_unsupported'; message: string }
  /** Nothing usable came back, but asking again may work; not an attempt. */
  | { outcome: 'rate_limited' | 'unavailable' | 'ambiguous' | 'interrupted'; message: string; retryAfterMs: number | null }
  /** Asking again cannot help. */
  | { outcome: 'permanent' | 'not_configured'; message: string }
  | { outcome: 'gone' }
  /** The analysis was already finished (a repeated activity after the completion was written). */
  | { outcome: 'finished'; state: 'completed' | 'failed'; expiresAt: string };

export interface FailInput {
  id: string;
  generation: number;
  reason: string;
  retentionSeconds: number;
}
