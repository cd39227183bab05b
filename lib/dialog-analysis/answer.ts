import { schemaErrorField, schemaErrorMessage, withoutRejectedAlternatives } from '../platform/schema-errors.js';
import type { CallerSchema } from './caller-schema.js';
import { seconds } from './caller-schema.js';
import type { AjvError, SchemaSandbox } from './schema-sandbox.js';
import { dropOptionalNulls, type OptionalSite } from './strict-schema.js';

/**
 * Judges one answer of the model: it must be a JSON object `{profile, feedback}` whose halves
 * conform to the caller's schemas, checked by ajv (in the schema sandbox) whatever the response
 * mode. What is wrong is said as lines `<path>: <message>` (paths and ajv messages only, never
 * values of the answer), which the next call shows the model.
 */
export type Judgement = { valid: true; output: string } | { valid: false; errors: string };

export interface AnswerText {
  content: string | null;
  refusal: string | null;
  finishReason: string | null;
}

const maxErrorLines = 50;
const maxErrorChars = 4000;

function parseJson(content: string): { value: unknown } | { error: string } {
  const candidates = [content.trim()];
  // Models without JSON mode like to wrap JSON in a Markdown fence, or to say something around it.
  const t = candidates[0]!;
  if (t.startsWith('```')) {
    const firstLineEnd = t.indexOf('\n');
    const closing = t.lastIndexOf('```');
    if (firstLineEnd > 0 && closing > firstLineEnd) candidates.push(t.slice(firstLineEnd + 1, closing));
  }
  const open = t.indexOf('{');
  const close = t.lastIndexOf('}');
  if (open >= 0 && close > open) candidates.push(t.slice(open, close + 1));
  let first: string | null = null;
  for (const c of candidates) {
    try {
      return { value: JSON.parse(c) };
    } catch (err) {
      first ??= (err as Error).message;
    }
  }
  return { error: first ?? 'empty' };
}

const isObject = (v: unknown): v is Record<string, unknown> => typeof v === 'object' && v !== null && !Array.isArray(v);

function errorLine(half: string, e: AjvError): string {
  return `${[half, ...schemaErrorField(e)].join('.')}: ${schemaErrorMessage(e, { spell: (v) => JSON.stringify(v), ourSchema: false })}`;
}

/** At most 50 lines and 4,000 characters, saying how many more there were. */
export function boundedErrors(lines: string[]): string {
  const kept: string[] = [];
  let chars = 0;
  for (const line of [...new Set(lines)]) {
    if (kept.length >= maxErrorLines || chars + line.length > maxErrorChars) break;
    kept.push(line);
    chars += line.length + 1;
  }
  const more = new Set(lines).size - kept.length;
  return more > 0 ? [...kept, `... and ${more} more`].join('\n') : kept.join('\n');
}

export async function judgeAnswer(
  sandbox: SchemaSandbox,
  answer: AnswerText,
  schemas: { profile: CallerSchema; feedback: CallerSchema },
  options: { optional: OptionalSite[] | null; maxOutputTokens: number; validationTimeoutMs: number },
): Promise<Judgement> {
  const invalid = (...lines: string[]): Judgement => ({ valid: false, errors: boundedErrors(lines) });
  if (answer.refusal) return invalid(`answer: the model refused: ${answer.refusal.slice(0, 500)}`);
  if (answer.finishReason === 'length') return invalid(`answer: cut off at the output limit (${options.maxOutputTokens} tokens); answer more briefly`);
  const parsed = parseJson(answer.content ?? '');
  if ('error' in parsed) return invalid(`answer: is not valid JSON (${parsed.error.slice(0, 200)})`);
  const value = parsed.value;
  if (!isObject(value)) return invalid('answer: must be a JSON object with the members "profile" and "feedback"');
  const missing = ['profile', 'feedback'].filter((k) => !Object.hasOwn(value, k));
  if (missing.length) return invalid(...missing.map((k) => `${k}: is required`));
  if (options.optional) dropOptionalNulls(value, options.optional);
  const output = { profile: value.profile, feedback: value.feedback };
  const result = await sandbox.run({
    op: 'validate',
    dialects: { profile: schemas.profile.dialect, feedback: schemas.feedback.dialect },
    schemas: { profile: schemas.profile.schema, feedback: schemas.feedback.schema },
    data: output,
  });
  if ('timedOut' in result) return invalid(`answer: validating it against the schemas took longer than ${seconds(options.validationTimeoutMs)} (a pattern of the schemas backtracks on it)`);
  if ('crashed' in result) return invalid(`answer: could not be validated: ${result.crashed}`);
  if ('compileError' in result) return invalid(`answer: could not be validated: the schemas do not compile (${result.compileError.message})`);
  if (!('errors' in result)) return invalid('answer: could not be validated');
  const lines = (['profile', 'feedback'] as const).flatMap((half) => withoutRejectedAlternatives(result.errors[half] ?? []).map((e) => errorLine(half, e)));
  return lines.length ? invalid(...lines) : { valid: true, output: JSON.stringify(output) };
}
