import { defineQuery, defineSignal } from '@temporalio/workflow';
import type { Bound } from './budget-admission.js';
import { serviceUnavailableFailure } from './activity-failure.js';

/**
 * Contract of the `documentPipeline` workflow: one execution per processing request of one
 * document (ID `document-<uuid>`). Imported by the API side (which starts, signals and queries it),
 * by the workflow and by its activities, so that all three agree on one definition.
 */
export const documentPipelineWorkflowType = 'documentPipeline';
export const documentWorkflowId = (documentId: string) => `document-${documentId}`;

export type PipelineStep = 'digitize' | 'finalize_original' | 'rewrite' | 'embed';

/** Rewrite content types (spec 2.6): each has its own prompt; `auto` picks one from the document's source. */
export type RewriteContentType = 'article' | 'video' | 'book';
export type RequestedContentType = RewriteContentType | 'auto';

/** The queue a step occupies in the document's `in_queues` while it waits or runs. */
export const queueOfStep: Record<PipelineStep, string> = { digitize: 'digitize', finalize_original: 'digitize', rewrite: 'rewrite', embed: 'embedding' };

export interface RewriteRequest {
  contentType: RequestedContentType;
  personName?: string | null;
}

export interface DocumentPipelineInput {
  documentId: string;
  knowledgeBaseId: string;
  partner: string;
  steps: PipelineStep[];
  /** Request-level cap on the KB's digitized characters (the smaller of it and the KB limit applies). */
  requestCharacterLimit?: number | null;
  /** Content type and person of the `rewrite` step (default: auto, no person). */
  rewrite?: RewriteRequest;
  /**
   * Where a continued run picks up (absent on a fresh start). A run that waits long (budget-blocked
   * through many re-checks, or retried many times) continues as new before its history grows past
   * `historyEventsLimit`; `steps` then lists only the steps still to run.
   */
  carry?: PipelineCarry;
}

/** What a run hands to its continuation: nothing a step has done or paid for is done again. */
export interface PipelineCarry {
  /** Runs of this processing request so far (1 = the first). */
  generation: number;
  /** Steps of the request that earlier runs completed (for `progress`). */
  completedSteps: PipelineStep[];
  /** Held by `pause` when the run continued. */
  paused: boolean;
  /** The first step failed for good and waits for `retry` (its failure is already recorded). */
  failure: string | null;
  /**
   * A rewrite attempt under way: its plan, the part and model of the next call, and since when
   * (workflow time, ms) every model of the part has been unavailable, if they are.
   */
  rewrite: { attemptId: string; plan: RewritePlan; part: number; modelIndex: number; outageSince?: number | null } | null;
  /** Rewrite attempts made so far (attempt IDs stay unique across runs). */
  rewriteAttempts: number;
  budgetRechecks: number;
  /** Since when (workflow time, ms) the first step has found a service it needs unavailable, if it has. */
  outageSince?: number | null;
}

/**
 * History bound of one run: it continues as new at its next waiting point once its history has
 * this many events (or Temporal suggests it), so a run never nears Temporal's 51,200-event limit.
 */
export const historyEventsLimit = 2_000;

export type PipelineStatus = 'running' | 'paused' | 'failed' | 'budget_blocked' | 'completed' | 'cancelled' | 'superseded';

export interface DocumentPipelineProgress {
  status: PipelineStatus;
  /** Runs of this processing request so far: a long wait continues as new (see PipelineCarry). */
  generation: number;
  /** Admissions tried again after a budget block (a wake-up or the re-check timer), over all runs. */
  budgetRechecks: number;
  currentStep: PipelineStep | null;
  completedSteps: PipelineStep[];
  lastError: string | null;
}

/** A step that failed for good runs again from that step. */
export const retrySignal = defineSignal('retry');
/** Holds the pipeline before its next step. */
export const pauseSignal = defineSignal('pause');
export const resumeSignal = defineSignal('resume');
/** Wakes work that waits for budget capacity. */
export const budgetChangedSignal = defineSignal('budgetChanged');
/**
 * A new processing request replaces this run: honoured only while the run waits (failed awaiting
 * `retry`, or budget-blocked), where it holds no budget; the run then ends as `superseded`.
 */
export const supersedeSignal = defineSignal<[reason: string]>('supersede');
export const progressQuery = defineQuery<DocumentPipelineProgress>('progress');

/** Failure types the activities raise and the workflow tells apart. */
export const pipelineFailure = {
  /** The document was deleted while its workflow ran: the workflow then ends quietly. */
  documentGone: 'DocumentGone',
  /** Retrying cannot fix it (unreadable file, missing content): recorded, waits for `retry`. */
  permanent: 'PermanentProcessingError',
  /**
   * A service the step needs is down (the embeddings API, the vector index, the video platform, the
   * transcription API): the workflow tries the step again, 2 s ... 5 min apart, for up to the
   * failure's window (EMBEDDING_ or DIGITIZATION_MAX_OUTAGE_SECONDS).
   */
  unavailable: serviceUnavailableFailure,
} as const;

export interface DocumentRef {
  documentId: string;
}

/**
 * Where an embed step stopped when a service went down: the chunks before `next` of the content
 * whose SHA-256 is `contentSha` are in `className` already. The workflow hands it to the step's next
 * try, which continues there if the content and class are still the same (nothing is embedded, or
 * paid for, twice).
 */
export interface EmbedResume {
  next: number;
  contentSha: string;
  className: string;
}

export interface EmbedDocumentInput extends DocumentRef {
  /** The admitted operation of a paid embedder. */
  operationKey?: string;
  resume?: EmbedResume;
}

/** The bound of one admission the workflow reserves before a paid operation. */
export interface AdmissionBound {
  knowledgeBaseId: string;
  bound: Bound;
}

/**
 * A whole digitization in one activity (`digitizeDocument`, workflows patched with
 * `digitize-in-one-activity`): the run's markers and request, extraction, the admission of its
 * characters under the workflow's operation key, accepting the text, and for use_original_as_rewritten
 * the final content too. What the workflow must still do itself comes back: a page to scrape first,
 * or a budget block to wait out with its admission loop.
 */
export interface DigitizeDocumentInput extends DocumentRef {
  /** A new run's request: its markers and request are recorded first (absent in a continued run). */
  begin: DocumentPipelineInput | null;
  operationKey: string;
  workflowId: string;
  requestCharacterLimit: number | null;
  /** The next step is finalize_original: do it in the same activity. */
  finalizeOriginal: boolean;
}

export type DigitizeDocumentOutcome =
  /** The text is the document's digitized content; `finalized`: and its final rewritten content. */
  | { outcome: 'accepted'; finalized: boolean; paidEmbedding: boolean }
  /** The page goes through the scraping provider first (admitted by its dollar bound). */
  | { outcome: 'scrape'; bound: { knowledgeBaseId: string; dollars: string } }
  /** The KB's budget cannot hold the characters now: nothing is held; the workflow waits for capacity. */
  | { outcome: 'blocked' }
  /** Refused by the request's own character_limit alone (raising the KB limit would not help). */
  | { outcome: 'request_limit'; detail: string };

/** The one-activity digitization followed by the local embedding (activities/ingestion.ts); `embedded`: the embed step is done too. */
export type DigitizeAndEmbedOutcome = DigitizeDocumentOutcome & { embedded: boolean };

export type ScrapeOutcome =
  | { outcome: 'scraped' }
  | { outcome: 'refused' | 'ambiguous'; message: string }
  /** The provider is down: waited out for `maxOutageSeconds` (DIGITIZATION_MAX_OUTAGE_SECONDS; absent from workers before it: 1 hour). */
  | { outcome: 'unavailable'; message: string; maxOutageSeconds?: number };

/** What the workflow needs to admit and run the model calls of a rewrite attempt. */
export interface RewritePlan {
  knowledgeBaseId: string;
  contentType: RewriteContentType;
  partCount: number;
  /** The tier's model, then the fallback model if one is configured. */
  models: string[];
  /** Admission bound of each part's call, per model. */
  bounds: Record<string, Array<{ tokens: number; dollars?: string }>>;
  /**
   * How long every model of a part may be unavailable before the step fails
   * (REWRITE_MAX_OUTAGE_SECONDS); absent in plans made before the setting (24 hours).
   */
  maxOutageSeconds?: number;
}

export type RewriteCallOutcome =
  | { outcome: 'accepted' }
  | { outcome: 'rejected'; message: string }
  | { outcome: 'rate_limited' | 'unavailable' | 'ambiguous' | 'permanent'; message: string; retryAfterMs: number | null };
