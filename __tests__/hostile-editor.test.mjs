// The stdio agent with its stdin in an attacker's hands: invalid JSON, huge lines, params of the
// wrong type for every method, odd and duplicate ids, requests before `initialize`, path tricks
// in session ids and cwds, pipelined prompts and cancel storms, answers to requests never made,
// stdin closed and signals mid-turn. After each case the agent must be alive and answer the
// next request, have written nothing but JSON-RPC 2.0 lines on stdout, leave no process behind
// once it ends (the stdio MCP servers it started included, however it ends), and have written
// no file outside its cache dir and the workspace. The agent is the real CLI on the embedded
// backend, driven with raw lines. Processes are read from /proc: Linux only.
import { test } from 'node:test'
import assert from 'node:assert/strict'
import { spawn } from 'node:child_process'
import { randomUUID } from 'node:crypto'
import fs from 'node:fs'
import path from 'node:path'
import { fileURLToPath } from 'node:url'
import { CLI, assertOnlyJsonRpc, tempDir } from './acp-harness.mjs'

const MCP_PID = fileURLToPath(new URL('./fixtures/mcp-pid.mjs', import.meta.url))
const linux = process.platform === 'linux'
const skip = !linux && 'reads /proc'
const MiB = 1024 * 1024
/** The agent's line limit (cli/acp.mjs `LINE_LIMIT_BYTES`, docs/security.md). */
const LINE_LIMIT = 32 * MiB

/** Waits for `predicate` to hold, polling, failing after `ms`. */
async function until(predicate, ms, what) {
  const deadline = Date.now() + ms
  for (;;) {
    const value = await predicate()
    if (value) return value
    if (Date.now() > deadline) throw new Error(`${what}: not within ${ms} ms`)
    await new Promise((resolve) => setTimeout(resolve, 25))
  }
}

/** Live (not zombie) processes whose environment holds `mark`, or that watch process `pid`. */
function processesOf(mark, pid) {
  const out = []
  for (const name of fs.readdirSync('/proc')) {
    if (!/^\d+$/.test(name)) continue
    try {
      const stat = fs.readFileSync(`/proc/${name}/stat`, 'utf8')
      if (stat.slice(stat.lastIndexOf(')') + 2).startsWith('Z')) continue
      const cmdline = fs.readFileSync(`/proc/${name}/cmdline`, 'utf8').split('\0')
      const environ = fs.readFileSync(`/proc/${name}/environ`, 'utf8')
      const watcher = cmdline.includes('cursor-acp-native-reaper') && cmdline.at(-2) === String(pid)
      if (environ.includes(mark) || watcher) out.push(`${name}: ${cmdline.join(' ')}`)
    } catch {
      // Gone meanwhile.
    }
  }
  return out
}

/** Whether process `pid` is running (a zombie is not). */
function running(pid) {
  try {
    const stat = fs.readFileSync(`/proc/${pid}/stat`, 'utf8')
    return !stat.slice(stat.lastIndexOf(')') + 2).startsWith('Z')
  } catch {
    return false
  }
}

/** Every file under `dir`, as paths relative to it. */
function filesUnder(dir) {
  return fs.readdirSync(dir, { recursive: true, withFileTypes: true })
    .filter((e) => !e.isDirectory())
    .map((e) => path.relative(dir, path.join(e.parentPath ?? e.path, e.name)))
}

/**
 * The agent, its HOME, config dir, TMPDIR, cache dir and workspace all in one fresh folder, and
 * a mark in its environment that every process it starts inherits.
 * @param {{ scenario?: object }} [o]
 */
function hostileAgent({ scenario } = {}) {
  const root = tempDir('hostile-')
  const dirs = { home: path.join(root, 'home'), config: path.join(root, 'home', 'config'), tmp: path.join(root, 'tmp'), cache: path.join(root, 'home', 'cache', 'agent'), workspace: path.join(root, 'workspace') }
  for (const dir of Object.values(dirs)) fs.mkdirSync(dir, { recursive: true })
  const args = [CLI, '--embedded', '--cache-dir', dirs.cache]
  if (scenario) {
    const file = path.join(dirs.tmp, 'scenario.json')
    fs.writeFileSync(file, JSON.stringify(scenario))
    args.push('--scenario', file)
  }
  const before = new Set(filesUnder(root))
  const mark = `HOSTILE_EDITOR_MARK=${randomUUID()}`
  const env = { ...process.env, HOME: dirs.home, TMPDIR: dirs.tmp, XDG_CACHE_HOME: path.join(dirs.home, '.cache'), CURSOR_ACP_CONFIG_DIR: dirs.config, CURSOR_ACCESS_TOKEN: '', CURSOR_API_KEY: '', HOSTILE_EDITOR_MARK: mark.split('=')[1] }
  const child = spawn(process.execPath, args, { stdio: ['pipe', 'pipe', 'pipe'], env, cwd: dirs.workspace })
  child.stdin.on('error', () => {}) // EPIPE once the agent has gone: the test says so
  let stdout = ''
  let stderr = ''
  /** @type {any[]} */
  const messages = []
  // The line being read: only it is scanned for newlines (answers can be tens of MiB).
  let partial = ''
  child.stdout.on('data', (chunk) => {
    stdout += chunk
    partial += chunk
    if (!String(chunk).includes('\n')) return
    const end = partial.lastIndexOf('\n')
    for (const line of partial.slice(0, end).split('\n')) {
      try {
        messages.push(JSON.parse(line))
      } catch {
        messages.push({ notJson: line })
      }
    }
    partial = partial.slice(end + 1)
  })
  child.stderr.on('data', (chunk) => { stderr += chunk })
  const exited = new Promise((resolve) => child.on('exit', (code, signal) => resolve({ code, signal })))
  let nextId = 1
  const agent = {
    child,
    dirs,
    mark,
    messages,
    stderr: () => stderr,
    /** The agent's resident memory now and at its peak, in bytes. */
    memory() {
      const status = fs.readFileSync(`/proc/${child.pid}/status`, 'utf8')
      const kB = (/** @type {string} */ field) => Number(new RegExp(`${field}:\\s+(\\d+) kB`).exec(status)?.[1]) * 1024
      return { rss: kB('VmRSS'), peak: kB('VmHWM') }
    },
    /** Writes `line` (an object is sent as JSON) and a newline. */
    send(line) {
      child.stdin.write(`${typeof line === 'string' ? line : JSON.stringify(line)}\n`)
    },
    /** The answer to request `id` (waited for). */
    answer(id, ms = 10_000) {
      return until(() => messages.find((m) => !('method' in m) && m.id === id && ('result' in m || 'error' in m)), ms, `the answer to ${JSON.stringify(id)} (stderr: ${stderr.slice(-500)})`)
    },
    /** Sends a request and waits for its answer. */
    request(method, params, id = `r${nextId++}`) {
      agent.send({ jsonrpc: '2.0', id, method, params })
      return agent.answer(id)
    },
    /** Requests that go out to the editor (permission, fs), by method. */
    asked(method) {
      return messages.filter((m) => m.method === method && 'id' in m)
    },
    /** The agent is alive, answers a request it should, and has written only JSON-RPC. */
    async assertServing() {
      assert.equal(child.exitCode, null, `the agent is alive (stderr: ${stderr.slice(-500)})`)
      const listed = await agent.request('session/list', {})
      assert.ok(Array.isArray(listed.result?.sessions), `session/list answers: ${JSON.stringify(listed)}`)
      assertOnlyJsonRpc(stdout, assert)
    },
    /** Ends the agent: `stdin` closed, or a signal; resolves its exit status. */
    async end(how = 'stdin') {
      if (how === 'stdin') child.stdin.end()
      else child.kill(how)
      const timer = setTimeout(() => child.kill('SIGKILL'), 10_000)
      const status = await exited
      clearTimeout(timer)
      return status
    },
    /** No process of the agent's is left, and no file was written outside cache and workspace. */
    async assertLeftNothing() {
      await until(() => processesOf(mark, child.pid).length === 0, 5000, `processes left: ${processesOf(mark, child.pid).join('; ')}`)
      const outside = filesUnder(root).filter((f) => !before.has(f) && !isUnder(path.join(root, f), dirs.cache) && !isUnder(path.join(root, f), dirs.workspace))
      assert.deepEqual(outside, [], 'no file outside the cache dir and the workspace')
    },
  }
  return agent
}

/** @param {string} file @param {string} dir */
const isUnder = (file, dir) => !path.relative(dir, file).startsWith('..')

const INIT = { protocolVersion: 1, clientCapabilities: { fs: { readTextFile: true, writeTextFile: true } }, clientInfo: { name: 'hostile', version: '0' } }

/** Sends `initialize` and a `session/new` in the workspace; resolves the session id. */
async function session(agent, extra = {}) {
  const init = await agent.request('initialize', INIT)
  assert.equal(init.result?.protocolVersion, 1)
  const created = await agent.request('session/new', { cwd: agent.dirs.workspace, mcpServers: [], ...extra })
  assert.ok(created.result?.sessionId, JSON.stringify(created))
  return created.result.sessionId
}

/** A turn whose shell (once allowed) runs until it is killed. */
const WAITING_TURN = { waitTimeoutMs: 600_000, steps: [
  { type: 'text', text: 'Running.' },
  { type: 'toolCallStarted', callId: 's1', toolCall: { shellToolCall: { args: { command: 'sleep 1001' } } } },
  { type: 'exec', id: 1, args: { shellStreamArgs: { command: 'sleep 1001', workingDirectory: '', toolCallId: 's1' } } },
  { type: 'turnEnded', inputTokens: 1, outputTokens: 1 },
] }

test('lines that are not JSON-RPC are answered with errors, and the agent serves on', { skip }, async () => {
  const agent = hostileAgent()
  try {
    await session(agent)
    const lines = ['{not json', '[]', '[{"jsonrpc":"2.0","id":"b","method":"session/list","params":{}}]', '42', '"text"', 'null', '{}', '{"jsonrpc":"1.0","id":"v","method":"session/list"}', '\u0000\u0001\u0002', '\ud800', '{"jsonrpc":"2.0","id":"x"', '   ', '\r']
    const before = agent.messages.length
    for (const line of lines) agent.send(line)
    await agent.assertServing()
    const errors = agent.messages.slice(before).filter((m) => m.error)
    assert.ok(errors.length >= 10, `each bad line is answered: ${JSON.stringify(errors)}`)
    assert.ok(errors.every((m) => m.id === null || m.id === 'v'), 'with id null (the batch is not run)')
    assert.ok(!agent.messages.some((m) => m.id === 'b'), 'a batch is never run')
  } finally {
    await agent.end()
  }
  await agent.assertLeftNothing()
})

test('lines over the 32 MiB limit are refused on their own, in bounded memory', { skip }, async () => {
  const agent = hostileAgent()
  try {
    const sessionId = await session(agent)
    const start = agent.memory()
    const text = 'a'.repeat(50 * MiB)
    // A prompt over the limit: answered with an error with its id.
    agent.send(`{"jsonrpc":"2.0","id":"huge","method":"session/prompt","params":{"sessionId":"${sessionId}","prompt":[{"type":"text","text":"${text}"}]}}`)
    const huge = await agent.answer('huge', 30_000)
    assert.equal(huge.error.code, -32600)
    assert.match(huge.error.message, /session\/prompt request is \d+ bytes, over the agent's limit of 33554432 bytes/)
    assert.equal(huge.error.data.limitBytes, LINE_LIMIT)
    // A line that names nothing: a parse error, id null. A notification: dropped.
    const before = agent.messages.length
    agent.send(`"${text}"`)
    agent.send(`{"jsonrpc":"2.0","method":"session/cancel","params":{"sessionId":"${sessionId}","x":"${text}"}}`)
    await agent.assertServing()
    const refused = agent.messages.slice(before).filter((m) => m.error)
    assert.deepEqual(refused.map((m) => [m.id, m.error.code]), [[null, -32700]])
    // 200 MiB without a newline, in 1 MiB writes: never held whole.
    const chunk = 'c'.repeat(MiB)
    for (let i = 0; i < 200; i++) {
      if (!agent.child.stdin.write(chunk)) await new Promise((resolve) => agent.child.stdin.once('drain', resolve))
    }
    agent.send('')
    await agent.assertServing()
    const peak = agent.memory().peak - start.rss
    console.error(`refusing 50 MiB lines and a 200 MiB line: peak RSS ${(peak / MiB).toFixed(0)} MiB over the ${(start.rss / MiB).toFixed(0)} MiB at start`)
    assert.ok(peak < 160 * MiB, `peak RSS grew by ${(peak / MiB).toFixed(0)} MiB`)
    // Just under the limit is read (an unknown method, so its answer does not repeat it).
    const under = `{"jsonrpc":"2.0","id":"under","method":"no/such_method","params":{"pad":"${'b'.repeat(LINE_LIMIT - 100)}"}}`
    assert.ok(Buffer.byteLength(under) <= LINE_LIMIT)
    agent.send(under)
    assert.equal((await agent.answer('under', 30_000)).error.code, -32601)
    await agent.assertServing()
  } finally {
    await agent.end()
  }
  await agent.assertLeftNothing()
})

test("an editor's answer over the limit fails the agent's request instead of hanging it", { skip }, async () => {
  const agent = hostileAgent({ scenario: { steps: [
    { type: 'toolCallStarted', callId: 'r1', toolCall: { readToolCall: { args: { path: 'big.txt' } } } },
    { type: 'exec', id: 1, args: { readArgs: { path: 'big.txt', toolCallId: 'r1' } } },
    { type: 'text', text: 'read' },
    { type: 'turnEnded', inputTokens: 1, outputTokens: 1 },
  ] } })
  try {
    const sessionId = await session(agent)
    fs.writeFileSync(path.join(agent.dirs.workspace, 'big.txt'), 'on disk\n')
    agent.send({ jsonrpc: '2.0', id: 'p', method: 'session/prompt', params: { sessionId, prompt: [{ type: 'text', text: 'read it' }] } })
    const [read] = await until(() => agent.asked('fs/read_text_file').length && agent.asked('fs/read_text_file'), 10_000, 'the read request')
    agent.send(`{"jsonrpc":"2.0","id":${JSON.stringify(read.id)},"result":{"content":"${'d'.repeat(40 * MiB)}"}}`)
    const turn = await agent.answer('p', 20_000)
    assert.equal(turn.result?.stopReason, 'end_turn', JSON.stringify(turn))
    await agent.assertServing()
  } finally {
    await agent.end()
  }
  await agent.assertLeftNothing()
})

const METHODS = ['initialize', 'authenticate', 'logout', 'session/new', 'session/load', 'session/resume', 'session/list', 'session/prompt', 'session/set_mode', 'session/set_config_option', 'session/delete', 'session/close']
const WRONG_PARAMS = [null, 42, 'text', true, [], [1, 2], {}, { sessionId: 42, cwd: 42, prompt: 'x', modeId: 1, configId: [], value: {}, methodId: 3, protocolVersion: 'one', mcpServers: 'x', cursor: 5, additionalDirectories: 'x' }, { sessionId: null, cwd: null, prompt: null, mcpServers: [{ name: 1 }] }, { protocolVersion: -1 }, { protocolVersion: 1e10 }, { cwd: '/', mcpServers: [{ name: 'x', command: 42 }] }, { sessionId: 'x'.repeat(100_000), cwd: '/'.repeat(100_000) }]

test('params of the wrong type for every method are answered with errors', { skip }, async () => {
  const agent = hostileAgent()
  try {
    await session(agent)
    let n = 0
    for (const method of METHODS) {
      for (const params of WRONG_PARAMS) {
        const id = `w${n++}`
        agent.send({ jsonrpc: '2.0', id, method, params })
        const answer = await agent.answer(id)
        // `logout` and `session/list` take any object (or none) without wrong types in the
        // fields they read; nothing else here is valid anywhere.
        const valid = method === 'logout' || method === 'session/list'
        if (!valid) assert.ok(answer.error, `${method} ${JSON.stringify(params).slice(0, 80)} is refused: ${JSON.stringify(answer).slice(0, 300)}`)
        if (answer.error) assert.ok([-32600, -32602, -32002, -32000].includes(answer.error.code), `${method}: ${JSON.stringify(answer.error).slice(0, 300)}`)
      }
      // And the notification, which has no answer.
      for (const params of WRONG_PARAMS) agent.send({ jsonrpc: '2.0', method: 'session/cancel', params })
    }
    await agent.assertServing()
  } finally {
    await agent.end()
  }
  await agent.assertLeftNothing()
})

test('odd ids, unknown methods, requests before initialize and answers never asked for', { skip }, async () => {
  const agent = hostileAgent()
  try {
    // Before initialize.
    const early = await agent.request('session/list', {})
    assert.ok(early.result || early.error)
    const unknown = await agent.request('no/such_method', {})
    assert.ok([-32600, -32601].includes(unknown.error.code), JSON.stringify(unknown))
    // Ids JSON-RPC does not allow: no answer can name them, and nothing is run.
    for (const id of [{}, [], true, 1.5e300]) agent.send({ jsonrpc: '2.0', id, method: 'session/new', params: { cwd: agent.dirs.workspace, mcpServers: [] } })
    // Duplicate ids in flight: each is answered.
    for (let i = 0; i < 3; i++) agent.send({ jsonrpc: '2.0', id: 'dup', method: 'session/list', params: {} })
    await until(() => agent.messages.filter((m) => m.id === 'dup').length === 3, 10_000, 'three answers to dup')
    // Answers (results and errors) to requests the agent never made.
    for (const id of [0, 999, 'zz', null]) {
      agent.send({ jsonrpc: '2.0', id, result: { outcome: { outcome: 'cancelled' } } })
      agent.send({ jsonrpc: '2.0', id, error: { code: 1, message: 'no' } })
    }
    await session(agent)
    assert.equal((await agent.request('no/such_method', {})).error.code, -32601)
    await agent.assertServing()
  } finally {
    await agent.end()
  }
  await agent.assertLeftNothing()
})

test('path tricks in session ids and cwds name nothing outside the store', { skip }, async () => {
  const agent = hostileAgent()
  try {
    await session(agent)
    const outside = path.join(agent.dirs.cache, '..', 'x.json')
    fs.writeFileSync(outside, JSON.stringify({ sessionId: '../x', cwd: agent.dirs.workspace }))
    const ids = ['../x', '..', '.', '../../x', 'sessions/../../x', '/etc/passwd', path.join(agent.dirs.cache, 'x'), 'a\u0000b', '', '%2e%2e', 'x\\..\\..\\y', 'x'.repeat(300)]
    for (const sessionId of ids) {
      for (const method of ['session/load', 'session/resume', 'session/delete', 'session/close', 'session/prompt', 'session/set_mode', 'session/set_config_option']) {
        const answer = await agent.request(method, { sessionId, cwd: agent.dirs.workspace, mcpServers: [], prompt: [{ type: 'text', text: 'hi' }], modeId: 'ask', configId: 'mode', value: 'ask' })
        assert.ok(answer.error, `${method} ${JSON.stringify(sessionId)}: ${JSON.stringify(answer).slice(0, 200)}`)
      }
    }
    assert.ok(fs.existsSync(outside), 'the file next to the store is untouched')
    fs.rmSync(outside)
    const file = path.join(agent.dirs.workspace, 'a-file')
    fs.writeFileSync(file, '')
    for (const cwd of ['relative', '.', '', path.join(agent.dirs.workspace, 'missing'), file, '/dev/null', 'a\u0000b', `${agent.dirs.workspace}/\u0000`]) {
      const answer = await agent.request('session/new', { cwd, mcpServers: [] })
      assert.ok(answer.error, `session/new in ${JSON.stringify(cwd)}: ${JSON.stringify(answer).slice(0, 200)}`)
    }
    await agent.assertServing()
  } finally {
    await agent.end()
  }
  await agent.assertLeftNothing()
})

test('pipelined prompts and cancel storms leave the agent serving', { skip }, async () => {
  const agent = hostileAgent({ scenario: { steps: [{ type: 'text', text: 'hi' }, { type: 'turnEnded', inputTokens: 1, outputTokens: 1 }] } })
  try {
    const sessionId = await session(agent)
    const prompt = (id) => ({ jsonrpc: '2.0', id, method: 'session/prompt', params: { sessionId, prompt: [{ type: 'text', text: `p${id}` }] } })
    for (let i = 0; i < 20; i++) {
      agent.send(prompt(i))
      for (let j = 0; j < 20; j++) agent.send({ jsonrpc: '2.0', method: 'session/cancel', params: { sessionId } })
    }
    for (let i = 0; i < 20; i++) {
      const answer = await agent.answer(i, 20_000)
      // A prompt while a turn runs is refused (-32602); the others end or are cancelled.
      assert.ok(answer.result?.stopReason || answer.error?.code === -32602, JSON.stringify(answer))
    }
    const last = await agent.request('session/prompt', prompt('last').params)
    assert.equal(last.result?.stopReason, 'end_turn', JSON.stringify(last))
    await agent.assertServing()
  } finally {
    await agent.end()
  }
  await agent.assertLeftNothing()
})

for (const how of ['stdin', 'SIGTERM', 'SIGINT', 'SIGKILL']) {
  test(`ended mid-turn (${how === 'stdin' ? 'stdin closed' : how}): its shells and MCP servers end with it`, { skip }, async () => {
    const agent = hostileAgent({ scenario: WAITING_TURN })
    const pidDir = agent.dirs.workspace
    const server = (name, mode) => ({ name, command: process.execPath, args: [MCP_PID, mode, pidDir, name], env: [] })
    /** @type {number[]} */
    let pids = []
    try {
      // A turn running a shell that never ends.
      const sessionId = await session(agent)
      agent.send({ jsonrpc: '2.0', id: 'turn', method: 'session/prompt', params: { sessionId, prompt: [{ type: 'text', text: 'go' }] } })
      const [asked] = await until(() => agent.asked('session/request_permission').length > 0 && agent.asked('session/request_permission'), 10_000, 'the permission request')
      agent.send({ jsonrpc: '2.0', id: asked.id, result: { outcome: { outcome: 'selected', optionId: 'allow-once' } } })
      await until(() => processesOf(agent.mark, agent.child.pid).some((p) => p.includes('sleep 1001')), 10_000, 'the shell running')
      // A session with MCP servers: `answer` connects; `silent` and `stubborn` never answer
      // initialize and are still connecting when the agent ends.
      agent.send({ jsonrpc: '2.0', id: 'new', method: 'session/new', params: { cwd: agent.dirs.workspace, mcpServers: [server('answer', 'answer'), server('silent', 'silent'), server('stubborn', 'stubborn')] } })
      pids = await until(() => {
        const files = ['answer', 'silent', 'stubborn'].map((n) => path.join(pidDir, `${n}.pids`))
        if (!files.every((f) => fs.existsSync(f) && fs.readFileSync(f, 'utf8').endsWith('\n'))) return null
        return files.flatMap((f) => fs.readFileSync(f, 'utf8').trim().split(' ').map(Number))
      }, 10_000, 'the MCP servers started')
      assert.equal(pids.length, 6)
      assert.ok(pids.every(running))
    } finally {
      const started = Date.now()
      const status = await agent.end(how)
      if (how === 'SIGKILL') assert.equal(status.signal, 'SIGKILL')
      else assert.deepEqual(status, { code: 0, signal: null }, agent.stderr())
      await until(() => pids.every((pid) => !running(pid)), 5000, `MCP servers and their children still running: ${pids.filter(running)}`)
      console.error(`${how}: every MCP server process gone ${Date.now() - started} ms after the agent was told to end`)
    }
    await agent.assertLeftNothing()
  })
}
