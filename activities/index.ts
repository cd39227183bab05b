import { createDocumentActivities, type DocumentActivityDeps } from './documents.js';

/** Every activity the worker registers, built over the process's shared clients. */
export function createActivities(deps: DocumentActivityDeps) {
  return {
    ...createDocumentActivities(deps),
  };
}

export type Activities = ReturnType<typeof createActivities>;
