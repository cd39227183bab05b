import assert from 'node:assert/strict';
import crypto from 'node:crypto';
import { eventually, type client } from '../support/system.js';
import { jsonCompletion, scripted, type Step, type UpstreamCall } from '../support/openai-upstream.js';

type Http = ReturnType<typeof client>;

/** The spec's map form: field name → JSON Schema of the field. */
export const profileMap = {
  name: { type: 'string', description: 'First name' },
  age: { type: 'integer', minimum: 0 },
  level: { type: 'string', enum: ['A1', 'A2', 'B1', 'B2'] },
};
export const feedbackMap = {
  summary: { type: 'string', maxLength: 200 },
  score: { type: 'integer', minimum: 1, maximum: 5 },
};

/** A full-form schema with an optional nested member (`address.zip`) and an optional field (`nickname`). */
export const profileFull = {
  type: 'object',
  properties: {
    name: { type: 'string' },
    nickname: { type: 'string' },
    address: { type: 'object', properties: { city: { type: 'string' }, zip: { type: 'string', pattern: '^[0-9]{5}$' } }, required: ['city'] },
  },
  required: ['name', 'address'],
  additionalProperties: false,
};

export const validAnswer = { profile: { name: 'Ana', age: 34, level: 'A2' }, feedback: { summary: 'Asked clear questions.', score: 4 } };
export const invalidAnswer = { profile: { name: 'Ana', age: 'thirty', level: 'A2' }, feedback: { summary: 'Fine.', score: 4 } };

/** A dialog carrying a token, so a test's upstream script answers only its own analysis. */
export function dialogInput(token: string, extra: Record<string, unknown> = {}) {
  return {
    messages: [
      { role: 'system', content: `Conversation ${token} of a language course.` },
      { role: 'assistant', content: 'Hallo! Wie heißt du und wie alt bist du?' },
      { role: 'user', content: 'Ich heiße Ana und bin 34.' },
    ],
    profile_schema: profileMap,
    feedback_schema: feedbackMap,
    ...extra,
  };
}

export const newToken = () => `tok-${crypto.randomUUID()}`;

/** Whether an upstream call belongs to the dialog with this token. */
export const callOf = (token: string) => (call: UpstreamCall) =>
  call.path === '/v1/chat/completions' && JSON.stringify(call.body?.messages ?? []).includes(token);

/** A responder that answers this dialog's calls with `steps` (the last repeats), others with the echo. */
export const forDialog = (token: string, steps: Step[]) => scripted(steps, { match: callOf(token) });

/** Steps that answer with a JSON value. */
export const json = (value: unknown) => (call: UpstreamCall) => ({ json: jsonCompletion(call, value) });

export async function create(http: Http, key: string, input: unknown) {
  const res = await http('POST', '/v2/dialog_analyses', { key, json: { input } });
  assert.equal(res.status, 200, JSON.stringify(res.body));
  return res.body as { id: string; state: string; created_at: string };
}

export const uuidOf = (path: string) => path.split('/').at(-1)!;

export async function waitForState(http: Http, key: string, path: string, state: string, timeoutMs = 60_000) {
  return eventually(`${path} to be ${state}`, async () => {
    const r = await http('GET', path, { key });
    assert.equal(r.status, 200, JSON.stringify(r.body));
    if (r.body.state !== 'in-progress' && r.body.state !== state) throw new Error(`${path} is ${r.body.state}: ${JSON.stringify(r.body)}`);
    return r.body.state === state ? r.body : null;
  }, timeoutMs);
}

/** Fills messages[0].content until `input` is exactly `n` code points as compact JSON. */
export function padInputTo(input: { messages: Array<{ content: string }> }, n: number, filler = 'x') {
  const size = () => [...JSON.stringify(input)].length;
  const fillerSize = [...filler].length;
  while (size() + fillerSize <= n) input.messages[0]!.content += filler.repeat(Math.max(1, Math.floor((n - size()) / fillerSize / 2)));
  while (size() < n) input.messages[0]!.content += 'x';
  assert.equal(size(), n);
  return input;
}
