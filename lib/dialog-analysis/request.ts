import { badRequest } from '../platform/errors.js';
import { countCharacters } from '../platform/text.js';
import { checkCallerSchema, type CallerSchema, type FieldError } from './caller-schema.js';
import type { SchemaSandbox } from './schema-sandbox.js';

/**
 * The `input` of POST /v2/dialog_analyses after the route's JSON Schema (api/dialog-analysis/
 * schemas.ts) has checked its shape: the checks a JSON Schema cannot make, in this order, each
 * stage reporting all its errors at once as 422 `{message, errors: {<field>: [...]}}`:
 *   0. the nesting depth (at most 64 levels: deeper would overflow the checks that follow);
 *   1. the size: code points of `input` as compact JSON, at most 100,000 (spec section 8);
 *   2. valid Unicode in every string and key (no NUL, no lone surrogates);
 *   3. each caller schema: its form, the pre-walk, ajv's meta-schema and a compile (in the sandbox).
 * Then the defaults are applied (after counting, so they never count against the limit).
 */
export interface DialogMessage {
  role: 'user' | 'assistant' | 'system';
  content: string;
}

export interface DialogAnalysisRequest {
  messages: DialogMessage[];
  language: string;
  current_profile: Record<string, unknown>;
  profile_schema: Record<string, unknown>;
  feedback_schema: Record<string, unknown>;
  prompt_extra_text: string;
}

/** The input as the client sent it (optional members may be missing). */
export type RawDialogInput = Pick<DialogAnalysisRequest, 'messages' | 'profile_schema' | 'feedback_schema'> & {
  language?: string;
  current_profile?: Record<string, unknown> | null;
  prompt_extra_text?: string;
};

export const maxInputCharacters = 100_000;
export const defaultLanguage = 'en';

/** A 400 (422 in this interface) naming every field; the message is the first, and how many more. */
export function invalidFields(errors: FieldError[]) {
  const fieldErrors: Record<string, string[]> = {};
  for (const e of errors) (fieldErrors[e.field] ??= []).push(e.message);
  const [first] = errors;
  const more = errors.length - 1;
  const message = `${first!.field} ${first!.message}${more > 0 ? ` (and ${more} more error${more === 1 ? '' : 's'})` : ''}`;
  return badRequest(message, { fieldErrors });
}

/** The size the limit applies to: code points of `input` written as compact JSON. */
export const inputCharacters = (input: unknown) => countCharacters(JSON.stringify(input));

const surrogate = /\p{Cs}/u;
const invalidText = (s: string) => s.includes('\u0000') || surrogate.test(s);

function unicodeErrors(value: unknown, path: string, out: FieldError[]): FieldError[] {
  const message = 'must be valid Unicode text (no NUL characters or lone surrogates)';
  if (typeof value === 'string') {
    if (invalidText(value)) out.push({ field: path, message });
  } else if (Array.isArray(value)) {
    value.forEach((v, i) => unicodeErrors(v, `${path}.${i}`, out));
  } else if (value && typeof value === 'object') {
    for (const [k, v] of Object.entries(value)) {
      if (invalidText(k)) out.push({ field: `${path}.${k}`, message: `(a member name) ${message}` });
      else unicodeErrors(v, `${path}.${k}`, out);
    }
  }
  return out;
}

/** How deep `input` may be nested (a schema thousands of levels deep would overflow ajv's compiler). */
export const maxInputDepth = 64;

/**
 * The first place nested deeper than `max` levels below `root` (breadth-first, iterative: nothing
 * here may overflow the stack on a deep body), or null.
 */
function firstTooDeep(value: unknown, root: string, max: number): string | null {
  type Place = { key: string; parent: Place | null; depth: number };
  let level: Array<[unknown, Place]> = [[value, { key: root, parent: null, depth: 0 }]];
  while (level.length) {
    const next: Array<[unknown, Place]> = [];
    for (const [v, place] of level) {
      if (!v || typeof v !== 'object') continue;
      if (place.depth >= max) {
        const keys: string[] = [];
        for (let q: Place | null = place; q; q = q.parent) keys.push(q.key);
        return keys.reverse().join('.');
      }
      const entries = Array.isArray(v) ? v.map((item, i) => [String(i), item] as const) : Object.entries(v);
      for (const [k, child] of entries) next.push([child, { key: k, parent: place, depth: place.depth + 1 }]);
    }
    level = next;
  }
  return null;
}

export interface ValidatedRequest {
  input: DialogAnalysisRequest;
  inputChars: number;
  schemas: { profile: CallerSchema; feedback: CallerSchema };
}

export async function validateDialogRequest(sandbox: SchemaSandbox, raw: RawDialogInput, timeoutMs: number): Promise<ValidatedRequest> {
  const deep = firstTooDeep(raw, 'input', maxInputDepth);
  if (deep) throw invalidFields([{ field: deep, message: `is nested more than ${maxInputDepth} levels deep` }]);
  const inputChars = inputCharacters(raw);
  if (inputChars > maxInputCharacters) {
    const text = `The input is too large: ${inputChars} characters; the maximum is ${maxInputCharacters} characters.`;
    throw badRequest(text, { fieldErrors: { input: [text] } });
  }
  const unicode = unicodeErrors(raw, 'input', []);
  if (unicode.length) throw invalidFields(unicode);
  const [profile, feedback] = await Promise.all([
    checkCallerSchema(sandbox, 'input.profile_schema', raw.profile_schema, timeoutMs),
    checkCallerSchema(sandbox, 'input.feedback_schema', raw.feedback_schema, timeoutMs),
  ]);
  const errors = [...profile.errors, ...feedback.errors];
  if (errors.length) throw invalidFields(errors);
  return {
    input: {
      messages: raw.messages,
      language: raw.language ?? defaultLanguage,
      current_profile: raw.current_profile ?? {},
      profile_schema: raw.profile_schema,
      feedback_schema: raw.feedback_schema,
      prompt_extra_text: raw.prompt_extra_text ?? '',
    },
    inputChars,
    schemas: { profile: profile.schema!, feedback: feedback.schema! },
  };
}
