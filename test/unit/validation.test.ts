import assert from 'node:assert/strict';
import { validate, type JsonSchema } from '../../api/http/validation.js';
import { createKnowledgeBaseForm, limitsPatchBody, partnerName } from '../../api/knowledge-base/schemas.js';
import { ttsTypeQuery } from '../../api/voices/schemas.js';
import { speechBody } from '../../api/speech/schemas.js';
import { AppError } from '../../lib/platform/errors.js';

/** The sentence and field errors a client reads for an invalid part. */
function refusal(where: 'body' | 'form', schema: JsonSchema, value: unknown, coerce = false): { message: string; fields: Record<string, string[]> } {
  try {
    validate(where, schema, value, coerce);
  } catch (err) {
    assert.ok(err instanceof AppError);
    return { message: err.message, fields: { ...(err.details?.fieldErrors as Record<string, string[]>) } };
  }
  assert.fail(`${JSON.stringify(value)} was accepted`);
}

describe('validation messages of fields that take alternatives', () => {
  it('a value of an alternative\'s type is told what that alternative wants, not what the others want', () => {
    assert.equal(refusal('body', limitsPatchBody, { character_limit: -1 }).message, 'body.character_limit must be >= 0');
    assert.equal(refusal('body', limitsPatchBody, { token_limit: 1.5 }).message, 'body.token_limit must be integer or null');
    assert.equal(refusal('body', limitsPatchBody, { character_limit: '5' }).message, 'body.character_limit must be integer or null');
    const voice = refusal('body', speechBody, { model: 'tts-1', voice: { id: '' }, input: 'hi' });
    assert.equal(voice.message, 'body.voice.id must NOT have fewer than 1 characters');
    assert.deepEqual(voice.fields, { 'voice.id': ['must NOT have fewer than 1 characters'] });
    assert.equal(refusal('body', speechBody, { model: 'tts-1', voice: '', input: 'hi' }).message, 'body.voice must NOT have fewer than 1 characters');
    assert.equal(refusal('body', speechBody, { model: 'tts-1', voice: { name: 'x' }, input: 'hi' }).message, 'body.voice.id is required; body.voice.name is not allowed');
  });

  it('a value of a type no alternative takes is told the types, once', () => {
    const voice = refusal('body', speechBody, { model: 'tts-1', voice: 5, input: 'hi' });
    assert.equal(voice.message, 'body.voice must be string or object');
    assert.deepEqual(voice.fields, { voice: ['must be string or object'] });
    assert.equal(refusal('body', limitsPatchBody, { dollar_limit_usd: true }).message, 'body.dollar_limit_usd must be string, number or null');
    const nested: JsonSchema = { type: 'object', properties: { v: { anyOf: [{ anyOf: [{ type: 'integer' }, { type: 'boolean' }] }, { type: 'null' }] } } };
    assert.equal(refusal('body', nested, { v: 'x' }).message, 'body.v must be integer, boolean or null');
  });

  it('a decimal amount says what it takes, as a string or as a number', () => {
    const wanted = 'body.dollar_limit_usd must be a decimal amount: at most 20 digits, and at most 8 after the point';
    assert.equal(refusal('body', limitsPatchBody, { dollar_limit_usd: 0.123456789 }).message, wanted);
    assert.equal(refusal('body', limitsPatchBody, { dollar_limit_usd: '1e3' }).message, wanted);
    assert.equal(refusal('body', limitsPatchBody, { dollar_limit_usd: -2 }).message, 'body.dollar_limit_usd must be >= 0');
    assert.equal(refusal('body', limitsPatchBody, { dollar_limit_usd: 1e-9 }).message, wanted);
    assert.equal(refusal('body', limitsPatchBody, { dollar_limit_usd: 1e21 }).message, wanted);
    // Amounts with 7 or 8 decimals, which JavaScript prints in exponent form (5e-7), are valid numbers too.
    for (const dollars of [0.0000005, 0.00000001, 12.00000001, 99999999999999.9]) {
      assert.doesNotThrow(() => validate('body', limitsPatchBody, { dollar_limit_usd: dollars }, false), String(dollars));
    }
  });

  it('a value that does not fit a pattern (partner name, OCR languages, TTS type) is told what it takes, not the regular expression', () => {
    const schema: JsonSchema = { type: 'object', properties: { new_name: partnerName } };
    assert.equal(refusal('form', schema, { new_name: 'acme 2' }, true).message, 'form.new_name must be a partner name: 1-64 letters, digits, ".", "_" or "-", the first a letter or digit');
    const ocr = refusal('form', createKnowledgeBaseForm, { name: 'kb', ocr_languages: 'eng,klingon' }, true).message;
    assert.match(ocr, /^form\.ocr_languages must be 1-5 comma-separated OCR language codes, each one of eng, deu, /);
    assert.doesNotMatch(ocr, /\(\?:/, 'no regular expression');
    assert.equal(refusal('form', ttsTypeQuery, { tts_type: 'XTTS' }, true).message, 'form.tts_type must be a TTS type: 1-64 lower-case letters, digits, ".", "_" or "-", the first a letter or digit');
  });

  it('each item of an array is judged on its own, and every error of every field is still reported', () => {
    const schema: JsonSchema = { type: 'object', properties: { names: { type: 'array', items: { anyOf: [{ type: 'string', maxLength: 3 }, { type: 'null' }] } }, n: { type: 'integer' } } };
    const r = refusal('body', schema, { names: ['abcd', 'ok', 7, null], n: 'x' });
    assert.equal(r.message, 'body.names.0 must NOT have more than 3 characters; body.names.2 must be string or null; body.n must be integer');
  });

  it('a oneOf that more than one alternative matches says so', () => {
    const schema: JsonSchema = { type: 'object', properties: { v: { oneOf: [{ type: 'number' }, { type: 'integer' }, { type: 'string' }] } } };
    assert.equal(refusal('body', schema, { v: 5 }).message, 'body.v must match exactly one schema in oneOf');
  });
});
