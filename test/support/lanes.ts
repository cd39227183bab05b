import fs from 'node:fs';
import path from 'node:path';
import { repoRoot } from '../../scripts/stack.js';

/**
 * The test lanes (docs/testing.md). A lane is one mocha process with servers of its own: what it
 * starts is what its files need, and `scripts/test` runs the lanes side by side. A file belongs to
 * the lane with the longest path prefix that names it; a new file under a listed folder needs no
 * entry, and one that no prefix names would join the last lane, which starts every server.
 */
export type Needs =
  /** No server: pure code, and the machine's own tools (ffmpeg, tesseract, ...). */
  | 'nothing'
  /** A fresh migrated Postgres database of the lane's own, and its work directory. */
  | 'database'
  /** The whole test stack: that database, a Temporal dev server, Weaviate and the S3 object store. */
  | 'servers';

export interface Lane {
  name: string;
  needs: Needs;
  /** Repository-relative folders (ending in `/`) and files. */
  paths: string[];
}

export const lanes: readonly Lane[] = [
  {
    name: 'unit',
    needs: 'nothing',
    paths: [
      'test/unit/',
      'test/abuse/ssrf.test.ts',
      'test/budget/group-commit.test.ts',
      'test/deploy/compose.test.ts',
      'test/deploy/system-tools.test.ts',
      'test/messaging/sse.test.ts',
      'test/retrieval/analysis.test.ts',
      'test/retrieval/fusion.test.ts',
      'test/voices/uploads.test.ts',
    ],
  },
  {
    name: 'database',
    needs: 'database',
    paths: [
      'test/db/',
      'test/budget/ledger.property.test.ts',
      'test/messaging/quota-ledger.test.ts',
      'test/unit/rate-limit.test.ts',
      // These start servers of their own, in the lane's work directory.
      'test/deploy/server-start.test.ts',
      'test/deploy/temporal-visibility.test.ts',
    ],
  },
  // The two halves of the tests that need every server, each with a stack of its own, split by
  // their time (the "slowest" lines of scripts/test): the HTTP interfaces, and the pipelines.
  {
    name: 'interfaces',
    needs: 'servers',
    paths: ['test/api/', 'test/abuse/', 'test/messaging/', 'test/speech/', 'test/transcription/', 'test/voices/', 'test/dialog-analysis/'],
  },
  {
    name: 'pipelines',
    needs: 'servers',
    paths: ['test/'],
  },
];

const rank: Record<Needs, number> = { nothing: 0, database: 1, servers: 2 };

/** The lane of a test file, given as a path relative to the repository or absolute. */
export function laneOf(file: string): Lane {
  const relative = path.relative(repoRoot, path.resolve(repoRoot, file)).split(path.sep).join('/');
  let best: { lane: Lane; length: number } | undefined;
  for (const lane of lanes) {
    for (const p of lane.paths) {
      const matches = p.endsWith('/') ? relative.startsWith(p) : relative === p;
      if (matches && p.length > (best?.length ?? -1)) best = { lane, length: p.length };
    }
  }
  return best?.lane ?? lanes[lanes.length - 1]!;
}

/** What a run of these files must start: the most any of them needs. */
export function needsOf(files: Iterable<string>): Needs {
  let needs: Needs = 'nothing';
  for (const file of files) {
    const n = laneOf(file).needs;
    if (rank[n] > rank[needs]) needs = n;
  }
  return needs;
}

/** Every test file of the repository (test/**\/*.test.ts), repository-relative and sorted. */
export function allTestFiles(): string[] {
  const found: string[] = [];
  const walk = (dir: string) => {
    for (const entry of fs.readdirSync(path.join(repoRoot, dir), { withFileTypes: true })) {
      const p = `${dir}/${entry.name}`;
      if (entry.isDirectory()) walk(p);
      else if (entry.name.endsWith('.test.ts')) found.push(p);
    }
  };
  walk('test');
  return found.sort();
}

/** The files of a lane. */
export function laneFiles(lane: Lane): string[] {
  return allTestFiles().filter((f) => laneOf(f) === lane);
}
