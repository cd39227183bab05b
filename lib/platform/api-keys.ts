import crypto from 'node:crypto';

export interface Principal {
  isAdmin: boolean;
  /** Set for partner-scoped keys. */
  partnerId: string | null;
  partnerName: string | null;
}

export const adminPrincipal: Principal = { isAdmin: true, partnerId: null, partnerName: null };

/** A partner key: a recognisable prefix and 32 random bytes. Shown once; only its hash is stored. */
export function generatePartnerKey(): string {
  return `pk_${crypto.randomBytes(32).toString('base64url')}`;
}

/** Keys carry 256 bits of entropy, so an unsalted SHA-256 is a safe lookup hash for them. */
export function hashKey(key: string): string {
  return crypto.createHash('sha256').update(key, 'utf8').digest('hex');
}

/** Compares two secrets in time that does not depend on where they first differ. */
export function secretsEqual(a: string, b: string): boolean {
  const da = crypto.createHash('sha256').update(a, 'utf8').digest();
  const db = crypto.createHash('sha256').update(b, 'utf8').digest();
  return crypto.timingSafeEqual(da, db);
}
