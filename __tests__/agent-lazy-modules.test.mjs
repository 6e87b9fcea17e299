// What a session does not use is not loaded: a plain session (initialize, session/new, a turn,
// a cancel) loads neither the ACP SDK and zod (cli/acp.mjs serves the protocol without them), the
// MCP client nor node's crypto module (the addon names sessions). The agent runs with a loader hook that logs every ES module it loads
// (fixtures/module-log.mjs); the same hook sees the SDK come in for params only its schemas take,
// and the MCP client for a session with an MCP server.
import { test } from 'node:test'
import assert from 'node:assert/strict'
import fs from 'node:fs'
import path from 'node:path'
import { fileURLToPath } from 'node:url'

import { INIT, startAgent, tempDir } from './acp-harness.mjs'

const HOOK = fileURLToPath(new URL('./fixtures/module-log.mjs', import.meta.url))
const MCP_SERVER = fileURLToPath(new URL('./fixtures/mcp-calc.mjs', import.meta.url))

/** The packages these sessions must leave out unless they use them. */
const HEAVY = { sdk: '/node_modules/@agentclientprotocol/sdk/', zod: '/node_modules/zod/', mcp: '/node_modules/@modelcontextprotocol/' }

/**
 * Runs `session` against an agent that logs its modules; the agent's own (not its MCP servers')
 * module URLs.
 * @param {(agent: ReturnType<typeof startAgent>) => Promise<void>} session
 */
async function modulesOf(session) {
  const log = path.join(tempDir('module-log-'), 'modules.txt')
  const agent = startAgent({ env: { MODULE_LOG: log, NODE_OPTIONS: `${process.env.NODE_OPTIONS ?? ''} --import=${JSON.stringify(HOOK)}`.trim() } })
  try {
    await agent.agent.request('initialize', INIT)
    await session(agent)
  } finally {
    await agent.stop()
  }
  const pid = String(agent.child.pid)
  return fs.readFileSync(log, 'utf8').split('\n').filter((l) => l.split(' ')[0] === pid).map((l) => l.slice(pid.length + 1))
}

/** @param {string[]} modules */
const loaded = (modules) => Object.fromEntries(Object.entries(HEAVY).map(([name, part]) => [name, modules.some((url) => url.includes(part))]))

/** node's own modules among `modules`, as `node:<name>`, whether imported or required. */
const builtins = (modules) => new Set(modules.filter((m) => m.startsWith('node:')))

test('a plain session loads neither the ACP SDK, zod nor the MCP client', async () => {
  const modules = await modulesOf(async ({ agent }) => {
    const { sessionId } = await agent.request('session/new', { cwd: tempDir(), mcpServers: [] })
    await agent.request('session/set_mode', { sessionId, modeId: 'ask' })
    const turn = agent.request('session/prompt', { sessionId, prompt: [{ type: 'text', text: 'look around' }] })
    await agent.notify('session/cancel', { sessionId })
    await turn
  })
  assert.ok(modules.some((url) => url.endsWith('/dist/main.mjs')), `the hook saw the agent's modules: ${modules.length}`)
  // The agent runs from its bundle: the package ships no cli/ (scripts/bundle-cli.mjs).
  assert.deepEqual(modules.filter((url) => url.includes('/cli/')), [])
  assert.deepEqual(loaded(modules), { sdk: false, zod: false, mcp: false })
  // node:crypto with its 15 internal modules, about 1 MiB of an idle agent, for a session id.
  const own = builtins(modules)
  assert.ok(own.has('node:fs') && own.has('node:path'), `the hook saw node's own modules: ${own.size}`)
  assert.equal(own.has('node:crypto'), false, 'node:crypto was loaded')
})

test('params only the SDK checks load it (and zod), not the MCP client', async () => {
  const modules = await modulesOf(async ({ agent }) => {
    // `_meta` with a `__proto__` key: the hand checks leave it to the SDK's schemas.
    await agent.request('session/new', { cwd: tempDir(), mcpServers: [], _meta: JSON.parse('{"__proto__": {"x": 1}}') })
  })
  assert.deepEqual(loaded(modules), { sdk: true, zod: true, mcp: false })
})

test('a session with an MCP server loads the MCP client', async () => {
  const modules = await modulesOf(async ({ agent }) => {
    await agent.request('session/new', { cwd: tempDir(), mcpServers: [{ name: 'calc', command: process.execPath, args: [MCP_SERVER], env: [] }] })
  })
  assert.equal(loaded(modules).mcp, true)
  assert.equal(loaded(modules).sdk, false)
})

test('the agent\'s modules take node\'s own through cli/builtin.mjs, never an ES module import', () => {
  // An ES module import of a built-in reads its every export, the lazy ones too (node:fs's
  // `promises` loads streams and readline): cli/builtin.mjs says what that cost at start-up.
  const root = fileURLToPath(new URL('..', import.meta.url))
  const offending = []
  for (const dir of ['cli', 'bin']) {
    for (const name of fs.readdirSync(path.join(root, dir))) {
      if (!name.endsWith('.mjs') || (dir === 'cli' && name === 'builtin.mjs')) continue
      const text = fs.readFileSync(path.join(root, dir, name), 'utf8')
      for (const m of text.matchAll(/^\s*import\b[^;'"]*?from\s+['"](node:[^'"]+|fs|path|os|util|v8|module|url|child_process|crypto)['"]|\bawait\s+import\(\s*['"](node:[^'"]+)['"]\s*\)/gm)) offending.push(`${dir}/${name}: ${m[0].trim()}`)
    }
  }
  assert.deepEqual(offending, [])
})
