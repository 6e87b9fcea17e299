// What editors rely on, end to end through the stdio agent (issue 27): tool call ids unique in a
// session whatever the server sends, every request about a tool after that tool's card in the
// same turn, cards that show what the tool did, usage where ACP puts it, and cancel that a
// client unable to withdraw a permission prompt cannot hold open.
import { test } from 'node:test'
import assert from 'node:assert/strict'
import fs from 'node:fs'
import path from 'node:path'
import { INIT, startAgent, tempDir } from './acp-harness.mjs'
import { assertAcpUpdate, within } from './helpers.mjs'

const ZED_LIKE = { ...INIT, clientCapabilities: { ...INIT.clientCapabilities, _meta: { terminal_output: true } } }

async function waitFor(predicate, ms, what) {
  const deadline = Date.now() + ms
  while (!predicate()) {
    if (Date.now() > deadline) throw new Error(`${what} not reached within ${ms} ms`)
    await new Promise((r) => setTimeout(r, 10))
  }
}

/** A workspace for the demo turn to list. */
function workspace() {
  const cwd = tempDir()
  fs.writeFileSync(path.join(cwd, 'README.md'), '# hi\n')
  fs.mkdirSync(path.join(cwd, 'src'))
  fs.writeFileSync(path.join(cwd, 'src', 'main.rs'), 'fn main() {}\n')
  return cwd
}

/**
 * Asserts that every request (at index `at` of the session's updates) names a card announced
 * earlier in the same turn: after `turnStart`, before the request.
 */
function assertAfterItsCard(updates, toolCallId, turnStart, at, what) {
  const announced = updates.findIndex((u, i) => i >= turnStart && u.update.sessionUpdate === 'tool_call' && u.update.toolCallId === toolCallId)
  assert.ok(announced >= 0 && announced < at, `${what} about ${toolCallId} went out after its card in the same turn (card at ${announced}, request at ${at}, turn from ${turnStart})`)
}

test('the demo twice in one session: unique ids, requests after their cards, cards that show the listing and the output', async () => {
  const cwd = workspace()
  const agent = startAgent({})
  try {
    await agent.agent.request('initialize', ZED_LIKE)
    const { sessionId } = await agent.agent.request('session/new', { cwd, mcpServers: [] })
    const turnStarts = []
    for (const text of ['what is here?', 'and again']) {
      turnStarts.push(agent.updates.length)
      const response = await within(20_000, agent.agent.request('session/prompt', { sessionId, prompt: [{ type: 'text', text }] }), 'prompt')
      assert.equal(response.stopReason, 'end_turn')
      assert.equal(response.usage.inputTokens, 1200, 'usage where ACP puts it')
      assert.equal(response.usage.totalTokens, 1830)
      assert.deepEqual(response._meta.cursor.usage, response.usage, 'and where it was before')
    }
    const updates = agent.updatesFor(sessionId)
    updates.forEach(assertAcpUpdate)
    const cards = updates.filter((u) => u.sessionUpdate === 'tool_call')
    assert.deepEqual(cards.map((c) => c.toolCallId), ['demo-ls', 'demo-shell', 'demo-ls~2', 'demo-shell~2'], 'ids are unique in the session')
    assert.deepEqual(cards.map((c) => c._meta.tool_name), ['ls', 'shell', 'ls', 'shell'], 'where Zed reads the tool name')
    assert.deepEqual(cards[3].content, [{ type: 'terminal', terminalId: 'demo-shell~2' }], 'the terminal is named after its card')

    assert.equal(agent.permissionRequests.length, 2)
    agent.permissionRequests.forEach((request, turn) => {
      const next = turnStarts[turn + 1] ?? Infinity
      assert.ok(request.at < next)
      assertAfterItsCard(agent.updates, request.params.toolCall.toolCallId, turnStarts[turn], request.at, 'session/request_permission')
    })
    assert.deepEqual(agent.permissionRequests.map((r) => r.params.toolCall.toolCallId), ['demo-shell', 'demo-shell~2'])
    assert.deepEqual(agent.permissionRequests[0].params.options.map((o) => o.kind), ['allow_once', 'allow_always', 'reject_once'])

    for (const id of ['demo-ls', 'demo-ls~2']) {
      const done = updates.find((u) => u.toolCallId === id && u.status === 'completed')
      assert.equal(done.content[0].content.text, '```\nsrc/\n  main.rs\nREADME.md\n```', 'the listing')
    }
    for (const id of ['demo-shell', 'demo-shell~2']) {
      const output = updates.filter((u) => u.toolCallId === id && u._meta?.terminal_output).map((u) => u._meta.terminal_output.data).join('')
      assert.match(output, /^hello from cursor-acp-native\n/, 'the command\'s output in its terminal')
      assert.ok(updates.some((u) => u.toolCallId === id && u.status === 'completed' && u._meta?.terminal_exit?.exit_code === 0))
    }
    for (const u of updates.filter((u) => u.rawOutput !== undefined)) {
      assert.ok(JSON.stringify(u.rawOutput).length < 2000, `rawOutput stays small: ${JSON.stringify(u.rawOutput).slice(0, 200)}`)
    }
  } finally {
    await agent.stop()
  }
})

test('fs/read_text_file goes out after the card of its read, the server\'s or one of its own', async () => {
  const cwd = tempDir()
  fs.writeFileSync(path.join(cwd, 'a.txt'), 'one\ntwo\n')
  const scenario = { steps: [
    { type: 'text', text: 'Reading.' },
    { type: 'toolCallStarted', callId: 'r1', toolCall: { readToolCall: { args: { path: path.join(cwd, 'a.txt') } } } },
    { type: 'exec', id: 1, args: { readArgs: { path: 'a.txt', toolCallId: 'r1' } } },
    { type: 'toolCallCompleted', callId: 'r1', toolCall: { readToolCall: { args: { path: path.join(cwd, 'a.txt') } } }, resultFromExec: 1 },
    // An exec that comes without its tool call.
    { type: 'exec', id: 2, args: { readArgs: { path: 'a.txt', offset: 2, limit: 1 } } },
    { type: 'turnEnded' },
  ] }
  const reads = []
  let agent
  agent = startAgent({
    scenario,
    handlers: { 'fs/read_text_file': (p) => { reads.push({ params: p, at: agent.updates.length }); return { content: p.line ? 'two\n' : 'one\ntwo (unsaved)\n' } } },
  })
  try {
    await agent.agent.request('initialize', INIT)
    const { sessionId } = await agent.agent.request('session/new', { cwd, mcpServers: [] })
    const response = await within(20_000, agent.agent.request('session/prompt', { sessionId, prompt: [{ type: 'text', text: 'read it' }] }))
    assert.equal(response.stopReason, 'end_turn')
    assert.equal(reads.length, 2)
    assertAfterItsCard(agent.updates, 'r1', 0, reads[0].at, 'fs/read_text_file')
    const updates = agent.updatesFor(sessionId)
    const own = updates.find((u) => u.sessionUpdate === 'tool_call' && u.toolCallId !== 'r1')
    assert.equal(own.title, 'Read a.txt (L2–L2)', 'a card of its own for the read without one')
    assertAfterItsCard(agent.updates, own.toolCallId, 0, reads[1].at, 'fs/read_text_file')
    const ownDone = updates.find((u) => u.sessionUpdate === 'tool_call_update' && u.toolCallId === own.toolCallId && u.status)
    assert.equal(ownDone.status, 'completed')
    assert.equal(ownDone.content[0].content.text, 'Lines 2–2 of 2')
    const r1 = updates.find((u) => u.toolCallId === 'r1' && u.status === 'completed')
    assert.equal(r1.content[0].content.text, '2 lines', 'the server\'s card shows the range it read, not the text')
  } finally {
    await agent.stop()
  }
})

test('cancel with a permission pending in a client that cannot withdraw it: cancelled at once, nothing completed, the late answer runs nothing', async () => {
  const cwd = tempDir()
  const marker = path.join(cwd, 'ran')
  const command = `touch ${marker}`
  const scenario = { steps: [
    { type: 'text', text: 'Running it.' },
    { type: 'toolCallStarted', callId: 'sh', toolCall: { shellToolCall: { args: { command } } } },
    { type: 'exec', id: 1, args: { shellStreamArgs: { command, workingDirectory: cwd, toolCallId: 'sh' } } },
    { type: 'toolCallCompleted', callId: 'sh', toolCall: { shellToolCall: { args: { command } } }, resultFromExec: 1 },
    { type: 'text', text: ' Done.' },
    { type: 'turnEnded', inputTokens: 3, outputTokens: 4 },
  ] }
  /** Answers the first prompt only when told to, ignoring `$/cancel_request` (as CodeCompanion's dialog does). */
  const late = []
  const agent = startAgent({
    scenario,
    handlers: {
      'session/request_permission': () => late.length === 0 && agent.permissionRequests.length === 1
        ? new Promise((resolve) => late.push(resolve))
        : { outcome: { outcome: 'selected', optionId: 'allow-once' } },
    },
  })
  try {
    await agent.agent.request('initialize', INIT)
    const { sessionId } = await agent.agent.request('session/new', { cwd, mcpServers: [] })
    const prompt = agent.agent.request('session/prompt', { sessionId, prompt: [{ type: 'text', text: 'run it' }] })
    await waitFor(() => late.length === 1, 10_000, 'the permission request')
    const cancelledAt = agent.updatesFor(sessionId).length
    const started = Date.now()
    await agent.agent.notify('session/cancel', { sessionId })
    const response = await within(5000, prompt, 'the cancelled prompt')
    assert.equal(response.stopReason, 'cancelled')
    assert.ok(Date.now() - started < 1500, `cancel took ${Date.now() - started} ms`)
    const after = agent.updatesFor(sessionId).slice(cancelledAt)
    assert.ok(!after.some((u) => u.sessionUpdate === 'agent_message_chunk'), `no text after the cancel: ${JSON.stringify(after)}`)
    assert.ok(!after.some((u) => u.status === 'completed'), `no card flipped to completed: ${JSON.stringify(after)}`)
    const card = agent.updatesFor(sessionId).filter((u) => u.toolCallId === 'sh').at(-1)
    assert.deepEqual([card.status, card.content[0].content.text], ['failed', 'Cancelled by the user.'])

    // The user answers the stale prompt: nothing runs, and the next turn is a turn of its own.
    late[0]({ outcome: { outcome: 'selected', optionId: 'allow-once' } })
    // Nothing may happen: a bounded wait for something that must not come.
    await new Promise((r) => setTimeout(r, 300))
    assert.equal(fs.existsSync(marker), false, 'the late answer ran nothing')
    const next = await within(20_000, agent.agent.request('session/prompt', { sessionId, prompt: [{ type: 'text', text: 'again' }] }), 'the next prompt')
    assert.equal(next.stopReason, 'end_turn')
    assert.equal(fs.existsSync(marker), true, 'the next turn runs its own, allowed, command')
    assert.deepEqual(agent.permissionRequests.map((r) => r.params.toolCall.toolCallId), ['sh', 'sh~2'])
    assert.ok(agent.updatesFor(sessionId).some((u) => u.toolCallId === 'sh~2' && u.status === 'completed'))
  } finally {
    await agent.stop()
  }
})
