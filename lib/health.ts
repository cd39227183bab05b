import type { Client } from '@temporalio/client';
import type { Db } from './db.js';
import type { VectorIndex } from './providers/vector-index.js';

export interface CheckResult {
  ok: boolean;
  latency_ms: number;
  error?: string;
}

async function timed(check: () => Promise<unknown>, timeoutMs = 3000): Promise<CheckResult> {
  const started = performance.now();
  let timer: NodeJS.Timeout | undefined;
  try {
    await Promise.race([
      check(),
      new Promise((_, reject) => (timer = setTimeout(() => reject(new Error(`no answer within ${timeoutMs} ms`)), timeoutMs))),
    ]);
    return { ok: true, latency_ms: Math.round(performance.now() - started) };
  } catch (err) {
    return { ok: false, latency_ms: Math.round(performance.now() - started), error: (err as Error).message };
  } finally {
    clearTimeout(timer);
  }
}

/** One round trip to each dependency the service cannot work without. */
export async function checkDependencies(deps: { db: Db; temporal: Client; index: VectorIndex }) {
  const [postgres, temporal, weaviate] = await Promise.all([
    timed(() => deps.db.$queryRaw`SELECT 1`),
    timed(() => deps.temporal.connection.workflowService.getSystemInfo({})),
    timed(async () => {
      if (!(await deps.index.ready())) throw new Error('Weaviate is not ready');
    }),
  ]);
  return { postgres, temporal, weaviate };
}
