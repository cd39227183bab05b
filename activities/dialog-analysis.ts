import { Context } from '@temporalio/activity';
import type { Services } from '../lib/services.js';
import type { CallInput, FailInput } from '../lib/contracts/dialog-analysis.js';
import { SchemaSandbox } from '../lib/dialog-analysis/schema-sandbox.js';
import { callModel, deleteAnalysis, failAnalysis, prepareAnalysis, reopenAnalysis } from '../lib/dialog-analysis/runs.js';

/**
 * Activities of the `dialogAnalysis` workflow (contract: lib/contracts/dialog-analysis.ts); each
 * is idempotent (lib/dialog-analysis/runs.ts). Answers are validated in this worker's own schema
 * sandbox threads, so a caller's slow pattern never blocks the worker's event loop.
 */
export function createDialogAnalysisActivities(deps: Services) {
  const run = { ...deps, sandbox: new SchemaSandbox({ timeoutMs: deps.config.dialogAnalysis.validationTimeoutMs }) };
  return {
    startDialogAnalysis: (input: { id: string; generation: number }) => prepareAnalysis(run, input),
    callDialogModel: (input: CallInput) => {
      const ctx = Context.current();
      return callModel(run, input, { heartbeat: () => ctx.heartbeat(), signal: ctx.cancellationSignal });
    },
    failDialogAnalysis: (input: FailInput) => failAnalysis(run, input),
    reopenDialogAnalysis: (input: { id: string; generation: number }) => reopenAnalysis(run, input),
    deleteDialogAnalysis: (input: { id: string }) => deleteAnalysis(run, input),
  };
}
