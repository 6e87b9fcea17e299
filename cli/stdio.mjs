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
// A line longer than `LINE_LIMIT_BYTES` is refused on its own and the agent goes on serving:
// the connection would instead fail its whole input on it (and close, so the agent
// would exit as if the editor had quit). The bytes of such a line are counted and dropped as
// they come, never kept (but for its start, which names its id): see `limitLines`.
import { Readable, Writable } from 'node:stream'

import { initializeResponse } from './initialize.mjs'

/** @typedef {import('@agentclientprotocol/sdk').AgentApp} AgentApp */
/** @typedef {import('@agentclientprotocol/sdk').AgentConnection} AgentConnection */
/** @typedef {import('@agentclientprotocol/sdk').AnyMessage} AnyMessage */
/** @typedef {import('@agentclientprotocol/sdk').Stream} Stream */
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
 * The longest line (one JSON-RPC message) the agent reads, in bytes: the ACP SDK's own default,
 * so nothing the SDK's connection accepted is refused. It leaves room for a prompt with files
 * attached (embedded resources: text as it is, an image or a blob as base64, 4/3 of its size:
 * a 20 MB screenshot is a 27 MB line), while one line costs at most this much memory, twice
 * (the bytes, then the decoded text). A longer line is answered with an error (see
 * `limitLines`), and the agent keeps serving.
 */
export const LINE_LIMIT_BYTES = 32 * 1024 * 1024

/** How much of an over-long line is kept to find its `id` and `method` (they come first). */
const HEAD_BYTES = 4096

/** JSON-RPC's code for a message that is not a valid request. */
const INVALID_REQUEST = -32600

/** JSON-RPC's code for a line that is not JSON. */
const PARSE_ERROR = -32700

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
 * @returns {Promise<AgentConnection>}
 */
export async function serveStdio({ input, output, loadAgent, newSessionEarly, log, onInputFailure }) {
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
  if (initialize) {
    answer(initialize)
    const second = newSessionEarly ? await lines.next(SESSION_NEW_WAIT_MS) : null
    let request = second === null ? null : acceptableRequest(second, 'session/new')
    // Its answer is told from the connection's answer to initialize by its id.
    if (request?.id === initialize.id) request = null
    const result = request && newSessionEarly ? await newSessionEarly(initialize.params, request.params) : null
    if (request && result) answer({ id: request.id, result: JSON.stringify(result) })
  }
  const { ndJsonStream } = await import('./acp.mjs')
  const app = await loadAgent()
  // What the client sent after each early answer reaches the connection once it has answered
  // that request too, as if the client had waited for its answer. Lines over the limit are
  // refused before the connection sees them.
  const limited = inputFrom(lines.consumed(), early, input).pipeThrough(limitLines(output, log))
  const stream = ndJsonStream(Writable.toWeb(output), noticeFailure(limited, log, onInputFailure), { maxMessageBytes: LINE_LIMIT_BYTES })
  return app.connect(early.length === 0 ? stream : withoutSecondAnswers(stream, early, log))
}

/**
 * The input, less lines over `LINE_LIMIT_BYTES`: a line is passed on once it is whole (so at
 * most that much of it is held), and one that grows past the limit is dropped as it comes,
 * but for its first `HEAD_BYTES`, which name what it was:
 * - a request (`method` and `id`): answered with an Invalid Request error with its id;
 * - an answer to one of the agent's requests (`id`, no `method`: a file read by the editor,
 *   say): the connection is handed an error answer with that id instead, so the request fails rather
 *   than waiting forever;
 * - a notification (`method`, no `id`): dropped, as JSON-RPC gives it no answer;
 * - anything else: a parse error with id null, as for a line that is not JSON.
 * Each is logged (its size, never its content).
 * @param {Writable} output
 * @param {import('./log.mjs').Logger} log
 * @returns {TransformStream<Uint8Array, Uint8Array>}
 */
export function limitLines(output, log) {
  /** The current line's bytes, while it is within the limit. */
  /** @type {Uint8Array[]} */
  let pending = []
  let pendingBytes = 0
  /** The current line once over the limit: its start and how long it is so far. */
  /** @type {{ head: Buffer, bytes: number } | null} */
  let dropping = null
  /** @type {(controller: TransformStreamDefaultController<Uint8Array>) => void} */
  const refuse = (controller) => {
    if (!dropping) return
    const { head, bytes } = dropping
    dropping = null
    const { id, method } = leadingIdAndMethod(head.toString('utf8'))
    const size = `${bytes} bytes, over the agent's limit of ${LINE_LIMIT_BYTES} bytes a line`
    const data = { lineBytes: bytes, limitBytes: LINE_LIMIT_BYTES }
    if (id !== undefined && method !== undefined) {
      log.error(`refused the ${method} request ${JSON.stringify(id)}: ${size}`)
      output.write(`${JSON.stringify({ jsonrpc: '2.0', id, error: { code: INVALID_REQUEST, message: `The ${method} request is ${size}`, data } })}\n`)
    } else if (id !== undefined && id !== null) {
      log.error(`refused the editor's answer ${JSON.stringify(id)}: ${size}`)
      const answer = { jsonrpc: '2.0', id, error: { code: INVALID_REQUEST, message: `The client's answer is ${size}`, data } }
      controller.enqueue(new TextEncoder().encode(`${JSON.stringify(answer)}\n`))
    } else if (method !== undefined) {
      log.error(`dropped a ${method} notification: ${size}`)
    } else {
      log.error(`refused a line of ${size}`)
      output.write(`${JSON.stringify({ jsonrpc: '2.0', id: null, error: { code: PARSE_ERROR, message: `A line of ${size}`, data } })}\n`)
    }
  }
  /**
   * Adds `part` to the current line, dropping the line once it is over the limit.
   * @param {Uint8Array} part
   */
  const add = (part) => {
    if (dropping) {
      if (dropping.head.length < HEAD_BYTES) dropping.head = Buffer.concat([dropping.head, part.subarray(0, HEAD_BYTES - dropping.head.length)])
      dropping.bytes += part.length
    } else if (pendingBytes + part.length > LINE_LIMIT_BYTES) {
      dropping = { head: firstBytes([...pending, part], HEAD_BYTES), bytes: pendingBytes + part.length }
      pending = []
      pendingBytes = 0
    } else if (part.length > 0) {
      pending.push(part)
      pendingBytes += part.length
    }
  }
  return new TransformStream({
    transform(chunk, controller) {
      let start = 0
      for (let newline = chunk.indexOf(0x0a); newline >= 0; newline = chunk.indexOf(0x0a, start)) {
        add(chunk.subarray(start, newline))
        if (dropping) refuse(controller)
        else {
          for (const part of pending) controller.enqueue(part)
          controller.enqueue(chunk.subarray(newline, newline + 1))
          pending = []
          pendingBytes = 0
        }
        start = newline + 1
      }
      if (start < chunk.length) add(chunk.subarray(start))
    },
    flush(controller) {
      // The last line, without a newline: the connection reads it at the end of the input.
      if (dropping) refuse(controller)
      for (const part of pending) controller.enqueue(part)
    },
  })
}

/**
 * A copy of the first `count` bytes of `parts` (the rest of them can then go).
 * @param {Uint8Array[]} parts
 * @param {number} count
 * @returns {Buffer}
 */
function firstBytes(parts, count) {
  /** @type {Uint8Array[]} */
  const taken = []
  let size = 0
  for (const part of parts) {
    if (size >= count) break
    const piece = part.subarray(0, count - size)
    taken.push(piece)
    size += piece.length
  }
  return Buffer.concat(taken)
}

/**
 * The `id` and `method` of the JSON object `text` starts with, as far as `text` goes (it is the
 * start of a line too long to parse): top-level members are read in order, and nested values
 * skipped. Each is undefined when not found, or not of a type JSON-RPC allows.
 * @param {string} text
 * @returns {{ id?: string | number | null, method?: string }}
 */
export function leadingIdAndMethod(text) {
  /** @type {{ id?: string | number | null, method?: string }} */
  const found = {}
  let i = 0
  const space = () => { while (i < text.length && ' \t\r\n'.includes(text[i])) i++ }
  /** A JSON string at `i`, parsed, or undefined when it does not end within `text`. */
  const string = () => {
    let end = i + 1
    while (end < text.length && text[end] !== '"') end += text[end] === '\\' ? 2 : 1
    if (end >= text.length) return undefined
    const raw = text.slice(i, end + 1)
    i = end + 1
    try {
      return /** @type {string} */ (JSON.parse(raw))
    } catch {
      return undefined
    }
  }
  /** Skips the value at `i`; false when it does not end within `text`. */
  const skip = () => {
    let depth = 0
    while (i < text.length) {
      const c = text[i]
      if (c === '"') {
        if (string() === undefined) return false
      } else if (c === '{' || c === '[') {
        depth++
        i++
      } else if (c === '}' || c === ']') {
        if (depth === 0) return true
        depth--
        i++
      } else if (c === ',' && depth === 0) {
        return true
      } else i++
      if (depth === 0 && (text[i] === ',' || text[i] === '}')) return true
    }
    return false
  }
  space()
  if (text[i] !== '{') return found
  i++
  for (;;) {
    space()
    if (text[i] !== '"') return found
    const key = string()
    if (key === undefined) return found
    space()
    if (text[i] !== ':') return found
    i++
    space()
    if ((key === 'id' || key === 'method') && text[i] === '"') {
      const value = string()
      if (value === undefined) return found
      found[key] = value
    } else if (key === 'id') {
      const number = /^(-?\d+(?:\.\d+)?(?:[eE][+-]?\d+)?|null)(?=[\s,}])/.exec(text.slice(i, i + 64))
      if (!number) return found
      found.id = number[1] === 'null' ? null : Number(number[1])
      i += number[1].length
    } else if (!skip()) return found
    space()
    if (text[i] !== ',') return found
    i++
  }
}

/**
 * The same stream; a failure to read it (not its end) is logged, since the connection ends the
 * connection on it as it does at the end of the input.
 * @param {ReadableStream<Uint8Array>} input
 * @param {import('./log.mjs').Logger} log
 * @param {(error: unknown) => void} [onFailure]
 * @returns {ReadableStream<Uint8Array>}
 */
function noticeFailure(input, log, onFailure) {
  const reader = input.getReader()
  // Once the connection has let go of the input (it is closing), what reading it does
  // next is no failure.
  let cancelled = false
  return new ReadableStream({
    async pull(controller) {
      try {
        const { value, done } = await reader.read()
        if (done) controller.close()
        else controller.enqueue(value)
      } catch (e) {
        if (cancelled) return
        log.error(`cannot read the editor's messages, the agent stops: ${e instanceof Error ? e.message : String(e)}`)
        onFailure?.(e)
        controller.error(e)
      }
    },
    cancel(reason) {
      cancelled = true
      return reader.cancel(reason)
    },
  })
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
 * @returns {ReadableStream<Uint8Array>}
 */
function inputFrom(consumed, early, input) {
  /** The parts of `consumed`, each with what it waits for. */
  const parts = [{ from: 0, to: early[0]?.end ?? consumed.length, after: Promise.resolve() }]
  early.forEach((e, i) => parts.push({ from: e.end, to: early[i + 1]?.end ?? consumed.length, after: e.seen }))
  const ready = early.at(-1)?.seen ?? Promise.resolve()
  /** @type {ReadableStreamDefaultReader<Uint8Array> | null} */
  let rest = null
  return new ReadableStream({
    async pull(controller) {
      // Each pull enqueues something or closes: a pull that does neither is not repeated.
      for (let part = parts.shift(); part; part = parts.shift()) {
        await part.after
        if (part.to > part.from) return controller.enqueue(new Uint8Array(consumed.subarray(part.from, part.to)))
      }
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
 * The same stream, less the connection's answers to the requests answered early; each one's `see` is
 * called when it comes. Each is built by the same function from the same request; a different
 * one is logged, as a bug.
 * @param {Stream} stream
 * @param {Pending[]} early
 * @param {import('./log.mjs').Logger} log
 * @returns {Stream}
 */
function withoutSecondAnswers(stream, early, log) {
  const pending = [...early]
  /** @type {TransformStream<AnyMessage, AnyMessage>} */
  const filter = new TransformStream({
    transform(message, controller) {
      const index = !('method' in message) && 'id' in message ? pending.findIndex((a) => a.id === message.id) : -1
      if (index < 0) return controller.enqueue(message)
      const [sent] = pending.splice(index, 1)
      const result = 'result' in message ? JSON.stringify(message.result) : null
      if (result !== sent.result) log.error(`request ${JSON.stringify(sent.id)} was answered early with ${sent.result}; the connection answered ${JSON.stringify(message)}`)
      sent.see()
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
