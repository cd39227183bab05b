import type { Prisma } from '../platform/db.js';
import type { Principal } from '../platform/api-keys.js';
import type { TranscriptStatus } from '../contracts/transcript.js';
import { invalid } from './audio-checks.js';
import { visibleTo, visibleTranscript, type TranscriptApiDeps } from './requests.js';

/**
 * GET /v2/transcript, AssemblyAI's `transcripts.list()`: the key's transcripts (every one for the
 * administrator key) still within their retention, newest first, a page at a time. `before_id`
 * pages to older ones, `after_id` to newer ones; the answer's `prev_url` (older) and `next_url`
 * (newer) are those pages, null when there is none at the moment of the request.
 */
export interface TranscriptListQuery {
  limit?: number;
  status?: TranscriptStatus;
  /** YYYY-MM-DD: transcripts created on that day (UTC). */
  created_on?: string;
  before_id?: string;
  after_id?: string;
  /** AssemblyAI's deprecated filter: nothing is throttled here, so `true` lists nothing. */
  throttled_only?: boolean;
}

const defaultLimit = 10;
const dayMs = 86_400_000;

/** An id as the API answers it (`/v2/transcript/<uuid>`) or the bare uuid. */
const uuidOf = (id: string) => id.replace(/^\/v2\/transcript\//, '');

export async function listTranscripts(deps: Pick<TranscriptApiDeps, 'db'>, principal: Principal, query: TranscriptListQuery, origin: string) {
  const limit = query.limit ?? defaultLimit;
  if (query.before_id !== undefined && query.after_id !== undefined) throw invalid('after_id', 'cannot be sent with before_id: page one way at a time');
  const where: Prisma.TranscriptWhereInput[] = [visibleTo(principal)];
  if (query.status) where.push({ status: query.status });
  if (query.created_on) {
    const day = new Date(`${query.created_on}T00:00:00Z`);
    if (Number.isNaN(day.getTime())) throw invalid('created_on', 'is not a date (YYYY-MM-DD)');
    where.push({ createdAt: { gte: day, lt: new Date(day.getTime() + dayMs) } });
  }

  const cursorField = query.before_id !== undefined ? 'before_id' : query.after_id !== undefined ? 'after_id' : null;
  let rows: Awaited<ReturnType<typeof deps.db.transcript.findMany>> = [];
  let hasOlder = false;
  let hasNewer = false;
  if (!query.throttled_only) {
    if (cursorField === null) {
      rows = await deps.db.transcript.findMany({ where: { AND: where }, orderBy: [{ createdAt: 'desc' }, { id: 'desc' }], take: limit + 1 });
      hasOlder = rows.length > limit;
    } else {
      const anchor = await visibleTranscript(deps, principal, uuidOf(query[cursorField]!)).catch(() => {
        throw invalid(cursorField, 'names no transcript of this key (unknown, another partner\'s, or past its retention)');
      });
      const at = anchor.createdAt;
      if (cursorField === 'before_id') {
        where.push({ OR: [{ createdAt: { lt: at } }, { createdAt: at, id: { lt: anchor.id } }] });
        rows = await deps.db.transcript.findMany({ where: { AND: where }, orderBy: [{ createdAt: 'desc' }, { id: 'desc' }], take: limit + 1 });
        hasOlder = rows.length > limit;
        hasNewer = true;
      } else {
        where.push({ OR: [{ createdAt: { gt: at } }, { createdAt: at, id: { gt: anchor.id } }] });
        rows = (await deps.db.transcript.findMany({ where: { AND: where }, orderBy: [{ createdAt: 'asc' }, { id: 'asc' }], take: limit + 1 })).reverse();
        hasNewer = rows.length > limit;
        if (hasNewer) rows = rows.slice(1);
        hasOlder = true;
      }
    }
    rows = rows.slice(0, limit);
  }

  const pageUrl = (cursor: Record<string, string> | null) => {
    const params = new URLSearchParams();
    params.set('limit', String(limit));
    if (query.status) params.set('status', query.status);
    if (query.created_on) params.set('created_on', query.created_on);
    if (query.throttled_only) params.set('throttled_only', 'true');
    for (const [k, v] of Object.entries(cursor ?? {})) params.set(k, v);
    return `${origin}/v2/transcript?${params}`;
  };
  const idOf = (row: { id: string }) => `/v2/transcript/${row.id}`;
  const first = rows[0];
  const last = rows.at(-1);
  return {
    page_details: {
      limit,
      result_count: rows.length,
      current_url: pageUrl(cursorField ? { [cursorField]: query[cursorField]! } : null),
      prev_url: hasOlder && last ? pageUrl({ before_id: idOf(last) }) : null,
      next_url: hasNewer && first ? pageUrl({ after_id: idOf(first) }) : null,
    },
    transcripts: rows.map((row) => ({
      id: idOf(row),
      resource_url: `${origin}${idOf(row)}`,
      status: row.status,
      created: row.createdAt.toISOString(),
      completed: row.status === 'completed' ? (row.finishedAt?.toISOString() ?? null) : null,
      audio_url: row.audioUrl,
      error: row.status === 'error' ? (row.error ?? 'transcription failed') : null,
    })),
  };
}
