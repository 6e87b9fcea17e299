// The permission policy of the stdio agent, end to end (the real CLI process, an ACP client, the
// embedded backend recording what reached "Cursor"): the user's Cursor rules (`cli.json`,
// `cli-config.json`; deny wins), "Always allow" remembered per workspace across processes (shown
// by `status`, forgotten by `permissions clear`), and the approval mode config option.
import { test } from 'node:test'
import assert from 'node:assert/strict'
import { spawnSync } from 'node:child_process'
import fs from 'node:fs'
import path from 'node:path'
import { CLI, startAgent, tempDir } from './acp-harness.mjs'
import { within } from './helpers.mjs'

const messagesOf = (records) => records.flatMap((r) => r.messages.map((m) => m.message))
const answer = (records, id) => messagesOf(records).map((m) => m.execClientMessage).find((m) => m && m.id === id && !m.shellStream)
const exec = (id, args) => ({ type: 'exec', id, args })

/** A home and a config folder of the test's own, so no rule or answer of the machine's leaks in. */
function userDirs() {
  const home = tempDir('home-')
  const config = tempDir('config-')
  return { home, config, env: { HOME: home, USERPROFILE: home, CURSOR_ACP_CONFIG_DIR: config } }
}

async function session(agent, cwd) {
  await agent.agent.request('initialize', { protocolVersion: 1, clientCapabilities: {} })
  const { sessionId } = await agent.agent.request('session/new', { cwd, mcpServers: [] })
  return sessionId
}

async function prompt(agent, sessionId) {
  const r = await within(20_000, agent.agent.request('session/prompt', { sessionId, prompt: [{ type: 'text', text: 'go' }] }))
  assert.equal(r.stopReason, 'end_turn')
}

test('the Cursor rules: deny refuses without a question, allow runs without one, the rest asks', async () => {
  const { home, env } = userDirs()
  const cwd = tempDir()
  fs.mkdirSync(path.join(cwd, '.cursor'))
  fs.writeFileSync(path.join(cwd, '.cursor', 'cli.json'), JSON.stringify({
    permissions: { allow: ['Write(notes/**)', 'Shell(echo)', 'Shell('], deny: ['Shell(rm)', 'Write(**/.env*)'] },
  }))
  fs.mkdirSync(path.join(home, '.cursor'))
  fs.writeFileSync(path.join(home, '.cursor', 'cli-config.json'), JSON.stringify({ permissions: { allow: ['Write(**)'], deny: 'not a list' } }))
  const scenario = { steps: [
    exec(1, { shellArgs: { command: 'rm -rf build' } }),
    exec(2, { writeArgs: { path: 'notes/a.md', fileText: 'a\n' } }),
    exec(3, { writeArgs: { path: 'sub/.env.local', fileText: 'SECRET=1\n' } }),
    exec(4, { shellArgs: { command: 'echo ok' } }),
    exec(5, { shellArgs: { command: 'ls' } }),
    { type: 'turnEnded' },
  ] }
  const agent = startAgent({ scenario, env, handlers: { 'session/request_permission': () => ({ outcome: { outcome: 'selected', optionId: 'reject-once' } }) } })
  try {
    const sessionId = await session(agent, cwd)
    await prompt(agent, sessionId)
    assert.deepEqual(agent.permissionRequests.map((r) => r.params.toolCall.title), ['ls'], 'only what no rule names asks')
    const { records } = await agent.stop()
    assert.match(answer(records, 1).shellResult.rejected.reason, /Denied by the permission rule Shell\(rm\) in .*cli\.json/)
    assert.ok(fs.existsSync(path.join(cwd, 'notes', 'a.md')), 'Write(notes/**) allowed it')
    assert.match(answer(records, 3).writeResult.rejected.reason, /Write\(\*\*\/\.env\*\)/, 'deny wins over the user\'s Write(**)')
    assert.ok(!fs.existsSync(path.join(cwd, 'sub', '.env.local')))
    assert.equal(answer(records, 4).shellResult.success.stdout, 'ok\n')
    assert.equal(answer(records, 5).shellResult.rejected.reason, 'User rejected')
    // The broken rule and the list that is not one are named in the log; the session served.
    assert.match(agent.stderr(), /"Shell\(" .* does not parse/)
    assert.match(agent.stderr(), /permissions\.deny .* is not a list/)
  } finally {
    await agent.stop()
  }
})

test('"Always allow" is remembered for the workspace, shown by status and forgotten by permissions clear', async () => {
  const { config, env } = userDirs()
  const cwd = tempDir()
  const write = (id, name) => exec(id, { writeArgs: { path: name, fileText: 'x\n' } })
  const run = async (scenario, optionId) => {
    const agent = startAgent({ scenario: { steps: [...scenario, { type: 'turnEnded' }] }, env, handlers: { 'session/request_permission': () => ({ outcome: { outcome: 'selected', optionId } }) } })
    try {
      await prompt(agent, await session(agent, cwd))
      return agent.permissionRequests.length
    } finally {
      await agent.stop()
    }
  }
  assert.equal(await run([write(1, 'a.txt')], 'allow-always'), 1)
  const stored = JSON.parse(fs.readFileSync(path.join(config, 'always-allowed.json'), 'utf8'))
  assert.deepEqual(stored.workspaces[cwd], ['edit'])
  if (process.platform !== 'win32') assert.equal(fs.statSync(path.join(config, 'always-allowed.json')).mode & 0o777, 0o600)

  // A new process, a new session in the same folder: no question.
  assert.equal(await run([write(1, 'b.txt')], 'reject-once'), 0)
  assert.ok(fs.existsSync(path.join(cwd, 'b.txt')))
  // Another folder does not inherit it.
  const cli = (...args) => spawnSync(process.execPath, [CLI, ...args, '--base-url', 'http://127.0.0.1:9'], { env: { ...process.env, ...env, CURSOR_API_KEY: '', CURSOR_ACCESS_TOKEN: '' }, encoding: 'utf8' })
  assert.match(cli('status').stdout, new RegExp(`Always allowed in ${cwd.replace(/[.*+?^${}()|[\]\\]/g, '\\$&')}: edit`))
  const cleared = cli('permissions', 'clear', cwd)
  assert.equal(cleared.status, 0, cleared.stderr)
  assert.match(cleared.stdout, /Forgot 1 "Always allow" answer/)
  assert.match(cli('status').stdout, /Always allowed: nothing remembered/)
  assert.equal(await run([write(1, 'c.txt')], 'reject-once'), 1, 'asked again once forgotten')
})

test('the approval mode: edits run without a question, commands still ask; it is a config option that persists', async () => {
  const { env } = userDirs()
  const cwd = tempDir()
  const cacheDir = tempDir('acp-cache-')
  const scenario = { steps: [
    exec(1, { writeArgs: { path: 'a.txt', fileText: 'a\n' } }),
    exec(2, { shellArgs: { command: 'echo hi' } }),
    { type: 'turnEnded' },
  ] }
  const agent = startAgent({ scenario, env, cacheDir })
  let sessionId
  try {
    sessionId = await session(agent, cwd)
    await assert.rejects(
      agent.agent.request('session/set_config_option', { sessionId, configId: 'approval', value: 'yolo' }),
      (e) => e.code === -32602 && /ask, edits, full/.test(e.message),
    )
    const { configOptions } = await agent.agent.request('session/set_config_option', { sessionId, configId: 'approval', value: 'edits' })
    assert.equal(configOptions.find((o) => o.id === 'approval').currentValue, 'edits')
    await prompt(agent, sessionId)
    assert.deepEqual(agent.permissionRequests.map((r) => r.params.toolCall.kind), ['execute'], 'only the command asked')
    assert.ok(fs.existsSync(path.join(cwd, 'a.txt')))
  } finally {
    await agent.stop()
  }
  const again = startAgent({ env, cacheDir })
  try {
    await again.agent.request('initialize', { protocolVersion: 1, clientCapabilities: {} })
    const { configOptions } = await again.agent.request('session/load', { sessionId, cwd, mcpServers: [] })
    assert.equal(configOptions.find((o) => o.id === 'approval').currentValue, 'edits', 'kept with the session')
  } finally {
    await again.stop()
  }
})
