import { fileURLToPath } from 'node:url';
import { NativeConnection, Runtime, Worker, DefaultLogger } from '@temporalio/worker';
import { loadConfigOrExit, orExitOnConfigError } from '../lib/platform/config.js';
import { createServices } from '../lib/services.js';
import { createActivities } from '../activities/index.js';
import { connectTemporalClient } from '../lib/platform/temporal.js';
import { ensureBudgetSweeper } from '../lib/budget/sweeper.js';
import { ensureReconciler } from '../lib/knowledge/reconcile.js';
import { reembedOnProfileChange } from '../lib/retrieval/embedding-profiles.js';
import { removeAbandonedScratch } from '../lib/platform/scratch.js';

/**
 * The worker process: polls the task queue for workflow and activity tasks. Run as many as the
 * load needs; they share the queue. SIGINT/SIGTERM drain in-flight tasks before exit; a worker that
 * is killed outright loses nothing, because Temporal hands its tasks to another worker.
 */
const config = loadConfigOrExit();
const services = createServices(config, 'worker');
// Before any task is taken: the storage (the object store of STORAGE_URL) answers and takes our credentials.
await orExitOnConfigError(services.storage.verify());
await removeAbandonedScratch(services.log);

Runtime.install({ logger: new DefaultLogger('WARN'), shutdownSignals: ['SIGINT', 'SIGTERM'] });

const connection = await NativeConnection.connect({ address: config.temporalAddress });
// Activities that ask Temporal about other workflows (the reservation sweeper) use a client.
const temporal = await connectTemporalClient(config.temporalAddress, config.temporalNamespace);
const activities = createActivities({ ...services, temporal });
const worker = await Worker.create({
  connection,
  namespace: config.temporalNamespace,
  taskQueue: config.temporalTaskQueue,
  ...(config.workflowBundlePath
    ? { workflowBundle: { codePath: config.workflowBundlePath } }
    : { workflowsPath: fileURLToPath(new URL('../workflows/index.ts', import.meta.url)) }),
  activities,
  maxConcurrentActivityTaskExecutions: config.workerMaxActivities,
  shutdownGraceTime: '20s',
});
// CPU-heavy audio work (speech recognition of transcript segments; splitting voices, their local
// voice prints and test samples) has its own task queue and concurrency (AUDIO_WORKER_MAX_ACTIVITIES,
// about one per core), so it never crowds out the rest.
const audioWorker = await Worker.create({
  connection,
  namespace: config.temporalNamespace,
  taskQueue: config.transcription.audioTaskQueue,
  activities: {
    transcribeTranscriptSegment: activities.transcribeTranscriptSegment,
    splitVoiceRecording: activities.splitVoiceRecording,
    embedVoiceLocally: activities.embedVoiceLocally,
    storeVoiceGpuResult: activities.storeVoiceGpuResult,
  },
  maxConcurrentActivityTaskExecutions: config.transcription.audioWorkerMaxActivities,
  shutdownGraceTime: '20s',
});

await ensureBudgetSweeper(temporal, config.temporalTaskQueue, {
  intervalSeconds: config.budgetSweepIntervalSeconds,
  graceSeconds: config.budgetSweepGraceSeconds,
});
if (config.reconcileIntervalSeconds > 0) {
  await ensureReconciler(temporal, config.temporalTaskQueue, { intervalSeconds: config.reconcileIntervalSeconds, graceSeconds: config.reconcileGraceSeconds });
}
// A changed embedding model re-embeds the knowledge bases that hold another profile's vectors.
const reembedding = await reembedOnProfileChange({ db: services.db, temporal, taskQueue: config.temporalTaskQueue }, services.embedder.profile);
if (reembedding > 0) services.log.info('re-embedding for a new embedding profile', { profile: services.embedder.profile.name, documents: reembedding });
services.log.info('worker started', { taskQueue: config.temporalTaskQueue, audioTaskQueue: config.transcription.audioTaskQueue, namespace: config.temporalNamespace });
await Promise.all([worker.run(), audioWorker.run()]);
await services.db.$disconnect();
await connection.close();
await temporal.connection.close();
services.log.info('worker stopped');
