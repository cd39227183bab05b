/**
 * Secrets never reach a log line or an error a client reads (docs/abuse-resistance.md,
 * "Health and secrets"). Every log line (lib/platform/logger.ts) and every configuration error
 * passes through `redactSecrets`, which removes
 * - the values this process was configured with that are secrets (keys, the database password),
 *   registered once at start-up (`registerConfigSecrets` of lib/services.ts);
 * - whatever has the shape of one: the password of a URL (`postgresql://user:secret@host`),
 *   `password=` / `apikey=` style parameters, `Authorization: Bearer` tokens, and the service's own
 *   partner (`pk_`) and quota (`qk_`) keys.
 */

const MASK = '***';
/** The registered secrets, longest first (so a secret that contains another is masked whole): sorted as one is added, not per line. */
let registered: string[] = [];

function register(value: string): void {
  if (!registered.includes(value)) registered = [...registered, value].sort((a, b) => b.length - a.length);
}

/** Shapes of secrets, each replaced by its first group followed by the mask. */
const secretShapes: RegExp[] = [
  // scheme://user:password@host (the user name stays, the password goes)
  /([a-z][\w+.-]{0,30}:\/\/[^\s:/?#@"'<>]{0,256}:)[^\s/?#@"'<>]{1,1024}(?=@)/gi,
  // password=..., api_key: ..., token=... in query strings, connection strings and messages
  /\b((?:password|passwd|pwd|secret|api[_-]?key|access[_-]?token|token)\s*[=:]\s*["']?)[^\s&"',;]{1,1024}/gi,
  // "password": "..." and the like in JSON
  /("(?:password|passwd|secret|api[_-]?key|access[_-]?token|authorization|x-api-key)"\s*:\s*")(?:[^"\\]|\\.){1,4096}(?=")/gi,
  /\b(bearer\s+)[\w.~+/-]{8,1024}=*/gi,
  // keys of this service: pk_ / qk_ followed by 43 base64url characters
  /\b([pq]k_)[\w-]{43}(?![\w-])/g,
];

/** Registers a value that must never be logged (shorter than 6 characters: ignored, too likely to be ordinary text). */
export function registerSecret(value: string | null | undefined): void {
  if (value && value.length >= 6) {
    register(value);
    // As it appears inside a JSON string, too.
    register(JSON.stringify(value).slice(1, -1));
    try {
      register(encodeURIComponent(value));
    } catch {
      /* a lone surrogate: not URL-encodable */
    }
  }
}

/** The password of a URL (a database URL): registered as a secret, decoded and as written. */
export function registerUrlPassword(url: string): void {
  try {
    const { password } = new URL(url);
    registerSecret(password);
    registerSecret(decodeURIComponent(password));
  } catch {
    /* not a URL: nothing to register */
  }
}

/** `text` with every registered secret and every secret-shaped substring masked. */
export function redactSecrets(text: string): string {
  let out = text;
  for (const secret of registered) {
    if (out.includes(secret)) out = out.split(secret).join(MASK);
  }
  for (const shape of secretShapes) out = out.replace(shape, `$1${MASK}`);
  return out;
}

/** A URL as it may be shown: its password masked. */
export function redactUrl(url: string): string {
  try {
    const u = new URL(url);
    if (u.password) u.password = MASK;
    return u.toString();
  } catch {
    return redactSecrets(url);
  }
}
