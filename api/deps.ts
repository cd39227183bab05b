import type { Client } from '@temporalio/client';
import type { Services } from '../lib/services.js';

/** What route handlers may use: the shared services plus a Temporal client. */
export interface ApiDeps extends Services {
  temporal: Client;
}
