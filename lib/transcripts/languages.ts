import type { LanguageRequest, SttLanguage } from '../providers/speech-to-text.js';

/** The `language_code` values of spec 4.2. */
export const transcriptLanguageCodes = ['en', 'en_us', 'en_uk', 'en_au', 'es', 'fr', 'de', 'id', 'it', 'ja', 'nl', 'pl', 'pt', 'ru', 'tr', 'uk', 'ca'] as const;
export type TranscriptLanguageCode = (typeof transcriptLanguageCodes)[number];

/**
 * What the engine is asked for: the regional English codes are English (the engines take ISO
 * 639-1; PocketSphinx reads every English with its US model), `language_auto` asks the engine to
 * identify the language itself.
 */
export function engineLanguage(code: string, auto: boolean): LanguageRequest {
  if (auto) return 'auto';
  return (code.startsWith('en') ? 'en' : code) as SttLanguage;
}
