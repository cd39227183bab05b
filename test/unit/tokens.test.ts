import assert from 'node:assert/strict';
import { Tiktoken } from 'js-tiktoken/lite';
import o200k from 'js-tiktoken/ranks/o200k_base';
import { countTokens, countTokensInTurns, lastTokens, tokenPieces } from '../../lib/platform/tokens.js';
import { timerTicksDuring } from '../support/event-loop.js';
import { longProse } from '../support/samples.js';

/** lib/platform/tokens.ts: o200k counts for admission bounds and for cutting long inputs. */
describe('token counts', function () {
  this.timeout(60_000);
  const reference = new Tiktoken(o200k);
  const base64 = (bytes: number) => Buffer.from(Array.from({ length: bytes }, (_, i) => (i * 7919 + 13) % 256)).toString('base64');

  it('ordinary text is counted exactly as the o200k encoder counts it', () => {
    const text = 'Rivers carry sediment to the sea, and deltas grow. 河流把泥沙带到海里。 Ünïcödé, emoji 😀 and code `x = 1;`\n\n'.repeat(40);
    assert.equal(countTokens(text), reference.encode(text).length);
  });

  it('a long text of many paragraphs and scripts is counted exactly, whole and in event loop turns', async () => {
    const text = longProse(300_000);
    const exact = reference.encode(text).length;
    assert.equal(countTokens(text), exact);
    assert.equal(await countTokensInTurns(text), exact);
  });

  it('counting a long text in turns leaves the event loop free meanwhile', async () => {
    const { result, ticks } = await timerTicksDuring(() => countTokensInTurns(longProse(2_000_000)));
    assert.ok(result > 400_000);
    assert.ok(ticks >= 3, `a 10 ms timer fired ${ticks} times while 2 MB were counted`);
  });

  it('a long run without spaces (a base64 blob, a row of x) is counted close to its exact count, and its tokens decode back to the text', async () => {
    const blob = base64(3_000);
    const exact = reference.encode(blob).length;
    const counted = countTokens(blob);
    assert.ok(Math.abs(counted - exact) <= exact * 0.03, `${counted} against ${exact}`);
    assert.equal(countTokens('x'.repeat(2_000)), reference.encode('x'.repeat(2_000)).length);
    const text = `before ${blob} middle ${'😀'.repeat(300)} after`;
    const pieces = await tokenPieces(text, 500);
    assert.ok(pieces.length > 1);
    assert.equal(pieces.join(''), text);
    for (const piece of pieces) assert.ok(countTokens(piece) <= 500 && !piece.includes('\uFFFD'), `a piece of ${countTokens(piece)} tokens`);
    assert.ok(text.endsWith(lastTokens(text, 120)));
    assert.ok(!lastTokens(text, 120).includes('\uFFFD'), 'no pair of surrogates was cut');
  });

  it('a run of a million characters is counted (the encoder alone takes time quadratic in a run: hours)', () => {
    assert.equal(countTokens('x'.repeat(1_000_000)), 125_000);
  });
});
