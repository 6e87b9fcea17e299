// Model variants through the real agent and the embedded backend's catalogue (its thinking
// model offers Max Mode, its fast one does not): the Max Mode switch as a boolean config option
// for clients that take them, carried by the run request, kept with the session across a
// restart, and refused by the backend for a model that does not offer it.
import { test } from 'node:test'
import assert from 'node:assert/strict'
import { startAgent, tempDir } from './acp-harness.mjs'
import { within } from './helpers.mjs'

const BOOLEAN_OPTIONS = { protocolVersion: 1, clientCapabilities: { session: { configOptions: { boolean: {} } } } }
const runRequests = (records) => records.map((r) => r.messages[0]?.message.runRequest).filter(Boolean)

async function prompt(agent, sessionId, text) {
  const r = await within(20_000, agent.agent.request('session/prompt', { sessionId, prompt: [{ type: 'text', text }] }))
  assert.equal(r.stopReason, 'end_turn')
}

test('Max Mode: a boolean option of the models that offer it, in the run request, kept across a restart', async () => {
  const cwd = tempDir()
  const cacheDir = tempDir('acp-cache-')
  const turns = { turns: [[{ type: 'turnEnded' }], [{ type: 'turnEnded' }]] }
  const first = startAgent({ scenario: turns, cacheDir })
  let sessionId
  try {
    await first.agent.request('initialize', BOOLEAN_OPTIONS)
    ;({ sessionId } = await first.agent.request('session/new', { cwd, mcpServers: [] }))
    const picked = await first.agent.request('session/set_config_option', { sessionId, configId: 'model', value: 'embedded-thinking' })
    assert.deepEqual(picked.configOptions.find((o) => o.id === 'max_mode'), {
      id: 'max_mode', name: 'Max Mode', description: 'The model\'s largest context and more tool calls per turn', category: 'model_config', type: 'boolean', currentValue: false,
    })
    const set = await first.agent.request('session/set_config_option', { sessionId, configId: 'max_mode', type: 'boolean', value: true })
    assert.equal(set.configOptions.find((o) => o.id === 'max_mode').currentValue, true)
    await prompt(first, sessionId, 'big')
  } finally {
    const { records } = await first.stop()
    const [run] = runRequests(records)
    assert.deepEqual([run.requestedModel.modelId, run.requestedModel.maxMode, run.modelDetails.maxMode], ['embedded-thinking', true, true])
  }

  const second = startAgent({ scenario: turns, cacheDir })
  try {
    await second.agent.request('initialize', BOOLEAN_OPTIONS)
    const loaded = await second.agent.request('session/load', { sessionId, cwd, mcpServers: [] })
    assert.equal(loaded.configOptions.find((o) => o.id === 'model').currentValue, 'embedded-thinking')
    await prompt(second, sessionId, 'again')
  } finally {
    const { records } = await second.stop()
    const [run] = runRequests(records)
    assert.equal(run.requestedModel.maxMode, true, 'the choice was kept with the session')
  }
})

test('the backend refuses Max Mode for a model that does not offer it, and the agent never asks for it', async () => {
  const agent = startAgent({ scenario: { turns: [[{ type: 'turnEnded' }]] } })
  try {
    await agent.agent.request('initialize', BOOLEAN_OPTIONS)
    const { sessionId } = await agent.agent.request('session/new', { cwd: tempDir(), mcpServers: [] })
    await agent.agent.request('session/set_config_option', { sessionId, configId: 'model', value: 'embedded-fast' })
    await assert.rejects(
      agent.agent.request('session/set_config_option', { sessionId, configId: 'max_mode', type: 'boolean', value: true }),
      (e) => e.code === -32602 && /Max Mode is not available/.test(e.message),
    )
    await prompt(agent, sessionId, 'small')
  } finally {
    const { records } = await agent.stop()
    const [run] = runRequests(records)
    assert.equal(run.requestedModel.modelId, 'embedded-fast')
    assert.equal(run.requestedModel.maxMode ?? false, false)
  }
})
