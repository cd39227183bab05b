import { ActivityFailure, ApplicationFailure, proxyActivities } from '@temporalio/workflow';
import type { Activities } from '../activities/index.js';
import { vendorSyncRefused, type VendorSyncInput } from '../lib/contracts/vendor-sync.js';

/**
 * Mirrors one document's final rewritten content into its KB's external vector store (contract:
 * lib/contracts/vendor-sync.ts). The upload is retried with backoff; when it fails for good the
 * document shows vendor_sync_status=failed and its error, and retry-failed queues it again.
 */
const sync = proxyActivities<Activities>({
  startToCloseTimeout: '5 minutes',
  retry: { initialInterval: '2s', backoffCoefficient: 2, maximumInterval: '30 seconds', maximumAttempts: 4, nonRetryableErrorTypes: [vendorSyncRefused] },
});
const quick = proxyActivities<Activities>({ startToCloseTimeout: '1 minute', retry: { maximumAttempts: 10 } });

export async function vendorSync(input: VendorSyncInput): Promise<{ status: string }> {
  try {
    return await sync.syncDocumentToVendor(input);
  } catch (err) {
    const cause = err instanceof ActivityFailure ? err.cause : err;
    const message = cause instanceof ApplicationFailure || cause instanceof Error ? cause.message : String(cause);
    await quick.markVendorSyncFailed({ ...input, message });
    return { status: 'failed' };
  }
}
