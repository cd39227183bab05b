/**
 * Text to speech, for /v2/audio/speech and for the voice interface's test samples: the built-in
 * voices, one-shot local synthesis, language detection, and the lookup of a partner's voices that
 * the voice interface implements.
 */
export { builtInVoices, findBuiltInVoice, type BuiltInVoice, type LocalEngine, type PartnerVoice, type PartnerVoiceSource } from './voices.js';
export { synthesize, SpeechService, OUTPUT_SAMPLE_RATE, type SpeechInput, type SpeechOutput, type ResolvedVoice, type LanguageChoice } from './synthesize.js';
export { detectLanguage, type DetectedLanguage } from './detect.js';
export { speechLanguages, isSpeechLanguage, espeakVoiceOf, type SpeechLanguage } from './languages.js';
