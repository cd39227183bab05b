import crypto from 'node:crypto';
import pg from 'pg';
import type { Document } from '../../generated/prisma/client.js';
import { Prisma, type Db } from '../platform/db.js';
import { AppError } from '../platform/errors.js';
import { GroupCommit } from '../platform/group-commit.js';
import { RecentLookups } from '../platform/recent-lookups.js';
import { findLiveFolder } from './lookup.js';

/**
 * Where new documents go and how they get there, on the creation hot path (issue #20):
 *
 * - **Destinations** (partner, KB and folder by the names of the request) are looked up once and
 *   reused for DESTINATION_CACHE_SECONDS (lib/platform/recent-lookups.ts). A cached destination only
 *   saves the lookup: the insert itself checks, under the rows' locks, that it is still live.
 * - **Inserts** run as node-postgres statements (Prisma's per-statement work cost more than the
 *   statement), grouped: the documents of one destination whose creations arrive while a statement of
 *   that destination is in flight go together in the next one (lib/platform/group-commit.ts). They
 *   would wait anyway: the max_documents trigger updates the partner's row, so a partner's inserts
 *   take turns on that row until each commit's WAL flush; grouped, one flush serves them all. When the
 *   trigger refuses a group (the limit is near), its documents are inserted again one at a time in
 *   arrival order, so the ones that fit are created and each of the others is refused on its own.
 * - **Liveness under lock.** The statement inserts only while the partner, the KB and the folder are
 *   not being deleted (and the partner has its name and, for audio, video and video URLs,
 *   allow_audio_video), holding the partner's row (FOR NO KEY UPDATE, as the trigger would next) and
 *   the KB's and folder's (FOR SHARE): a deletion that marks them waits for the insert's commit and
 *   then marks the new documents too, or the insert waits for the deletion's commit and inserts
 *   nothing. The partner's row is locked first, as the trigger and a partner's deletion lock it, so
 *   neither can deadlock with the other.
 */

/** A new document's row, as Prisma would take it; its id is chosen before the insert (files are stored under it). */
export type NewDocument = Prisma.DocumentCreateManyInput & { id: string };

/** Where new documents of one request go: partner, KB and folder, found live. */
export type Destination = Awaited<ReturnType<typeof findLiveFolder>>;

/** How long a destination's lookup is reused: the insert checks it again, so this bounds nothing but how often it is looked up. */
const DESTINATION_CACHE_SECONDS = 5;
const destinations = new RecentLookups<Destination>();
const destinationKey = (partner: string, kb: string, folder: string) => JSON.stringify([partner, kb, folder]);

/** Whether a lookup failed because there is no such live destination (its refusal is answered by findLiveFolder itself). */
const refusal = (err: unknown) => err instanceof AppError;

/** The live destination of `partner`/`kb`/`folder`, looked up at most every few seconds; a 404 or 409 when there is none. */
export async function liveDestination(db: Db, partner: string, kb: string, folder: string): Promise<Destination> {
  const found = await destinations.find(destinationKey(partner, kb, folder), DESTINATION_CACHE_SECONDS, () =>
    findLiveFolder(db, partner, kb, folder).catch((err: unknown) => (refusal(err) ? null : Promise.reject(err))),
  );
  return found ?? findLiveFolder(db, partner, kb, folder);
}

/** Forgets a destination the database no longer takes documents into. */
function forgetDestination(dest: Destination): void {
  destinations.forget((d) => d.folder.id === dest.folder.id);
}

/** Result columns as Prisma reads them: `timestamp(3)` columns hold UTC, decimals are Decimal. */
const documentTypes = {
  getTypeParser(oid: number, format?: string) {
    if (oid === pg.types.builtins.TIMESTAMP) return (value: string) => new Date(`${value.replace(' ', 'T')}Z`);
    if (oid === pg.types.builtins.NUMERIC) return (value: string) => new Prisma.Decimal(value);
    return pg.types.getTypeParser(oid, format as 'text');
  },
} as pg.CustomTypesConfig;

const quoted = (column: string) => `"${column.replace(/"/g, '""')}"`;

/** The statement inserting rows of these columns into a live destination: one per column set, each prepared once per connection. */
const statements = new Map<string, { name: string; text: string }>();
function insertStatement(columns: string[]): { name: string; text: string } {
  const signature = columns.join(',');
  let statement = statements.get(signature);
  if (!statement) {
    statement = { name: `document-insert-${crypto.createHash('sha256').update(signature).digest('hex').slice(0, 16)}`, text: insertStatementText(columns) };
    statements.set(signature, statement);
  }
  return statement;
}

function insertStatementText(columns: string[]): string {
  const list = columns.map(quoted).join(', ');
  return `
    WITH live AS (
      SELECT p.id FROM partners p
      JOIN knowledge_bases k ON k."partnerId" = p.id
      JOIN folders f ON f."knowledgeBaseId" = k.id
      WHERE p.id = $1::uuid AND p.name = $2 AND k.id = $3::uuid AND f.id = $4::uuid
        AND p."deletionRequestedAt" IS NULL AND k."deletionRequestedAt" IS NULL AND f."deletionRequestedAt" IS NULL
        AND (p."allowAudioVideo" OR NOT $5::boolean)
      FOR NO KEY UPDATE OF p FOR SHARE OF k, f
    )
    INSERT INTO documents (${list}, "updatedAt")
    SELECT ${list}, now() AT TIME ZONE 'UTC' FROM jsonb_populate_recordset(NULL::documents, $6::jsonb)
    WHERE EXISTS (SELECT 1 FROM live)
    RETURNING *`;
}

interface InsertBatchKey {
  dest: Destination;
  audioVideo: boolean;
  columns: string[];
}

const insertersOf = new WeakMap<Db, GroupCommit<string, { key: InsertBatchKey; row: NewDocument }, Document | null>>();

function inserter(db: Db) {
  let batcher = insertersOf.get(db);
  if (!batcher) {
    batcher = new GroupCommit(
      async (_key, items) => {
        const { dest, audioVideo, columns } = items[0]!.key;
        const { rows } = await db.pool.query<Document>({
          ...insertStatement(columns),
          values: [dest.partner.id, dest.partner.name, dest.kb.id, dest.folder.id, audioVideo, JSON.stringify(items.map((i) => i.row))],
          types: documentTypes,
        });
        const byId = new Map(rows.map((r) => [r.id, r]));
        return items.map((i) => byId.get(i.row.id) ?? null);
      },
      { retryAlone: true },
    );
    insertersOf.set(db, batcher);
  }
  return batcher;
}

/**
 * Inserts a new document into `dest` if it is still live (grouped with the creations of the same
 * destination in flight; see above): the row as the database holds it, or null when the
 * destination is no longer live (being deleted, renamed, or audio/video no longer allowed) and
 * nothing was inserted. A refusal of max_documents is thrown (quotaRefusal reads it).
 */
export function insertIntoLiveDestination(db: Db, dest: Destination, row: NewDocument, options: { audioVideo: boolean }): Promise<Document | null> {
  const columns = Object.keys(row).filter((c) => row[c as keyof NewDocument] !== undefined).sort();
  const key = JSON.stringify([dest.partner.id, dest.partner.name, dest.kb.id, dest.folder.id, options.audioVideo, columns]);
  return inserter(db)
    .submit(key, { key: { dest, audioVideo: options.audioVideo, columns }, row })
    .then((created) => {
      if (!created) forgetDestination(dest);
      return created;
    });
}
