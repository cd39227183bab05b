import fs from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import proto from '@temporalio/proto';
import type { Client } from '@temporalio/client';

/**
 * Recorded workflow histories (test/workflows/histories/<type>.<path>.json), replayed against the
 * current workflow code by test/workflows/replay.test.ts. Each file is `History.toObject` of
 * @temporalio/proto with longs, enums and bytes as strings, which `History.fromObject` reads back
 * exactly (the SDK's historyFromJSON cannot be used here: @temporalio/common and
 * @temporalio/proto each bundle their own protobufjs).
 */
export const historiesDir = fileURLToPath(new URL('./histories/', import.meta.url));

const History = proto.temporal.api.history.v1.History;
type HistoryEvent = proto.temporal.api.history.v1.IHistoryEvent;

export function readHistory(file: string) {
  return History.fromObject(JSON.parse(fs.readFileSync(path.join(historiesDir, file), 'utf8')));
}

/** The text of every payload in an event (search attributes, results): bytes decoded as UTF-8. */
function payloadText(value: unknown): string {
  if (value instanceof Uint8Array) return Buffer.from(value).toString();
  if (Array.isArray(value)) return value.map(payloadText).join(' ');
  if (value && typeof value === 'object') return Object.values(value).map(payloadText).join(' ');
  return '';
}

/**
 * The path a run took, from its history: how it ended, and for document pipelines whether it was
 * budget-blocked, retried after a failed step, replaced by a new request, or continued as new
 * between two model calls of a rewrite, or waited out an outage of every model or of a service a
 * step needs; for dialog analyses and vendor syncs whether a provider outage was waited out; for transcripts
 * whether a webhook was called. Null: not worth keeping
 * (terminated by hand, timed out).
 */
export function pathOf(type: string, events: HistoryEvent[]): string | null {
  const last = events.at(-1);
  const ended = last?.workflowExecutionCompletedEventAttributes
    ? 'completed'
    : last?.workflowExecutionFailedEventAttributes
      ? 'failed'
      : last?.workflowExecutionCanceledEventAttributes
        ? 'cancelled'
        : last?.workflowExecutionContinuedAsNewEventAttributes
          ? 'continued-as-new'
          : last?.workflowExecutionTerminatedEventAttributes || last?.workflowExecutionTimedOutEventAttributes
            ? null
            : 'running';
  if (ended !== null && type === 'dialogAnalysis' && events.some((e) => e.markerRecordedEventAttributes && payloadText(e).includes('dialog-analysis-outage-window'))) return `${ended}-after-outage`;
  const waitedOutOutage = events.some((e) => e.activityTaskFailedEventAttributes?.failure?.applicationFailureInfo?.type === 'ServiceUnavailable');
  if (ended !== null && type === 'vendorSync' && waitedOutOutage) return `${ended}-after-outage`;
  if (ended !== null && type === 'transcript' && events.some((e) => e.activityTaskScheduledEventAttributes?.activityType?.name === 'notifyTranscriptWebhook')) return `${ended}-after-webhook`;
  if (ended === null || type !== 'documentPipeline') return ended;
  if (ended === 'continued-as-new' && events.some((e) => e.markerRecordedEventAttributes && payloadText(e).includes('rewrite-continues-as-new'))) return 'continued-as-new-mid-rewrite';
  if (ended !== 'completed') return ended === 'running' ? null : ended;
  if (events.some((e) => e.markerRecordedEventAttributes && payloadText(e).includes('rewrite-waits-out-outage'))) return 'completed-after-outage';
  const resumedEmbedding = events.some((e) => e.activityTaskScheduledEventAttributes?.activityType?.name === 'embedDocument' && payloadText(e).includes('contentSha'));
  if (waitedOutOutage && resumedEmbedding) return 'completed-after-service-outage-resumed';
  if (waitedOutOutage) return 'completed-after-service-outage';
  if (last && payloadText(last).includes('superseded')) return 'superseded';
  if (events.some((e) => e.activityTaskScheduledEventAttributes?.activityType?.name === 'requeueStep')) return 'failed-and-retried';
  if (events.some((e) => e.upsertWorkflowSearchAttributesEventAttributes && payloadText(e).includes('budget_blocked'))) return 'budget-blocked';
  if (events[0]?.workflowExecutionStartedEventAttributes?.continuedExecutionRunId) return 'continued';
  if (events.some((e) => e.activityTaskScheduledEventAttributes?.activityType?.name === 'digitizeAndEmbedDocument')) return 'completed-embedded-with-digitize';
  return 'completed';
}

/**
 * Writes the smallest history of every (workflow type, path) that the server holds and the folder
 * lacks (recorded files are never overwritten: they are the record of the code that made them).
 * Run by `npm run record:histories` at the end of a test run (test/support/global.ts).
 */
export async function recordHistories(client: Client, dir = historiesDir): Promise<string[]> {
  fs.mkdirSync(dir, { recursive: true });
  const best = new Map<string, { size: number; object: object }>();
  for await (const execution of client.workflow.list()) {
    const handle = client.workflow.getHandle(execution.workflowId, execution.runId);
    const history = await handle.fetchHistory();
    const label = pathOf(execution.type, history.events ?? []);
    if (!label) continue;
    const object = History.toObject(History.fromObject(history), { longs: String, enums: String, bytes: String });
    const size = JSON.stringify(object).length;
    const key = `${execution.type}.${label}`;
    if (!best.has(key) || best.get(key)!.size > size) best.set(key, { size, object });
  }
  const written: string[] = [];
  for (const [key, { object }] of [...best.entries()].sort()) {
    const file = path.join(dir, `${key}.json`);
    if (fs.existsSync(file)) continue;
    fs.writeFileSync(file, `${JSON.stringify(object)}\n`);
    written.push(file);
  }
  return written;
}
