import fs from 'node:fs';

/**
 * The service's version, from package.json, read once: `npm_package_version` is set only when the
 * process was started through npm, and scripts/start and the image start node directly.
 */
export const serviceVersion: string = (JSON.parse(fs.readFileSync(new URL('../../package.json', import.meta.url), 'utf8')) as { version: string }).version;
