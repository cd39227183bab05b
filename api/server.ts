import type { Server } from 'node:http';
import { loadConfigOrExit, orExitOnConfigError } from '../lib/platform/config.js';
import { createServices } from '../lib/services.js';
import { lazyTemporalClient } from '../lib/platform/temporal.js';
import { createApp } from './app.js';
import { keepUploadFolder, uploadFolder } from './http/upload-folder.js';
import { keepClientConnections } from './http/connections.js';
import { countTokens } from '../lib/platform/tokens.js';
import { latinDetector } from '../lib/speech/detect.js';
import { removeAbandonedScratch } from '../lib/platform/scratch.js';
import { returnEscrows } from '../lib/messaging/quota-escrow.js';

/** The API process. Stateless: run as many replicas as needed behind a load balancer. */
const config = loadConfigOrExit();
const services = createServices(config, 'api');
// Before anything is served: the storage (the object store of STORAGE_URL) answers and takes our credentials.
await orExitOnConfigError(services.storage.verify());
keepUploadFolder(uploadFolder(config.storageDir), services.log);
// Speech and voice samples decode in the API too.
await removeAbandonedScratch(services.log);
const temporal = lazyTemporalClient(config.temporalAddress, config.temporalNamespace);
// Quota holds count tokens: build the tokenizer (about a second) now rather than in the first request.
countTokens(' ');
// The language detector of /v2/audio/speech (about 150 ms, 85 MB) likewise.
await latinDetector();

const app = createApp({ ...services, temporal });
const server: Server = app.listen(config.port, '0.0.0.0', () => {
  const address = server.address();
  services.log.info('api listening', { port: typeof address === 'object' && address ? address.port : config.port });
});
keepClientConnections(server, config.httpKeepAliveMs);

let stopping = false;
const stop = () => {
  if (stopping) return;
  stopping = true;
  services.log.info('api stopping');
  server.close(async () => {
    // What this process's escrow slices have not lent goes back to their keys at once, not at expiry.
    await returnEscrows(services.db).catch((err: unknown) => services.log.warn('quota escrows not given back', { err }));
    await services.db.$disconnect();
    await temporal.connection.close();
    process.exit(0);
  });
  setTimeout(() => process.exit(0), 10_000).unref();
};
process.on('SIGINT', stop);
process.on('SIGTERM', stop);
