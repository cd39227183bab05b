import type { Prisma } from '../platform/db.js';
import type { Principal } from '../platform/api-keys.js';
import { transcriptPath, type TranscriptStatus } from '../contracts/transcript.js';
import { invalid } from './audio-checks.js';
import { visibleTo, visibleTranscriptWhere, type TranscriptApiDeps } from './requests.js';

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
  // Newer pages are read oldest first from the anchor, then turned round: every page is newest first.
  const newerPage = cursorField === 'after_id';
  if (cursorField !== null && !query.throttled_only) {
    // Only what the cursor needs: the anchor's text and words may be megabytes.
    const anchorWhere = visibleTranscriptWhere(principal, uuidOf(query[cursorField]!));
    const anchor = anchorWhere ? await deps.db.transcript.findFirst({ where: anchorWhere, select: { id: true, createdAt: true } }) : null;
    if (!anchor) throw invalid(cursorField, 'names no transcript of this key (unknown, another partner\'s, or past its retention)');
    const at = anchor.createdAt;
    where.push(newerPage ? { OR: [{ createdAt: { gt: at } }, { createdAt: at, id: { gt: anchor.id } }] } : { OR: [{ createdAt: { lt: at } }, { createdAt: at, id: { lt: anchor.id } }] });
  }
  const order = newerPage ? 'asc' : 'desc';
  const found = query.throttled_only
    ? []
    : await deps.db.transcript.findMany({
        where: { AND: where },
        orderBy: [{ createdAt: order }, { id: order }],
        take: limit + 1,
        // Not the text and words: a page of long transcripts would read megabytes it does not show.
        select: { id: true, status: true, createdAt: true, finishedAt: true, audioUrl: true, error: true },
      });
  const more = found.length > limit;
  const rows = found.slice(0, limit);
  if (newerPage) rows.reverse();
  // Beyond a cursor lies its anchor: older than a newer page, newer than an older one.
  const hasOlder = newerPage ? rows.length > 0 : more;
  const hasNewer = newerPage ? more : cursorField === 'before_id';

  const pageUrl = (cursor: Record<string, string> | null) => {
    const params = new URLSearchParams();
    params.set('limit', String(limit));
    if (query.status) params.set('status', query.status);
    if (query.created_on) params.set('created_on', query.created_on);
    if (query.throttled_only) params.set('throttled_only', 'true');
    for (const [k, v] of Object.entries(cursor ?? {})) params.set(k, v);
    return `${origin}/v2/transcript?${params}`;
  };
  const first = rows[0];
  const last = rows.at(-1);
  return {
    page_details: {
      limit,
      result_count: rows.length,
      current_url: pageUrl(cursorField ? { [cursorField]: query[cursorField]! } : null),
      prev_url: hasOlder && last ? pageUrl({ before_id: transcriptPath(last.id) }) : null,
      next_url: hasNewer && first ? pageUrl({ after_id: transcriptPath(first.id) }) : null,
    },
    transcripts: rows.map((row) => ({
      id: transcriptPath(row.id),
      resource_url: `${origin}${transcriptPath(row.id)}`,
      status: row.status,
      created: row.createdAt.toISOString(),
      completed: row.status === 'completed' ? (row.finishedAt?.toISOString() ?? null) : null,
      audio_url: row.audioUrl,
      error: row.status === 'error' ? (row.error ?? 'transcription failed') : null,
    })),
  };
}
