import type { Client } from '@temporalio/client';
import type { Services } from '../lib/services.js';
import { createDigitizationActivities } from './digitization.js';
import { createPipelineStepActivities } from './pipeline-steps.js';
import { createBudgetActivities } from './budget.js';
import { createDeletionActivities } from './deletion.js';
import { createEmbeddingActivities } from './embedding.js';
import { createVendorSyncActivities } from './vendor-sync.js';
import { createMessagingActivities } from './messaging.js';
import { createRewriteActivities } from './rewrite.js';
import { createDialogAnalysisActivities } from './dialog-analysis.js';
import { createChannelSourceActivities } from './channel-source.js';
import { createTranscriptActivities } from './transcripts.js';
import { createReconcilerActivities } from './reconciler.js';
import { createVoiceActivities } from './voices.js';
import { createIngestionActivities } from './ingestion.js';

/** Every activity the worker registers, built over the process's shared clients. */
export function createActivities(deps: Services & { temporal: Client }) {
  const digitization = createDigitizationActivities(deps);
  const embedding = createEmbeddingActivities(deps);
  return {
    ...digitization,
    ...createPipelineStepActivities(deps),
    ...createBudgetActivities(deps),
    ...createDeletionActivities(deps),
    ...embedding,
    ...createIngestionActivities(digitization, embedding, deps.log),
    ...createVendorSyncActivities(deps),
    ...createMessagingActivities(deps),
    ...createRewriteActivities(deps),
    ...createDialogAnalysisActivities(deps),
    ...createChannelSourceActivities(deps),
    ...createTranscriptActivities(deps),
    ...createReconcilerActivities(deps),
    ...createVoiceActivities(deps),
  };
}

export type Activities = ReturnType<typeof createActivities>;
