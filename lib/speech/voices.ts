import { speechLanguages, type SpeechLanguage } from './languages.js';

/**
 * The built-in voices. Each speaks English with its own engine and every other supported language
 * with espeak-ng (festival and flite speak English only). When no remote speech model is
 * configured, OpenAI's voice names are aliases of them, so code written for OpenAI runs unchanged.
 */
export type LocalEngine = 'festival' | 'flite' | 'espeak-ng';

export interface BuiltInVoice {
  name: string;
  /** The engine of its English. */
  engine: LocalEngine;
  /** Every language it speaks (all of spec 4.3's). */
  languages: SpeechLanguage[];
  gender: 'female' | 'male';
  description: string;
  /** OpenAI voice names that mean this voice while SPEECH_MODEL is unset. */
  aliases: string[];
  /** The engine's own voice for English, and the espeak-ng variant suffix for other languages ('' or '+f3'). */
  english: { engine: LocalEngine; voice: string };
  espeakVariant: '' | '+f3';
}

const all = [...speechLanguages];

const voices: BuiltInVoice[] = [
  {
    name: 'slt', engine: 'festival', languages: all, gender: 'female', aliases: ['alloy', 'coral', 'nova', 'shimmer', 'sage'],
    description: 'US English female, festival HTS (cmu_us_slt_arctic_hts; flite slt when festival is not installed); other languages: espeak-ng female',
    english: { engine: 'festival', voice: 'cmu_us_slt_arctic_hts' }, espeakVariant: '+f3',
  },
  {
    name: 'kal', engine: 'flite', languages: all, gender: 'male', aliases: ['echo', 'onyx', 'ash'],
    description: 'US English male, flite kal16; other languages: espeak-ng male',
    english: { engine: 'flite', voice: 'kal16' }, espeakVariant: '',
  },
  {
    name: 'awb', engine: 'flite', languages: all, gender: 'male', aliases: ['fable'],
    description: 'Scottish English male, flite awb; other languages: espeak-ng male',
    english: { engine: 'flite', voice: 'awb' }, espeakVariant: '',
  },
  {
    name: 'rms', engine: 'flite', languages: all, gender: 'male', aliases: ['ballad', 'verse'],
    description: 'US English male, flite rms; other languages: espeak-ng male',
    english: { engine: 'flite', voice: 'rms' }, espeakVariant: '',
  },
  {
    name: 'espeak', engine: 'espeak-ng', languages: all, gender: 'male', aliases: [],
    description: 'espeak-ng in every language (fast, robotic), male',
    english: { engine: 'espeak-ng', voice: 'en-us' }, espeakVariant: '',
  },
  {
    name: 'espeak-f', engine: 'espeak-ng', languages: all, gender: 'female', aliases: ['marin', 'cedar'],
    description: 'espeak-ng in every language (fast, robotic), female',
    english: { engine: 'espeak-ng', voice: 'en-us+f3' }, espeakVariant: '+f3',
  },
];

/** The built-in voices (a copy). */
export function builtInVoices(): BuiltInVoice[] {
  return voices.map((v) => ({ ...v, languages: [...v.languages], aliases: [...v.aliases], english: { ...v.english } }));
}

/** A built-in voice by name (case-insensitive), or by alias when `aliases` is true. */
export function findBuiltInVoice(name: string, aliases: boolean): BuiltInVoice | null {
  const n = name.trim().toLowerCase();
  return voices.find((v) => v.name === n || (aliases && v.aliases.includes(n))) ?? null;
}

/**
 * A voice of a partner (the voice interface, /api/voices) as speech sees it. It is speakable when
 * an engine can speak it: by a remote voice id of the remote speech model (SPEECH_MODEL), or
 * locally by the built-in voice nearest to it (no local engine can clone a voice).
 */
export interface PartnerVoice {
  name: string;
  /** False while the voice's embedding is missing or unfinished; `reason` then says why. */
  ready: boolean;
  reason?: string;
  /** The built-in voice that speaks it locally; null: none. */
  builtInVoice: string | null;
  /** The voice id the remote speech model knows it by; null: none. */
  remoteVoiceId: string | null;
}

/**
 * Where speech finds a partner's voices. The voice interface implements it (lib/voices sits above
 * lib/speech and hands its implementation to the speech routes); without it, only built-in voices
 * exist.
 */
export interface PartnerVoiceSource {
  /** The partner's voices, speakable or not. */
  list(partnerId: string): Promise<PartnerVoice[]>;
  /** One voice by its exact name, else by its id (the voice interface's `id`), or null. */
  find(partnerId: string, nameOrId: string): Promise<PartnerVoice | null>;
}
