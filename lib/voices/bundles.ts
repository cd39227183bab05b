import type { Readable } from 'node:stream';
import yazl from 'yazl';
import type { FileStorage } from '../platform/storage.js';
import type { Voice, VoiceSample } from '../../generated/prisma/client.js';
import { voiceFiles } from './files.js';
import { embeddingTypeOf, presentSample } from './presenters.js';

/**
 * ZIP archives of the voice interface: the samples bundle (streamed: each sample is read while the
 * archive is sent) and small archives built in memory (an embedding's artefact).
 */

/** `voice_info.json` of a samples bundle: the voice and, per sample, its file in the archive. */
export function voiceInfo(voice: Voice, partnerName: string, samples: VoiceSample[]) {
  return {
    name: voice.name,
    partner: partnerName,
    original_uploaded_name: voice.originalUploadedName,
    original_duration: voice.originalDuration,
    embedding_type: embeddingTypeOf(voice),
    preferred_sample_index: voice.preferredSampleIndex,
    sample_format: { codec: 'opus', container: 'ogg', bitrate_kbps: 96, channels: 1, sample_rate: 48000 },
    samples: samples.map((s) => ({ ...presentSample(s), file: `${s.index}.opus`, source_start_seconds: s.sourceStart, origin: s.origin })),
    creator_name: voice.creatorName ?? '',
    creator_email: voice.creatorEmail ?? '',
  };
}

/** The samples bundle: `voice_info.json`, then `{index}.opus` for every sample, as a stream. */
export function samplesBundle(storage: FileStorage, voice: Voice, partnerName: string, samples: VoiceSample[]): Readable {
  const zip = new yazl.ZipFile();
  const output = zip.outputStream as Readable;
  // A sample that cannot be read ends the download as a broken transfer, never as a short archive.
  zip.on('error', (err: Error) => output.destroy(err));
  zip.addBuffer(Buffer.from(`${JSON.stringify(voiceInfo(voice, partnerName, samples), null, 2)}\n`), 'voice_info.json');
  for (const s of samples) {
    // Opus does not compress further: stored, not deflated.
    zip.addReadStreamLazy(`${s.index}.opus`, { compress: false }, (cb) => {
      storage.stream(voiceFiles.sample(voice.partnerId, voice.id, s.index)).then(
        (stream) => {
          stream.on('error', (err) => zip.emit('error', err));
          cb(null, stream);
        },
        (err: Error) => zip.emit('error', err),
      );
    });
  }
  zip.end();
  return output;
}

/** A small archive in memory. */
export function zipToBuffer(entries: Array<{ name: string; data: Buffer | string }>): Promise<Buffer> {
  const zip = new yazl.ZipFile();
  for (const e of entries) zip.addBuffer(typeof e.data === 'string' ? Buffer.from(e.data) : e.data, e.name);
  zip.end();
  return new Promise((resolve, reject) => {
    const parts: Buffer[] = [];
    const out = zip.outputStream as Readable;
    out.on('data', (d: Buffer) => parts.push(d));
    out.on('end', () => resolve(Buffer.concat(parts)));
    out.on('error', reject);
  });
}
