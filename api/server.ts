import fs from 'node:fs';
import path from 'node:path';
import type { Server } from 'node:http';
import { loadConfigOrExit } from '../lib/config.js';
import { createServices } from '../lib/runtime.js';
import { connectTemporalClient } from '../lib/temporal.js';
import { createApp } from './app.js';
import { countTokens } from '../lib/kb/tokens.js';

/** The API process. Stateless: run as many replicas as needed behind a load balancer. */
const config = loadConfigOrExit();
const services = createServices(config, 'api');
fs.mkdirSync(path.join(config.storageDir, 'uploads'), { recursive: true });
const temporal = await connectTemporalClient(config.temporalAddress, config.temporalNamespace);
// Quota holds count tokens: build the tokenizer (about a second) now rather than in the first request.
countTokens(' ');

const app = createApp({ ...services, temporal });
const server: Server = app.listen(config.port, '0.0.0.0', () => {
  const address = server.address();
  services.log.info('api listening', { port: typeof address === 'object' && address ? address.port : config.port });
});

let stopping = false;
const stop = () => {
  if (stopping) return;
  stopping = true;
  services.log.info('api stopping');
  server.close(async () => {
    await services.db.$disconnect();
    await temporal.connection.close();
    process.exit(0);
  });
  setTimeout(() => process.exit(0), 10_000).unref();
};
process.on('SIGINT', stop);
process.on('SIGTERM', stop);
