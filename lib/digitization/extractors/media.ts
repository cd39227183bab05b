/**
 * Text from images (tesseract OCR, lib/digitization/ocr.ts) and from audio/video (ffmpeg to 16 kHz
 * mono 16-bit WAV, cut at pauses into pieces the engine takes, then the process's speech-to-text
 * engine, `Services.speechToText`: the same adapter as /v2/transcript).
 * Every child process is time-bounded and killed with SIGKILL on expiry; temp files live in a
 * private directory removed in `finally`.
 */
import { rm } from 'node:fs/promises';
import path from 'node:path';
import type { SpeechToTextEngine } from '../../providers/speech-to-text.js';
import { tidyExtractedText, UnreadableDocument, type Extracted } from './types.js';
import { isAudioVideo, isImage } from '../formats.js';
import { isInputFailure, runTool } from '../../platform/child-process.js';
import { ocrImage, resolveOcrLanguages, type OcrLanguageChoice } from '../ocr.js';
import { AudioUnreadable, decodeToWav, findPauses, planSegments, probeAudio, readWavInfo, sliceWav } from '../../audio/index.js';
import { makeScratchDir } from '../../platform/scratch.js';

const OCR_TIMEOUT_MS = 2 * 60_000;
const PROBE_TIMEOUT_MS = 60_000;
const CONVERT_TIMEOUT_MS = 10 * 60_000;

/** The first frame of an image as PNG (leptonica's support for GIF and WebP varies by build). */
async function firstFrameAsPng(filePath: string, tmp: () => Promise<string>): Promise<string> {
  const png = path.join(await tmp(), 'frame.png');
  try {
    await runTool('ffmpeg', ['-nostdin', '-hide_banner', '-loglevel', 'error', '-y', '-i', filePath, '-frames:v', '1', png], { timeoutMs: OCR_TIMEOUT_MS });
  } catch (err) {
    if (isInputFailure(err)) throw new UnreadableDocument(err.kind === 'failed' ? 'the image could not be read' : `the image cannot be read: ${err.message}`);
    throw err;
  }
  return png;
}

/** OCR of an image in the chosen languages, or those detected on it (lib/digitization/ocr.ts). */
async function readImage(filePath: string, ext: string, tmp: () => Promise<string>, languages: OcrLanguageChoice): Promise<Extracted> {
  const read = async (image: string) => {
    const resolved = await resolveOcrLanguages(languages, image);
    return resolved.firstPass ?? (await ocrImage(image, resolved.languages));
  };
  let text: string;
  if (ext === 'gif' || ext === 'webp') text = await read(await firstFrameAsPng(filePath, tmp));
  else {
    try {
      text = await read(filePath);
    } catch (err) {
      // A file tesseract cannot open as it is gets one more chance as a PNG frame.
      if (!(err instanceof UnreadableDocument)) throw err;
      text = await read(await firstFrameAsPng(filePath, tmp));
    }
  }
  const clean = tidyExtractedText(text);
  if (!/[\p{L}\p{N}]/u.test(clean)) throw new UnreadableDocument('no text was recognised in the image');
  return { text: clean, title: null };
}

/**
 * Transcripts of a recording's pieces kept from one try of an extraction to the next, so that a
 * speech-to-text outage after some pieces costs only the pieces after them. `key` names the piece
 * (its engine and bounds); the keeper ties it to the recording.
 */
export interface PieceTranscripts {
  get(key: string): Promise<string | null>;
  put(key: string, text: string): Promise<void>;
}

const hoursAndMinutes = (seconds: number) => (seconds >= 3600 ? `${Math.floor(seconds / 3600)} h ${Math.round((seconds % 3600) / 60)} min` : `${Math.round(seconds / 60)} min`);

/**
 * A recording longer than `maxSeconds` (DOCUMENT_MAX_MEDIA_SECONDS) by its container is refused
 * before it is decoded; one whose header claims less than it holds is decoded no further than that
 * (ffmpeg `-t`), and the decoded WAV is bounded by the tools' file-size limit besides.
 */
async function transcribeMedia(filePath: string, tmp: () => Promise<string>, speech: SpeechToTextEngine, maxSeconds: number, kept: PieceTranscripts | null): Promise<Extracted> {
  const dir = await tmp();
  const wav = path.join(dir, 'audio.wav');
  try {
    const probe = await probeAudio(filePath, { timeoutMs: PROBE_TIMEOUT_MS });
    if (probe.audioStreams.length === 0) throw new UnreadableDocument('the file has no audio track');
    if (probe.durationSeconds > maxSeconds) {
      throw new UnreadableDocument(`the recording is ${hoursAndMinutes(probe.durationSeconds)} long (by its header); at most ${hoursAndMinutes(maxSeconds)} are transcribed (DOCUMENT_MAX_MEDIA_SECONDS)`);
    }
    await decodeToWav(filePath, wav, { timeoutMs: CONVERT_TIMEOUT_MS, maxSeconds });
  } catch (err) {
    if (err instanceof AudioUnreadable) throw new UnreadableDocument(err.message.startsWith('the file is not') ? 'the media file could not be read' : 'the audio could not be decoded');
    throw err;
  }
  // Recordings longer than one engine call are cut in pauses; each piece is transcribed in turn.
  const { durationSeconds } = await readWavInfo(wav);
  if (durationSeconds === 0) throw new UnreadableDocument('the recording is empty: the file holds no sound (0 seconds)');
  const pieces =
    durationSeconds > speech.maxSegmentSeconds
      ? planSegments({ durationSeconds, pauses: (await findPauses(wav, { durationSeconds })).pauses, targetSeconds: speech.maxSegmentSeconds * 0.8, maxSeconds: speech.maxSegmentSeconds })
      : [{ index: 0, start: 0, end: durationSeconds }];
  const texts: string[] = [];
  // A recording of one piece has nothing to keep between tries.
  const keeper = pieces.length > 1 ? kept : null;
  for (const piece of pieces) {
    const key = `${speech.id} ${piece.start.toFixed(3)}-${piece.end.toFixed(3)}`;
    const earlier = await keeper?.get(key);
    if (earlier != null) {
      texts.push(earlier);
      continue;
    }
    let input = wav;
    if (pieces.length > 1) {
      input = path.join(dir, `piece-${piece.index}.wav`);
      await sliceWav(wav, piece.start, piece.end, input);
    }
    const { text } = await speech.transcribeSegment({ wavPath: input, language: 'default' });
    await keeper?.put(key, text);
    texts.push(text);
  }
  const clean = tidyExtractedText(texts.join(' ').replace(/\s+/g, ' ').trim());
  if (!clean.trim()) throw new UnreadableDocument('no speech was recognised in the recording');
  return { text: clean, title: null };
}

export const isMediaExtension = (extension: string) => isImage(extension) || isAudioVideo(extension);

/**
 * Extract text from an image (OCR in `ocrLanguages`, null: detected) or an audio/video file (speech
 * to text with `speech`, reusing the pieces in `pieceTranscripts` that an earlier try transcribed).
 */
export async function extractMedia(
  filePath: string,
  extension: string,
  options: { speech: SpeechToTextEngine; ocrLanguages: OcrLanguageChoice; maxMediaSeconds?: number; pieceTranscripts?: PieceTranscripts | null },
): Promise<Extracted> {
  const ext = extension.replace(/^\./, '').toLowerCase();
  let dir: string | null = null;
  const tmp = async () => (dir ??= await makeScratchDir('kb-media-'));
  try {
    if (isImage(ext)) return await readImage(filePath, ext, tmp, options.ocrLanguages);
    if (isAudioVideo(ext)) {
      return await transcribeMedia(filePath, tmp, options.speech, options.maxMediaSeconds ?? 14_400, options.pieceTranscripts ?? null);
    }
    throw new Error(`extractMedia does not handle .${ext} files`);
  } finally {
    if (dir) await rm(dir, { recursive: true, force: true });
  }
}
