// Lint of every TypeScript file, run by scripts/test. typescript-eslint's recommended rules, and
// eslint-plugin-regexp, which flags regular expressions that can backtrack super-linearly: one
// such expression over user text can block the event loop for every tenant.
import js from '@eslint/js';
import globals from 'globals';
import tseslint from 'typescript-eslint';
import regexp from 'eslint-plugin-regexp';

export default tseslint.config(
  { ignores: ['node_modules/**', 'generated/**', '.data/**'] },
  js.configs.recommended,
  ...tseslint.configs.recommended,
  regexp.configs['flat/recommended'],
  {
    languageOptions: { globals: globals.node },
    rules: {
      'regexp/no-super-linear-backtracking': 'error',
      'regexp/no-super-linear-move': 'error',
      // `_`-prefixed names are deliberately unused (an Express error handler's fourth argument).
      '@typescript-eslint/no-unused-vars': ['error', { argsIgnorePattern: '^_', varsIgnorePattern: '^_', ignoreRestSiblings: true }],
    },
  },
  {
    // Tests read JSON answers whose shape is what they assert.
    files: ['test/**'],
    rules: { '@typescript-eslint/no-explicit-any': 'off' },
  },
);
