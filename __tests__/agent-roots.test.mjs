// `additionalDirectories` (advertised in `sessionCapabilities`): a session's roots are its cwd
// and those folders; the built-in tools reach them and nothing beside them, and `session/list`
// reports them.
import assert from 'node:assert/strict'
import fs from 'node:fs'
import path from 'node:path'
import test from 'node:test'

import { INIT, startAgent, tempDir } from './acp-harness.mjs'
import { within } from './helpers.mjs'

const messagesOf = (records) => records.flatMap((r) => r.messages.map((m) => m.message))
const execReplies = (records, id) => messagesOf(records).map((m) => m.execClientMessage).filter((m) => m && m.id === id)

test('a session reads from its additional directories, and only there; session/list names them', async () => {
  const cwd = tempDir()
  const extra = tempDir()
  const outside = tempDir()
  fs.writeFileSync(path.join(extra, 'notes.txt'), 'from the other root\n')
  fs.writeFileSync(path.join(outside, 'secret.txt'), 'not yours\n')
  const scenario = { steps: [
    { type: 'exec', id: 1, args: { readArgs: { path: path.join(extra, 'notes.txt') } } },
    { type: 'exec', id: 2, args: { readArgs: { path: path.join(outside, 'secret.txt') } } },
    { type: 'turnEnded' },
  ] }
  const agent = startAgent({ scenario })
  let records
  try {
    const init = await agent.agent.request('initialize', INIT)
    assert.deepEqual(init.agentCapabilities.sessionCapabilities.additionalDirectories, {})
    const { sessionId } = await agent.agent.request('session/new', { cwd, additionalDirectories: [extra], mcpServers: [] })
    const answer = await within(20_000, agent.agent.request('session/prompt', { sessionId, prompt: [{ type: 'text', text: 'read' }] }), 'prompt')
    assert.equal(answer.stopReason, 'end_turn')
    const { sessions } = await agent.agent.request('session/list', {})
    assert.deepEqual(sessions.find((s) => s.sessionId === sessionId)?.additionalDirectories, [extra])
  } finally {
    ({ records } = await agent.stop())
  }
  assert.equal(execReplies(records, 1)[0].readResult.success.content, 'from the other root\n')
  const refused = execReplies(records, 2)[0].readResult
  assert.ok(!refused.success, 'a file beside the roots is not read')
  assert.doesNotMatch(JSON.stringify(refused), /not yours/)
})

test('prompt links: a text file inside the roots is attached, anything else stays a mention; no block fails the prompt', async () => {
  const cwd = tempDir()
  const outside = tempDir()
  fs.writeFileSync(path.join(cwd, 'notes.md'), '# Notes\nthe plan\n')
  fs.writeFileSync(path.join(outside, 'secret.txt'), 'not yours\n')
  fs.symlinkSync(path.join(outside, 'secret.txt'), path.join(cwd, 'escape.txt'))
  fs.writeFileSync(path.join(cwd, 'image.bin'), Buffer.from([0, 1, 2, 3]))
  const scenario = { steps: [{ type: 'text', text: 'ok' }, { type: 'turnEnded' }] }
  const agent = startAgent({ scenario })
  let records
  try {
    await agent.agent.request('initialize', INIT)
    const { sessionId } = await agent.agent.request('session/new', { cwd, mcpServers: [] })
    const link = (file) => ({ type: 'resource_link', uri: `file://${file}`, name: path.basename(file) })
    const prompt = [
      { type: 'text', text: 'Read these' },
      link(path.join(cwd, 'notes.md')),
      link(path.join(outside, 'secret.txt')),
      link(path.join(cwd, 'escape.txt')),
      link(path.join(cwd, 'image.bin')),
      { type: 'resource_link', uri: 'https://example.com/spec', name: 'The spec' },
      { type: 'resource', resource: { uri: `file://${cwd}/spec.pdf`, blob: Buffer.from('%PDF-1.7').toString('base64'), mimeType: 'application/pdf' } },
    ]
    const answer = await within(20_000, agent.agent.request('session/prompt', { sessionId, prompt }), 'prompt')
    assert.equal(answer.stopReason, 'end_turn')
  } finally {
    ({ records } = await agent.stop())
  }
  const message = messagesOf(records).find((m) => m.runRequest)?.runRequest.action.userMessageAction.userMessage
  assert.deepEqual(message.text.split('\n'), [
    'Read these',
    `@${cwd}/notes.md`,
    `@${outside}/secret.txt`,
    `@${cwd}/escape.txt`,
    `@${cwd}/image.bin`,
    '[The spec](https://example.com/spec)',
    '[attachment not sent: spec.pdf (application/pdf, 8 bytes)]',
  ])
  const files = message.selectedContext.files.map((f) => [f.path, f.content])
  assert.deepEqual(files, [[path.join(cwd, 'notes.md'), '# Notes\nthe plan\n']], 'only the text file inside the roots is read')
  assert.doesNotMatch(JSON.stringify(records), /not yours/)
})
