// A session's title, as an editor's list of threads shows it, made from the first prompt.
import assert from 'node:assert/strict'
import test from 'node:test'

import { titleOf } from '../cli/session.mjs'

test('the title is the first line with words, whitespace collapsed', () => {
  assert.equal(titleOf('  fix the\tbug   \n\nand then the docs'), 'fix the bug')
  assert.equal(titleOf('\n\n   \n  Why does   the test fail?\n'), 'Why does the test fail?')
})

test('a long first line is cut at a word boundary, with an ellipsis', () => {
  const prompt = 'Refactor the translator so that every card goes through the ledger, and then write the property test for it'
  const title = titleOf(prompt)
  assert.ok([...title].length <= 80, title)
  assert.equal(title, 'Refactor the translator so that every card goes through the ledger, and then…')
  // No word is cut, and no punctuation hangs before the ellipsis.
  assert.equal(titleOf(`${'word '.repeat(15)}and, more words follow here`), `${'word '.repeat(15).trim()}…`)
})

test('a line without spaces is cut by characters, never inside one', () => {
  const title = titleOf('日本語'.repeat(40))
  assert.equal([...title].length, 80)
  assert.ok(title.endsWith('…'))
  assert.equal(titleOf('x'.repeat(80)), 'x'.repeat(80), 'exactly 80 stays whole')
})
