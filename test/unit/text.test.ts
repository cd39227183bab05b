import assert from 'node:assert/strict';
import { hasControlCharacters, isBlank, nameFromTitle, replaceControlCharacters, trimLineEnds, trimOf } from '../../lib/platform/text.js';
import { renderCleanMarkdown } from '../../lib/knowledge/content/clean-markdown.js';

describe('text helpers', () => {
  it('trim only the given characters, at the ends only', () => {
    assert.equal(trimOf('__a_b__', '_'), 'a_b');
    assert.equal(trimOf('\0 07 \0', '\0 '), '07');
    assert.equal(trimLineEnds('a \t\n  b  \nc'), 'a\n  b\nc');
  });

  it('find and replace control characters but leave other text alone', () => {
    assert.equal(hasControlCharacters('report\n.pdf'), true);
    assert.equal(hasControlCharacters('Bericht über Zölle.pdf'), false);
    assert.equal(replaceControlCharacters('a\u0000b\u007fc\td', '_'), 'a_b_c_d');
  });

  it('text of whitespace, controls and invisible format characters is blank; anything visible is not', () => {
    for (const blank of ['', ' \n\t', '\u200b\u200c\u200d', '\ufeff\u2060', '\u200e\u200f\u00ad', '\u0000\u0007 ']) assert.equal(isBlank(blank), true, JSON.stringify(blank));
    for (const text of ['.', '\u200bx', 'é', '👍', '\u3000中']) assert.equal(isBlank(text), false, JSON.stringify(text));
  });

  it('a title becomes a name on one line: no control characters, spaces collapsed, cut at the limit but never inside an emoji', () => {
    assert.equal(nameFromTitle('\n  Tides\r\n\texplained\u0007 \u0000'), 'Tides explained');
    assert.equal(nameFromTitle('Port  Vell – Faro ✓'), 'Port Vell – Faro ✓');
    assert.equal(nameFromTitle(' \n\t\u0001 '), null);
    assert.equal(nameFromTitle(null), null);
    assert.equal(nameFromTitle('abc😀def', 4), 'abc');
    assert.equal(nameFromTitle('ab cd', 3), 'ab');
  });
});

describe('clean Markdown of rewritten content', () => {
  it('unwraps a document that is wholly one markdown fence and tidies it', () => {
    assert.equal(renderCleanMarkdown('\n```markdown\n# Title\nText  \n\n\n\nMore\n```\n\n'), '# Title\n\nText\n\nMore\n');
    assert.equal(renderCleanMarkdown('~~~md\nA\n~~~'), 'A\n');
    assert.equal(renderCleanMarkdown('```md\nA\n````'), '```md\nA\n````\n', 'a closing fence of another length is not the same fence');
  });

  it('renders lines made of hundreds of thousands of spaces in linear time (no catastrophic backtracking)', function () {
    // A regular expression that backtracks over a run of spaces (e.g. /[ \t]+$/ on spaces followed
    // by a letter, or the old whole-document fence expression) takes time quadratic in the run:
    // about 0.6 s for 40,000 spaces as measured on the 2-core test machine, so some 90 s for
    // 500,000: far past this test's 5 s even on a machine several times faster. The linear
    // implementation renders all of it in tens of milliseconds.
    this.timeout(5_000);
    const spaces = ' '.repeat(500_000);
    assert.equal(renderCleanMarkdown(`${spaces}x${spaces}\n${spaces}\ny`), `${spaces}x\n\ny\n`);
    assert.equal(renderCleanMarkdown(`# Title${spaces}\nbody${spaces}\t`), '# Title\n\nbody\n');
    const fence = '```';
    assert.equal(renderCleanMarkdown(`${fence}markdown\nA\n${fence}${spaces}x`), `${fence}markdown\nA\n${fence}${spaces}x\n`, 'a closing line that is not a fence leaves the fence open');
  });
});
