import { ActivityFailure, ApplicationFailure, patched, proxyActivities, sleep, type ActivityOptions } from '@temporalio/workflow';
import type { Activities } from '../activities/index.js';
import { vendorSyncRefused, type VendorSyncInput } from '../lib/contracts/vendor-sync.js';
import { outageWaitMs, serviceOutageOf, serviceUnavailableFailure } from '../lib/contracts/activity-failure.js';

/**
 * Mirrors one document's final rewritten content into its KB's external vector store (contract:
 * lib/contracts/vendor-sync.ts). The upload is retried with backoff; an outage of the vector-store
 * API (patch `vendor-sync-waits-out-outages`) is waited out, 2 s ... 5 min apart, for the worker's
 * VENDOR_SYNC_MAX_OUTAGE_SECONDS. When it fails for good the document shows
 * vendor_sync_status=failed and its error, and retry-failed queues it again.
 */
const syncOptions: ActivityOptions = { startToCloseTimeout: '5 minutes', retry: { initialInterval: '2s', backoffCoefficient: 2, maximumInterval: '30 seconds', maximumAttempts: 4, nonRetryableErrorTypes: [vendorSyncRefused] } };
const sync = proxyActivities<Activities>(syncOptions);
/** An outage comes back at once: the workflow waits it out itself. */
const syncWaitingOutOutages = proxyActivities<Activities>({ ...syncOptions, retry: { ...syncOptions.retry, nonRetryableErrorTypes: [vendorSyncRefused, serviceUnavailableFailure] } });
const quick = proxyActivities<Activities>({ startToCloseTimeout: '1 minute', retry: { maximumAttempts: 10 } });

/** The window of outage failures that carry none. */
const DEFAULT_MAX_OUTAGE_SECONDS = 3600;

export async function vendorSync(input: VendorSyncInput): Promise<{ status: string }> {
  const waitsOutOutages = patched('vendor-sync-waits-out-outages');
  let outageSince: number | null = null;
  for (let round = 0; ; round++) {
    try {
      return await (waitsOutOutages ? syncWaitingOutOutages : sync).syncDocumentToVendor(input);
    } catch (err) {
      const outage = waitsOutOutages ? serviceOutageOf(err, DEFAULT_MAX_OUTAGE_SECONDS) : null;
      let message: string;
      if (outage) {
        outageSince ??= Date.now();
        const lasted = Date.now() - outageSince;
        const windowMs = outage.maxOutageSeconds * 1000;
        if (lasted < windowMs) {
          await sleep(outageWaitMs(round, lasted, windowMs));
          continue;
        }
        message = `${outage.message} (unavailable for ${Math.round(lasted / 1000)} s)`;
      } else {
        const cause = err instanceof ActivityFailure ? err.cause : err;
        message = cause instanceof ApplicationFailure || cause instanceof Error ? cause.message : String(cause);
      }
      await quick.markVendorSyncFailed({ ...input, message });
      return { status: 'failed' };
    }
  }
}
