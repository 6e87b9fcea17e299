// The agent warms the configured server while the user types: after session/new (and load, and
// a change of mode or model) its session sends Cursor's PrewarmRequest on a stream of its own,
// once the answer is out. The backend keeps prewarms apart from turns (they play none).
import { test } from 'node:test'
import assert from 'node:assert/strict'
import { startAgent, tempDir } from './acp-harness.mjs'
import { recordsWhen, startEmbeddedBackend, within } from './helpers.mjs'

const INIT = { protocolVersion: 1, clientCapabilities: {} }
const prewarmModels = (prewarms) => prewarms.map((r) => r.messages.find((m) => m.kind === 'prewarmRequest')?.message.prewarmRequest.requestedModel.modelId)

test('session/new, a model change and session/load each prewarm the server; the turns play as they would without', async () => {
  const backend = await startEmbeddedBackend({ scenario: { turns: [[{ type: 'text', text: 'first' }, { type: 'turnEnded' }], [{ type: 'text', text: 'second' }, { type: 'turnEnded' }]] } })
  const cacheDir = tempDir('acp-cache-')
  const cwd = tempDir()
  let sessionId
  try {
    const agent = startAgent({ embedded: false, cacheDir, args: ['--base-url', backend.url] })
    try {
      await agent.agent.request('initialize', INIT)
      ;({ sessionId } = await agent.agent.request('session/new', { cwd, mcpServers: [] }))
      let prewarms = await recordsWhen(backend, (rs) => rs.length >= 1, 5000, 'prewarms')
      assert.deepEqual(prewarmModels(prewarms), ['default'], 'one prewarm, with the session\'s model')
      assert.equal(prewarms[0].turnIndex ?? null, null, 'a prewarm plays no turn')
      await agent.agent.request('session/set_config_option', { sessionId, configId: 'model', value: 'embedded-thinking' })
      prewarms = await recordsWhen(backend, (rs) => rs.length >= 2, 5000, 'prewarms')
      assert.deepEqual(prewarmModels(prewarms), ['default', 'embedded-thinking'], 'the new model warmed too')
      const r = await within(20_000, agent.agent.request('session/prompt', { sessionId, prompt: [{ type: 'text', text: 'go' }] }))
      assert.equal(r.stopReason, 'end_turn')
      const text = agent.updatesFor(sessionId).filter((u) => u.sessionUpdate === 'agent_message_chunk').map((u) => u.content.text).join('')
      assert.equal(text, 'first', 'the first turn of the scenario, not taken by a prewarm')
    } finally {
      await agent.stop()
    }
    const again = startAgent({ embedded: false, cacheDir, args: ['--base-url', backend.url] })
    try {
      await again.agent.request('initialize', INIT)
      await again.agent.request('session/load', { sessionId, cwd, mcpServers: [] })
      const prewarms = await recordsWhen(backend, (rs) => rs.length >= 3, 5000, 'prewarms')
      assert.equal(prewarmModels(prewarms)[2], 'embedded-thinking', 'the loaded session warmed with its model')
      assert.ok(prewarms[2].messages[0].message.prewarmRequest.conversationState, 'and its conversation')
    } finally {
      await again.stop()
    }
    // A stream that ended before its first message asked the server for nothing: a prewarm
    // the stopping agent had opened (a session warms a second time once the account's models
    // arrive after its first prewarm went) and cut before it was sent.
    const streams = backend.records()
    const said = (r) => JSON.stringify({ outcome: r.outcome, messages: r.messages.map((m) => m.kind), turnIndex: r.turnIndex })
    const turns = streams.filter((r) => r.messages.length > 0)
    assert.equal(turns.length, 1, `only the prompt is a turn: ${streams.map(said).join(', ')}`)
    assert.equal(turns[0].turnIndex, 0)
    for (const cut of streams.filter((r) => r.messages.length === 0)) {
      assert.equal(cut.turnIndex ?? null, null, `a stream without a message played no turn: ${said(cut)}`)
    }
  } finally {
    backend.close()
  }
})

test('a prewarm that cannot reach the server costs the session nothing', async () => {
  // Nothing listens there: session/new is answered as usual, and the failed prewarm is a log line.
  const agent = startAgent({ embedded: false, args: ['--base-url', 'http://127.0.0.1:9', '--log-level', 'info'] })
  try {
    await agent.agent.request('initialize', INIT)
    const { sessionId } = await within(10_000, agent.agent.request('session/new', { cwd: tempDir(), mcpServers: [] }))
    assert.ok(sessionId)
    const deadline = Date.now() + 10_000
    while (!/prewarm failed/.test(agent.stderr()) && Date.now() < deadline) await new Promise((r) => setTimeout(r, 20))
    assert.match(agent.stderr(), /prewarm failed; the next prompt connects as usual/)
    // And the session is there for its prompt, which fails as it would have anyway.
    await assert.rejects(agent.agent.request('session/prompt', { sessionId, prompt: [{ type: 'text', text: 'hi' }] }), /connect/)
  } finally {
    await agent.stop()
  }
})
