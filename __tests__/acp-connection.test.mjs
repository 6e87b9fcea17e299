// The agent's connection (cli/acp.mjs) against the ACP SDK's, the one it stands in for: both
// serve the same handlers on JSON lines, get the same input byte for byte (editors' messages,
// and what a buggy or hostile one sends: bad JSON, batches, odd ids, wrong params, requests
// before `initialize`, unknown methods, cancellations, answers to nothing) and must write the
// same answers, and their handlers must get the same params. Answers are compared by id (two
// requests' handlers may finish in either order); the rest in the order written.
import { test } from 'node:test'
import assert from 'node:assert/strict'
import { PassThrough, Writable } from 'node:stream'

import * as sdk from '@agentclientprotocol/sdk'
import * as light from '../cli/acp.mjs'

/**
 * Serves test handlers with `impl` on an input of `lines`, playing the client: the agent's
 * requests are answered as `answers` says. Resolves with every message written, in order, and
 * what the notification handler got.
 * @param {typeof sdk | typeof light} impl
 * @param {(string | Uint8Array)[]} chunks  the input, as it arrives
 */
async function serve(impl, chunks, { answers = {} } = {}) {
  const written = []
  const notified = []
  let buffered = ''
  /** @param {string} text  what the agent wrote */
  const take = (text) => {
    buffered += text
    let newline
    while ((newline = buffered.indexOf('\n')) >= 0) {
      const message = JSON.parse(buffered.slice(0, newline))
      buffered = buffered.slice(newline + 1)
      written.push(message)
      // The agent asked the client something: answered as the test says.
      if (message.method && message.id !== undefined && answers[message.method]) send(`${JSON.stringify({ jsonrpc: '2.0', id: message.id, ...answers[message.method] })}\n`)
    }
  }
  // The SDK's stream is on web streams, the agent's (`JsonLines`) on Node's: each gets the same
  // bytes in the same chunks.
  /** @type {(text: string | Uint8Array) => void} */
  let send
  /** @type {() => void} */
  let end
  /** @type {any} */
  let stream
  if (impl === light) {
    const input = new PassThrough()
    send = (text) => input.write(text)
    end = () => input.end()
    const output = new Writable({ write(chunk, _encoding, done) { take(chunk.toString()); done() } })
    stream = new light.JsonLines(output, input)
  } else {
    /** @type {ReadableStreamDefaultController<Uint8Array>} */
    let input
    const readable = new ReadableStream({ start: (c) => { input = c } })
    const encoder = new TextEncoder()
    send = (text) => input.enqueue(typeof text === 'string' ? encoder.encode(text) : text)
    end = () => input.close()
    const writable = new WritableStream({ write(chunk) { take(new TextDecoder().decode(chunk)) } })
    stream = sdk.ndJsonStream(writable, readable)
  }
  const app = impl.agent({ name: 'test' })
  const echo = async ({ method, params }) => ({ method, params: params ?? null })
  for (const method of ['initialize', 'authenticate', 'logout', 'session/new', 'session/load', 'session/list', 'session/delete', 'session/resume', 'session/set_mode', 'session/set_config_option', 'session/prompt']) app.onRequest(method, echo)
  // A handler that returns nothing: the SDK answers some methods with {} and the others with null.
  app.onRequest('session/close', async () => undefined)
  app.onRequest('_test/undefined', (p) => p, async () => undefined)
  app.onRequest('_test/throw', (p) => p, async ({ params }) => {
    if (params.kind === 'request') throw impl.RequestError.sessionNotFound('s9')
    if (params.kind === 'json') throw new Error('{"detail":[1,2]}')
    if (params.kind === 'object') throw { message: 'not an Error' }
    if (params.kind === 'nothing') throw 7
    throw new Error('boom')
  })
  app.onRequest('_test/parser-throws', () => { throw impl.RequestError.invalidParams(undefined, 'bad') }, echo)
  // Waits for its cancellation and fails as an aborted fetch would.
  app.onRequest('_test/wait', (p) => p, ({ signal }) => new Promise((resolve, reject) => {
    signal.addEventListener('abort', () => reject(Object.assign(new Error('aborted'), { name: 'AbortError' })))
  }))
  // Asks the client, and answers with what it said (or how it failed).
  app.onRequest('_test/ask', (p) => p, async ({ params, client }) => {
    try {
      return { got: await client.request(params.method, params.params) }
    } catch (e) {
      return { failed: { code: e.code, message: e.message, data: e.data ?? null, name: e.name } }
    }
  })
  app.onNotification('session/cancel', ({ params }) => { notified.push(params) })
  const connection = app.connect(stream)
  for (const chunk of chunks) {
    send(chunk)
    // Each chunk arrives on its own, as lines do from a pipe.
    await new Promise((resolve) => setTimeout(resolve, 5))
  }
  await new Promise((resolve) => setTimeout(resolve, 100))
  end()
  await connection.closed
  return { written, notified }
}

/** The answers by id (in the order of their ids' first answer), the rest as written. */
function shape({ written, notified }) {
  const answers = written.filter((m) => !('method' in m)).map((m) => JSON.stringify(m)).sort()
  const others = written.filter((m) => 'method' in m).map((m) => JSON.stringify(m))
  return { answers, others, notified: JSON.stringify(notified) }
}

const line = (message) => `${JSON.stringify({ jsonrpc: '2.0', ...message })}\n`
const INIT = line({ id: 0, method: 'initialize', params: { protocolVersion: 1, clientCapabilities: { fs: { readTextFile: true }, terminal: true }, clientInfo: { name: 'zed', version: '1' } } })

async function same(name, chunks, options) {
  const theirs = shape(await serve(sdk, chunks, options))
  const ours = shape(await serve(light, chunks, options))
  assert.deepEqual(ours, theirs, name)
  return ours
}

test('a session as an editor runs it: the same answers, the same params', async () => {
  const out = await same('session', [
    INIT,
    line({ id: 1, method: 'session/new', params: { cwd: '/work', mcpServers: [] } }),
    line({ id: 2, method: 'session/prompt', params: { sessionId: 's1', prompt: [{ type: 'text', text: 'hi' }, { type: 'resource_link', name: 'a', uri: 'file:///a' }] } }),
    line({ method: 'session/cancel', params: { sessionId: 's1' } }),
    line({ id: 3, method: 'session/set_mode', params: { sessionId: 's1', modeId: 'plan' } }),
    line({ id: 4, method: 'session/set_config_option', params: { sessionId: 's1', configId: 'max_mode', type: 'boolean', value: true } }),
    line({ id: 'five', method: 'session/list', params: {} }),
    line({ id: 6, method: 'session/close', params: { sessionId: 's1' } }),
    line({ id: 7, method: 'logout' }),
    line({ id: 8, method: '_test/undefined', params: {} }),
  ])
  assert.equal(out.answers.length, 9)
})

test('params the hand checks leave to the SDK: its params, its errors, in the order sent', async () => {
  await same('odd params', [
    INIT,
    // Valid, but not as editors send it: an unknown field, a role the schema skips, a null list.
    line({ id: 1, method: 'session/new', params: { cwd: '/work', mcpServers: null, extra: 1, _meta: JSON.parse('{"__proto__":{"x":1},"k":2}') } }),
    line({ id: 2, method: 'session/prompt', params: { sessionId: 's1', prompt: [{ type: 'text', text: 'hi', annotations: { audience: ['user', 'robot'] } }] } }),
    line({ id: 3, method: 'session/prompt', params: { sessionId: 's1', prompt: [{ type: 'text', text: 'after' }] } }),
    // Invalid: the SDK's own errors (zod's issues in their data).
    line({ id: 4, method: 'session/prompt', params: { sessionId: 's1' } }),
    line({ id: 5, method: 'session/new', params: { cwd: 7, mcpServers: [] } }),
    line({ id: 6, method: 'initialize', params: { protocolVersion: '1' } }),
    line({ id: 7, method: 'session/set_mode' }),
    line({ method: 'session/cancel', params: { sessionId: 1 } }),
    line({ method: 'session/cancel' }),
    line({ method: 'session/cancel', params: { sessionId: 's2', extra: true } }),
    line({ id: 8, method: 'session/load', params: { sessionId: 's1', cwd: '/w', mcpServers: [{ name: 'm', command: 'node' }] } }),
    line({ id: 9, method: 'session/list', params: { cwd: null, cursor: 5 } }),
  ])
})

test('a buggy or hostile editor: the same answers to every kind of bad input', async () => {
  await same('before initialize', [
    line({ id: 1, method: 'session/new', params: { cwd: '/work', mcpServers: [] } }),
    line({ id: 2, method: 'no/such', params: {} }),
    line({ method: 'session/cancel', params: { sessionId: 's1' } }),
    // A refused initialize opens nothing.
    line({ id: 'i', method: 'initialize', params: { protocolVersion: 'one' } }),
    line({ id: 4, method: 'session/list', params: {} }),
    INIT,
    line({ id: 3, method: 'session/list', params: {} }),
  ])
  await same('bad input', [
    INIT,
    'not json\n',
    '\n  \n',
    '[1, 2]\n',
    '"a string"\n',
    '42\n',
    'null\n',
    '{"id": 1, "method": "session/list"}\n',
    line({ id: { x: 1 }, method: 'session/list' }),
    line({ id: 1.5, method: 'session/list', params: {} }),
    line({ id: null, method: 'session/list', params: {} }),
    line({ id: 2, method: 'no/such/method', params: {} }),
    line({ method: 'no/such/notification', params: {} }),
    line({ id: 3, result: {} }),
    line({ id: 4, error: { code: 1, message: 'x' } }),
    line({ result: {} }),
    line({ id: 5 }),
    '{"jsonrpc":"2.0","id":6,"method":"session/list","params":{}}\r\n',
    line({ id: 7, method: '_test/parser-throws', params: {} }),
    ...['request', 'json', 'object', 'nothing', 'error'].map((kind, i) => line({ id: 10 + i, method: '_test/throw', params: { kind } })),
    // A line in pieces, then one without its newline at the end of the input.
    '{"jsonrpc":"2.0","id":20,',
    '"method":"session/list","params":{"cwd":"/w"}}\n',
    '{"jsonrpc":"2.0","id":21,"method":"session/list","params":{}}',
  ])
})

test('cancellation: $/cancel_request aborts a request, which answers as cancelled', async () => {
  await same('cancel', [
    INIT,
    line({ id: 1, method: '_test/wait', params: {} }),
    line({ id: 2, method: '_test/wait', params: {} }),
    line({ method: '$/cancel_request', params: { requestId: 1 } }),
    line({ method: '$/cancel_request', params: { requestId: 99 } }),
    line({ method: '$/cancel_request', params: {} }),
  ])
})

test("the agent's own requests: ids, results, errors, malformed answers", async () => {
  const out = await same('ask', [
    INIT,
    line({ id: 1, method: '_test/ask', params: { method: 'fs/read_text_file', params: { sessionId: 's1', path: '/a' } } }),
    line({ id: 2, method: '_test/ask', params: { method: 'fs/write_text_file', params: { sessionId: 's1', path: '/a', content: 'x' } } }),
    line({ id: 3, method: '_test/ask', params: { method: 'session/request_permission', params: { sessionId: 's1' } } }),
    line({ id: 4, method: '_test/ask', params: { method: 'terminal/kill', params: { sessionId: 's1', terminalId: 't' } } }),
  ], {
    answers: {
      'fs/read_text_file': { result: { content: 'text' } },
      'fs/write_text_file': { result: null },
      'session/request_permission': { error: { code: -32001, message: 'no', data: { why: 'test' } } },
      'terminal/kill': { result: {}, error: { code: 1, message: 'both' } },
    },
  })
  assert.equal(out.others.length, 4)
})

test("JsonLines: the addon's serialized lines leave in order with the messages around them, in one write", async () => {
  /** @type {string[][]} each write of the output: its pieces */
  const writes = []
  const output = new Writable({
    write(chunk, _encoding, done) {
      writes.push([chunk.toString()])
      done()
    },
    writev(chunks, done) {
      writes.push(chunks.map((c) => c.chunk.toString()))
      done()
    },
  })
  const stream = new light.JsonLines(output, new PassThrough())
  const tick = () => new Promise((resolve) => setImmediate(resolve))
  const lines = Buffer.from('{"jsonrpc":"2.0","method":"b","params":{"text":"ü\\n"}}\n{"jsonrpc":"2.0","method":"c"}\n')
  await Promise.all([
    stream.write({ jsonrpc: '2.0', method: 'a' }),
    stream.writeLines(lines),
    stream.write({ jsonrpc: '2.0', method: 'd' }),
    stream.write({ jsonrpc: '2.0', method: 'e' }),
  ])
  await tick()
  assert.equal(writes.length, 1, `what was written in one go leaves in one write: ${JSON.stringify(writes)}`)
  const methods = (pieces) => pieces.join('').trimEnd().split('\n').map((l) => JSON.parse(l).method)
  assert.deepEqual(methods(writes[0]), ['a', 'b', 'c', 'd', 'e'])
  assert.equal(JSON.parse(writes[0].join('').split('\n')[1]).params.text, 'ü\n')

  // Lines alone, and nothing at all.
  await stream.writeLines(Buffer.from('{"jsonrpc":"2.0","method":"f"}\n'))
  await stream.writeLines(new Uint8Array(0))
  await tick()
  assert.deepEqual(writes.slice(1).map(methods), [['f']])

  // Once the output is gone, lines are refused as messages are.
  output.destroy()
  await assert.rejects(stream.writeLines(lines), /closed/)
  await assert.rejects(stream.write({ jsonrpc: '2.0', method: 'g' }), /closed/)
})
