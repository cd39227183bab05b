/**
 * Audio and video containers recognised by their first bytes (shared by the upload checks of
 * documents, transcripts and voices):
 * mp3 (an ID3v2 tag or an MPEG Layer III frame), wav (RIFF/WAVE), ogg (OggS), flac (fLaC),
 * iso-media (an ISO BMFF `ftyp` box: mp4, m4a, mov), webm / matroska (EBML, by its DocType).
 */
export type AudioContainer = 'mp3' | 'wav' | 'ogg' | 'flac' | 'iso-media' | 'webm' | 'matroska';

const ascii = (buf: Buffer, start: number, end: number) => buf.toString('latin1', start, end);

/** An ID3v2 tag header: "ID3", version 2-4, a revision, flags and a four-byte syncsafe size. */
export function isId3Header(head: Buffer): boolean {
  if (head.length < 10 || ascii(head, 0, 3) !== 'ID3') return false;
  const version = head[3]!;
  if (version < 2 || version > 4 || head[4] === 0xff) return false;
  for (let i = 6; i < 10; i++) if (head[i]! >= 0x80) return false;
  return true;
}

/** An MPEG audio Layer III frame header (the frame sync FF Ex/Fx with valid fields). */
export function isMp3FrameHeader(head: Buffer): boolean {
  if (head.length < 4 || head[0] !== 0xff) return false;
  const b1 = head[1]!;
  const b2 = head[2]!;
  if ((b1 & 0xe0) !== 0xe0) return false;
  if (((b1 >> 3) & 0x03) === 0x01) return false; // reserved MPEG version
  if (((b1 >> 1) & 0x03) !== 0x01) return false; // Layer III only
  if (b2 >> 4 === 0x0f) return false; // bad bitrate index
  if (((b2 >> 2) & 0x03) === 0x03) return false; // reserved sample rate
  return true;
}

/** An ISO BMFF `ftyp` box at the start: a plausible size and the type at offset 4. */
export function isFtypBox(head: Buffer): boolean {
  if (head.length < 12 || ascii(head, 4, 8) !== 'ftyp') return false;
  const size = head.readUInt32BE(0);
  return size >= 8 && size <= 4096 && size % 4 === 0;
}

/** EBML (Matroska / WebM): its DocType element (0x4282) names which. */
function ebmlDocType(head: Buffer): 'webm' | 'matroska' | null {
  if (head.length < 4 || head.readUInt32BE(0) !== 0x1a45dfa3) return null;
  const at = head.subarray(0, Math.min(head.length, 64)).indexOf(Buffer.from([0x42, 0x82]));
  if (at < 0) return 'matroska';
  const size = head[at + 2]! & 0x7f; // a one-byte size (0x80 | n) is what writers use
  return ascii(head, at + 3, at + 3 + size) === 'webm' ? 'webm' : 'matroska';
}

/** The audio/video container of a file's first bytes, or null. */
export function sniffAudioContainer(head: Buffer): AudioContainer | null {
  if (head.length >= 12 && ascii(head, 0, 4) === 'RIFF' && ascii(head, 8, 12) === 'WAVE') return 'wav';
  if (head.length >= 4 && ascii(head, 0, 4) === 'OggS') return 'ogg';
  if (head.length >= 4 && ascii(head, 0, 4) === 'fLaC') return 'flac';
  if (isFtypBox(head)) return 'iso-media';
  const ebml = ebmlDocType(head);
  if (ebml) return ebml;
  if (isId3Header(head) || isMp3FrameHeader(head)) return 'mp3';
  return null;
}
