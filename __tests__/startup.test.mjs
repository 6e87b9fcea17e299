// The stdio agent's start-up: the first `initialize`, and a `session/new` right after it, are
// answered before the ACP SDK is loaded (cli/stdio.mjs). These tests drive the real agent
// process with raw JSON lines and check that what a client sees is what the SDK alone would
// answer: one answer per request, the same result, requests sent after those answers served in
// order, and everything that is not an acceptable `initialize` (or `session/new`) left to the
// SDK's own errors.
import { test } from 'node:test'
import assert from 'node:assert/strict'
import { spawn } from 'node:child_process'
import { PassThrough } from 'node:stream'
import { agent as agentApp } from '../cli/acp.mjs'
import { initializeResponse } from '../cli/initialize.mjs'
import { createLogger } from '../cli/log.mjs'
import { serveStdio } from '../cli/stdio.mjs'
import { CLI, tempDir } from './acp-harness.mjs'

/** Spawns the agent (local gateway URL, nothing listening: no request here reaches it). */
function rawAgent(extraArgs = []) {
  const child = spawn(process.execPath, [CLI, '--base-url', 'http://127.0.0.1:9', '--cache-dir', tempDir('acp-cache-'), ...extraArgs], {
    stdio: ['pipe', 'pipe', 'pipe'],
    env: { ...process.env, CURSOR_ACCESS_TOKEN: '', CURSOR_API_KEY: '' },
  })
  let out = ''
  let err = ''
  /** @type {(() => void)[]} */
  let wakers = []
  child.stdout.on('data', (c) => {
    out += c
    for (const wake of wakers) wake()
    wakers = []
  })
  child.stderr.on('data', (c) => { err += c })
  const exited = new Promise((resolve) => child.on('exit', (code) => resolve(code)))
  const messages = () => out.split('\n').filter(Boolean).map((l) => JSON.parse(l))
  return {
    child,
    write: (text) => child.stdin.write(text),
    send: (message) => child.stdin.write(`${JSON.stringify({ jsonrpc: '2.0', ...message })}\n`),
    messages,
    stderr: () => err,
    /** Resolves the answer to request `id` once it is on stdout (the `nth` one, counting from 1). */
    async answer(id, ms = 10_000, nth = 1) {
      const deadline = Date.now() + ms
      for (;;) {
        const found = messages().filter((m) => m.id === id && !('method' in m))[nth - 1]
        if (found) return found
        if (Date.now() > deadline) throw new Error(`no answer ${nth} to ${JSON.stringify(id)} within ${ms} ms; stdout: ${out}`)
        await new Promise((resolve) => {
          wakers.push(resolve)
          setTimeout(resolve, 50)
        })
      }
    },
    async stop() {
      child.stdin.end()
      const timer = setTimeout(() => child.kill('SIGKILL'), 5000)
      const code = await exited
      clearTimeout(timer)
      return code
    },
  }
}

/**
 * In-process stdio for `serveStdio`: what the agent writes, as JSON lines, and a wait for one.
 */
function pipes() {
  const input = new PassThrough()
  const output = new PassThrough()
  let out = ''
  output.on('data', (c) => { out += c })
  const lines = () => out.split('\n').filter(Boolean).map((l) => JSON.parse(l))
  /** @param {() => boolean} predicate */
  const until = async (predicate) => {
    const deadline = Date.now() + 5000
    while (!predicate()) {
      if (Date.now() > deadline) throw new Error(`not reached; output: ${out}`)
      await new Promise((resolve) => setTimeout(resolve, 10))
    }
  }
  return { input, output, lines, until }
}

const INITIALIZE = { method: 'initialize', params: { protocolVersion: 1, clientCapabilities: { fs: { readTextFile: true } }, clientInfo: { name: 'startup-test', version: '1' } } }
const NEW_SESSION = { method: 'session/new', params: { cwd: process.cwd(), mcpServers: [] } }

test('an initialize sent first is answered once, as the SDK answers it, and requests after its answer are served', async () => {
  // The SDK's own answer: bad JSON first, so the agent does not answer early.
  const viaSdk = rawAgent()
  viaSdk.write('not json\n')
  viaSdk.send({ id: 1, ...INITIALIZE })
  const sdkAnswer = await viaSdk.answer(1)
  assert.equal(await viaSdk.stop(), 0)

  for (let run = 0; run < 3; run++) {
    const agent = rawAgent()
    agent.send({ id: 1, ...INITIALIZE })
    const early = await agent.answer(1)
    assert.deepEqual(early, sdkAnswer)
    // Sent the moment the answer arrives, while the agent is still loading the SDK.
    agent.send({ id: 2, ...NEW_SESSION })
    const created = await agent.answer(2)
    assert.equal(created.error, undefined, JSON.stringify(created))
    assert.match(created.result.sessionId, /^[0-9a-f-]{36}$/)
    agent.send({ id: 3, method: 'session/close', params: { sessionId: created.result.sessionId } })
    assert.deepEqual((await agent.answer(3)).result, {})
    assert.equal(await agent.stop(), 0)
    const answers = agent.messages().filter((m) => !('method' in m))
    assert.deepEqual(answers.map((m) => m.id), [1, 2, 3], 'one answer per request, in order')
    assert.doesNotMatch(agent.stderr(), /answered early/)
  }
})

test('blank lines and CRLF before the first initialize change nothing; a string id is echoed', async () => {
  const agent = rawAgent()
  agent.write(`\n  \r\n${JSON.stringify({ jsonrpc: '2.0', id: 'init-1', ...INITIALIZE })}\r\n`)
  const answer = await agent.answer('init-1')
  assert.equal(answer.result.protocolVersion, 1)
  agent.send({ id: 'new-1', ...NEW_SESSION })
  assert.ok((await agent.answer('new-1')).result.sessionId)
  assert.equal(await agent.stop(), 0)
  assert.equal(agent.messages().filter((m) => m.id === 'init-1').length, 1)
})

test('a first request that is not an acceptable initialize gets the SDK\'s own answer', async () => {
  const cases = [
    // No protocol version, a string one, one out of range: invalid params.
    [{ id: 1, method: 'initialize', params: {} }, -32602],
    [{ id: 1, method: 'initialize', params: { protocolVersion: '1' } }, -32602],
    [{ id: 1, method: 'initialize', params: { protocolVersion: 70000 } }, -32602],
    [{ id: 1, method: 'initialize', params: { protocolVersion: 1.5 } }, -32602],
    [{ id: 1, method: 'initialize' }, -32602],
    // Another method before initialize.
    [{ id: 1, ...NEW_SESSION }, -32600],
  ]
  for (const [request, code] of cases) {
    const agent = rawAgent()
    agent.send(request)
    const answer = await agent.answer(1)
    assert.equal(answer.error?.code, code, `${JSON.stringify(request)} → ${JSON.stringify(answer)}`)
    // The connection still serves an initialize afterwards.
    agent.send({ id: 2, ...INITIALIZE })
    assert.equal((await agent.answer(2)).result.protocolVersion, 1)
    assert.equal(await agent.stop(), 0)
    assert.equal(agent.messages().filter((m) => m.id === 1).length, 1)
  }
})

test('a batch first gets -32600 and the agent keeps serving', async () => {
  const agent = rawAgent()
  agent.write(`${JSON.stringify([{ jsonrpc: '2.0', id: 1, ...INITIALIZE }])}\n`)
  agent.send({ id: 2, ...INITIALIZE })
  await agent.answer(2)
  assert.ok(agent.messages().some((m) => m.id === null && m.error?.code === -32600))
  assert.equal(await agent.stop(), 0)
})

test('input that ends early: the agent answers what it got and exits', async () => {
  // A whole line, then the end: answered (as without the early answer), then the agent exits.
  const agent = rawAgent()
  agent.send({ id: 1, ...INITIALIZE })
  agent.child.stdin.end()
  assert.equal((await agent.answer(1)).result.protocolVersion, 1)
  assert.equal(await agent.stop(), 0)
  assert.equal(agent.messages().length, 1)

  // Half a line: the SDK's parse error, then the agent exits. Nothing at all: it just exits.
  const half = rawAgent()
  half.child.stdin.end(JSON.stringify({ jsonrpc: '2.0', id: 1, ...INITIALIZE }).slice(0, 20))
  assert.equal(await half.stop(), 0)
  assert.deepEqual(half.messages().map((m) => m.error?.code), [-32700])
  const silent = rawAgent()
  silent.child.stdin.end()
  assert.equal(await silent.stop(), 0)
  assert.deepEqual(silent.messages(), [])
})

test('what the client sends after the early answer reaches the agent once the SDK has answered initialize too', async () => {
  // An agent whose initialize handler takes a while: a request let through at once would meet
  // the SDK's "not initialized yet" error.
  const handled = []
  const app = agentApp({ name: 'slow-initialize' })
    .onRequest('initialize', async ({ params }) => {
      await new Promise((resolve) => setTimeout(resolve, 200))
      handled.push('initialize')
      return initializeResponse(params)
    })
    .onRequest('session/new', async () => {
      handled.push('session/new')
      return { sessionId: 'slow-1' }
    })
  const { input, output, lines, until } = pipes()
  input.write(`${JSON.stringify({ jsonrpc: '2.0', id: 1, ...INITIALIZE })}\n`)
  const connecting = serveStdio({ input, output, loadAgent: async () => app, log: createLogger('error') })
  await until(() => lines().some((m) => m.id === 1))
  input.write(`${JSON.stringify({ jsonrpc: '2.0', id: 2, ...NEW_SESSION })}\n`)
  const connection = await connecting
  await until(() => lines().some((m) => m.id === 2))
  assert.deepEqual(lines().find((m) => m.id === 2), { jsonrpc: '2.0', id: 2, result: { sessionId: 'slow-1' } })
  assert.deepEqual(handled, ['initialize', 'session/new'])
  assert.equal(lines().filter((m) => m.id === 1).length, 1)
  connection.close()
})

test('SIGTERM before any request ends the agent', async () => {
  const agent = rawAgent(['--log-level', 'debug'])
  // Once it says so it reads stdin, with its signal handlers in place; nothing is ever sent.
  const deadline = Date.now() + 10_000
  while (!agent.stderr().includes('reading the client on stdin')) {
    assert.ok(Date.now() < deadline, `the agent never began reading stdin:\n${agent.stderr()}`)
    await new Promise((resolve) => setTimeout(resolve, 20))
  }
  agent.child.kill('SIGTERM')
  const timer = setTimeout(() => agent.child.kill('SIGKILL'), 5000)
  const [code, signal] = await new Promise((resolve) => agent.child.on('exit', (c, s) => resolve([c, s])))
  clearTimeout(timer)
  assert.deepEqual([code, signal], [0, null], 'it exits by itself, not by the SIGKILL 5 s later')
})

test('a session/new sent on the initialize answer: one answer, a real session, its commands after it', async () => {
  // The SDK's own answer to a session/new: sent after a bad line, so that nothing is answered early.
  const viaSdk = rawAgent()
  viaSdk.write('not json\n')
  viaSdk.send({ id: 1, ...INITIALIZE })
  await viaSdk.answer(1)
  viaSdk.send({ id: 2, ...NEW_SESSION })
  const sdkAnswer = await viaSdk.answer(2)
  assert.equal(await viaSdk.stop(), 0)

  const agent = rawAgent()
  agent.send({ id: 1, ...INITIALIZE })
  await agent.answer(1)
  agent.send({ id: 2, ...NEW_SESSION })
  // Sent at once behind it: held back until the SDK has answered session/new too.
  agent.send({ id: 3, method: 'session/list', params: {} })
  const created = await agent.answer(2)
  const { sessionId } = created.result
  assert.match(sessionId, /^[0-9a-f-]{36}$/)
  assert.deepEqual({ ...created.result, sessionId: 'x' }, { ...sdkAnswer.result, sessionId: 'x' })
  const listed = await agent.answer(3)
  assert.deepEqual(listed.result.sessions.map((s) => s.sessionId), [sessionId], 'saved, and known to the SDK\'s handlers')
  agent.send({ id: 4, method: 'session/close', params: { sessionId } })
  assert.deepEqual((await agent.answer(4)).result, {})
  assert.equal(await agent.stop(), 0)
  const messages = agent.messages()
  assert.deepEqual(messages.filter((m) => !('method' in m)).map((m) => m.id), [1, 2, 3, 4], 'one answer per request, in order')
  const commands = messages.findIndex((m) => m.params?.update?.sessionUpdate === 'available_commands_update')
  assert.ok(commands > messages.findIndex((m) => m.id === 2), 'the commands follow the answer')
  assert.equal(messages[commands].params.sessionId, sessionId)
  assert.doesNotMatch(agent.stderr(), /answered early/)
})

test('a session/new the agent does not answer early gets the SDK\'s own answer', async () => {
  const cases = [
    // Params the SDK checks: a relative cwd, no mcpServers, a directory that is not a string.
    [{ cwd: 'relative', mcpServers: [] }, -32602],
    [{ cwd: process.cwd() }, -32602],
    [{ cwd: process.cwd(), mcpServers: [], additionalDirectories: [7] }, -32602],
  ]
  for (const [params, code] of cases) {
    const agent = rawAgent()
    agent.send({ id: 1, ...INITIALIZE })
    await agent.answer(1)
    agent.send({ id: 2, method: 'session/new', params })
    const answer = await agent.answer(2)
    assert.equal(answer.error?.code, code, `${JSON.stringify(params)} → ${JSON.stringify(answer)}`)
    assert.equal(await agent.stop(), 0)
    assert.equal(agent.messages().filter((m) => m.id === 2).length, 1)
  }
  // The same id as initialize's: left to the SDK, which answers both.
  const same = rawAgent()
  same.send({ id: 1, ...INITIALIZE })
  await same.answer(1)
  same.send({ id: 1, ...NEW_SESSION })
  await same.answer(1, 10_000, 2)
  assert.equal(await same.stop(), 0)
  assert.equal(same.messages().filter((m) => m.id === 1).length, 2)
  assert.ok(same.messages().some((m) => m.id === 1 && m.result?.sessionId))
})

test('session/new is answered early before the SDK is loaded; the SDK\'s answer to it is not written again', async () => {
  // The agent's app is held back: only the early path can answer session/new meanwhile.
  const handled = []
  const app = agentApp({ name: 'slow-load' })
    .onRequest('initialize', async ({ params }) => {
      handled.push('initialize')
      return initializeResponse(params)
    })
    .onRequest('session/new', async () => {
      handled.push('session/new')
      return { sessionId: 'early-1' }
    })
    .onRequest('session/list', async () => {
      handled.push('session/list')
      return { sessions: [] }
    })
  /** @type {() => void} */
  let release = () => {}
  const loaded = new Promise((resolve) => { release = () => resolve(app) })
  const { input, output, lines, until } = pipes()
  const earlyCalls = []
  const connecting = serveStdio({
    input,
    output,
    loadAgent: () => loaded,
    newSessionEarly: async (initialize, params) => {
      earlyCalls.push({ initialize, params })
      return { sessionId: 'early-1' }
    },
    log: createLogger('error'),
  })
  input.write(`${JSON.stringify({ jsonrpc: '2.0', id: 1, ...INITIALIZE })}\n`)
  await until(() => lines().some((m) => m.id === 1))
  input.write(`${JSON.stringify({ jsonrpc: '2.0', id: 2, ...NEW_SESSION })}\n${JSON.stringify({ jsonrpc: '2.0', id: 3, method: 'session/list', params: {} })}\n`)
  await until(() => lines().some((m) => m.id === 2))
  assert.deepEqual(lines().find((m) => m.id === 2), { jsonrpc: '2.0', id: 2, result: { sessionId: 'early-1' } })
  assert.deepEqual(earlyCalls, [{ initialize: INITIALIZE.params, params: NEW_SESSION.params }])
  assert.deepEqual(handled, [], 'answered before the app was loaded')
  release()
  const connection = await connecting
  await until(() => lines().some((m) => m.id === 3))
  assert.deepEqual(handled, ['initialize', 'session/new', 'session/list'], 'the SDK read both requests, in order, before the next')
  assert.deepEqual(lines().map((m) => m.id), [1, 2, 3])
  connection.close()
})
