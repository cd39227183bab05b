/**
 * Audio work through ffmpeg/ffprobe (lib/platform/child-process.ts runTool/streamTool): probing,
 * decoding, levels and pauses, cutting plans, encoding, WAV headers, container signatures. Used by
 * transcription, speech, voices and document digitization.
 */
export { AudioUnreadable } from './errors.js';
export { probeAudio, type AudioStreamInfo, type ProbeResult } from './probe.js';
export { decodeToWav, decodePcm, decodePcmChunks, type DecodeOptions } from './decode.js';
export { LevelMeter, frameLevels, measureLevels, quietRuns, silenceThreshold, type Levels, type SilenceThreshold } from './levels.js';
export { detectPauses, findPauses, parseSilenceEvents, type Pause, type PauseOptions, type PauseAnalysis } from './silences.js';
export { spreadWordTimes, type WordSpan } from './word-times.js';
export { planSegments, planSamples, formatTimestamp, type Segment, type PlannedSample, type SamplePlanOptions } from './segments.js';
export { audioFormats, voiceSampleOpus, encodeFile, encodeCuts, encodePcmStream, type AudioFormat, type EncodeOptions, type Cut, type PcmInput } from './encode.js';
export { wavHeader, wavFile, parseWavHeader, readWavInfo, readWavSamples, sliceWav, type PcmFormat, type WavLayout, type WavInfo } from './wav.js';
export { sniffAudioContainer, isId3Header, isMp3FrameHeader, isFtypBox, type AudioContainer } from './signatures.js';
