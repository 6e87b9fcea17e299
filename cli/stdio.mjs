// @ts-check
// The agent on stdin/stdout, ACP's newline-delimited JSON-RPC.
//
// An editor starts an agent per thread and waits for the answer to `initialize` before it
// sends anything else that matters. Loading the ACP SDK (and zod, which it builds its schemas
// with) takes longer than Node takes to start, so the first request is answered before the SDK
// is loaded when it is an `initialize` the SDK would accept: from `initializeResponse`, which
// the SDK's handler answers with too. The SDK's connection then reads the input from its first
// byte, that request included, so everything it knows (that the connection is initialized, the
// client's capabilities) is as it would be without the early answer; its own answer to that
// request is not written a second time, and what the client sent after the early answer
// reaches it only once it has answered, as if the client had waited for that answer. Anything
// else first — another method, bad JSON, a batch, invalid params — is left to the SDK alone.
import { Readable, Writable } from 'node:stream'

import { initializeResponse } from './initialize.mjs'

/** @typedef {import('@agentclientprotocol/sdk').AgentApp} AgentApp */
/** @typedef {import('@agentclientprotocol/sdk').AgentConnection} AgentConnection */
/** @typedef {import('@agentclientprotocol/sdk').AnyMessage} AnyMessage */
/** @typedef {import('@agentclientprotocol/sdk').Stream} Stream */
/**
 * An `initialize` answered before the SDK was loaded.
 * @typedef {{ id: string | number, result: string }} EarlyAnswer  the request's id, the JSON of the result sent
 */

/**
 * A first line longer than this is not looked at (an `initialize` is a few hundred bytes); the
 * SDK reads it as it would any other.
 */
const FIRST_LINE_LIMIT_BYTES = 64 * 1024

/**
 * Serves the agent on `input` and `output`: answers an `initialize` that comes first at once,
 * then loads the agent and connects it.
 * @param {object} o
 * @param {Readable} o.input
 * @param {Writable} o.output
 * @param {() => Promise<AgentApp>} o.loadAgent
 * @param {import('./log.mjs').Logger} o.log
 * @returns {Promise<AgentConnection>}
 */
export async function serveStdio({ input, output, loadAgent, log }) {
  const first = await readFirstLine(input)
  const early = first.line === null ? null : acceptableInitialize(first.line)
  if (early) output.write(`{"jsonrpc":"2.0","id":${JSON.stringify(early.id)},"result":${early.result}}\n`)
  const [{ ndJsonStream }, app] = await Promise.all([import('@agentclientprotocol/sdk'), loadAgent()])
  if (!early) return app.connect(ndJsonStream(Writable.toWeb(output), inputFrom(first, input, Promise.resolve())))
  // What the client sent after the early answer reaches the SDK once the SDK has answered that
  // request too, as if the client had waited for the SDK's answer.
  const { promise: answered, resolve } = withResolvers()
  const stream = ndJsonStream(Writable.toWeb(output), inputFrom(first, input, answered))
  return app.connect(withoutSecondAnswer(stream, early, resolve, log))
}

/**
 * @typedef {object} FirstLine
 * @property {string | null} line  the first line that is not blank; null when the input ended
 *   first or the line is longer than `FIRST_LINE_LIMIT_BYTES`
 * @property {Buffer} consumed  every byte read from the input
 */

/**
 * Reads up to the first line that is not blank, and leaves the rest in `input`, paused.
 * @param {Readable} input
 * @returns {Promise<FirstLine>}
 */
function readFirstLine(input) {
  return new Promise((resolve) => {
    /** @type {Buffer[]} */
    const chunks = []
    let size = 0
    let scanned = 0
    /** @param {string | null} line */
    const finish = (line) => {
      input.off('readable', onReadable)
      for (const event of ['end', 'close', 'error']) input.off(event, onEnd)
      resolve({ line, consumed: Buffer.concat(chunks) })
    }
    // The end of the input, or the input closed or failed (the agent is being stopped).
    const onEnd = () => finish(null)
    const onReadable = () => {
      /** @type {Buffer | null} */
      let chunk
      while ((chunk = input.read()) !== null) {
        chunks.push(chunk)
        size += chunk.length
        const all = chunks.length === 1 ? chunk : Buffer.concat(chunks)
        let newline
        while ((newline = all.indexOf(0x0a, scanned)) >= 0) {
          // Read as the SDK reads a line: UTF-8, trimmed; blank lines are skipped.
          const line = new TextDecoder().decode(all.subarray(scanned, newline)).trim()
          scanned = newline + 1
          if (line) return finish(line)
        }
        if (size > FIRST_LINE_LIMIT_BYTES) return finish(null)
      }
    }
    input.on('readable', onReadable)
    for (const event of ['end', 'close', 'error']) input.on(event, onEnd)
  })
}

/**
 * The SDK's input: the bytes read already, then — once `ready` — the rest of `input`.
 * @param {FirstLine} first
 * @param {Readable} input
 * @param {Promise<void>} ready
 * @returns {ReadableStream<Uint8Array>}
 */
function inputFrom(first, input, ready) {
  /** @type {ReadableStreamDefaultReader<Uint8Array> | null} */
  let rest = null
  return new ReadableStream({
    start(controller) {
      if (first.consumed.length > 0) controller.enqueue(new Uint8Array(first.consumed))
    },
    async pull(controller) {
      await ready
      if (input.readableEnded || input.destroyed) return controller.close()
      rest ??= /** @type {ReadableStream<Uint8Array>} */ (Readable.toWeb(input)).getReader()
      const { value, done } = await rest.read()
      if (done) controller.close()
      else controller.enqueue(value)
    },
    async cancel(reason) {
      if (rest) await rest.cancel(reason)
      else input.destroy()
    },
  })
}

/**
 * The request, when `line` is an `initialize` request the SDK would answer with a result: a
 * JSON-RPC 2.0 request with a string or number id and params holding a protocol version
 * (an integer from 0 to 65535; every other field of the params has a default).
 * @param {string} line
 * @returns {EarlyAnswer | null}
 */
function acceptableInitialize(line) {
  let message
  try {
    message = JSON.parse(line)
  } catch {
    return null
  }
  if (!isPlainObject(message) || message.jsonrpc !== '2.0' || message.method !== 'initialize') return null
  const id = message.id
  if (!(typeof id === 'string' || (typeof id === 'number' && Number.isFinite(id)))) return null
  const params = message.params
  if (!isPlainObject(params)) return null
  const version = params.protocolVersion
  if (typeof version !== 'number' || !Number.isInteger(version) || version < 0 || version > 65535) return null
  const clientCapabilities = isPlainObject(params.clientCapabilities) ? params.clientCapabilities : undefined
  return { id, result: JSON.stringify(initializeResponse({ protocolVersion: version, clientCapabilities })) }
}

/**
 * @param {unknown} value
 * @returns {value is Record<string, unknown>}
 */
function isPlainObject(value) {
  return typeof value === 'object' && value !== null && !Array.isArray(value)
}

/**
 * The same stream, less the SDK's answer to the request answered early; `answered` is called
 * when it comes. That answer is built by the same function from the same request; a different
 * one is logged, as a bug.
 * @param {Stream} stream
 * @param {EarlyAnswer} early
 * @param {() => void} answered
 * @param {import('./log.mjs').Logger} log
 * @returns {Stream}
 */
function withoutSecondAnswer(stream, early, answered, log) {
  let pending = true
  /** @type {TransformStream<AnyMessage, AnyMessage>} */
  const filter = new TransformStream({
    transform(message, controller) {
      if (pending && !('method' in message) && 'id' in message && message.id === early.id) {
        pending = false
        const result = 'result' in message ? JSON.stringify(message.result) : null
        if (result !== early.result) log.error(`initialize was answered early with ${early.result}; the SDK answered ${JSON.stringify(message)}`)
        answered()
        return
      }
      controller.enqueue(message)
    },
  })
  filter.readable.pipeTo(stream.writable).catch(() => {})
  return { readable: stream.readable, writable: filter.writable }
}

/**
 * `Promise.withResolvers`, which Node 20 lacks.
 * @returns {{ promise: Promise<void>, resolve: () => void }}
 */
function withResolvers() {
  /** @type {() => void} */
  let resolve = () => {}
  const promise = new Promise((r) => { resolve = () => r(undefined) })
  return { promise, resolve }
}
