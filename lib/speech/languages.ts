/** The `language` values of spec 4.3 (besides `auto`): short codes only. */
export const speechLanguages = ['en', 'es', 'fr', 'de', 'it', 'pt', 'pl', 'ru', 'nl', 'ar', 'zh-cn', 'ja', 'ko', 'hi', 'he'] as const;
export type SpeechLanguage = (typeof speechLanguages)[number];

export const isSpeechLanguage = (code: string): code is SpeechLanguage => (speechLanguages as readonly string[]).includes(code);

/**
 * The espeak-ng voice that speaks each language. Mandarin is `cmn-latn-pinyin` (Debian's `cmn`
 * reads tone digits in English); Japanese text is converted to kana first (kakasi), because the
 * `ja` voice reads kanji as "Chinese letter".
 */
export const espeakVoiceOf: Record<SpeechLanguage, string> = {
  en: 'en-us', es: 'es', fr: 'fr-fr', de: 'de', it: 'it', pt: 'pt-br', pl: 'pl', ru: 'ru', nl: 'nl',
  ar: 'ar', 'zh-cn': 'cmn-latn-pinyin', ja: 'ja', ko: 'ko', hi: 'hi', he: 'he',
};

/** BCP 47 tags for Intl.Segmenter (sentence boundaries). */
export const localeOf = (language: SpeechLanguage | null) => (language === 'zh-cn' ? 'zh-CN' : language ?? 'en');
