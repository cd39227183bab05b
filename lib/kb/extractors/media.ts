/**
 * Text from images (OCR with Debian `tesseract-ocr` + `tesseract-ocr-eng`) and from audio/video
 * (ffmpeg to 16 kHz mono 16-bit WAV, then a SpeechToText provider; local PocketSphinx by default).
 * Every child process is time-bounded and killed with SIGKILL on expiry; temp files live in a
 * private directory removed in `finally`.
 */
import { mkdtemp, rm } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { LocalPocketSphinx, type SpeechToText } from '../../providers/speech-to-text.js';
import { UnreadableDocument, type Extracted } from './types.js';
import { runTool, ToolFailed } from '../../process.js';

export const IMAGE_EXTENSIONS = ['jpg', 'jpeg', 'png', 'tif', 'tiff', 'gif', 'webp'] as const;
export const AUDIO_VIDEO_EXTENSIONS = ['mp3', 'wav', 'm4a', 'mp4', 'mov', 'm4v', 'avi'] as const;

const OCR_TIMEOUT_MS = 2 * 60_000;
const PROBE_TIMEOUT_MS = 60_000;
const CONVERT_TIMEOUT_MS = 10 * 60_000;

let defaultSpeech: SpeechToText | null = null;

/** The provider used when extractMedia is called without one (the lead wires config here). */
export function setDefaultSpeechToText(provider: SpeechToText | null): void {
  defaultSpeech = provider;
}

function speechProvider(): SpeechToText {
  defaultSpeech ??= new LocalPocketSphinx();
  return defaultSpeech;
}

function normaliseText(s: string): string {
  return s
    .replace(/\r\n?/g, '\n')
    .replace(/\f/g, '\n')
    .replace(/[ \t]+\n/g, '\n')
    .replace(/\n{3,}/g, '\n\n')
    .trim();
}

async function tesseract(file: string): Promise<string> {
  const { stdout } = await runTool('tesseract', [file, 'stdout', '-l', 'eng'], OCR_TIMEOUT_MS);
  return stdout;
}

async function ocrImage(filePath: string, ext: string, tmp: () => Promise<string>): Promise<Extracted> {
  let text: string;
  try {
    // GIF/WebP go straight to PNG: leptonica's support for them varies by build, and animated
    // files would otherwise fail; the first frame is what is read.
    if (ext === 'gif' || ext === 'webp') throw new ToolFailed('convert first', '', false);
    text = await tesseract(filePath);
  } catch (err) {
    if (!(err instanceof ToolFailed) || (err.missing && err.message.startsWith('tesseract'))) throw err;
    const png = path.join(await tmp(), 'frame.png');
    try {
      await runTool(
        'ffmpeg',
        ['-nostdin', '-hide_banner', '-loglevel', 'error', '-y', '-i', filePath, '-frames:v', '1', png],
        OCR_TIMEOUT_MS,
      );
    } catch (convErr) {
      if (convErr instanceof ToolFailed && !convErr.missing) {
        throw new UnreadableDocument('the image could not be read');
      }
      throw convErr;
    }
    try {
      text = await tesseract(png);
    } catch (ocrErr) {
      if (ocrErr instanceof ToolFailed && !ocrErr.missing) throw new UnreadableDocument('the image could not be read');
      throw ocrErr;
    }
  }
  const clean = normaliseText(text);
  if (!/[\p{L}\p{N}]/u.test(clean)) throw new UnreadableDocument('no text was recognised in the image');
  return { text: clean, title: null };
}

async function transcribeMedia(
  filePath: string,
  tmp: () => Promise<string>,
  speech: SpeechToText,
): Promise<Extracted> {
  let probe: string;
  try {
    ({ stdout: probe } = await runTool(
      'ffprobe',
      ['-v', 'error', '-select_streams', 'a', '-show_entries', 'stream=index', '-of', 'csv=p=0', filePath],
      PROBE_TIMEOUT_MS,
    ));
  } catch (err) {
    if (err instanceof ToolFailed && !err.missing) throw new UnreadableDocument('the media file could not be read');
    throw err;
  }
  if (!probe.trim()) throw new UnreadableDocument('the file has no audio track');

  const wav = path.join(await tmp(), 'audio.wav');
  try {
    await runTool(
      'ffmpeg',
      [
        '-nostdin', '-hide_banner', '-loglevel', 'error', '-y', '-i', filePath,
        '-map', '0:a:0', '-vn', '-ac', '1', '-ar', '16000', '-c:a', 'pcm_s16le', '-f', 'wav', wav,
      ],
      CONVERT_TIMEOUT_MS,
    );
  } catch (err) {
    if (err instanceof ToolFailed && !err.missing) throw new UnreadableDocument('the audio could not be decoded');
    throw err;
  }
  const { text } = await speech.transcribe(wav);
  const clean = normaliseText(text);
  if (!clean) throw new UnreadableDocument('no speech was recognised in the recording');
  return { text: clean, title: null };
}

export function isMediaExtension(extension: string): boolean {
  const ext = extension.replace(/^\./, '').toLowerCase();
  return (IMAGE_EXTENSIONS as readonly string[]).includes(ext) || (AUDIO_VIDEO_EXTENSIONS as readonly string[]).includes(ext);
}

/**
 * Extract text from an image (OCR) or an audio/video file (speech to text). Usable as an Extractor;
 * the optional third argument overrides the speech provider for this call.
 */
export async function extractMedia(
  filePath: string,
  extension: string,
  options: { speech?: SpeechToText } = {},
): Promise<Extracted> {
  const ext = extension.replace(/^\./, '').toLowerCase();
  let dir: string | null = null;
  const tmp = async () => (dir ??= await mkdtemp(path.join(os.tmpdir(), 'kb-media-')));
  try {
    if ((IMAGE_EXTENSIONS as readonly string[]).includes(ext)) return await ocrImage(filePath, ext, tmp);
    if ((AUDIO_VIDEO_EXTENSIONS as readonly string[]).includes(ext)) {
      return await transcribeMedia(filePath, tmp, options.speech ?? speechProvider());
    }
    throw new Error(`extractMedia does not handle .${ext} files`);
  } finally {
    if (dir) await rm(dir, { recursive: true, force: true });
  }
}
