import assert from 'node:assert/strict';
import { Tiktoken } from 'js-tiktoken/lite';
import o200k from 'js-tiktoken/ranks/o200k_base';
import { countTokens, lastTokens, splitAtToken } from '../../lib/platform/tokens.js';

/** lib/platform/tokens.ts: o200k counts for admission bounds and for cutting long inputs. */
describe('token counts', function () {
  this.timeout(60_000);
  const reference = new Tiktoken(o200k);
  const base64 = (bytes: number) => Buffer.from(Array.from({ length: bytes }, (_, i) => (i * 7919 + 13) % 256)).toString('base64');

  it('ordinary text is counted exactly as the o200k encoder counts it', () => {
    const text = 'Rivers carry sediment to the sea, and deltas grow. 河流把泥沙带到海里。 Ünïcödé, emoji 😀 and code `x = 1;`\n\n'.repeat(40);
    assert.equal(countTokens(text), reference.encode(text).length);
  });

  it('a long run without spaces (a base64 blob, a row of x) is counted close to its exact count, and its tokens decode back to the text', () => {
    const blob = base64(3_000);
    const exact = reference.encode(blob).length;
    const counted = countTokens(blob);
    assert.ok(Math.abs(counted - exact) <= exact * 0.03, `${counted} against ${exact}`);
    assert.equal(countTokens('x'.repeat(2_000)), reference.encode('x'.repeat(2_000)).length);
    const text = `before ${blob} middle ${'😀'.repeat(300)} after`;
    const [head, rest] = splitAtToken(text, 500);
    assert.equal(head + rest, text);
    assert.ok(head.length > 0 && rest.length > 0);
    assert.ok(text.endsWith(lastTokens(text, 120)));
    assert.ok(!lastTokens(text, 120).includes('\uFFFD'), 'no pair of surrogates was cut');
  });

  it('a run of a million characters is counted (the encoder alone takes time quadratic in a run: hours)', () => {
    assert.equal(countTokens('x'.repeat(1_000_000)), 125_000);
  });
});
