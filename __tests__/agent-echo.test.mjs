// An error answers a bad value without sending it back whole: a megabyte mode id is named by
// its first characters and its length, and the agent keeps serving.
import assert from 'node:assert/strict'
import test from 'node:test'

import { INIT, startAgent, tempDir } from './acp-harness.mjs'

test('errors repeat at most a short cut of what the client sent', async () => {
  const agent = startAgent()
  try {
    await agent.agent.request('initialize', INIT)
    const { sessionId } = await agent.agent.request('session/new', { cwd: tempDir(), mcpServers: [] })
    const huge = 'x'.repeat(1024 * 1024)
    const cases = [
      ['session/set_mode', { sessionId, modeId: huge }],
      ['session/set_config_option', { sessionId, configId: huge, value: 'v' }],
      ['session/new', { cwd: huge, mcpServers: [] }],
      ['authenticate', { methodId: huge }],
    ]
    for (const [method, params] of cases) {
      await assert.rejects(agent.agent.request(method, params), (e) => {
        assert.equal(e.code, -32602, method)
        assert.ok(JSON.stringify(e).length < 1000, `${method}: ${JSON.stringify(e).length} characters`)
        assert.match(e.message, /1048578 characters/, method)
        return true
      })
    }
    // Still serving.
    const { sessions } = await agent.agent.request('session/list', {})
    assert.ok(sessions.some((s) => s.sessionId === sessionId))
  } finally {
    await agent.stop()
  }
})
