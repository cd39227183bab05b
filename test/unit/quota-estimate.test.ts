import assert from 'node:assert/strict';
import { estimateTokens, quickTokenBound } from '../../lib/messaging/quota.js';
import { countTokens } from '../../lib/platform/tokens.js';

describe('quota hold estimate', () => {
  it('holds at least the tokenizer count for any script, short or long, where characters / 4 would under-hold', () => {
    for (const repeat of [2, 20, 200]) {
      const chinese = '河流把泥沙带到海里，三角洲因此一年年变大。'.repeat(repeat);
      const actual = countTokens(chinese);
      assert.ok(Math.ceil(chinese.length / 4) < actual, 'the naive estimate is too small here');
      assert.ok(estimateTokens(chinese) >= actual, `${repeat} × Chinese`);
      const english = 'Rivers carry sediment to the sea and deltas grow. '.repeat(repeat);
      assert.ok(estimateTokens(english) >= countTokens(english), `${repeat} × English`);
    }
  });

  it('past 1 MiB holds the byte bound without counting, still at least the tokenizer count', () => {
    const english = 'Rivers carry sediment to the sea and deltas grow. '.repeat(22_000);
    assert.ok(Buffer.byteLength(english) > 1 << 20);
    assert.equal(estimateTokens(english), quickTokenBound(english).tokens);
    assert.ok(estimateTokens(english) >= countTokens(english));
  });

  it('does not hold far more than the text can use once it is long', () => {
    const english = 'Rivers carry sediment to the sea and deltas grow. '.repeat(200);
    assert.ok(estimateTokens(english) < Buffer.byteLength(english) / 2, 'a long English text holds about its tokens, not its bytes');
  });
});
