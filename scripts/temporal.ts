import { spawn } from 'node:child_process';
import fs from 'node:fs';
import { ConfigError, temporalConnection } from '../lib/platform/config.js';
import { binaries } from './stack.js';

/**
 * `npm run temporal -- <args>`: the Temporal CLI that scripts/build-tools.sh built, pointed at the
 * system's Temporal. The CLI reads TEMPORAL_ADDRESS and TEMPORAL_NAMESPACE itself (a `--address`
 * or `--namespace` flag wins over them); this sets both to what the services use
 * (lib/platform/config.ts: 127.0.0.1:7233 and `default` unless set), so every operator command of
 * docs/operations.md works as written. Its exit status is the CLI's.
 */
const args = process.argv.slice(2);
if (!fs.existsSync(binaries.temporal)) {
  process.stderr.write(`the Temporal CLI is not built (${binaries.temporal}): run scripts/setup.sh (or scripts/build-tools.sh)\n`);
  process.exit(127);
}
let connection: { address: string; namespace: string };
try {
  connection = temporalConnection(process.env);
} catch (err) {
  if (!(err instanceof ConfigError)) throw err;
  process.stderr.write(`configuration error: ${err.message}\n`);
  process.exit(78);
}

const child = spawn(binaries.temporal, args, {
  stdio: 'inherit',
  env: { ...process.env, TEMPORAL_ADDRESS: connection.address, TEMPORAL_NAMESPACE: connection.namespace },
});
// Ctrl-C reaches the CLI through the terminal's process group; a signal sent to this process alone is passed on.
for (const signal of ['SIGINT', 'SIGTERM', 'SIGHUP'] as const) process.on(signal, () => child.kill(signal));
child.once('error', (err) => {
  process.stderr.write(`could not run ${binaries.temporal}: ${err.message}\n`);
  process.exit(126);
});
child.once('exit', (code, signal) => process.exit(code ?? (signal ? 128 : 1)));
