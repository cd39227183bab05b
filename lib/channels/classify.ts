import type { VideoDetails } from '../providers/video-data-api.js';

/**
 * What a channel source does with one video of the uploads list (spec 2.4): regular videos,
 * shorts and completed livestreams (and premieres) are imported; live and upcoming streams, and
 * uploads still being processed, are deferred until they end; private, failed, rejected and
 * deleted uploads are not recorded at all (they are imported once they become public). Shorts
 * need no telling apart: they are in the uploads list and import like any video.
 */
export type VideoDecision =
  | { decision: 'import'; liveState: 'none' | 'completed'; durationSeconds: number | null }
  | { decision: 'defer'; liveState: 'live' | 'upcoming' | 'processing'; durationSeconds: number | null }
  | { decision: 'skip' };

const DURATION = /^P(?:(\d+)W)?(?:(\d+)D)?(?:T(?:(\d+)H)?(?:(\d+)M)?(?:(\d+(?:\.\d+)?)S)?)?$/;

/** Seconds of an ISO 8601 duration as the Data API writes it (`PT1H2M3S`, `P0D`), or null. */
export function isoDurationSeconds(value: string | null | undefined): number | null {
  if (!value) return null;
  const m = DURATION.exec(value);
  if (!m || value === 'P' || value.endsWith('T')) return null;
  const [, w, d, h, min, s] = m.map((x) => (x === undefined ? 0 : Number(x)));
  return Math.round(w! * 604800 + d! * 86400 + h! * 3600 + min! * 60 + s!);
}

/** The decision for a video of the uploads list; `details` missing means deleted or private. */
export function classifyVideo(details: VideoDetails | undefined): VideoDecision {
  if (!details) return { decision: 'skip' };
  if (details.privacyStatus === 'private') return { decision: 'skip' };
  if (details.uploadStatus === 'failed' || details.uploadStatus === 'rejected' || details.uploadStatus === 'deleted') return { decision: 'skip' };
  const durationSeconds = isoDurationSeconds(details.duration);
  const live = details.liveBroadcastContent;
  if (live === 'live' || live === 'upcoming') return { decision: 'defer', liveState: live, durationSeconds };
  const stream = details.liveStreamingDetails;
  if (stream && !stream.actualEndTime && live !== 'completed') {
    return { decision: 'defer', liveState: stream.actualStartTime ? 'live' : 'upcoming', durationSeconds };
  }
  if (details.uploadStatus === 'uploaded') return { decision: 'defer', liveState: 'processing', durationSeconds };
  return { decision: 'import', liveState: stream ? 'completed' : 'none', durationSeconds };
}
