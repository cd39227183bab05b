/** Shared shapes of the text extractors (`documents.ts`, `media.ts`). */

/** A file whose text cannot be read; the message is a clear reason meant for the user. */
export class UnreadableDocument extends Error {
  override name = 'UnreadableDocument';
}

export interface Extracted {
  text: string;
  title?: string | null;
}

export type Extractor = (filePath: string, extension: string) => Promise<Extracted>;
