/**
 * What every speech-to-text engine is: the contract of lib/providers/speech-to-text.ts (which picks
 * the engine) and of each engine's module.
 */
/** Languages an engine may be asked for (ISO 639-1), `auto` (the engine identifies it) or `default` (its own). */
export const sttLanguages = ['en', 'es', 'fr', 'de', 'id', 'it', 'ja', 'nl', 'pl', 'pt', 'ru', 'tr', 'uk', 'ca'] as const;
export type SttLanguage = (typeof sttLanguages)[number];
export type LanguageRequest = SttLanguage | 'auto' | 'default';

export interface SegmentRequest {
  /** 16 kHz mono s16 WAV of one segment. */
  wavPath: string;
  language: LanguageRequest;
  boostedWords?: readonly string[];
  /** Ask the engine to keep hesitations (uh, um); the text formatter removes them otherwise. */
  fillerWords?: boolean;
  signal?: AbortSignal;
}

/** A recognised word: text, start and end (seconds from the segment start), confidence (0-1, null: unknown). */
export interface RecognizedWord {
  w: string;
  s: number;
  e: number;
  c: number | null;
  /** The last word of an utterance (the engine heard the speaker stop). */
  end?: boolean;
  /** The engine wrote the word with its capitals and punctuation (Moonshine: "Hello," "test."); else lower-case letters only. */
  formatted?: boolean;
}

export interface SegmentResult {
  /** The engine's text, as it gives it. */
  text: string;
  /** Words with times (local engine); null when the engine gives text only. */
  words: RecognizedWord[] | null;
}

export interface SpeechToTextEngine {
  /** `pocketsphinx` or `openai:<model>`. */
  readonly id: string;
  /** A phrase for messages, e.g. "the local PocketSphinx engine (English only)". */
  readonly description: string;
  /** Longest segment one call takes. */
  readonly maxSegmentSeconds: number;
  supports(language: LanguageRequest): boolean;
  transcribeSegment(req: SegmentRequest): Promise<SegmentResult>;
}

/** The engine cannot transcribe the requested language: final. */
export class UnsupportedLanguage extends Error {
  override name = 'UnsupportedLanguage';
}

/** Refuses a segment in a language the engine cannot transcribe, saying which and why. */
export function assertLanguageSupported(engine: SpeechToTextEngine, language: LanguageRequest): void {
  if (engine.supports(language)) return;
  throw new UnsupportedLanguage(
    language === 'auto' ? `automatic language detection is not available with ${engine.description}` : `language ${language} cannot be transcribed by ${engine.description}`,
  );
}

/** The provider refused the request (a 4xx other than 408/429): final, with its message. */
export class ProviderRefused extends Error {
  override name = 'ProviderRefused';
}
