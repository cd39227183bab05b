import crypto from 'node:crypto';
import type { Config } from '../platform/config.js';

/**
 * Signed links that let the GPU job service download a voice's samples bundle without a partner
 * key: `<VOICE_JOB_FILES_BASE_URL>/api/voice-job-files/<token>`, the token being
 * `<voice id>.<expiry, unix seconds>.<HMAC-SHA256>` under a secret derived from ADMIN_API_KEY
 * (which the API and every worker share). A link names one voice, expires, and cannot be altered.
 */
const secretOf = (config: Pick<Config, 'adminApiKey'>) => crypto.createHmac('sha256', config.adminApiKey).update('voice-job-files/v1').digest();

const signature = (config: Pick<Config, 'adminApiKey'>, payload: string) => crypto.createHmac('sha256', secretOf(config)).update(payload).digest('base64url');

export function jobFilesToken(config: Pick<Config, 'adminApiKey'>, voiceId: string, expiresAt: Date): string {
  const payload = `${voiceId}.${Math.floor(expiresAt.getTime() / 1000)}`;
  return `${payload}.${signature(config, payload)}`;
}

const tokenShape = /^([0-9a-f-]{36})\.(\d{1,12})\.([\w-]{43})$/;

/** The voice a token names, or null when it is malformed, altered or expired. */
export function verifyJobFilesToken(config: Pick<Config, 'adminApiKey'>, token: string, now = new Date()): string | null {
  const m = tokenShape.exec(token);
  if (!m) return null;
  const expected = Buffer.from(signature(config, `${m[1]}.${m[2]}`));
  const given = Buffer.from(m[3]!);
  if (expected.length !== given.length || !crypto.timingSafeEqual(expected, given)) return null;
  if (Number(m[2]) * 1000 < now.getTime()) return null;
  return m[1]!;
}

/** The samples-bundle link handed to a GPU job, valid for `ttlSeconds`. */
export function jobSamplesBundleUrl(config: Pick<Config, 'adminApiKey' | 'voices'>, voiceId: string, ttlSeconds: number): { url: string; expiresAt: Date } {
  const expiresAt = new Date(Date.now() + ttlSeconds * 1000);
  return { url: `${config.voices.jobFilesBaseUrl}/api/voice-job-files/${jobFilesToken(config, voiceId, expiresAt)}`, expiresAt };
}
