import { XMLParser } from 'fast-xml-parser';
import { readBoundedBody } from './web-fetch.js';
import { connectionFailed, isUnavailableStatus, ServiceUnavailable } from './service-unavailable.js';

/**
 * Transcripts of videos on a video platform: a video URL document is digitized from its
 * transcript (no video is downloaded). The YouTube adapter speaks the platform's timedtext and
 * oEmbed endpoints: `GET /api/timedtext?type=list&v=<id>` lists caption tracks,
 * `GET /api/timedtext?v=<id>&lang=<code>` returns one as `<transcript><text start dur>…</text>`,
 * `GET /oembed?url=<video url>&format=json` gives the title. The base URL is configuration
 * (VIDEO_PLATFORM_BASE_URL), never taken from the user's URL, so no user input chooses the host.
 */
export interface VideoTranscript {
  videoId: string;
  title: string | null;
  language: string | null;
  text: string;
}

export class TranscriptUnavailable extends Error {
  override name = 'TranscriptUnavailable';
}

export interface VideoTranscriptSource {
  /** Null when the URL is not a video of this platform. */
  videoId(url: string): string | null;
  fetchTranscript(url: string): Promise<VideoTranscript>;
}

const ID = /^[\w-]{6,20}$/;

export function youTubeVideoId(url: string): string | null {
  let u: URL;
  try {
    u = new URL(url);
  } catch {
    return null;
  }
  const host = u.hostname.toLowerCase().replace(/^(www\.|m\.|music\.)/, '');
  let id: string | null = null;
  if (host === 'youtu.be') id = u.pathname.split('/')[1] ?? null;
  else if (host === 'youtube.com' || host === 'youtube-nocookie.com') {
    if (u.pathname === '/watch') id = u.searchParams.get('v');
    else {
      const m = /^\/(?:shorts|live|embed|v)\/([^/?#]+)/.exec(u.pathname);
      id = m?.[1] ?? null;
    }
  }
  return id && ID.test(id) ? id : null;
}

const parser = new XMLParser({ ignoreAttributes: false, attributeNamePrefix: '', textNodeName: '#text', processEntities: true, htmlEntities: true, isArray: (name) => name === 'text' || name === 'track' });

/** Caption lines to readable paragraphs: a pause of over 2 s, or ~600 characters, starts a new one. */
export function transcriptToText(lines: Array<{ start: number; dur: number; text: string }>): string {
  const paragraphs: string[] = [];
  let current = '';
  let lastEnd = 0;
  for (const line of lines) {
    const text = line.text.replace(/\s+/g, ' ').trim();
    if (!text) continue;
    if (current && (line.start - lastEnd > 2 || current.length > 600)) {
      paragraphs.push(current);
      current = '';
    }
    current = current ? `${current} ${text}` : text;
    lastEnd = line.start + line.dur;
  }
  if (current) paragraphs.push(current);
  return paragraphs.join('\n\n');
}

export class YouTubeTranscripts implements VideoTranscriptSource {
  constructor(private readonly options: { baseUrl: string; timeoutMs?: number; language?: string }) {}

  videoId(url: string): string | null {
    return youTubeVideoId(url);
  }

  /** A platform page; a platform that cannot be reached or answers 408, 429 or 5xx is ServiceUnavailable. */
  private async get(path: string): Promise<Response> {
    let res: Response;
    try {
      res = await fetch(`${this.options.baseUrl}${path}`, { signal: AbortSignal.timeout(this.options.timeoutMs ?? 30_000), redirect: 'follow' });
    } catch (err) {
      if (connectionFailed(err)) throw new ServiceUnavailable(`the video platform could not be reached: ${(err as Error).message}`);
      throw err;
    }
    if (isUnavailableStatus(res.status)) {
      await res.body?.cancel();
      throw new ServiceUnavailable(`the video platform answered HTTP ${res.status}`);
    }
    return res;
  }

  /** A platform answer's text, at most 16 MiB (a caption track is far smaller). */
  private async text(res: Response): Promise<string> {
    return (await readBoundedBody(res, 16 * 1024 * 1024, () => new TranscriptUnavailable('the video platform answered with more than 16 MiB'))).toString('utf8');
  }

  async fetchTranscript(url: string): Promise<VideoTranscript> {
    const videoId = this.videoId(url);
    if (!videoId) throw new TranscriptUnavailable(`${url} is not a video URL this service can read`);
    const list = await this.get(`/api/timedtext?type=list&v=${videoId}`);
    if (!list.ok) throw new TranscriptUnavailable(`the video platform has no captions for ${videoId} (HTTP ${list.status})`);
    const tracks: Array<{ lang_code?: string; name?: string; lang_default?: string; kind?: string }> = parser.parse(await this.text(list))?.transcript_list?.track ?? [];
    if (tracks.length === 0) throw new TranscriptUnavailable(`video ${videoId} has no transcript`);
    const preferred = this.options.language;
    const track = tracks.find((t) => preferred && t.lang_code === preferred) ?? tracks.find((t) => t.lang_default === 'true') ?? tracks[0]!;
    const query = new URLSearchParams({ v: videoId, lang: track.lang_code ?? '' });
    if (track.name) query.set('name', track.name);
    if (track.kind) query.set('kind', track.kind);
    const res = await this.get(`/api/timedtext?${query}`);
    if (!res.ok) throw new TranscriptUnavailable(`the transcript of ${videoId} could not be read (HTTP ${res.status})`);
    const lines = (parser.parse(await this.text(res))?.transcript?.text ?? []).map((t: { start?: string; dur?: string; '#text'?: string | number } | string) =>
      typeof t === 'string' ? { start: 0, dur: 0, text: t } : { start: Number(t.start ?? 0), dur: Number(t.dur ?? 0), text: String(t['#text'] ?? '') },
    );
    const text = transcriptToText(lines);
    if (!text.trim()) throw new TranscriptUnavailable(`the transcript of ${videoId} is empty`);
    let title: string | null = null;
    try {
      const meta = await this.get(`/oembed?format=json&url=${encodeURIComponent(`https://www.youtube.com/watch?v=${videoId}`)}`);
      if (meta.ok) title = (JSON.parse(await this.text(meta)) as { title?: string }).title ?? null;
    } catch {
      // The title is a nicety: the URL stays the name without it.
    }
    return { videoId, title, language: track.lang_code ?? null, text };
  }
}
