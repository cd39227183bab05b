import type { ChildProcess } from 'node:child_process';

/** What each running worker (test/support/system.ts, startWorker) has printed so far. */
export const workerOutputs = new Map<ChildProcess, string[]>();

/**
 * The last warnings and errors the running workers logged: test/support/global.ts adds them to a
 * failed test's report, since a workflow that never finished has usually said why in its worker's log.
 */
export function workerComplaints(max = 12): string {
  const lines = [...workerOutputs.values()].flatMap((output) => output.filter((line) => /"level":"(?:warn|error)"|^\S*Error\b/.test(line)));
  return lines.slice(-max).map((line) => (line.length > 400 ? `${line.slice(0, 400)}...` : line)).join('\n');
}
