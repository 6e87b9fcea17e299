// The stdio agent's tool cards as an editor receives them, against the embedded demo turn (its
// server announces `demo-ls` and `demo-shell` in every turn): whatever update a cancel lands
// on, no update names a card the editor was not told of, no card id repeats in the session
// (after a restart too), an ended card stays ended, and once cancelled nothing new goes out.
// CARD_CANCEL_RUNS=1000 runs the cancel case that many times with a random cancel point.
import assert from 'node:assert/strict'
import test from 'node:test'

import { INIT, startAgent, tempDir } from './acp-harness.mjs'
import { within } from './helpers.mjs'

const WORDS = new Set(['agent_message_chunk', 'agent_thought_chunk'])

/**
 * Checks a session's updates as one editor received them, across its turns. `cancelledAt[i]`
 * is the index of the first update received after a cancel was sent in turn i's range.
 * @param {any[]} updates
 * @param {{ from: number, to: number, cancelledAt?: number }[]} turns
 */
function assertCardRules(updates, turns) {
  const announced = new Set()
  const ended = new Set()
  for (const { from, to, cancelledAt } of turns) {
    const thisTurn = []
    for (let i = from; i < to; i++) {
      const u = updates[i]
      const where = `update ${i}: ${JSON.stringify(u)}`
      if (cancelledAt !== undefined && i >= cancelledAt) {
        assert.ok(!WORDS.has(u.sessionUpdate), `words after the cancel, ${where}`)
        assert.notEqual(u.sessionUpdate, 'tool_call', `a new card after the cancel, ${where}`)
      }
      if (u.sessionUpdate === 'tool_call') {
        assert.ok(!announced.has(u.toolCallId), `card id used twice in the session, ${where}`)
        announced.add(u.toolCallId)
        thisTurn.push(u.toolCallId)
      }
      if (u.sessionUpdate === 'tool_call_update') {
        assert.ok(announced.has(u.toolCallId), `an update of a card never announced, ${where}`)
        assert.ok(!ended.has(u.toolCallId), `an update after the card ended, ${where}`)
        if (u.status === 'completed' || u.status === 'failed') ended.add(u.toolCallId)
      }
    }
    for (const id of thisTurn) assert.ok(ended.has(id), `card ${id} still open after its turn`)
  }
  return announced
}

/** Resolves once `predicate()` holds, polling every turn of the event loop, or fails after `ms`. */
async function until(predicate, ms, what) {
  const deadline = Date.now() + ms
  while (!predicate()) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`)
    await new Promise((resolve) => setImmediate(resolve))
  }
}

/**
 * One session of the demo: a turn played to its end, then a turn cancelled once it has sent
 * `cancelAfter` updates; returns the updates' ranges for `assertCardRules`.
 */
async function demoThenCancelled(agent, cancelAfter) {
  const { sessionId } = await agent.agent.request('session/new', { cwd: tempDir(), mcpServers: [] })
  const got = () => agent.updatesFor(sessionId)
  const first = await within(20_000, agent.agent.request('session/prompt', { sessionId, prompt: [{ type: 'text', text: 'look around' }] }), 'first prompt')
  assert.equal(first.stopReason, 'end_turn')
  const afterFirst = got().length
  const second = agent.agent.request('session/prompt', { sessionId, prompt: [{ type: 'text', text: 'again' }] })
  let done = false
  second.finally(() => { done = true })
  await until(() => done || got().length >= afterFirst + cancelAfter, 20_000, `update ${cancelAfter} of the second turn`)
  const cancelledAt = got().length
  await agent.agent.notify('session/cancel', { sessionId })
  const response = await within(20_000, second, 'cancelled prompt')
  assert.ok(['cancelled', 'end_turn'].includes(response.stopReason), response.stopReason)
  if (response.stopReason === 'end_turn') assert.ok(done, 'end_turn only for a turn that was over before the cancel')
  // Whatever the agent still sends about the turn has arrived once the next request is answered.
  await agent.agent.request('session/list', {})
  return { sessionId, turns: [{ from: 0, to: afterFirst }, { from: afterFirst, to: got().length, cancelledAt: done ? undefined : cancelledAt }] }
}

test('the demo turn cancelled at any update never names a card the editor was not told of', async () => {
  const agent = startAgent({ embedded: true })
  try {
    await agent.agent.request('initialize', INIT)
    const runs = Number(process.env.CARD_CANCEL_RUNS ?? 0)
    // Every update of the turn once, then (on request) random ones.
    const points = [...Array(14).keys(), ...Array.from({ length: runs }, () => Math.floor(Math.random() * 14))]
    for (const cancelAfter of points) {
      const { sessionId, turns } = await demoThenCancelled(agent, cancelAfter)
      assertCardRules(agent.updatesFor(sessionId), turns)
    }
  } finally {
    await agent.stop()
  }
})

test('card ids stay unique in a session after session/load and session/resume in a new process', async () => {
  const cacheDir = tempDir('acp-cache-')
  const cwd = tempDir()
  const prompt = (agent, sessionId) => within(20_000, agent.agent.request('session/prompt', { sessionId, prompt: [{ type: 'text', text: 'go' }] }), 'prompt')
  const first = startAgent({ embedded: true, cacheDir })
  let sessionId
  /** ACP ids the editor has been shown in the session so far. */
  const shown = new Set()
  try {
    await first.agent.request('initialize', INIT)
    ;({ sessionId } = await first.agent.request('session/new', { cwd, mcpServers: [] }))
    await prompt(first, sessionId)
    await prompt(first, sessionId)
    const updates = first.updatesFor(sessionId)
    for (const id of assertCardRules(updates, [{ from: 0, to: updates.length }])) shown.add(id)
    assert.ok(shown.has('demo-ls') && shown.has('demo-ls~2'), [...shown].join(', '))
  } finally {
    await first.stop()
  }
  for (const method of ['session/load', 'session/resume']) {
    const next = startAgent({ embedded: true, cacheDir })
    try {
      await next.agent.request('initialize', INIT)
      await next.agent.request(method, { sessionId, cwd, mcpServers: [] })
      const replayed = next.updatesFor(sessionId).length
      await prompt(next, sessionId)
      const updates = next.updatesFor(sessionId)
      // The replay is a thread of its own ids; the new turn's cards take none the editor has seen.
      const now = assertCardRules(updates, [{ from: 0, to: replayed }, { from: replayed, to: updates.length }])
      const fresh = updates.slice(replayed).filter((u) => u.sessionUpdate === 'tool_call').map((u) => u.toolCallId)
      assert.equal(fresh.length, 2, JSON.stringify(fresh))
      for (const id of fresh) assert.ok(!shown.has(id), `${method}: ${id} was shown before the restart`)
      for (const id of now) shown.add(id)
    } finally {
      await next.stop()
    }
  }
})
