// @ts-check
// The agent on stdin/stdout, ACP's newline-delimited JSON-RPC.
//
// An editor starts an agent per thread and waits for the answer to `initialize` before it
// sends anything else that matters. Loading the agent (its modules, then the addon) takes a good
// share of Node's own start-up, so the first request is answered before the agent and its
// connection (acp.mjs) are loaded when it is an `initialize` the connection would accept: from
// `initializeResponse`, which the agent's handler answers with too. The connection then reads
// the input from its first byte, that request included, so everything it knows (that the
// connection is initialized, the client's capabilities) is as it would be without the early
// answer; its own answer to that request is not written a second time, and what the client sent
// after the early answer reaches it only once it has answered, as if the client had waited for
// that answer. Anything else first — another method, bad JSON, a batch, invalid params — is left
// to the connection alone.
//
// The same goes for a `session/new` that comes right after that `initialize` (within
// `SESSION_NEW_WAIT_MS` of its answer, as an editor opening a thread sends it): before the
// connection is made, the agent makes the session and it is answered (`newSessionEarly`); the
// connection then reads that request too, its handler answers with the same session, and that
// answer is not written a second time either. Anything the agent does not answer early (MCP
// servers to connect, credentials still to fetch, params it leaves to the connection to check)
// goes to the connection.
//
// The connection's input is split into lines once, by `JsonLines` (acp.mjs), which also refuses
// a line over its limit on its own: the bytes read here first are handed to it again, then the
// rest of the input.

import { initializeResponse } from './initialize.mjs'

/** @typedef {import('node:stream').Readable} Readable */
/** @typedef {import('node:stream').Writable} Writable */
/** @typedef {import('./acp.mjs').JsonLines} JsonLines */
/** acp.mjs's `agent()`, typed as the SDK's app it stands in for. @typedef {import('@agentclientprotocol/sdk').AgentApp} AgentApp */
/** @typedef {import('@agentclientprotocol/sdk').AgentConnection} AgentConnection */
/**
 * A request answered before the connection was made.
 * @typedef {{ id: string | number, result: string }} EarlyAnswer  the request's id, the JSON of the result sent
 */
/**
 * An early answer, and the connection's answer to the same request still to come: the input
 * after that request (from byte `end`) reaches the connection once `seen` resolves.
 * @typedef {EarlyAnswer & { end: number, seen: Promise<void>, see: () => void }} Pending
 */
/** @typedef {import('@agentclientprotocol/sdk').InitializeRequest} InitializeRequest */
/**
 * @typedef {(initialize: InitializeRequest, params: unknown) => Promise<object | null>} NewSessionEarly
 *   makes the session of a `session/new` sent right after `initialize` and returns the result to
 *   answer with, or null to leave the request to the connection
 */

/**
 * A first line longer than this is not looked at (an `initialize` is a few hundred bytes); the
 * connection reads it as it would any other.
 */
const FIRST_LINE_LIMIT_BYTES = 64 * 1024

/**
 * How long after the early `initialize` answer a `session/new` is waited for before the agent
 * is loaded and connected. An editor opening a thread sends it at once; one that does not gets
 * it answered by the connection, made this much later.
 */
const SESSION_NEW_WAIT_MS = 20

/**
 * Serves the agent on `input` and `output`: answers an `initialize` that comes first at once
 * (and a `session/new` right after it, with `newSessionEarly`), then loads the connection and
 * the agent and connects them.
 * @param {object} o
 * @param {Readable} o.input
 * @param {Writable} o.output
 * @param {() => Promise<AgentApp>} o.loadAgent
 * @param {NewSessionEarly} [o.newSessionEarly]
 * @param {import('./log.mjs').Logger} o.log
 * @param {(error: unknown) => void} [o.onInputFailure]  called when reading the input fails
 *   (not at its end): the connection then closes as it does at the end of the input
 * @param {() => void} [o.afterFirstLine]  called once the first line is read (or the input ended
 *   first), right after an `initialize` is answered and before anything else is: work the
 *   agent needs before its first session is done there, while the client reads that answer
 * @returns {Promise<AgentConnection>}
 */
export async function serveStdio({ input, output, loadAgent, newSessionEarly, log, onInputFailure, afterFirstLine }) {
  const lines = new LineReader(input)
  const first = await lines.next()
  const initialize = first === null ? null : acceptableInitialize(first)
  /** @type {Pending[]} */
  const early = []
  /**
   * Writes the answer to the line read last.
   * @param {EarlyAnswer} answer
   */
  const answer = ({ id, result }) => {
    output.write(`{"jsonrpc":"2.0","id":${JSON.stringify(id)},"result":${result}}\n`)
    const { promise, resolve } = withResolvers()
    early.push({ id, result, end: lines.end, seen: promise, see: resolve })
  }
  if (initialize) answer(initialize)
  afterFirstLine?.()
  if (initialize) {
    const second = newSessionEarly ? await lines.next(SESSION_NEW_WAIT_MS) : null
    let request = second === null ? null : acceptableRequest(second, 'session/new')
    // Its answer is told from the connection's answer to initialize by its id.
    if (request?.id === initialize.id) request = null
    const result = request && newSessionEarly ? await newSessionEarly(initialize.params, request.params) : null
    if (request && result) answer({ id: request.id, result: JSON.stringify(result) })
  }
  const { JsonLines } = await import('./acp.mjs')
  const app = await loadAgent()
  // What the client sent after each early answer reaches the connection once it has answered
  // that request too, as if the client had waited for its answer.
  const stream = new JsonLines(output, input, { chunks: inputFrom(lines.consumed(), early, input), log, onInputFailure })
  if (early.length > 0) stream.skip = secondAnswers(stream, early, log)
  // acp.mjs's app connects to a JsonLines (the SDK's typings name its web streams).
  return app.connect(/** @type {any} */ (stream))
}

/**
 * The lines of the input, read one at a time: each read leaves the rest in `input`, paused.
 */
class LineReader {
  /** @param {Readable} input */
  constructor(input) {
    this.input = input
    /** @type {Buffer[]} */
    this.chunks = []
    this.size = 0
    /** Where the bytes not scanned for lines yet start: after the line read last, once read. */
    this.end = 0
  }

  /** Every byte read from the input so far. */
  consumed() {
    return Buffer.concat(this.chunks)
  }

  /**
   * The next line that is not blank, read as the connection reads a line (UTF-8, trimmed); null when
   * the input ended, failed or closed first, when more than `FIRST_LINE_LIMIT_BYTES` have been
   * read, or when `timeoutMs` passed first.
   * @param {number} [timeoutMs]
   * @returns {Promise<string | null>}
   */
  next(timeoutMs) {
    const { input } = this
    return new Promise((resolve) => {
      /** @param {string | null} line */
      const finish = (line) => {
        clearTimeout(timer)
        input.off('readable', onReadable)
        for (const event of ['end', 'close', 'error']) input.off(event, onEnd)
        resolve(line)
      }
      const timer = timeoutMs === undefined ? undefined : setTimeout(() => finish(null), timeoutMs)
      // The end of the input, or the input closed or failed (the agent is being stopped).
      const onEnd = () => finish(null)
      const scan = () => {
        const all = Buffer.concat(this.chunks)
        let newline
        while ((newline = all.indexOf(0x0a, this.end)) >= 0) {
          const line = new TextDecoder().decode(all.subarray(this.end, newline)).trim()
          this.end = newline + 1
          if (line) return line
        }
        return null
      }
      const onReadable = () => {
        /** @type {Buffer | null} */
        let chunk
        while ((chunk = input.read()) !== null) {
          this.chunks.push(chunk)
          this.size += chunk.length
          const line = scan()
          if (line !== null) return finish(line)
          if (this.size > FIRST_LINE_LIMIT_BYTES) return finish(null)
        }
      }
      // A line read already with the one before it.
      const buffered = scan()
      if (buffered !== null) return finish(buffered)
      if (this.size > FIRST_LINE_LIMIT_BYTES || input.readableEnded || input.destroyed) return finish(null)
      input.on('readable', onReadable)
      for (const event of ['end', 'close', 'error']) input.on(event, onEnd)
    })
  }
}

/**
 * The connection's input: the bytes read already, then the rest of `input`, each part after a
 * request answered early held back until the connection has answered it too.
 * @param {Buffer} consumed
 * @param {Pending[]} early  in the order of their requests
 * @param {Readable} input
 * @returns {AsyncGenerator<Buffer>}
 */
async function* inputFrom(consumed, early, input) {
  /** The parts of `consumed`, each with what it waits for. */
  const parts = [{ from: 0, to: early[0]?.end ?? consumed.length, after: Promise.resolve() }]
  early.forEach((e, i) => parts.push({ from: e.end, to: early[i + 1]?.end ?? consumed.length, after: e.seen }))
  for (const part of parts) {
    await part.after
    if (part.to > part.from) yield consumed.subarray(part.from, part.to)
  }
  if (input.readableEnded || input.destroyed) return
  yield* input
}

/**
 * The request on `line`, when it is a JSON-RPC 2.0 request for `method` with a string or number
 * id and params that are an object.
 * @param {string} line
 * @param {string} method
 * @returns {{ id: string | number, params: Record<string, unknown> } | null}
 */
function acceptableRequest(line, method) {
  let message
  try {
    message = JSON.parse(line)
  } catch {
    return null
  }
  if (!isPlainObject(message) || message.jsonrpc !== '2.0' || message.method !== method) return null
  const id = message.id
  if (!(typeof id === 'string' || (typeof id === 'number' && Number.isFinite(id)))) return null
  const params = message.params
  if (!isPlainObject(params)) return null
  return { id, params }
}

/**
 * The request, when `line` is an `initialize` request the connection would answer with a result: a
 * JSON-RPC 2.0 request with a string or number id and params holding a protocol version
 * (an integer from 0 to 65535; every other field of the params has a default).
 * @param {string} line
 * @returns {(EarlyAnswer & { params: InitializeRequest }) | null}
 */
function acceptableInitialize(line) {
  const request = acceptableRequest(line, 'initialize')
  if (!request) return null
  const version = request.params.protocolVersion
  if (typeof version !== 'number' || !Number.isInteger(version) || version < 0 || version > 65535) return null
  const params = /** @type {InitializeRequest} */ (/** @type {unknown} */ (request.params))
  const clientCapabilities = isPlainObject(request.params.clientCapabilities) ? params.clientCapabilities : undefined
  return { id: request.id, result: JSON.stringify(initializeResponse({ protocolVersion: version, clientCapabilities })), params }
}

/**
 * @param {unknown} value
 * @returns {value is Record<string, unknown>}
 */
function isPlainObject(value) {
  return typeof value === 'object' && value !== null && !Array.isArray(value)
}

/**
 * What `stream` must not write: the connection's answers to the requests answered early; each
 * one's `see` is called when it comes, and once all have come nothing is held back any more.
 * Each is built by the same function from the same request; a different one is logged, as a bug.
 * @param {JsonLines} stream
 * @param {Pending[]} early
 * @param {import('./log.mjs').Logger} log
 * @returns {(message: Record<string, any>) => boolean}
 */
function secondAnswers(stream, early, log) {
  const pending = [...early]
  return (message) => {
    const index = !('method' in message) && 'id' in message ? pending.findIndex((a) => a.id === message.id) : -1
    if (index < 0) return false
    const [sent] = pending.splice(index, 1)
    if (pending.length === 0) stream.skip = null
    const result = 'result' in message ? JSON.stringify(message.result) : null
    if (result !== sent.result) log.error(`request ${JSON.stringify(sent.id)} was answered early with ${sent.result}; the connection answered ${JSON.stringify(message)}`)
    sent.see()
    return true
  }
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
