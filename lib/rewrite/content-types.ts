import { isAudioVideo } from '../digitization/formats.js';
import type { RequestedContentType, RewriteContentType } from '../contracts/document-pipeline.js';

/** GET /api/content_types. */
export const contentTypeCatalog = [
  { id: 'auto', name: 'Auto-detect' },
  { id: 'article', name: 'Article' },
  { id: 'video', name: 'Video' },
  { id: 'book', name: 'Book' },
];

const VIDEO_HOSTS = ['youtube.com', 'youtu.be', 'vimeo.com', 'dailymotion.com', 'tiktok.com'];

function isVideoUrl(url: string | null | undefined): boolean {
  if (!url) return false;
  try {
    const host = new URL(url).hostname.toLowerCase().replace(/^(?:www\.|m\.)/, '');
    return VIDEO_HOSTS.some((h) => host === h || host.endsWith(`.${h}`));
  } catch {
    return false;
  }
}

/**
 * Spec 4.5: video URLs and audio (and video) files use `video`; PDF, EPUB and Word documents use
 * `book`; everything else uses `article`.
 */
export function resolveContentType(requested: RequestedContentType, doc: { type: string; url: string | null; originalExtension: string | null }): RewriteContentType {
  if (requested !== 'auto') return requested;
  if (doc.type === 'url') return isVideoUrl(doc.url) ? 'video' : 'article';
  const ext = doc.originalExtension ?? '';
  if (isAudioVideo(ext)) return 'video';
  if (['pdf', 'epub', 'doc', 'docx'].includes(ext)) return 'book';
  return 'article';
}
