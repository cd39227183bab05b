// The worker bundles this file: every workflow type is exported from here.
export { documentPipeline } from './document-pipeline.js';
export { budgetSweeper } from './budget-sweeper.js';
export { deletion } from './deletion.js';
export { vendorSync } from './vendor-sync.js';
export { legacyCompletion } from './legacy-completion.js';
export { dialogAnalysis } from './dialog-analysis.js';
export { channelSource } from './channel-source.js';
export { transcript } from './transcript.js';
export { voiceJob } from './voice-job.js';
export { reconciler } from './reconciler.js';
