/** Storage keys of a transcript's audio (all removed when the transcript finishes). */
export const transcriptFiles = {
  prefix: (transcriptId: string) => `transcripts/${transcriptId}/`,
  original: (transcriptId: string, extension: string) => `transcripts/${transcriptId}/original.${extension}`,
  segment: (transcriptId: string, index: number) => `transcripts/${transcriptId}/segments/${index}.wav`,
};

/** Containers an upload or a downloaded `audio_url` may be, with the extension the original is stored under. */
export const acceptedContainers = { mp3: 'mp3', wav: 'wav', ogg: 'ogg', flac: 'flac', 'iso-media': 'mp4', webm: 'webm' } as const;
export type AcceptedContainer = keyof typeof acceptedContainers;

/** Storage keys of files sent to POST /v2/upload, under their partner (removed with it) or `admin`. */
export const audioUploadFiles = {
  prefixOf: (partnerId: string | null) => `audio-uploads/${partnerId ?? 'admin'}/`,
  file: (partnerId: string | null, uploadId: string, kind: AcceptedContainer) => `audio-uploads/${partnerId ?? 'admin'}/${uploadId}.${acceptedContainers[kind]}`,
};
