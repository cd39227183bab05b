import { fileURLToPath } from 'node:url';
import { NativeConnection, Runtime, Worker, DefaultLogger } from '@temporalio/worker';
import { loadConfigOrExit } from '../lib/config.js';
import { createServices } from '../lib/runtime.js';
import { createActivities } from '../activities/index.js';
import { connectTemporalClient, ensureBudgetSweeper } from '../lib/temporal.js';
import { setDefaultSpeechToText } from '../lib/kb/extractors/media.js';
import { reembedOnProfileChange } from '../lib/kb/embedding-profiles.js';
import { OpenAiCompatibleSpeechToText } from '../lib/providers/speech-to-text.js';

/**
 * The worker process: polls the task queue for workflow and activity tasks. Run as many as the
 * load needs; they share the queue. SIGINT/SIGTERM drain in-flight tasks before exit; a worker that
 * is killed outright loses nothing, because Temporal hands its tasks to another worker.
 */
const config = loadConfigOrExit();
const services = createServices(config, 'worker');

if (config.transcriptionModel && config.openaiBaseUrl) {
  setDefaultSpeechToText(new OpenAiCompatibleSpeechToText({ baseURL: config.openaiBaseUrl, apiKey: config.openaiApiKey ?? '', model: config.transcriptionModel }));
}

Runtime.install({ logger: new DefaultLogger('WARN'), shutdownSignals: ['SIGINT', 'SIGTERM'] });

const connection = await NativeConnection.connect({ address: config.temporalAddress });
// Activities that ask Temporal about other workflows (the reservation sweeper) use a client.
const temporal = await connectTemporalClient(config.temporalAddress, config.temporalNamespace);
const worker = await Worker.create({
  connection,
  namespace: config.temporalNamespace,
  taskQueue: config.temporalTaskQueue,
  ...(config.workflowBundlePath
    ? { workflowBundle: { codePath: config.workflowBundlePath } }
    : { workflowsPath: fileURLToPath(new URL('../workflows/index.ts', import.meta.url)) }),
  activities: createActivities({ ...services, temporal }),
  maxConcurrentActivityTaskExecutions: config.workerMaxActivities,
  shutdownGraceTime: '20s',
});

await ensureBudgetSweeper(temporal, config.temporalTaskQueue, {
  intervalSeconds: config.budgetSweepIntervalSeconds,
  graceSeconds: config.budgetSweepGraceSeconds,
});
// A changed embedding model re-embeds the knowledge bases that hold another profile's vectors.
const reembedding = await reembedOnProfileChange({ db: services.db, temporal, taskQueue: config.temporalTaskQueue }, services.embedder.profile);
if (reembedding > 0) services.log.info('re-embedding for a new embedding profile', { profile: services.embedder.profile.name, documents: reembedding });
services.log.info('worker started', { taskQueue: config.temporalTaskQueue, namespace: config.temporalNamespace });
await worker.run();
await services.db.$disconnect();
await connection.close();
await temporal.connection.close();
services.log.info('worker stopped');
