import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import fs from 'node:fs';
import { promisify } from 'node:util';
import { checkVoiceUpload } from '../../lib/voices/uploads.js';
import { loadConfig } from '../../lib/platform/config.js';
import { audioDir, speak } from '../support/audio.js';

const run = promisify(execFile);

/**
 * What a voice recording may be: any audio or video container ffmpeg reads that the service
 * recognises by its signature, whatever the file is called; and the voice settings' defaults and
 * refusals.
 */
describe('voices: recordings in every container ffmpeg writes here are recognised', function () {
  this.timeout(120_000);
  let clip: string;
  before(async () => {
    clip = await speak('Visitors can borrow up to ten books for three weeks at a time.', 'flite-kal');
  });

  const containers: Array<[string, string[], string]> = [
    ['wav', [], 'wav'],
    ['mp3', ['-c:a', 'libmp3lame'], 'mp3'],
    ['ogg', ['-c:a', 'libopus'], 'ogg'],
    ['flac', [], 'flac'],
    ['m4a', ['-c:a', 'aac'], 'iso-media'],
    ['mov', ['-c:a', 'aac'], 'iso-media'],
    ['webm', ['-c:a', 'libopus'], 'webm'],
    ['mkv', ['-c:a', 'flac'], 'matroska'],
    ['avi', ['-c:a', 'pcm_s16le'], 'avi'],
    ['aiff', [], 'aiff'],
    ['wma', ['-c:a', 'wmav2'], 'asf'],
    ['ts', ['-c:a', 'aac'], 'mpeg-ts'],
    ['mpg', ['-c:a', 'mp2', '-f', 'mpeg'], 'mpeg-ps'],
    ['flv', ['-c:a', 'aac'], 'flv'],
    ['caf', [], 'caf'],
    ['au', [], 'au'],
    ['aac', ['-c:a', 'aac', '-f', 'adts'], 'aac'],
  ];
  for (const [ext, args, expected] of containers) {
    it(`.${ext} is ${expected}`, async () => {
      // Named .bin: the signature decides, not the name.
      const out = `${audioDir}/container-${process.pid}.${ext}`;
      await run('ffmpeg', ['-nostdin', '-loglevel', 'error', '-y', '-i', clip, ...args, out]);
      const renamed = `${out}.bin`;
      fs.renameSync(out, renamed);
      const checked = await checkVoiceUpload({ path: renamed, originalName: 'recording.bin', size: fs.statSync(renamed).size }, { field: 'file', maxSeconds: 60 });
      assert.equal(checked.container, expected);
      assert.ok(checked.durationSeconds > 2.5 && checked.durationSeconds < 5, `${checked.durationSeconds} s`);
      await assert.rejects(checkVoiceUpload({ path: renamed, originalName: 'recording.bin', size: fs.statSync(renamed).size }, { field: 'file', maxSeconds: 2 }), /at most 2 s/);
    });
  }

  it('voice settings: documented defaults, and refusals that name the variable', () => {
    const valid = { ADMIN_API_KEY: 'a-long-enough-admin-key' };
    assert.deepEqual(loadConfig(valid).voices, {
      gpuJobs: null,
      gpuJobPollIntervalMs: 5000,
      gpuJobTimeoutSeconds: 3600,
      jobFilesBaseUrl: 'http://127.0.0.1:3000',
      maxUploadBytes: 104857600,
      maxOriginalSeconds: 3600,
      heartbeatTimeoutSeconds: 30,
      retryWindowSeconds: 604800,
      rateLimitPerMinute: 30,
    });
    const gpu = loadConfig({ ...valid, VOICE_JOB_BASE_URL: 'https://api.runpod.ai/v2/abc123/', VOICE_JOB_API_KEY: 'rp_key', PORT: '8000' });
    assert.deepEqual(gpu.voices.gpuJobs, { baseUrl: 'https://api.runpod.ai/v2/abc123', apiKey: 'rp_key' });
    assert.equal(gpu.voices.jobFilesBaseUrl, 'http://127.0.0.1:8000');
    assert.throws(() => loadConfig({ ...valid, VOICE_JOB_API_KEY: 'rp_key' }), /VOICE_JOB_API_KEY needs VOICE_JOB_BASE_URL/);
    assert.throws(() => loadConfig({ ...valid, VOICE_JOB_BASE_URL: 'runpod' }), /VOICE_JOB_BASE_URL is not a valid URL/);
    assert.throws(() => loadConfig({ ...valid, VOICE_JOB_POLL_INTERVAL_MS: '10' }), /VOICE_JOB_POLL_INTERVAL_MS must be between 50/);
    assert.throws(() => loadConfig({ ...valid, VOICE_JOB_FILES_BASE_URL: 'ftp://x' }), /VOICE_JOB_FILES_BASE_URL must use http: or https:/);
    assert.throws(() => loadConfig({ ...valid, VOICE_RATE_LIMIT_PER_MINUTE: '-1' }), /VOICE_RATE_LIMIT_PER_MINUTE must be a whole number/);
  });
});
