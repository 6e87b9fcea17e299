// An MCP server the agent starts is a process the model drives: it never inherits the agent's
// own credentials (the core's list), while the rest of the environment, and what the server's
// configuration sets, reach it.
import assert from 'node:assert/strict'
import fs from 'node:fs'
import path from 'node:path'
import test from 'node:test'
import { fileURLToPath } from 'node:url'

import { INIT, startAgent, tempDir } from './acp-harness.mjs'

const SERVER = fileURLToPath(new URL('./fixtures/mcp-env.mjs', import.meta.url))

test("an MCP server gets the environment without the agent's own credentials", async () => {
  const dir = tempDir()
  const seen = (name) => path.join(dir, `${name}.json`)
  const agent = startAgent({ env: { CURSOR_ACCESS_TOKEN: 'token-of-the-agent', cursor_api_key: 'lower-case-too', SOME_SETTING: 'kept' } })
  try {
    await agent.agent.request('initialize', INIT)
    const mcpServers = [
      { name: 'plain', command: process.execPath, args: [SERVER, seen('plain')], env: [] },
      { name: 'configured', command: process.execPath, args: [SERVER, seen('configured')], env: [{ name: 'CURSOR_ACCESS_TOKEN', value: 'set-by-its-config' }] },
    ]
    await agent.agent.request('session/new', { cwd: tempDir(), mcpServers })
    const deadline = Date.now() + 10_000
    while (!fs.existsSync(seen('plain')) || !fs.existsSync(seen('configured'))) {
      assert.ok(Date.now() < deadline, 'both servers started')
      await new Promise((resolve) => setTimeout(resolve, 20))
    }
  } finally {
    await agent.stop()
  }
  const read = (name) => JSON.parse(fs.readFileSync(seen(name), 'utf8'))
  const plain = read('plain')
  assert.equal(plain.CURSOR_ACCESS_TOKEN, undefined)
  assert.equal(plain.cursor_api_key, undefined)
  assert.equal(plain.SOME_SETTING, 'kept')
  assert.ok(plain.PATH, 'the rest of the environment')
  assert.equal(read('configured').CURSOR_ACCESS_TOKEN, 'set-by-its-config')
})
