import { mkdir, rm } from 'node:fs/promises';
import path from 'node:path';
import type { VoiceStepOutcome } from '../contracts/voice-job.js';
import { AudioUnreadable, decodeToWav, encodeCuts, findPauses, planSamples, probeAudio, readWavInfo, voiceSampleOpus } from '../audio/index.js';
import { voiceFiles } from './files.js';
import { VoiceInputError, type VoiceJobDeps } from './job-steps.js';
import { makeScratchDir } from '../platform/scratch.js';

/**
 * The split job: the original recording cut into samples that start and end in pauses. The pauses
 * are found on a 16 kHz mono decode (ffmpeg `silencedetect` at a threshold adapted to the
 * recording's level, lib/audio/silences.ts); `planSamples` packs speech runs into samples of at most
 * `sample_duration` seconds and keeps at most `max_samples` spread over the recording; each is cut
 * from the original (exact to the sample) and encoded as Opus in Ogg, 96 kbit/s constant, mono.
 *
 * Nothing is half-written: the samples are cut into a scratch directory, the old sample files are
 * removed and the new ones moved in, and the rows appear in one transaction that also marks the
 * split `completed`, only if this split is still the one wanted. A worker killed at any point
 * leaves the voice with no samples and the split `in_progress`; the retry starts over.
 */
export async function splitVoiceRecording(deps: VoiceJobDeps, voiceId: string, generation: number, signal?: AbortSignal): Promise<VoiceStepOutcome> {
  const v = await deps.db.voice.findUnique({ where: { id: voiceId } });
  if (!v) return 'gone';
  if (v.splitGeneration !== generation || v.splittingStatus !== 'in_progress') return 'superseded';
  if (!v.originalFilename) throw new VoiceInputError('the voice has no original recording to split (it was created empty)');

  const dir = await makeScratchDir('voice-split-');
  try {
    const original = path.join(dir, v.originalFilename);
    await deps.storage.download(voiceFiles.original(v.partnerId, v.id, v.originalFilename), original);
    const wav = path.join(dir, 'analysis-16k.wav');
    try {
      await decodeToWav(original, wav, { sampleRate: 16000, channels: 1, signal, timeoutMs: 30 * 60_000 });
    } catch (err) {
      if (err instanceof AudioUnreadable) throw new VoiceInputError('the original recording could not be decoded: the file is damaged');
      throw err;
    }
    const { durationSeconds } = await readWavInfo(wav);
    const limit = deps.config.voices.maxOriginalSeconds;
    if (durationSeconds > limit) throw new VoiceInputError(`the original recording is ${Math.round(durationSeconds)} s long; at most ${limit} s can be split`);
    const analysis = await findPauses(wav, { durationSeconds, signal });
    if (analysis.threshold.silent) throw new VoiceInputError('the original recording holds no speech (it is silent)');
    const plan = planSamples({
      durationSeconds,
      pauses: analysis.pauses,
      levels: analysis.levels,
      sampleSeconds: v.splitSampleDuration,
      maxSamples: v.splitMaxSamples,
    });
    if (plan.length === 0) throw new VoiceInputError('no speech long enough for a sample was found in the original recording');

    const cutsDir = path.join(dir, 'samples');
    await mkdir(cutsDir);
    const cuts = plan.map((p) => ({ start: p.start, end: p.end, output: path.join(cutsDir, `${p.index}.opus`) }));
    try {
      await encodeCuts(original, cuts, { ...voiceSampleOpus, signal, timeoutMs: 30 * 60_000 });
    } catch (err) {
      if (err instanceof AudioUnreadable) throw new VoiceInputError('the original recording could not be cut: the file is damaged');
      throw err;
    }
    const durations: number[] = [];
    for (const c of cuts) durations.push((await probeAudio(c.output, { signal })).durationSeconds);

    // Still wanted? (A newer split, or the voice's deletion, makes this one moot.)
    const current = await deps.db.voice.findUnique({ where: { id: voiceId }, select: { splitGeneration: true, splittingStatus: true } });
    if (!current) return 'gone';
    if (current.splitGeneration !== generation || current.splittingStatus !== 'in_progress') return 'superseded';

    await deps.storage.removePrefix(voiceFiles.samples(v.partnerId, v.id));
    for (const c of plan) await deps.storage.moveIn(voiceFiles.sample(v.partnerId, v.id, c.index), cuts[c.index]!.output);
    const committed = await deps.db.$transaction(async (tx) => {
      const updated = await tx.voice.updateMany({
        where: { id: voiceId, splitGeneration: generation, splittingStatus: 'in_progress' },
        data: { splittingStatus: 'completed', splittingError: null, originalDuration: durationSeconds, nextSampleIndex: plan.length },
      });
      if (updated.count === 0) return false;
      await tx.voiceSample.deleteMany({ where: { voiceId } });
      await tx.voiceSample.createMany({
        data: plan.map((p, i) => ({ voiceId, index: p.index, sourceStart: p.start, durationSeconds: durations[i]! || p.duration, origin: 'split', generation })),
      });
      return true;
    });
    if (committed) return 'done';
    if (!(await deps.db.voice.count({ where: { id: voiceId } }))) {
      await deps.storage.removePrefix(voiceFiles.prefix(v.partnerId, v.id));
      return 'gone';
    }
    return 'superseded';
  } finally {
    await rm(dir, { recursive: true, force: true });
  }
}
