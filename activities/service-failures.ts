import { ApplicationFailure } from '@temporalio/activity';
import { serviceUnavailableFailure, type ServiceOutageDetails } from '../lib/contracts/activity-failure.js';
import { ServiceRejected, ServiceUnavailable } from '../lib/providers/service-unavailable.js';

/**
 * A provider's error as the workflow handles it: an outage becomes `ServiceUnavailable` carrying the
 * worker's outage window (the workflow waits it out) and `resume`, where the next try may continue;
 * a refusal a non-retryable failure of `refusedType` (its message is recorded); anything else is
 * returned as it is (the usual retries).
 */
export function serviceFailureOf(err: unknown, maxOutageSeconds: number, refusedType: string, resume?: unknown): unknown {
  if (err instanceof ServiceUnavailable) {
    const details: ServiceOutageDetails = { maxOutageSeconds, ...(resume !== undefined ? { resume } : {}) };
    return ApplicationFailure.create({ type: serviceUnavailableFailure, message: err.message, details: [details] });
  }
  if (err instanceof ServiceRejected) return ApplicationFailure.nonRetryable(err.message, refusedType);
  return err;
}
