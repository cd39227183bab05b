/**
 * The input is not usable audio (ffprobe or ffmpeg refused it, it has no audio stream, or it holds
 * no sound): the input's fault, so retrying cannot help. Tool failures of another kind (a missing
 * binary, a timeout) stay `ToolFailed` from lib/platform/child-process.ts and are worth a retry.
 */
export class AudioUnreadable extends Error {
  override name = 'AudioUnreadable';
}
