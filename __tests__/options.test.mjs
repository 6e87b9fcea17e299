// Client options are the core's: one message per bad option, whether it comes through
// `new AgentClient(...)`, `checkClientOptions`, a flag of the stdio agent or its
// CURSOR_ACP_CLIENT_OPTIONS; one default base URL; and one shell, the same in the request context
// the server gets and in the commands the tools run.
import { test } from 'node:test'
import assert from 'node:assert/strict'
import { spawn } from 'node:child_process'
import { CLI, INIT, startAgent, tempDir } from './acp-harness.mjs'
import { SessionStore } from '../cli/store.mjs'
import { addon, AgentClient, within } from './helpers.mjs'

const { LocalTools, checkClientOptions, DEFAULT_BASE_URL } = addon

const messagesOf = (records) => records.flatMap((r) => r.messages.map((m) => m.message))
const execReply = (records, id) => messagesOf(records).map((m) => m.execClientMessage).find((m) => m && m.id === id)

/** The E_INVALID error `fn` throws. */
function invalid(fn) {
  try {
    fn()
  } catch (e) {
    assert.equal(e.code, 'E_INVALID', e.message)
    return e
  }
  assert.fail('no error thrown')
}

/** Runs the agent with `args` and `env` until it exits on its own (bounded). */
async function runAgent(args, env = {}) {
  const child = spawn(process.execPath, [CLI, '--cache-dir', tempDir('acp-cache-'), ...args], {
    stdio: ['pipe', 'ignore', 'pipe'],
    env: { ...process.env, CURSOR_ACCESS_TOKEN: '', CURSOR_API_KEY: '', ...env },
  })
  let stderr = ''
  child.stderr.on('data', (c) => { stderr += c })
  const code = await within(10_000, new Promise((resolve) => child.on('exit', resolve)), 'the agent to exit').finally(() => child.kill())
  return { code, stderr }
}

test('a bad option gets one message: the option, what it takes, what it got', () => {
  const cases = [
    [{ transport: 'quic' }, `transport must be 'auto', 'sse' or 'h2', got "quic"`],
    [{ stallTimeoutMs: -1 }, 'stallTimeoutMs must be a whole number of milliseconds from 1 to 4294967295, got -1'],
    [{ heartbeatIntervalMs: 0.5 }, 'heartbeatIntervalMs must be a whole number of milliseconds from 1 to 4294967295, got 0.5'],
    [{ clientVersion: 'cli 2026' }, 'clientVersion must be 1 to 128 printable ASCII characters without spaces, got "cli 2026"'],
    [{ baseUrl: 'ftp://example.com' }, 'baseUrl must be an http(s) URL, got "ftp://example.com" (the scheme is "ftp")'],
    [{ compression: 'br' }, `compression must be 'gzip' or 'none', got "br"`],
    [{ shell: '/no/such/shell' }, 'shell must be an executable file: an absolute path, or a name found on PATH, got "/no/such/shell" (no such file)'],
  ]
  for (const [options, message] of cases) {
    const fromClient = invalid(() => new AgentClient(options))
    assert.equal(fromClient.message, `invalid input: ${message}`, JSON.stringify(options))
    // The JSON check the stdio agent uses says the very same.
    assert.equal(invalid(() => checkClientOptions(options)).message, fromClient.message)
  }
  // Only JSON can carry names that are no option, or values of the wrong type.
  assert.match(invalid(() => checkClientOptions({ stalTimeoutMs: 5 })).message, /each client option must be one of .*stallTimeoutMs.*, got "stalTimeoutMs"/)
  assert.equal(invalid(() => checkClientOptions({ stallTimeoutMs: '5' })).message, 'invalid input: stallTimeoutMs must be a number, got "5"')
  assert.doesNotThrow(() => checkClientOptions({ transport: 'sse', stallTimeoutMs: 60000, headers: { 'x-team': 'a' } }))
})

test('a shell that cannot run is refused by the client and the tools alike; client and tools share one', () => {
  const roots = [tempDir()]
  const client = invalid(() => new AgentClient({ shell: '/no/such/zsh' }))
  const tools = invalid(() => new LocalTools({ roots, shell: '/no/such/zsh' }))
  assert.equal(tools.message, client.message)
  assert.match(client.message, /shell must be .*, got "\/no\/such\/zsh" \(no such file\)/)
  assert.match(invalid(() => new AgentClient({ shell: roots[0] })).message, /\(not a file\)/)
  assert.match(invalid(() => new AgentClient({ shell: '/bin/sh', tools: { roots, shell: '/bin/bash' } })).message, /tools\.shell must be the client's shell when both are given, got "\/bin\/bash"/)
  // A name is looked up on PATH and named by its full path.
  const sh = new LocalTools({ roots, shell: 'sh' })
  assert.match(sh.shell, /^\/.*\/sh$/)
  assert.equal(new LocalTools({ roots }).shell, new LocalTools({ roots }).shell)
})

test('the agent fails at start with the same message for a bad flag or CURSOR_ACP_CLIENT_OPTIONS', async () => {
  const cases = [
    [['--transport', 'quic'], {}, { transport: 'quic' }],
    [['--client-version', 'cli 2026'], {}, { clientVersion: 'cli 2026' }],
    [[], { CURSOR_ACP_BASE_URL: 'ftp://example.com' }, { baseUrl: 'ftp://example.com' }],
    [[], { CURSOR_ACP_CLIENT_OPTIONS: '{"stallTimeoutMs":-1}' }, { stallTimeoutMs: -1 }],
    [['--embedded'], { CURSOR_ACP_CLIENT_OPTIONS: '{"transport":"h3"}' }, { transport: 'h3' }],
    // The flag wins over the JSON, so the flag's bad value is the one named.
    [['--transport', 'quic'], { CURSOR_ACP_CLIENT_OPTIONS: '{"transport":"sse"}' }, { transport: 'quic' }],
  ]
  for (const [args, env, options] of cases) {
    const expected = invalid(() => new AgentClient(options)).message
    const { code, stderr } = await runAgent(args, env)
    assert.equal(code, 2, `${JSON.stringify([args, env])}: ${stderr}`)
    assert.ok(stderr.startsWith(`cursor-acp-native: ${expected}\n`), `${JSON.stringify([args, env])}: ${stderr}`)
  }
  const { code, stderr } = await runAgent([], { CURSOR_ACP_CLIENT_OPTIONS: '{"stalTimeoutMs":5}' })
  assert.equal(code, 2)
  assert.match(stderr, /each client option must be one of .*, got "stalTimeoutMs"/)
  const shell = await runAgent([], { CURSOR_ACP_CLIENT_OPTIONS: '{"shell":"/bin/sh"}' })
  assert.equal(shell.code, 2)
  assert.match(shell.stderr, /CURSOR_ACP_CLIENT_OPTIONS cannot set shell/)
  const notJson = await runAgent([], { CURSOR_ACP_CLIENT_OPTIONS: '{stall' })
  assert.equal(notJson.code, 2)
  assert.match(notJson.stderr, /CURSOR_ACP_CLIENT_OPTIONS is not JSON/)
  // JSON that is not an object gets the core's message, not a TypeError of the agent's.
  for (const json of ['null', '[1]', '5']) {
    const expected = invalid(() => checkClientOptions(JSON.parse(json))).message
    const notObject = await runAgent([], { CURSOR_ACP_CLIENT_OPTIONS: json })
    assert.equal(notObject.code, 2, `${json}: ${notObject.stderr}`)
    assert.ok(notObject.stderr.startsWith(`cursor-acp-native: ${expected}\n`), `${json}: ${notObject.stderr}`)
  }
})

test('with a bad option, an editor gets initialize answered and then the exit, before any session', async () => {
  const cacheDir = tempDir('acp-cache-')
  const child = spawn(process.execPath, [CLI, '--cache-dir', cacheDir, '--base-url', 'ftp://example.com'], {
    stdio: ['pipe', 'pipe', 'pipe'],
    env: { ...process.env, CURSOR_ACCESS_TOKEN: '', CURSOR_API_KEY: '' },
  })
  let stdout = ''
  let stderr = ''
  child.stdout.on('data', (c) => { stdout += c })
  child.stderr.on('data', (c) => { stderr += c })
  // As an editor opening a thread: both at once, before any answer.
  child.stdin.write(`${JSON.stringify({ jsonrpc: '2.0', id: 0, method: 'initialize', params: INIT })}\n`)
  child.stdin.write(`${JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'session/new', params: { cwd: tempDir(), mcpServers: [] } })}\n`)
  const code = await within(10_000, new Promise((resolve) => child.on('exit', resolve)), 'the agent to exit').finally(() => child.kill())
  assert.equal(code, 2, stderr)
  assert.ok(stderr.startsWith(`cursor-acp-native: ${invalid(() => checkClientOptions({ baseUrl: 'ftp://example.com' })).message}\n`), stderr)
  const answers = stdout.trim().split('\n').map((line) => JSON.parse(line))
  assert.deepEqual(answers.map((a) => a.id), [0], 'initialize answered, session/new not')
  assert.equal(answers[0].result.protocolVersion, INIT.protocolVersion)
  assert.deepEqual(new SessionStore(cacheDir).list(), [], 'no session was made')
})

test('CURSOR_ACP_CLIENT_OPTIONS is applied, and the flags win over it', async () => {
  const scenario = { steps: [{ type: 'text', text: 'hi' }, { type: 'turnEnded' }] }
  const agent = startAgent({
    scenario,
    args: ['--client-version', 'cli-from-flag'],
    env: { CURSOR_ACP_CLIENT_OPTIONS: JSON.stringify({ transport: 'sse', clientVersion: 'cli-from-json', headers: { 'x-team': 'blue' } }) },
  })
  let records
  try {
    await agent.agent.request('initialize', INIT)
    const { sessionId } = await agent.agent.request('session/new', { cwd: tempDir(), mcpServers: [] })
    const r = await within(10_000, agent.agent.request('session/prompt', { sessionId, prompt: [{ type: 'text', text: 'hello' }] }), 'prompt')
    assert.equal(r.stopReason, 'end_turn')
  } finally {
    ({ records } = await agent.stop())
  }
  assert.deepEqual(records.map((r) => r.transport), ['sse'], 'the JSON chose the transport')
  assert.equal(records[0].headers['x-cursor-client-version'], 'cli-from-flag', 'the flag won over the JSON')
  assert.equal(records[0].headers['x-team'], 'blue')
})

test('the default base URL is the core\'s, and the agent names the same one', async () => {
  assert.equal(DEFAULT_BASE_URL, 'https://api2.cursor.sh')
  const child = spawn(process.execPath, [CLI, '--help'], { stdio: ['ignore', 'pipe', 'ignore'] })
  let out = ''
  child.stdout.on('data', (c) => { out += c })
  await within(10_000, new Promise((resolve) => child.on('exit', resolve)), '--help')
  assert.ok(out.includes(`(default ${DEFAULT_BASE_URL},`), out)
})

test('the request context names the shell the tools run, not the user\'s $SHELL', async () => {
  const command = 'echo "$0"; echo "$SHELL"'
  const scenario = { steps: [
    { type: 'toolCallStarted', callId: 's1', toolCall: { shellToolCall: { args: { command } } } },
    { type: 'exec', id: 1, args: { shellArgs: { command, toolCallId: 's1' } } },
    { type: 'exec', id: 2, args: { requestContextArgs: {} } },
    { type: 'turnEnded' },
  ] }
  // A login shell that the tools do not run, and that need not even exist here.
  const agent = startAgent({ scenario, env: { SHELL: '/usr/bin/fish' } })
  let records
  try {
    await agent.agent.request('initialize', INIT)
    const { sessionId } = await agent.agent.request('session/new', { cwd: tempDir(), mcpServers: [] })
    const r = await within(20_000, agent.agent.request('session/prompt', { sessionId, prompt: [{ type: 'text', text: 'which shell?' }] }), 'prompt')
    assert.equal(r.stopReason, 'end_turn')
  } finally {
    ({ records } = await agent.stop())
  }
  const told = messagesOf(records)[0].runRequest.action.userMessageAction.requestContext.env.shell
  assert.equal(execReply(records, 2).requestContextResult.success.requestContext.env.shell, told)
  assert.notEqual(told, '/usr/bin/fish')
  assert.equal(told, new LocalTools({ roots: [tempDir()] }).shell, 'the tools\' default shell')
  const ran = execReply(records, 1).shellResult.success.stdout.trim().split('\n')
  assert.deepEqual(ran, [told, told], '$0 and $SHELL of the command are the shell the server was told of')
})
