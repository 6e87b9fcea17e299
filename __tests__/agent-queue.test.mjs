// A prompt sent while a turn runs is queued, not refused: the stdio agent answers the prompts
// of a session in the order they came, each with its own stop reason, and `session/cancel`
// cancels the running turn and every prompt still waiting.
import assert from 'node:assert/strict'
import test from 'node:test'

import { INIT, startAgent, tempDir } from './acp-harness.mjs'
import { within } from './helpers.mjs'

const say = (text) => ({ type: 'text', text })

test('prompts sent while a turn runs are answered in order, each after the one before', async () => {
  // Each turn says its prompt back after a moment (the embedded backend echoes nothing; the
  // scenario's text is the same every turn, so order is read from when each answer came).
  const scenario = { steps: [{ type: 'sleep', ms: 150 }, say('done'), { type: 'turnEnded' }] }
  const agent = startAgent({ scenario })
  try {
    await agent.agent.request('initialize', INIT)
    const { sessionId } = await agent.agent.request('session/new', { cwd: tempDir(), mcpServers: [] })
    const answered = []
    const prompts = ['one', 'two', 'three'].map((text) =>
      agent.agent.request('session/prompt', { sessionId, prompt: [{ type: 'text', text }] }).then((r) => {
        answered.push({ text, stopReason: r.stopReason, updates: agent.updatesFor(sessionId).length })
        return r
      }),
    )
    await within(20_000, Promise.all(prompts), 'three prompts')
    assert.deepEqual(answered.map((a) => [a.text, a.stopReason]), [['one', 'end_turn'], ['two', 'end_turn'], ['three', 'end_turn']])
    // Each answer came once its own turn's words were out, and before the next turn's.
    const words = agent.updatesFor(sessionId).map((u, i) => [u, i]).filter(([u]) => u.sessionUpdate === 'agent_message_chunk').map(([, i]) => i)
    assert.equal(words.length, 3)
    for (const [n, a] of answered.entries()) {
      assert.ok(words[n] < a.updates, `turn ${n + 1}'s words before its answer`)
      if (n + 1 < words.length) assert.ok(words[n + 1] >= a.updates, `turn ${n + 2}'s words after turn ${n + 1}'s answer`)
    }
  } finally {
    const { records } = await agent.stop()
    assert.equal(records.length, 3, 'three runs, one after the other')
  }
})

test('session/cancel cancels the running turn and the prompts waiting behind it', async () => {
  const scenario = { steps: [say('working'), { type: 'sleep', ms: 30_000 }, say('never'), { type: 'turnEnded' }] }
  const agent = startAgent({ scenario })
  let sessionId
  try {
    await agent.agent.request('initialize', INIT)
    ;({ sessionId } = await agent.agent.request('session/new', { cwd: tempDir(), mcpServers: [] }))
    const prompts = ['one', 'two', 'three'].map((text) => agent.agent.request('session/prompt', { sessionId, prompt: [{ type: 'text', text }] }))
    // A turn is running once its first words are out.
    const wordsOut = async (n) => {
      const deadline = Date.now() + 10_000
      while (agent.updatesFor(sessionId).filter((u) => u.sessionUpdate === 'agent_message_chunk').length < n) {
        assert.ok(Date.now() < deadline, `turn ${n} started`)
        await new Promise((resolve) => setTimeout(resolve, 5))
      }
    }
    await wordsOut(1)
    await agent.agent.notify('session/cancel', { sessionId })
    const answers = await within(10_000, Promise.all(prompts), 'cancelled prompts')
    assert.deepEqual(answers.map((a) => a.stopReason), ['cancelled', 'cancelled', 'cancelled'])
    // The session goes on: the next prompt runs a turn of its own.
    const next = agent.agent.request('session/prompt', { sessionId, prompt: [{ type: 'text', text: 'four' }] })
    await wordsOut(2)
    await agent.agent.notify('session/cancel', { sessionId })
    assert.equal((await within(10_000, next, 'fourth prompt')).stopReason, 'cancelled')
  } finally {
    const { records } = await agent.stop()
    assert.equal(records.length, 2, 'the waiting prompts never reached the server')
  }
})

test('_cursor/steer sends a message into the running turn; without a turn it is refused', async () => {
  const scenario = { steps: [
    say('Working.'),
    // Waits for the injection, then says what became of it.
    { type: 'injectionState', states: [{ queued: {} }, { delivered: { step: 1 } }] },
    say('Done.'),
    { type: 'turnEnded' },
  ] }
  const agent = startAgent({ scenario })
  try {
    const init = await agent.agent.request('initialize', INIT)
    assert.equal(init.agentCapabilities._meta?.cursor?.steer, true, 'advertised')
    const { sessionId } = await agent.agent.request('session/new', { cwd: tempDir(), mcpServers: [] })
    const steer = (prompt) => agent.agent.request('_cursor/steer', { sessionId, prompt })
    await assert.rejects(steer([{ type: 'text', text: 'too early' }]), (e) => e.code === -32600 && /no turn is running/.test(e.message))
    await assert.rejects(steer('not a list'), (e) => e.code === -32602)
    await assert.rejects(steer([{ type: 'image', data: '', mimeType: 'image/png' }]), (e) => e.code === -32602 && /no text/.test(e.message))

    const turn = agent.agent.request('session/prompt', { sessionId, prompt: [{ type: 'text', text: 'fix it' }] })
    await within(10_000, (async () => {
      while (!agent.updatesFor(sessionId).some((u) => u.sessionUpdate === 'agent_message_chunk')) await new Promise((r) => setTimeout(r, 10))
    })(), 'the turn to speak')
    const { injectionId } = await steer([{ type: 'text', text: 'and the docs' }])
    assert.equal(typeof injectionId, 'string')
    assert.equal((await within(20_000, turn, 'the steered turn')).stopReason, 'end_turn')
    const users = agent.updatesFor(sessionId).filter((u) => u.sessionUpdate === 'user_message_chunk').map((u) => u.content.text)
    assert.deepEqual(users, ['and the docs'], 'shown once the server delivered it')
    const { records } = await agent.stop()
    const injected = records[0].messages.find((m) => m.message.conversationAction?.injectContextAction)?.message.conversationAction.injectContextAction
    assert.equal(injected?.injectionId, injectionId)
  } finally {
    await agent.stop()
  }
})
