import assert from 'node:assert/strict';
import { estimateTokens } from '../../lib/messaging/quota.js';
import { countTokens } from '../../lib/kb/tokens.js';

describe('quota hold estimate', () => {
  it('holds at least the tokenizer count for any script, where characters / 4 would under-hold', () => {
    const chinese = '河流把泥沙带到海里，三角洲因此一年年变大。'.repeat(20);
    const actual = countTokens(chinese);
    assert.ok(Math.ceil(chinese.length / 4) < actual, 'the naive estimate is too small here');
    assert.ok(estimateTokens(chinese) >= actual);
    const english = 'Rivers carry sediment to the sea and deltas grow. '.repeat(20);
    assert.ok(estimateTokens(english) >= countTokens(english));
  });
});
