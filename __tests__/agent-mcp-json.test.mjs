// MCP servers from the user's Cursor set-up: `.cursor/mcp.json` of the project (cwd up to the git
// root) and `~/.cursor/mcp.json` (HOME) join the editor's servers. The project's start only once
// the user allowed them for the workspace (asked at the first turn, remembered in the agent's
// config folder); the user's start at once. The editor's entry wins a name, then the project's.
// A broken file is skipped with a warning; `${…}` variables are replaced. A server has started
// when the fixture has written its environment to the file its arguments name.
import assert from 'node:assert/strict'
import fs from 'node:fs'
import path from 'node:path'
import test from 'node:test'
import { fileURLToPath } from 'node:url'

import { INIT, startAgent, tempDir } from './acp-harness.mjs'
import { within } from './helpers.mjs'

const SERVER = fileURLToPath(new URL('./fixtures/mcp-env.mjs', import.meta.url))
/** One short turn: the run request carries the request context, which waits for the servers. */
const SCENARIO = { steps: [{ type: 'text', text: 'ok' }, { type: 'turnEnded' }] }

/** Resolves once `predicate()` holds, or fails after `ms`. */
async function waitFor(predicate, ms, what) {
  const deadline = Date.now() + ms
  while (!predicate()) {
    if (Date.now() > deadline) throw new Error(`${what} not reached within ${ms} ms`)
    await new Promise((resolve) => setTimeout(resolve, 20))
  }
}

/** A stdio server of the fixture that writes its environment to `file`. */
const server = (file, more = {}) => ({ command: process.execPath, args: [SERVER, file], ...more })

/** @param {string} dir  where `.cursor/mcp.json` goes */
function writeMcpJson(dir, value) {
  fs.mkdirSync(path.join(dir, '.cursor'), { recursive: true })
  fs.writeFileSync(path.join(dir, '.cursor', 'mcp.json'), typeof value === 'string' ? value : JSON.stringify(value))
}

/** A project in git, a home folder and a config folder of their own, and a folder for what the servers write. */
function world() {
  const project = tempDir('acp-project-')
  fs.mkdirSync(path.join(project, '.git'))
  return { project, home: tempDir('acp-home-'), config: tempDir('acp-config-'), seen: tempDir('acp-seen-') }
}

/**
 * An agent of `w` whose permission prompts about the project's servers are answered `answer`
 * (and counted); any other prompt is allowed once.
 */
function agentOf(w, answer, more = {}) {
  const asked = []
  /** What the servers had written when each question came. */
  const seenWhenAsked = []
  const agent = startAgent({
    scenario: SCENARIO,
    env: { HOME: w.home, CURSOR_ACP_CONFIG_DIR: w.config, ...more.env },
    handlers: {
      'session/request_permission': (params) => {
        asked.push(params)
        seenWhenAsked.push(fs.readdirSync(w.seen))
        return { outcome: { outcome: 'selected', optionId: answer } }
      },
    },
  })
  return { agent, asked, seenWhenAsked }
}

const prompt = (agent, sessionId) => within(20_000, agent.agent.request('session/prompt', { sessionId, prompt: [{ type: 'text', text: 'go' }] }), 'prompt')

test("a project's servers start once the user allows them, and the answer is remembered for the workspace", async () => {
  const w = world()
  const started = path.join(w.seen, 'project.json')
  writeMcpJson(w.project, { mcpServers: { proj: server(started) } })
  const cwd = path.join(w.project, 'src')
  fs.mkdirSync(cwd)
  const first = agentOf(w, 'allow-always')
  try {
    await first.agent.agent.request('initialize', INIT)
    const { sessionId } = await first.agent.agent.request('session/new', { cwd, mcpServers: [] })
    assert.equal((await prompt(first.agent, sessionId)).stopReason, 'end_turn')
    assert.equal(first.asked.length, 1, 'asked once')
    assert.deepEqual(first.seenWhenAsked, [[]], 'not started before the answer')
    const [question] = first.asked
    assert.match(question.toolCall.title, /MCP servers/)
    assert.deepEqual(question.options.map((o) => o.kind), ['allow_always', 'allow_once', 'reject_once', 'reject_always'])
    // The question names a card the client was told of, which ends with the answer.
    const cards = first.agent.updatesFor(sessionId)
    assert.ok(cards.some((u) => u.sessionUpdate === 'tool_call' && u.toolCallId === question.toolCall.toolCallId))
    assert.ok(cards.some((u) => u.sessionUpdate === 'tool_call_update' && u.toolCallId === question.toolCall.toolCallId && u.status === 'completed'))
    // The turn's request context waited for the allowed server.
    assert.ok(fs.existsSync(started), 'the project server started')
    await prompt(first.agent, sessionId)
    assert.equal(first.asked.length, 1, 'not asked again in the session')
    const approvals = path.join(w.config, 'mcp-approvals.json')
    assert.equal(fs.statSync(approvals).mode & 0o777, 0o600)
    assert.ok(JSON.parse(fs.readFileSync(approvals, 'utf8')).workspaces[w.project].allowed)
  } finally {
    await first.agent.stop()
  }

  fs.rmSync(started)
  const second = agentOf(w, 'reject-once')
  try {
    await second.agent.agent.request('initialize', INIT)
    await second.agent.agent.request('session/new', { cwd, mcpServers: [] })
    // Remembered: started with the session, no turn and no question needed.
    await waitFor(() => fs.existsSync(started), 10_000, 'the project server to start')
    assert.equal(second.asked.length, 0)
  } finally {
    await second.agent.stop()
  }

  // A changed set of servers is asked about again.
  writeMcpJson(w.project, { mcpServers: { proj: server(started), added: server(path.join(w.seen, 'added.json')) } })
  fs.rmSync(started)
  const third = agentOf(w, 'reject-once')
  try {
    await third.agent.agent.request('initialize', INIT)
    const { sessionId } = await third.agent.agent.request('session/new', { cwd, mcpServers: [] })
    await prompt(third.agent, sessionId)
    assert.equal(third.asked.length, 1, 'asked about the new set')
    assert.ok(!fs.existsSync(started) && !fs.existsSync(path.join(w.seen, 'added.json')), 'declined: none started')
  } finally {
    await third.agent.stop()
  }
})

test("the user's ~/.cursor/mcp.json starts without a question", async () => {
  const w = world()
  const started = path.join(w.seen, 'user.json')
  writeMcpJson(w.home, { mcpServers: { mine: server(started) } })
  const { agent, asked } = agentOf(w, 'reject-once')
  try {
    await agent.agent.request('initialize', INIT)
    const { sessionId } = await agent.agent.request('session/new', { cwd: w.project, mcpServers: [] })
    await waitFor(() => fs.existsSync(started), 10_000, 'the user server to start')
    assert.equal((await prompt(agent, sessionId)).stopReason, 'end_turn')
    assert.equal(asked.length, 0)
  } finally {
    await agent.stop()
  }
})

test("a name's server is the editor's, then the project's, then the user's; declined, the user's runs", async () => {
  const w = world()
  const seen = (name) => path.join(w.seen, `${name}.json`)
  writeMcpJson(w.project, { mcpServers: { dup: server(seen('project-dup')), shared: server(seen('project-shared')) } })
  writeMcpJson(w.home, { mcpServers: { dup: server(seen('user-dup')), shared: server(seen('user-shared')), mine: server(seen('user-mine')) } })
  const editor = [{ name: 'dup', command: process.execPath, args: [SERVER, seen('editor-dup')], env: [] }]

  const allowing = agentOf(w, 'allow-once')
  try {
    await allowing.agent.agent.request('initialize', INIT)
    const { sessionId } = await allowing.agent.agent.request('session/new', { cwd: w.project, mcpServers: editor })
    await prompt(allowing.agent, sessionId)
    assert.equal(allowing.asked.length, 1)
    // Asked about the project's servers the editor does not name.
    assert.deepEqual(allowing.asked[0].toolCall.rawInput.servers.map((s) => s.name), ['shared'])
    for (const name of ['editor-dup', 'project-shared', 'user-mine']) assert.ok(fs.existsSync(seen(name)), `${name} started`)
    for (const name of ['project-dup', 'user-dup', 'user-shared']) assert.ok(!fs.existsSync(seen(name)), `${name} not started`)
    assert.ok(!fs.existsSync(path.join(w.config, 'mcp-approvals.json')), '"allow once" is not remembered')
  } finally {
    await allowing.agent.stop()
  }

  for (const name of fs.readdirSync(w.seen)) fs.rmSync(path.join(w.seen, name))
  const declining = agentOf(w, 'reject-once')
  try {
    await declining.agent.agent.request('initialize', INIT)
    const { sessionId } = await declining.agent.agent.request('session/new', { cwd: w.project, mcpServers: editor })
    await prompt(declining.agent, sessionId)
    assert.equal(declining.asked.length, 1)
    for (const name of ['editor-dup', 'user-shared', 'user-mine']) assert.ok(fs.existsSync(seen(name)), `${name} started`)
    for (const name of ['project-dup', 'project-shared', 'user-dup']) assert.ok(!fs.existsSync(seen(name)), `${name} not started`)
  } finally {
    await declining.agent.stop()
  }
})

test('a broken mcp.json is skipped with a warning; the session works and the good entries start', async () => {
  const w = world()
  const good = path.join(w.seen, 'good.json')
  writeMcpJson(w.project, '{ "mcpServers": { not json')
  writeMcpJson(w.home, { mcpServers: { bad: { command: 42 }, args: { command: 'x', args: 'not a list' }, good: server(good) } })
  const { agent, asked } = agentOf(w, 'allow-once')
  try {
    await agent.agent.request('initialize', INIT)
    const { sessionId } = await agent.agent.request('session/new', { cwd: w.project, mcpServers: [] })
    await waitFor(() => fs.existsSync(good), 10_000, 'the good server to start')
    assert.equal((await prompt(agent, sessionId)).stopReason, 'end_turn')
    assert.equal(asked.length, 0, 'nothing of the broken project file to ask about')
  } finally {
    await agent.stop()
  }
  const log = agent.stderr()
  assert.match(log, new RegExp(`${path.join(w.project, '.cursor', 'mcp.json').replace(/[.*+?^${}()|[\]\\]/g, '\\$&')} skipped: not JSON`))
  assert.match(log, /MCP server "bad" skipped/)
  assert.match(log, /MCP server "args" skipped: "args" must be an array of strings/)

  // Not an object of servers: the whole file is skipped.
  writeMcpJson(w.home, { mcpServers: [server(good)] })
  fs.rmSync(good)
  const again = agentOf(w, 'allow-once')
  try {
    await again.agent.agent.request('initialize', INIT)
    const { sessionId } = await again.agent.agent.request('session/new', { cwd: w.project, mcpServers: [] })
    assert.equal((await prompt(again.agent, sessionId)).stopReason, 'end_turn')
    assert.ok(!fs.existsSync(good))
  } finally {
    await again.agent.stop()
  }
  assert.match(again.agent.stderr(), /skipped: "mcpServers" must be an object/)
})

test('${env:NAME}, ${userHome}, ${workspaceFolder} and the others are replaced', async () => {
  const w = world()
  const cwd = path.join(w.project, 'packages', 'app')
  fs.mkdirSync(cwd, { recursive: true })
  const env = { TOKEN: 'secret-${env:MCP_TEST_SECRET}', OWN: '${env:CURSOR_ACCESS_TOKEN}', HOME_IS: '${userHome}', WS: '${workspaceFolder}', BASE: '${workspaceFolderBasename}', SEP: 'a${/}b${pathSeparator}c', KEPT: '${unknownThing}', UNSET: '${env:MCP_TEST_UNSET}' }
  writeMcpJson(w.home, { mcpServers: { user: server('${userHome}/user-seen.json', { env }) } })
  writeMcpJson(w.project, { mcpServers: { project: server('${workspaceFolder}/.project-seen.json', { env: { WS: '${workspaceFolder}', KEY: '${env:MCP_TEST_SECRET}' } }) } })
  const { agent, asked } = agentOf(w, 'allow-once', { env: { MCP_TEST_SECRET: 's3cret-value', MCP_TEST_UNSET: undefined, CURSOR_ACCESS_TOKEN: 'token-of-the-agent' } })
  try {
    await agent.agent.request('initialize', INIT)
    const { sessionId } = await agent.agent.request('session/new', { cwd, mcpServers: [] })
    await prompt(agent, sessionId)
  } finally {
    await agent.stop()
  }
  // The question shows the servers as written, and the names of what they set, never a value.
  assert.equal(asked.length, 1)
  const question = JSON.stringify(asked[0])
  assert.ok(!question.includes('s3cret-value'), question)
  assert.match(asked[0].toolCall.content[0].content.text, /project: .*\.project-seen\.json \(sets WS, KEY\)/)
  const user = JSON.parse(fs.readFileSync(path.join(w.home, 'user-seen.json'), 'utf8'))
  assert.equal(user.TOKEN, 'secret-s3cret-value')
  assert.equal(user.OWN, '', "the agent's own credentials are not the files' to pass on")
  assert.equal(user.HOME_IS, w.home)
  // The user's file belongs to no project: its workspace folder is the session's.
  assert.equal(user.WS, cwd)
  assert.equal(user.BASE, 'app')
  assert.equal(user.SEP, `a${path.sep}b${path.sep}c`)
  assert.equal(user.KEPT, '${unknownThing}')
  assert.equal(user.UNSET, '')
  // The project's file: the folder that holds its .cursor.
  const project = JSON.parse(fs.readFileSync(path.join(w.project, '.project-seen.json'), 'utf8'))
  assert.equal(project.WS, w.project)
})
