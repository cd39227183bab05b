import { open } from 'node:fs/promises';
import { AppError, badRequest } from '../platform/errors.js';
import { sniffAudioContainer } from '../audio/signatures.js';
import { acceptedContainers, type AcceptedContainer } from './files.js';

/** A file a client sent: an `audio` form file, or the body of POST /v2/upload. */
export interface TranscriptUpload {
  path: string;
  /** The client's file name; '' when it gave none. */
  originalName: string;
  size: number;
}

/** The largest upload (spec: 100 MB), also the bound on a downloaded `audio_url`. */
export const maxTranscriptUploadBytes = 100 * 1024 * 1024;

/** The transcription interface's 422: `{message, errors: {<field>: [...]}}`. */
export const invalid = (field: string, message: string) => badRequest(`The request is invalid: ${field} ${message}`, { fieldErrors: { [field]: [message] } });

/** A URL the worker will fetch or call: http or https only, else a 422 on `field`. */
export function requireHttpUrl(field: string, url: string): void {
  if (!/^https?:\/\//i.test(url)) throw invalid(field, 'must be an http or https URL');
}

/** The transcription interface's 429 (a rate or a concurrency limit), with Retry-After. */
export const tooMany = (message: string, retryAfterSeconds: number) => new AppError('rate_limited', message, { retryAfterSeconds });

/** Extensions a client may give its upload, and the container each must hold. */
const extensionFamilies: Record<string, AcceptedContainer[]> = {
  mp3: ['mp3'], wav: ['wav'], ogg: ['ogg'], oga: ['ogg'], opus: ['ogg'], flac: ['flac'], m4a: ['iso-media'], mp4: ['iso-media'], webm: ['webm'],
};
const supportedList = 'mp3, wav, ogg, flac, m4a, mp4, webm';

const containerLabels: Record<string, string> = {
  mp3: 'an MP3 file', wav: 'a WAV file', ogg: 'an Ogg file', flac: 'a FLAC file', 'iso-media': 'an MP4/M4A file', webm: 'a WebM file', matroska: 'a Matroska (MKV) file',
};

/** What the upload is, by its first bytes; its extension (if it has a known one) must agree. */
export async function checkUpload(upload: TranscriptUpload, field = 'audio'): Promise<AcceptedContainer> {
  const fh = await open(upload.path, 'r');
  let head: Buffer;
  try {
    head = Buffer.alloc(64 * 1024);
    const { bytesRead } = await fh.read(head, 0, head.length, 0);
    head = head.subarray(0, bytesRead);
  } finally {
    await fh.close();
  }
  // Named by the client's file name; a file without one is the field itself ("file is empty").
  const name = upload.originalName ? `${upload.originalName} ` : '';
  if (head.length === 0) throw invalid(field, `${name}is empty`);
  const found = sniffAudioContainer(head);
  if (!found || !(found in acceptedContainers)) {
    const what = found ? containerLabels[found] : head.subarray(0, 5).toString('latin1') === '%PDF-' ? 'a PDF' : null;
    throw invalid(field, `${name}is ${what ?? 'not an audio file this service recognises'}${what ? ', not a supported audio file' : ''} (${supportedList})`);
  }
  const ext = /\.([A-Z0-9]{1,5})$/i.exec(upload.originalName)?.[1]?.toLowerCase();
  const family = ext ? extensionFamilies[ext] : undefined;
  if (family && !family.includes(found as AcceptedContainer)) throw invalid(field, `${name}is ${containerLabels[found]}, not a .${ext} file`);
  return found as AcceptedContainer;
}
