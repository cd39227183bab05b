import fs from 'node:fs';
import path from 'node:path';
import type { Client } from '@temporalio/client';
import proto from '@temporalio/proto';
import { stringify } from 'yaml';
import { binaries, freePort, manage, startAgainOnTakenPort, waitFor, type ManagedProcess } from '../../scripts/stack.js';
import { registerNamespace, temporalCli } from '../../scripts/temporal-server.js';
import { registerTestServers } from './stack.js';

/**
 * The tests' time-skipping environment (docs/testing.md, "Time-skipping environment"): the Temporal
 * server itself at a version whose workflows can skip time (go.temporal.io/server v1.32, built by
 * `scripts/build-tools.sh temporal-time-skipping`), in memory, with the feature turned on for its
 * namespace. A workflow whose time skipping is enabled has its clock moved on to its next timer (a
 * sleep, a condition's timeout, an activity's retry backoff) whenever nothing of it is in flight:
 * no workflow task, activity, child workflow or Nexus operation. The workflow, its activities,
 * the worker and the SDK are the real ones; only Temporal's clock of that one workflow runs ahead.
 * Postgres' clock and the test's own do not, so a test here asserts what follows from workflow
 * timers alone.
 */
export interface TimeSkippingTemporal {
  /** The frontend, for TEMPORAL_ADDRESS; the namespace is `default`. */
  address: string;
  process: ManagedProcess;
  stop(): Promise<void>;
}

const timeSkippingServerBinary = binaries.temporalTimeSkipping;

export async function startTimeSkippingTemporal(workDir: string): Promise<TimeSkippingTemporal> {
  if (!fs.existsSync(timeSkippingServerBinary)) throw new Error(`${timeSkippingServerBinary} is missing: run scripts/build-tools.sh temporal-time-skipping`);
  const configDir = path.join(workDir, 'config');
  fs.mkdirSync(configDir, { recursive: true });
  const proc = await startAgainOnTakenPort(async () => {
    const ports = { frontend: await freePort(), http: await freePort(), history: await freePort(), matching: await freePort(), worker: await freePort() };
    const membership = { frontend: await freePort(), history: await freePort(), matching: await freePort(), worker: await freePort() };
    fs.writeFileSync(path.join(configDir, 'time-skipping.yaml'), stringify(serverConfig(ports, membership, configDir)));
    fs.writeFileSync(path.join(configDir, 'dynamicconfig.yaml'), stringify(dynamicConfig));
    const p = manage('temporal-time-skipping', timeSkippingServerBinary, ['--root', workDir, '--config', 'config', '--env', 'time-skipping', '--allow-no-auth', 'start'], {
      logFile: path.join(workDir, 'temporal.log'),
    });
    const address = `127.0.0.1:${ports.frontend}`;
    try {
      await waitFor('Temporal server (time skipping)', async () => /SERVING/.test((await temporalCli(address, ['operator', 'cluster', 'health'])).stdout), 60_000, p);
    } catch (err) {
      await p.stop();
      throw err;
    }
    return Object.assign(p, { address });
  }, () => true);
  // A run killed before its teardown leaves this server to the next run to stop.
  registerTestServers([proc.child.pid!]);
  await registerNamespace(proc.address, 'default', '24h', proc);
  return { address: proc.address, process: proc, stop: () => proc.stop() };
}

const dynamicConfig = {
  // The feature flag of the namespace (off by default): without it, a time-skipping config is refused.
  'frontend.WorkflowTimeSkippingEnabled': [{ value: true }],
  // Our search attributes are created just before the first workflow uses them.
  'system.forceSearchAttributesCacheRefreshOnRead': [{ value: true }],
  'limit.maxIDLength': [{ value: 1000 }],
  // A timer task is written at least this far in the future, so that the timer queue's reader
  // cannot miss it: 1 s by default, which would be the real time of every skipped timer.
  'history.timerProcessorMaxTimeShift': [{ value: '100ms' }],
};

type Ports = Record<'frontend' | 'http' | 'history' | 'matching' | 'worker', number>;
type MembershipPorts = Record<'frontend' | 'history' | 'matching' | 'worker', number>;

/** The server's static configuration: its development SQLite set-up (in memory), on loopback ports of its own. */
function serverConfig(ports: Ports, membership: MembershipPorts, configDir: string) {
  const datastore = { sql: { pluginName: 'sqlite', databaseName: 'default', connectAddr: 'localhost', connectProtocol: 'tcp', connectAttributes: { mode: 'memory', cache: 'private' }, maxConns: 1, maxIdleConns: 1, maxConnLifetime: '1h' } };
  const service = (grpcPort: number, membershipPort: number, extra: Record<string, unknown> = {}) => ({ rpc: { grpcPort, membershipPort, bindOnIP: '127.0.0.1', ...extra } });
  return {
    log: { stdout: true, level: 'warn' },
    persistence: { defaultStore: 'sqlite-default', visibilityStore: 'sqlite-visibility', numHistoryShards: 1, datastores: { 'sqlite-default': datastore, 'sqlite-visibility': datastore } },
    global: { membership: { maxJoinDuration: '30s', broadcastAddress: '127.0.0.1' } },
    services: {
      frontend: service(ports.frontend, membership.frontend, { httpPort: ports.http }),
      history: service(ports.history, membership.history),
      matching: service(ports.matching, membership.matching),
      worker: service(ports.worker, membership.worker),
    },
    clusterMetadata: {
      enableGlobalNamespace: false,
      failoverVersionIncrement: 10,
      masterClusterName: 'active',
      currentClusterName: 'active',
      clusterInformation: { active: { enabled: true, initialFailoverVersion: 1, rpcName: 'frontend', rpcAddress: `127.0.0.1:${ports.frontend}`, httpAddress: `127.0.0.1:${ports.http}` } },
    },
    dcRedirectionPolicy: { policy: 'noop' },
    dynamicConfigClient: { filepath: path.join(configDir, 'dynamicconfig.yaml'), pollInterval: '10s' },
  };
}

const { FastForwardPollingResult } = proto.temporal.api.enums.v1;

/**
 * Lets one workflow's clock run ahead by `ms` (a fast-forward), skipping its timers whenever it
 * is idle, and waits until its clock got there: then time skipping is off again and the
 * workflow's clock runs with the wall clock. Fails when the workflow closes before that time.
 */
export async function fastForward(client: Client, workflowId: string, ms: number): Promise<void> {
  const namespace = client.options.namespace;
  const id = `${workflowId}-${Date.now()}`;
  await client.workflowService.updateWorkflowExecutionOptions({
    namespace,
    workflowExecution: { workflowId },
    workflowExecutionOptions: { timeSkippingConfig: { enabled: true, fastForwardConfig: { id, duration: proto.google.protobuf.Duration.fromObject({ seconds: Math.floor(ms / 1000), nanos: (ms % 1000) * 1e6 }) } } },
    updateMask: { paths: ['time_skipping_config'] },
  });
  for (;;) {
    // A long poll: it answers when the fast-forward completed or failed, or after its own timeout.
    const r = await client.workflowService.pollWorkflowExecutionTimeSkipping({ namespace, workflowExecution: { workflowId }, fastForwardId: id });
    if (r.fastForwardPollingResult === FastForwardPollingResult.FAST_FORWARD_POLLING_RESULT_FAST_FORWARD_COMPLETED) return;
    if (r.fastForwardPollingResult === FastForwardPollingResult.FAST_FORWARD_POLLING_RESULT_FAST_FORWARD_FAILED) throw new Error(`fast-forward of ${workflowId} by ${ms} ms failed: ${r.failedReason}`);
  }
}

/** Skips one workflow's time from now on, timer after timer, until it closes (or its skip budget is used up). */
export async function skipTimeUntilClosed(client: Client, workflowId: string): Promise<void> {
  await client.workflowService.updateWorkflowExecutionOptions({
    namespace: client.options.namespace,
    workflowExecution: { workflowId },
    workflowExecutionOptions: { timeSkippingConfig: { enabled: true } },
    updateMask: { paths: ['time_skipping_config'] },
  });
}
