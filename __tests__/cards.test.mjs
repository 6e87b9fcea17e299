// The one card source through the binding: describeExec, describeExecResult and
// describeInteraction give a host the cards the translation gives the server's tool calls.
import { test } from 'node:test'
import assert from 'node:assert/strict'
import { addon, assertAcpUpdate } from './helpers.mjs'

const { describeExec, describeExecResult, describeInteraction } = addon

test('an exec request becomes the card of its tool; its result settles it', () => {
  const write = { kind: 'write', id: 1, execId: 'e1', args: { path: '/w/out/b.txt', fileText: 'new\n', toolCallId: 'c2' } }
  const card = describeExec(write, { cwd: '/w', previousText: null })
  assert.deepEqual(card, {
    title: 'Write out/b.txt',
    name: 'edit',
    kind: 'edit',
    content: [{ type: 'diff', path: '/w/out/b.txt', oldText: null, newText: 'new\n' }],
    locations: [{ path: '/w/out/b.txt' }],
    rawInput: { path: '/w/out/b.txt' },
    _meta: { tool_name: 'edit' },
  })
  assert.equal(describeExec(write, { cwd: '/w', previousText: 'old\n' }).content[0].oldText, 'old\n')
  // A card is a valid ACP tool_call once it has an id.
  assertAcpUpdate({ sessionUpdate: 'tool_call', toolCallId: 'x', status: 'pending', ...card })
  assert.equal(describeExec({ kind: 'requestContext', id: 2, execId: 'e2', args: {} }), null)

  const ls = { kind: 'ls', id: 3, execId: 'e3', args: { path: '/w' } }
  const outcome = describeExecResult(ls, { success: { directoryTreeRoot: { absPath: '/w', childrenFiles: [{ name: 'a.txt' }] } } }, { cwd: '/w' })
  assert.equal(outcome.status, 'completed')
  assert.deepEqual(outcome.content, [{ type: 'content', content: { type: 'text', text: '```\na.txt\n```' } }])
  assertAcpUpdate({ sessionUpdate: 'tool_call_update', toolCallId: 'x', ...outcome })
})

test('an interaction query becomes the card of its tool', () => {
  const card = describeInteraction({ kind: 'switchMode', id: 1, query: { args: { targetModeId: 'plan', explanation: 'Planning first' } } })
  assert.equal(card.title, 'Switch to plan mode')
  assert.equal(card.kind, 'switch_mode')
  assert.deepEqual(card.content, [{ type: 'content', content: { type: 'text', text: 'Planning first' } }])
})

test('a request without a kind is refused with a clear error', () => {
  assert.throws(() => describeExec({ args: {} }), /no "kind"/)
  assert.throws(() => describeInteraction({ kind: 7 }), /"kind" is not a string/)
  assert.throws(() => describeExecResult({ kind: 'read' }), /result|undefined|Expected/i)
})
