// `session/fork` through the stdio agent: a fork is a new session with the source's history so
// far (its checkpoint, blobs, card ids and title copied by the store), which then goes its own
// way while the source stays as it was; both are prompted, saved, listed and loaded in a new
// process. A fork of an unknown session is -32002 and writes nothing; a fork of a session whose
// turn is running takes the source's last save.
import assert from 'node:assert/strict'
import fs from 'node:fs'
import path from 'node:path'
import test from 'node:test'

import { INIT, startAgent, tempDir } from './acp-harness.mjs'
import { within } from './helpers.mjs'

const messagesOf = (records) => records.flatMap((r) => r.messages.map((m) => m.message))
const textOf = (updates, kind = 'agent_message_chunk') => updates.filter((u) => u.sessionUpdate === kind).map((u) => u.content.text).join('')

/** A length-delimited protobuf field (short values only: a one-byte length). */
const ld = (n, bytes) => Buffer.concat([Buffer.from([(n << 3) | 2, bytes.length]), Buffer.from(bytes)])
/** A checkpoint turn, as `ConversationStateStructure.turns` holds it: a user message and an answer. */
const turn = (question, answer) => ld(1, Buffer.concat([ld(1, ld(1, Buffer.from(question))), ld(2, ld(1, ld(1, Buffer.from(answer))))])).toString('base64')

/** Resolves once `predicate()` holds, or fails after `ms`. */
async function waitFor(predicate, ms, what) {
  const deadline = Date.now() + ms
  while (!predicate()) {
    if (Date.now() > deadline) throw new Error(`${what} not reached within ${ms} ms`)
    await new Promise((resolve) => setTimeout(resolve, 20))
  }
}

const prompt = (agent, sessionId, text) => within(20_000, agent.agent.request('session/prompt', { sessionId, prompt: [{ type: 'text', text }] }), `prompt ${text}`)
const record = (cacheDir, sessionId) => JSON.parse(fs.readFileSync(path.join(cacheDir, 'sessions', `${sessionId}.json`), 'utf8'))
const blobs = (cacheDir, sessionId) => {
  try {
    return fs.readdirSync(path.join(cacheDir, 'blobs', sessionId)).sort()
  } catch {
    return []
  }
}

test('a fork shares the history so far, then goes its own way; both are saved, listed and loaded', async () => {
  const cwd = tempDir()
  const forkCwd = tempDir()
  const cacheDir = tempDir('acp-cache-')
  const first = turn('first question', 'first answer')
  const scenario = { turns: [
    [
      { type: 'kvSet', id: 1, data: 'first question, as a blob' },
      { type: 'toolCallStarted', callId: 'look', toolCall: { lsToolCall: { args: { path: '' } } } },
      { type: 'toolCallCompleted', callId: 'look', toolCall: { lsToolCall: { args: { path: '' } } } },
      { type: 'text', text: 'first answer' },
      { type: 'checkpoint', state: { turns: [first] } },
      { type: 'turnEnded' },
    ],
    [
      { type: 'text', text: 'source answer' },
      { type: 'checkpoint', state: { turns: [first, turn('source question', 'source answer')] } },
      { type: 'turnEnded' },
    ],
    [
      { type: 'toolCallStarted', callId: 'look', toolCall: { lsToolCall: { args: { path: '' } } } },
      { type: 'toolCallCompleted', callId: 'look', toolCall: { lsToolCall: { args: { path: '' } } } },
      { type: 'text', text: 'fork answer' },
      { type: 'checkpoint', state: { turns: [first, turn('fork question', 'fork answer')] } },
      { type: 'turnEnded' },
    ],
  ] }
  const agent = startAgent({ scenario, cacheDir })
  let sourceId
  let forkId
  let records
  try {
    const init = await agent.agent.request('initialize', INIT)
    assert.deepEqual(init.agentCapabilities.sessionCapabilities.fork, {})
    ;({ sessionId: sourceId } = await agent.agent.request('session/new', { cwd, mcpServers: [] }))
    assert.equal((await prompt(agent, sourceId, 'first question')).stopReason, 'end_turn')
    const before = record(cacheDir, sourceId)
    assert.deepEqual(before.saved.cardIds, ['look'])
    assert.ok(blobs(cacheDir, sourceId).length > 0, 'the source has blobs')

    const forked = await agent.agent.request('session/fork', { sessionId: sourceId, cwd: forkCwd, mcpServers: [] })
    forkId = forked.sessionId
    assert.ok(forkId && forkId !== sourceId)
    assert.equal(forked.modes.currentModeId, 'agent')
    assert.ok(forked.configOptions.some((o) => o.id === 'model'))
    // Its title comes after the response, as the source's came after its first prompt.
    await waitFor(() => agent.updatesFor(forkId).some((u) => u.sessionUpdate === 'session_info_update' && u.title === 'first question'), 5000, "the fork's title")

    const copy = record(cacheDir, forkId)
    assert.equal(copy.cwd, forkCwd)
    assert.equal(copy.title, 'first question')
    assert.equal(copy.saved.checkpoint, before.saved.checkpoint, 'the checkpoint is copied')
    assert.deepEqual(copy.saved.cardIds, ['look'], 'the card ids used so far stay used in the fork')
    assert.equal(copy.saved.conversationId, forkId, 'a conversation of its own')
    assert.deepEqual(blobs(cacheDir, forkId), blobs(cacheDir, sourceId), 'the blobs are copied')
    assert.deepEqual(record(cacheDir, sourceId), before, 'the source is untouched')

    assert.equal((await prompt(agent, sourceId, 'source question')).stopReason, 'end_turn')
    assert.equal((await prompt(agent, forkId, 'fork question')).stopReason, 'end_turn')
    // The fork's next card cannot take an id its history used.
    assert.deepEqual(agent.updatesFor(forkId).filter((u) => u.sessionUpdate === 'tool_call').map((u) => u.toolCallId), ['look~2'])
  } finally {
    ;({ records } = await agent.stop())
  }
  // The fork's run request continued the copied checkpoint under the fork's conversation id.
  const runs = messagesOf(records).filter((m) => m.runRequest).map((m) => m.runRequest)
  assert.equal(runs.length, 3)
  assert.equal(runs[2].conversationId, forkId)
  assert.deepEqual(runs[2].conversationState?.turns, [first])
  assert.equal(runs[1].conversationId, sourceId)

  const next = startAgent({ scenario, cacheDir })
  try {
    await next.agent.request('initialize', INIT)
    const listed = (await next.agent.request('session/list', {})).sessions
    assert.deepEqual(listed.map((s) => s.sessionId).sort(), [sourceId, forkId].sort())
    assert.ok(listed.every((s) => s.title === 'first question'), JSON.stringify(listed))
    assert.equal(listed.find((s) => s.sessionId === forkId).cwd, forkCwd)

    await next.agent.request('session/load', { sessionId: sourceId, cwd, mcpServers: [] })
    const source = next.updatesFor(sourceId)
    assert.equal(textOf(source, 'user_message_chunk'), 'first questionsource question')
    assert.equal(textOf(source), 'first answersource answer')

    await next.agent.request('session/load', { sessionId: forkId, cwd: forkCwd, mcpServers: [] })
    const fork = next.updatesFor(forkId)
    assert.equal(textOf(fork, 'user_message_chunk'), 'first questionfork question')
    assert.equal(textOf(fork), 'first answerfork answer')
    assert.equal((await prompt(next, forkId, 'and on')).stopReason, 'end_turn')
  } finally {
    await next.stop()
  }
})

test('forking an unknown session is -32002 and writes nothing; bad params are -32602', async () => {
  const cacheDir = tempDir('acp-cache-')
  const agent = startAgent({ cacheDir })
  try {
    await agent.agent.request('initialize', INIT)
    const files = () => [...fs.readdirSync(path.join(cacheDir, 'sessions')), ...fs.readdirSync(path.join(cacheDir, 'blobs'))]
    const before = files()
    await assert.rejects(agent.agent.request('session/fork', { sessionId: 'no-such-session', cwd: tempDir(), mcpServers: [] }), (e) => e.code === -32002)
    await assert.rejects(agent.agent.request('session/fork', { sessionId: '../../etc/passwd', cwd: tempDir() }), (e) => e.code === -32002)
    const { sessionId } = await agent.agent.request('session/new', { cwd: tempDir(), mcpServers: [] })
    const made = files()
    await assert.rejects(agent.agent.request('session/fork', { sessionId, cwd: 'relative/path' }), (e) => e.code === -32602)
    await assert.rejects(agent.agent.request('session/fork', { sessionId, cwd: tempDir(), mcpServers: [{ name: 'x' }] }), (e) => e.code === -32602)
    await assert.rejects(agent.agent.request('session/fork', { cwd: tempDir() }), (e) => e.code === -32602)
    assert.deepEqual(files(), made, 'nothing written')
    assert.equal(before.length, 0)
  } finally {
    await agent.stop()
  }
})

test('a fork of a session whose turn is running takes its last save', async () => {
  const cacheDir = tempDir('acp-cache-')
  const cwd = tempDir()
  const first = turn('first question', 'first answer')
  const scenario = { turns: [
    [{ type: 'text', text: 'first answer' }, { type: 'checkpoint', state: { turns: [first] } }, { type: 'turnEnded' }],
    [
      { type: 'text', text: 'thinking it over' },
      { type: 'sleep', ms: 1500 },
      { type: 'checkpoint', state: { turns: [first, turn('slow question', 'slow answer')] } },
      { type: 'turnEnded' },
    ],
  ] }
  const agent = startAgent({ scenario, cacheDir })
  try {
    await agent.agent.request('initialize', INIT)
    const { sessionId } = await agent.agent.request('session/new', { cwd, mcpServers: [] })
    await prompt(agent, sessionId, 'first question')
    const saved = record(cacheDir, sessionId).saved.checkpoint
    const before = agent.updatesFor(sessionId).length
    const slow = prompt(agent, sessionId, 'slow question')
    await waitFor(() => textOf(agent.updatesFor(sessionId).slice(before)).includes('thinking it over'), 10_000, 'the slow turn to start')
    const { sessionId: forkId } = await agent.agent.request('session/fork', { sessionId, cwd })
    assert.equal(record(cacheDir, forkId).saved.checkpoint, saved, 'the checkpoint of the last save')
    assert.equal((await slow).stopReason, 'end_turn')
    assert.notEqual(record(cacheDir, sessionId).saved.checkpoint, saved, 'the source saved its turn')
    assert.equal(record(cacheDir, forkId).saved.checkpoint, saved, 'and the fork did not get it')
  } finally {
    await agent.stop()
  }
})
