import { defineRoute, type RouteDefinition } from '../http/route.js';
import { clientAddress } from '../http/rate-limits.js';
import type { ApiDeps } from '../deps.js';
import type { Principal } from '../../lib/platform/api-keys.js';
import { createDialogAnalysis, readDialogAnalysis } from '../../lib/dialog-analysis/analyses.js';
import { SchemaSandbox } from '../../lib/dialog-analysis/schema-sandbox.js';
import type { RawDialogInput } from '../../lib/dialog-analysis/request.js';
import { dialogAnalysisBody, dialogAnalysisErrors, dialogAnalysisIdParams, dialogAnalysisView, notFoundResponse } from './schemas.js';

/** The dialog-analysis interface (spec: voice-transcription-speech-dialog.md 2.3, 4.4). Errors: `{message}`, 422 `{message, errors}`. */
export function dialogAnalysisRoutes(deps: ApiDeps): RouteDefinition[] {
  // Callers' schemas are compiled in threads with a time limit, never on the API's event loop.
  const sandbox = new SchemaSandbox({ timeoutMs: deps.config.dialogAnalysis.validationTimeoutMs });
  return [
    defineRoute<unknown, unknown, { input: RawDialogInput }>({
      method: 'post', path: '/v2/dialog_analyses', access: 'authenticated', summary: 'Start a dialog analysis',
      description:
        'Key: `X-Api-Key` with a partner key or the administrator key. Answers 200 `{id: "/v2/dialog_analyses/<uuid>", state: "in-progress", created_at}`; ' +
        'the analysis runs as the workflow `dialog-analysis-<uuid>`. Every answer of the model is validated with ajv against both schemas; ' +
        'non-conforming answers are retried with the errors (DIALOG_ANALYSIS_MAX_ATTEMPTS), then the analysis is `failed`.',
      body: { type: 'json', schema: dialogAnalysisBody },
      responses: { 200: { description: 'Accepted', schema: dialogAnalysisView }, ...dialogAnalysisErrors, 503: { description: 'The workflow service is unavailable; nothing was kept' } },
      handler: async ({ body, principal, req }) => ({ body: await createDialogAnalysis(deps, sandbox, principal as Principal, body.input, clientAddress(req)) }),
    }),
    readRoute('/v2/dialog_analyses/{id}', 'Read a dialog analysis'),
    readRoute('/v2/dialog_analyses//v2/dialog_analyses/{id}', 'Read a dialog analysis (the id as returned, appended to the path)'),
  ];

  // The id is itself the path /v2/dialog_analyses/<uuid>: a client that appends it to the documented path gets the same answer.
  function readRoute(path: string, summary: string) {
    return defineRoute<{ id: string }>({
      method: 'get', path, access: 'authenticated', summary,
      description:
        '`{id, state, created_at}`; when `completed` also `server_runtime` (seconds) and `output: {profile, feedback}`; when `failed` also `error`. ' +
        'Results are kept for DIALOG_ANALYSIS_RETENTION_SECONDS (24 hours) after completion or failure, then deleted (404). Other partners get 404.',
      params: dialogAnalysisIdParams,
      responses: { 200: { description: 'The analysis', schema: dialogAnalysisView }, 401: dialogAnalysisErrors[401], 404: notFoundResponse },
      handler: async ({ params, principal }) => ({ body: await readDialogAnalysis(deps, principal as Principal, params.id) }),
    });
  }
}
