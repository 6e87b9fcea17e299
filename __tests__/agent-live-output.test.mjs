// A shell the agent runs shows its output on its card while it runs, through the real agent
// process and the embedded backend: as fenced text for a client without Zed's terminal, as
// `_meta.terminal_output` chunks for one that advertises it.
import { test } from 'node:test'
import assert from 'node:assert/strict'
import { startAgent, tempDir } from './acp-harness.mjs'
import { within } from './helpers.mjs'

const COMMAND = process.platform === 'win32' ? 'echo first && ping -n 2 127.0.0.1 > nul && echo second' : 'echo first; sleep 1; echo second'
const SCENARIO = { steps: [
  { type: 'toolCallStarted', callId: 'sh', toolCall: { shellToolCall: { args: { command: COMMAND } } } },
  { type: 'exec', id: 1, args: { shellArgs: { command: COMMAND, toolCallId: 'sh' } }, wait: true },
  { type: 'turnEnded' },
] }

async function run(clientCapabilities) {
  const agent = startAgent({ scenario: SCENARIO })
  try {
    await agent.agent.request('initialize', { protocolVersion: 1, clientCapabilities })
    const { sessionId } = await agent.agent.request('session/new', { cwd: tempDir(), mcpServers: [] })
    const r = await within(20_000, agent.agent.request('session/prompt', { sessionId, prompt: [{ type: 'text', text: 'run it' }] }))
    assert.equal(r.stopReason, 'end_turn')
    return agent.updatesFor(sessionId).filter((u) => u.sessionUpdate === 'tool_call_update' && u.toolCallId === 'sh')
  } finally {
    await agent.stop()
  }
}

test('a running shell shows its first line on the card before the command ends', async () => {
  const updates = await run({})
  const texts = updates.map((u) => u.content?.[0]?.content?.text).filter(Boolean)
  assert.ok(texts.some((t) => t.includes('first') && !t.includes('second')), `live: ${JSON.stringify(texts)}`)
  assert.ok(texts.some((t) => t.includes('second')), 'then the rest')
})

test('with Zed\'s terminal the output streams as terminal_output chunks', async () => {
  const updates = await run({ _meta: { terminal_output: true } })
  const chunks = updates.map((u) => u._meta?.terminal_output?.data).filter(Boolean)
  assert.ok(chunks.length >= 1 && chunks[0].includes('first') && !chunks[0].includes('second'), JSON.stringify(chunks))
  assert.ok(chunks.join('').includes('second'))
})
