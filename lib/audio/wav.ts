import { open } from 'node:fs/promises';

/**
 * RIFF/WAVE for 16-bit PCM. A WAV written to a pipe (ffmpeg, espeak-ng, festival) cannot go back to
 * fill in its sizes, so they read 0, 0xFFFFFFFF or a guess: readers here trust the `fmt ` chunk
 * and take the data as running to the end; writers build the 44-byte header themselves once the
 * length is known.
 */
export interface PcmFormat {
  sampleRate: number;
  channels: number;
  /** Only 16 is produced here. */
  bitsPerSample?: number;
}

/** The canonical 44-byte header of a PCM WAV holding `dataBytes` bytes of samples. */
export function wavHeader(format: PcmFormat, dataBytes: number): Buffer {
  const bits = format.bitsPerSample ?? 16;
  const blockAlign = (format.channels * bits) / 8;
  const h = Buffer.alloc(44);
  h.write('RIFF', 0, 'ascii');
  h.writeUInt32LE(36 + dataBytes, 4);
  h.write('WAVE', 8, 'ascii');
  h.write('fmt ', 12, 'ascii');
  h.writeUInt32LE(16, 16);
  h.writeUInt16LE(1, 20); // PCM
  h.writeUInt16LE(format.channels, 22);
  h.writeUInt32LE(format.sampleRate, 24);
  h.writeUInt32LE(format.sampleRate * blockAlign, 28);
  h.writeUInt16LE(blockAlign, 32);
  h.writeUInt16LE(bits, 34);
  h.write('data', 36, 'ascii');
  h.writeUInt32LE(dataBytes, 40);
  return h;
}

/** A whole WAV file from PCM samples. */
export const wavFile = (format: PcmFormat, pcm: Buffer) => Buffer.concat([wavHeader(format, pcm.length), pcm]);

export interface WavLayout extends Required<PcmFormat> {
  /** Byte offset of the first sample. */
  dataOffset: number;
  /** The data chunk's size as written (null: unknown, runs to the end of the stream). */
  declaredDataBytes: number | null;
}

/**
 * Reads the header at the start of `head`: `null` while more bytes are needed (a stream), throws
 * when it is not a PCM WAV.
 */
export function parseWavHeader(head: Buffer): WavLayout | null {
  if (head.length < 12) return null;
  if (head.toString('ascii', 0, 4) !== 'RIFF' || head.toString('ascii', 8, 12) !== 'WAVE') throw new Error('not a RIFF/WAVE stream');
  let format: Required<PcmFormat> | null = null;
  let offset = 12;
  while (offset + 8 <= head.length) {
    const id = head.toString('ascii', offset, offset + 4);
    const size = head.readUInt32LE(offset + 4);
    if (id === 'data') {
      if (!format) throw new Error('WAV data before its fmt chunk');
      const unknown = size === 0 || size === 0xffffffff || size >= 0x7fff0000;
      return { ...format, dataOffset: offset + 8, declaredDataBytes: unknown ? null : size };
    }
    if (id === 'fmt ') {
      if (offset + 24 > head.length) return null;
      const codec = head.readUInt16LE(offset + 8);
      const bits = head.readUInt16LE(offset + 22);
      if ((codec !== 1 && codec !== 0xfffe) || bits !== 16) throw new Error(`WAV is not 16-bit PCM (format ${codec}, ${bits} bits)`);
      format = { channels: head.readUInt16LE(offset + 10), sampleRate: head.readUInt32LE(offset + 12), bitsPerSample: bits };
    }
    offset += 8 + size + (size % 2);
  }
  return null;
}

export interface WavInfo extends WavLayout {
  dataBytes: number;
  durationSeconds: number;
}

/** Layout and duration of a 16-bit PCM WAV file (sizes a pipe writer left unknown are taken from the file size). */
export async function readWavInfo(file: string): Promise<WavInfo> {
  const fh = await open(file, 'r');
  try {
    const { size } = await fh.stat();
    const head = Buffer.alloc(Math.min(size, 64 * 1024));
    await fh.read(head, 0, head.length, 0);
    const layout = parseWavHeader(head);
    if (!layout) throw new Error(`${file} has no complete WAV header`);
    const available = size - layout.dataOffset;
    const dataBytes = layout.declaredDataBytes === null ? available : Math.min(layout.declaredDataBytes, available);
    const bytesPerSecond = layout.sampleRate * layout.channels * 2;
    return { ...layout, dataBytes, durationSeconds: bytesPerSecond ? dataBytes / bytesPerSecond : 0 };
  } finally {
    await fh.close();
  }
}

/**
 * Copies the samples between `fromSeconds` and `toSeconds` of a PCM WAV file into a new WAV file
 * (its own 44-byte header), by byte offsets: exact to the sample, no decoding.
 */
export async function sliceWav(source: string, fromSeconds: number, toSeconds: number, destination: string): Promise<void> {
  const info = await readWavInfo(source);
  const frame = info.channels * 2;
  const at = (t: number) => Math.min(info.dataBytes, Math.max(0, Math.round(t * info.sampleRate) * frame));
  const start = at(fromSeconds);
  const length = Math.max(0, at(toSeconds) - start);
  const src = await open(source, 'r');
  try {
    const dst = await open(destination, 'w');
    try {
      await dst.write(wavHeader(info, length), 0, 44, 0);
      const buf = Buffer.alloc(Math.min(length, 1 << 20));
      for (let done = 0; done < length; ) {
        const { bytesRead } = await src.read(buf, 0, Math.min(buf.length, length - done), info.dataOffset + start + done);
        if (bytesRead === 0) break;
        await dst.write(buf, 0, bytesRead, 44 + done);
        done += bytesRead;
      }
    } finally {
      await dst.close();
    }
  } finally {
    await src.close();
  }
}

/** The samples of a 16-bit mono PCM WAV file (a transcription segment: minutes, not hours). */
export async function readWavSamples(file: string): Promise<{ samples: Int16Array; sampleRate: number }> {
  const info = await readWavInfo(file);
  if (info.channels !== 1) throw new Error(`${file} has ${info.channels} channels, not one`);
  const fh = await open(file, 'r');
  try {
    const bytes = Buffer.alloc(info.dataBytes - (info.dataBytes % 2));
    await fh.read(bytes, 0, bytes.length, info.dataOffset);
    const samples = new Int16Array(bytes.length / 2);
    for (let i = 0; i < samples.length; i++) samples[i] = bytes.readInt16LE(2 * i);
    return { samples, sampleRate: info.sampleRate };
  } finally {
    await fh.close();
  }
}
