// @ts-check
// The agent's side of ACP on newline-delimited JSON-RPC, without the ACP SDK: the SDK's `agent()`
// app and `ndJsonStream` (here `JsonLines`, on Node streams), as far as the agent uses them, with
// the same answers and errors and the same order, but for one thing: a line over
// `LINE_LIMIT_BYTES` is refused on its own, where the SDK's stream fails the whole input. The SDK builds a zod schema for every type of the protocol as it loads: 17 MiB of
// the agent's RSS (zod 12 of it), more than the rest of the agent together, for checks that the
// messages of a session pass. Here the params of each request are checked by hand as those
// schemas check them (acp-params.mjs); those the hand checks leave go to the SDK's own schemas,
// loaded then, in a connection of their own (`sdkSchemas`): what a handler gets, and every error
// the client gets, is still the SDK's.
//
// What the SDK's connection does, and this one too: a line that is not JSON is answered with a
// parse error, a batch or anything but an object with an invalid request (id null); requests
// before a successful `initialize` are refused; an unknown method is "Method not found", an
// unknown notification is dropped; a handler's error becomes the JSON-RPC error (a RequestError
// as it is, a zod error as invalid params, anything else an internal error carrying its
// message); `$/cancel_request` aborts the request's signal; the agent's own requests get ids
// from 0, and `$/cancel_request` when their cancellation signal aborts; messages are written in
// the order they are sent; the end of the input closes the connection, which rejects the
// agent's pending requests and aborts the client's.
import { NOT_HERE, NOTIFICATION_METHODS, REQUEST_METHODS, notificationParams, requestParams } from './acp-params.mjs'

/** @typedef {import('@agentclientprotocol/sdk').AnyMessage} AnyMessage */
/** @typedef {{ code: number, message: string, data?: unknown }} ErrorObject */
/** @typedef {{ result: unknown } | { error: ErrorObject }} Outcome */

/** A JSON-RPC error, thrown by handlers and by the agent's requests the client refused. */
export class RequestError extends Error {
  /**
   * @param {number} code
   * @param {string} message
   * @param {unknown} [data]
   */
  constructor(code, message, data) {
    super(message)
    this.code = code
    this.name = 'RequestError'
    this.data = data
  }

  /** @param {string} [more] */
  static #more(more) {
    return more ? `: ${more}` : ''
  }

  /** @param {unknown} [data] @param {string} [more] */
  static parseError(data, more) {
    return new RequestError(-32700, `Parse error${RequestError.#more(more)}`, data)
  }

  /** @param {unknown} [data] @param {string} [more] */
  static invalidRequest(data, more) {
    return new RequestError(-32600, `Invalid request${RequestError.#more(more)}`, data)
  }

  /** @param {string} method */
  static methodNotFound(method) {
    return new RequestError(-32601, `"Method not found": ${method}`, { method })
  }

  /** @param {unknown} [data] @param {string} [more] */
  static invalidParams(data, more) {
    return new RequestError(-32602, `Invalid params${RequestError.#more(more)}`, data)
  }

  /** @param {unknown} [data] @param {string} [more] */
  static internalError(data, more) {
    return new RequestError(-32603, `Internal error${RequestError.#more(more)}`, data)
  }

  /** @param {unknown} [data] @param {string} [more] */
  static requestCancelled(data, more) {
    return new RequestError(-32800, `Request cancelled${RequestError.#more(more)}`, data)
  }

  /** @param {unknown} [data] @param {string} [more] */
  static authRequired(data, more) {
    return new RequestError(-32000, `Authentication required${RequestError.#more(more)}`, data)
  }

  /** @param {string} [uri] */
  static resourceNotFound(uri) {
    return new RequestError(-32002, `Resource not found${uri ? `: ${uri}` : ''}`, uri && { uri })
  }

  /** The session a request names does not exist (here). @param {string} sessionId */
  static sessionNotFound(sessionId) {
    return new RequestError(-32002, 'Resource not found', { sessionId })
  }

  /** @returns {{ error: ErrorObject }} */
  toResult() {
    return { error: this.toErrorResponse() }
  }

  /** @returns {ErrorObject} */
  toErrorResponse() {
    return { code: this.code, message: this.message, data: this.data }
  }
}

// ---------- JSON lines ----------

/**
 * The longest line (one JSON-RPC message) the agent reads, in bytes: the ACP SDK's own default,
 * so nothing the SDK's connection accepted is refused. It leaves room for a prompt with files
 * attached (embedded resources: text as it is, an image or a blob as base64, 4/3 of its size:
 * a 20 MB screenshot is a 27 MB line), while one line costs at most this much memory, twice
 * (the bytes, then the decoded text). A longer line is refused on its own, and the agent keeps
 * serving (`JsonLines`).
 */
export const LINE_LIMIT_BYTES = 32 * 1024 * 1024

/** How much of an over-long line is kept to find its `id` and `method` (they come first). */
const HEAD_BYTES = 4096

/** A write that need not be waited for. */
const WRITTEN = Promise.resolve()

/**
 * @typedef {object} LineLog
 * @property {(...args: unknown[]) => void} error
 */

/**
 * The connection's messages as JSON lines on Node streams, the one place the input is split:
 * - each line is handed on parsed, as soon as it is whole (a line of spaces is skipped; one
 *   that is not JSON is answered with a parse error, a batch or anything but an object with an
 *   invalid request, id null, as the SDK's `ndJsonStream` answers them);
 * - a line longer than `limitBytes` (the bytes before its LF) is dropped as it comes, never
 *   kept but for its first `HEAD_BYTES`, which name what it was, and the agent goes on serving
 *   (the SDK's stream would fail the whole input on it, and the agent would exit as if the
 *   editor had quit):
 *   - a request (`method` and `id`): answered with an Invalid Request error with its id;
 *   - an answer to one of the agent's requests (`id`, no `method`: a file read by the editor,
 *     say): the connection is handed an error answer with that id instead, so the request fails
 *     rather than waiting forever;
 *   - a notification (`method`, no `id`): dropped, as JSON-RPC gives it no answer;
 *   - anything else: a parse error with id null, as for a line that is not JSON.
 *   Each is logged (its size, never its content);
 * - messages are written as lines in the order sent, those of one go of the event loop in
 *   one `write` (at the next tick: no web-stream writer per message, no system call per line;
 *   the relay writes thousands a second). A write is waited for only when `output` asks to be
 *   drained.
 */
export class JsonLines {
  /**
   * @param {import('node:stream').Writable} output
   * @param {import('node:stream').Readable} input  destroyed when the connection lets go of it
   * @param {object} [o]
   * @param {AsyncIterable<Uint8Array>} [o.chunks]  the input's bytes, when not read from `input`
   *   as it is (stdio.mjs hands over the bytes it read first, then the rest of `input`)
   * @param {number} [o.limitBytes]
   * @param {LineLog} [o.log]
   * @param {(error: unknown) => void} [o.onInputFailure]  called when reading the input fails
   *   (not at its end); the connection then closes as it does at the end of the input
   */
  constructor(output, input, { chunks = input, limitBytes = LINE_LIMIT_BYTES, log = console, onInputFailure } = {}) {
    this.output = output
    this.input = input
    this.chunks = chunks
    this.limit = limitBytes
    this.log = log
    this.onInputFailure = onInputFailure
    /**
     * A message it returns true for is not written (stdio.mjs: the connection's answer to a
     * request answered before the connection was made).
     * @type {((message: Record<string, any>) => boolean) | null}
     */
    this.skip = null
    /** @type {unknown} the output's failure; every write after it fails */
    this.failure = undefined
    /** @type {Promise<void>} settles once the output has drained */
    this.ready = WRITTEN
    /**
     * What was written since the last flush, in order: text of the messages (each string
     * holds the lines of several in a row) and bytes of lines the addon serialized. Null when
     * nothing waits for the flush.
     * @type {(string | Uint8Array)[] | null}
     */
    this.pending = null
    this.cancelled = false
    /** @type {(message: Record<string, any>) => void} */
    this.receive = () => {}
    /** The current line's bytes, while it is within the limit. @type {Buffer[]} */
    this.parts = []
    this.size = 0
    /** The current line once over the limit: its start and how long it is so far. @type {{ head: Buffer, bytes: number } | null} */
    this.dropping = null
    output.on('error', (e) => {
      this.failure ??= e
    })
  }

  /**
   * Writes `message` as a line after those before it; resolves at once unless the output must
   * drain first, rejects once the output failed (or when `message` is not JSON).
   * @param {Record<string, any>} message
   * @returns {Promise<void>}
   */
  write(message) {
    const refused = this.refusal()
    if (refused) return refused
    if (this.skip?.(message)) return WRITTEN
    let line
    try {
      line = `${JSON.stringify(message)}\n`
    } catch (e) {
      return rejected(e)
    }
    return this.queue(line)
  }

  /**
   * Writes `lines`, whole JSON-RPC lines serialized already (the addon's `PromptTurn.nextLines`:
   * a turn's updates), after the messages before them, as `write` writes a message.
   * @param {Uint8Array} lines  UTF-8, each line ending in LF
   * @returns {Promise<void>}
   */
  writeLines(lines) {
    return this.refusal() ?? (lines.length ? this.queue(lines) : this.ready)
  }

  /** A write's rejection once the output failed or closed; null while it takes writes. */
  refusal() {
    if (this.failure !== undefined) return rejected(this.failure)
    if (this.output.destroyed || this.output.writableEnded) return rejected((this.failure = new Error('the output is closed')))
    return null
  }

  /**
   * Queues `piece` for the next flush, after what is queued. What is written in one go of the
   * event loop (a batch of updates, several sessions' turns at once) leaves in one `write`: one
   * system call, not one a line.
   * @param {string | Uint8Array} piece
   * @returns {Promise<void>}
   */
  queue(piece) {
    const { pending } = this
    if (pending === null) {
      this.pending = [piece]
      process.nextTick(this.flush)
    } else if (typeof piece === 'string' && typeof pending[pending.length - 1] === 'string') {
      pending[pending.length - 1] += piece
    } else {
      pending.push(piece)
    }
    return this.ready
  }

  /** Writes what was queued since the last flush. */
  flush = () => {
    const { pending, output } = this
    this.pending = null
    if (pending === null || this.failure !== undefined || output.destroyed) return
    let flowing
    if (pending.length === 1) {
      flowing = output.write(pending[0])
    } else {
      // Corked, the pieces leave together (one `writev` on a pipe or a socket).
      output.cork()
      for (const piece of pending) flowing = output.write(piece)
      output.uncork()
    }
    if (flowing || this.ready !== WRITTEN) return
    // Backed up: writes are waited for until it drains (or fails).
    this.ready = new Promise((resolve, reject) => {
      const drained = () => done(undefined)
      /** @param {unknown} [e] */
      const failed = (e) => done(e ?? this.failure ?? new Error('the output is closed'))
      /** @param {unknown} e */
      const done = (e) => {
        output.off('drain', drained).off('error', failed).off('close', failed)
        this.ready = WRITTEN
        if (e === undefined) resolve()
        else reject(e)
      }
      output.on('drain', drained).on('error', failed).on('close', failed)
    })
    this.ready.catch(() => {})
  }

  /**
   * Reads the input to its end, handing each message to `receive` as its line completes, then
   * calls `end` (with the error when reading failed), at once after the last message: a
   * request on the last line is not answered, as with the SDK's stream and connection. Nothing
   * is called once cancelled.
   * @param {(message: Record<string, any>) => void} receive
   * @param {(error?: unknown) => void} end
   */
  async read(receive, end) {
    this.receive = receive
    try {
      for await (const chunk of this.chunks) {
        if (this.cancelled) return
        this.#push(Buffer.isBuffer(chunk) ? chunk : Buffer.from(chunk.buffer, chunk.byteOffset, chunk.byteLength))
        if (this.cancelled) return
      }
      if (this.cancelled) return
      // The last line, without a newline.
      this.#lineEnd()
    } catch (e) {
      // Once the connection has let go of the input (it is closing), what reading it does
      // next is no failure.
      if (this.cancelled) return
      this.log.error(`cannot read the editor's messages, the agent stops: ${e instanceof Error ? e.message : String(e)}`)
      this.onInputFailure?.(e)
      end(e)
      return
    }
    end()
  }

  /** Stops reading: nothing more is handed on, and the input is destroyed. */
  cancel() {
    this.cancelled = true
    this.input.destroy()
  }

  /** @param {Buffer} chunk */
  #push(chunk) {
    let start = 0
    for (let newline = chunk.indexOf(0x0a); newline >= 0; newline = chunk.indexOf(0x0a, start)) {
      if (this.size === 0 && !this.dropping && newline - start <= this.limit) {
        // A line within this chunk, as most are: decoded from it, no copy.
        this.#line(chunk.toString('utf8', start, newline))
      } else {
        this.#add(chunk.subarray(start, newline))
        this.#lineEnd()
      }
      start = newline + 1
      if (this.cancelled) return
    }
    if (start < chunk.length) this.#add(chunk.subarray(start))
  }

  /**
   * Adds `part` to the current line, dropping the line once it is over the limit.
   * @param {Buffer} part
   */
  #add(part) {
    const { dropping } = this
    if (dropping) {
      if (dropping.head.length < HEAD_BYTES) dropping.head = Buffer.concat([dropping.head, part.subarray(0, HEAD_BYTES - dropping.head.length)])
      dropping.bytes += part.length
    } else if (this.size + part.length > this.limit) {
      this.dropping = { head: firstBytes([...this.parts, part], HEAD_BYTES), bytes: this.size + part.length }
      this.parts = []
      this.size = 0
    } else if (part.length > 0) {
      this.parts.push(part)
      this.size += part.length
    }
  }

  /** The current line is whole: handed on, or refused when it went over the limit. */
  #lineEnd() {
    if (this.dropping) return this.#refuse(this.dropping)
    const { parts } = this
    if (parts.length === 0) return
    this.parts = []
    this.size = 0
    this.#line((parts.length === 1 ? parts[0] : Buffer.concat(parts)).toString('utf8'))
  }

  /** @param {string} line */
  #line(line) {
    const text = line.trim()
    if (!text) return
    let message
    try {
      message = JSON.parse(text)
    } catch {
      this.#answer(protocolError(RequestError.parseError()))
      return
    }
    // ACP has no batches: an array is answered once, and none of it is read.
    if (Array.isArray(message)) this.#answer(protocolError(RequestError.invalidRequest(undefined, 'JSON-RPC batches are not supported')))
    else if (isRecord(message)) this.receive(message)
    else this.#answer(protocolError(RequestError.invalidRequest(message)))
  }

  /**
   * Refuses the line `dropping` held the start of (see the class).
   * @param {{ head: Buffer, bytes: number }} dropping
   */
  #refuse({ head, bytes }) {
    this.dropping = null
    const { id, method } = leadingIdAndMethod(head.toString('utf8'))
    const size = `${bytes} bytes, over the agent's limit of ${this.limit} bytes a line`
    const data = { lineBytes: bytes, limitBytes: this.limit }
    if (id !== undefined && method !== undefined) {
      this.log.error(`refused the ${method} request ${JSON.stringify(id)}: ${size}`)
      this.#answer({ jsonrpc: '2.0', id, error: { code: -32600, message: `The ${method} request is ${size}`, data } })
    } else if (id !== undefined && id !== null) {
      this.log.error(`refused the editor's answer ${JSON.stringify(id)}: ${size}`)
      this.receive({ jsonrpc: '2.0', id, error: { code: -32600, message: `The client's answer is ${size}`, data } })
    } else if (method !== undefined) {
      this.log.error(`dropped a ${method} notification: ${size}`)
    } else {
      this.log.error(`refused a line of ${size}`)
      this.#answer({ jsonrpc: '2.0', id: null, error: { code: -32700, message: `A line of ${size}`, data } })
    }
  }

  /**
   * An answer of the stream's own, to a line the connection never sees. A failed write is the
   * connection's to notice: its next write fails too.
   * @param {Record<string, any>} message
   */
  #answer(message) {
    this.write(message).catch(() => {})
  }
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

// ---------- JSON-RPC ----------

/**
 * @param {unknown} value
 * @returns {value is Record<string, any>}
 */
const isRecord = (value) => typeof value === 'object' && value !== null

/** @param {unknown} id */
const isId = (id) => id === null || typeof id === 'string' || (typeof id === 'number' && Number.isFinite(id))

/** @param {Record<string, any>} m */
const isEnvelope = (m) => isRecord(m) && m.jsonrpc === '2.0'

/** @param {Record<string, any>} m */
const isRequest = (m) => isEnvelope(m) && 'id' in m && typeof m.method === 'string' && isId(m.id)

/** @param {Record<string, any>} m */
const isNotification = (m) => isEnvelope(m) && !('id' in m) && typeof m.method === 'string'

/** @param {Record<string, any>} m */
const isResponseShaped = (m) => isRecord(m) && !('method' in m) && ('id' in m || 'result' in m || 'error' in m)

/** @param {Record<string, any>} m */
function isResponse(m) {
  if (!isEnvelope(m) || 'method' in m || !('id' in m) || !isId(m.id)) return false
  const hasResult = Object.hasOwn(m, 'result')
  const hasError = Object.hasOwn(m, 'error')
  if (hasResult === hasError) return false
  const e = m.error
  return !hasError || (isRecord(e) && Number.isInteger(e.code) && typeof e.message === 'string')
}

/** @param {RequestError} error */
const protocolError = (error) => ({ jsonrpc: '2.0', id: null, error: error.toErrorResponse() })

/** What a message was, for a log line: never its values (they may hold credentials). @param {unknown} m */
const describe = (m) => (Array.isArray(m) ? { type: 'array' } : isRecord(m) ? { type: 'object', keys: Object.keys(m) } : { type: m === null ? 'null' : typeof m })

/**
 * A handler's error as the client gets it.
 * @param {unknown} error
 * @returns {{ error: ErrorObject }}
 */
function errorResult(error) {
  if (error instanceof RequestError) return error.toResult()
  const e = /** @type {any} */ (error)
  if (isRecord(e) && e.name === 'ZodError' && Array.isArray(e.issues) && typeof e.format === 'function') return RequestError.invalidParams(e.format()).toResult()
  const details = error instanceof Error ? error.message : isRecord(e) && typeof e.message === 'string' ? e.message : undefined
  try {
    return RequestError.internalError(details ? JSON.parse(details) : {}).toResult()
  } catch {
    return RequestError.internalError({ details }).toResult()
  }
}

/**
 * @param {unknown} reason
 * @returns {RequestError}
 */
const cancelledError = (reason) => (reason instanceof RequestError && reason.code === -32800 ? reason : RequestError.requestCancelled(reason))

/**
 * A request's error as the client gets it: aborted by `$/cancel_request` (or the connection's
 * end), an abort error is the request cancelled.
 * @param {unknown} error
 * @param {AbortSignal} signal
 */
function requestErrorResult(error, signal) {
  const e = /** @type {any} */ (error)
  const abort = isRecord(e) && (e.name === 'AbortError' || e.code === 'ABORT_ERR')
  return signal.aborted && abort ? cancelledError(signal.reason).toResult() : errorResult(error)
}

/** @param {unknown} error */
function rejected(error) {
  const promise = Promise.reject(error)
  promise.catch(() => {})
  return promise
}

/** The methods whose answer is `{}` when the handler returns nothing (the SDK's `emptyObjectResponse`). */
const EMPTY_OBJECT_ANSWERS = new Set(['session/load', 'session/delete', 'session/close', 'session/set_mode', 'authenticate', 'logout'])
/** The client's answers that are `{}` when it sends nothing. */
const EMPTY_OBJECT_RESULTS = new Set(['fs/write_text_file', 'terminal/release', 'terminal/kill'])
/** @param {unknown} value */
const emptyObject = (value) => value ?? {}

/** The answer to one of the client's requests, sent once. */
class Responder {
  /**
   * @param {(outcome: Outcome) => Promise<void>} send
   * @param {AbortSignal} signal
   * @param {() => void} finish
   */
  constructor(send, signal, finish) {
    this.send = send
    this.signal = signal
    this.finish = finish
    this.responded = false
  }

  /** @param {unknown} result */
  respond(result) {
    return this.respondWith({ result: result ?? null })
  }

  /** @param {RequestError} error */
  respondWithError(error) {
    return this.respondWith({ error: error.toErrorResponse() })
  }

  /** @param {Outcome} outcome */
  respondWith(outcome) {
    if (this.responded) return rejected(new Error('JSON-RPC request already responded'))
    this.responded = true
    return this.send(outcome).finally(this.finish)
  }
}

/** What a handler is called with for a request or notification, and the client to call. */
class AgentContext {
  /**
   * @param {Connection} connection
   * @param {string | number | null} [requestId]
   */
  constructor(connection, requestId) {
    this.connection = connection
    this.requestId = requestId
  }

  /**
   * One of the client's methods; the answer's result.
   * @param {string} method
   * @param {unknown} params
   * @param {{ cancellationSignal?: AbortSignal, stopWaitingOnCancel?: boolean }} [options]
   */
  request(method, params, options) {
    return this.connection.sendRequest(method, params, EMPTY_OBJECT_RESULTS.has(method) ? emptyObject : undefined, options)
  }

  /**
   * @param {string} method
   * @param {unknown} params
   */
  notify(method, params) {
    return this.connection.sendNotification(method, params)
  }

  /**
   * Notifications serialized already, one JSON-RPC line each (`PromptTurn.nextLines`).
   * @param {Uint8Array} lines
   */
  notifyLines(lines) {
    return this.connection.sendLines(lines)
  }
}

/**
 * @typedef {object} Call  a request or notification of the client, as received
 * @property {string} method
 * @property {unknown} params
 * @property {Responder} [responder]  a request's
 * @property {string | number | null} [id]
 */

class Connection {
  /**
   * @param {JsonLines} stream
   * @param {App} app
   */
  constructor(stream, app) {
    this.stream = stream
    this.app = app
    this.abort = new AbortController()
    /** @type {Promise<void>} */
    this.closed = new Promise((resolve) => this.abort.signal.addEventListener('abort', () => resolve()))
    /** The agent's requests waiting for an answer, by id. @type {Map<number, any>} */
    this.pending = new Map()
    /** The client's requests being handled, by id. @type {Map<unknown, AbortController>} */
    this.incoming = new Map()
    this.nextId = 0
    this.initialized = false
    /**
     * The calls received after one whose params wait for the SDK's schemas, in order: each is
     * dispatched after it, as the SDK would have handled them in the order they came.
     * @type {Call[] | null}
     */
    this.held = null
    void this.receive()
  }

  get signal() {
    return this.abort.signal
  }

  closedReason() {
    return this.abort.signal.reason ?? new Error('ACP connection closed')
  }

  receive() {
    void this.stream.read((message) => this.receiveMessage(message), (error) => this.close(error))
  }

  /** @param {unknown} message */
  receiveMessage(message) {
    if (Array.isArray(message)) {
      void this.send(protocolError(RequestError.invalidRequest(undefined, 'JSON-RPC batches are not supported'))).catch(() => {})
      return
    }
    const m = /** @type {Record<string, any>} */ (message)
    if (!isRequest(m) && !isNotification(m) && !isResponseShaped(m)) {
      void this.send(protocolError(RequestError.invalidRequest(message))).catch(() => {})
      return
    }
    if (this.signal.aborted) return
    if (!isRecord(m)) {
      console.error('Invalid message', describe(m))
    } else if ('method' in m) {
      if (!('id' in m)) this.cancelRequest(m)
      this.call(m)
    } else if ('id' in m) {
      this.answer(m)
    } else {
      console.error('Invalid message', describe(m))
    }
  }

  /** `$/cancel_request`: the client gives up one of its requests. @param {Record<string, any>} m */
  cancelRequest(m) {
    if (m.method !== '$/cancel_request' || !isRecord(m.params) || !isId(m.params.requestId)) return
    const controller = this.incoming.get(m.params.requestId)
    if (controller && !controller.signal.aborted) controller.abort(RequestError.requestCancelled({ requestId: m.params.requestId }))
  }

  /** @param {Record<string, any>} m */
  call(m) {
    /** @type {Call} */
    const call = { method: m.method, params: m.params }
    if ('id' in m) {
      const controller = new AbortController()
      this.incoming.set(m.id, controller)
      const finish = () => {
        if (this.incoming.get(m.id) === controller) this.incoming.delete(m.id)
      }
      /** @param {Outcome} outcome */
      const send = (outcome) => {
        // The first successful `initialize` opens the connection, before its answer goes out.
        if (m.method === 'initialize' && 'result' in outcome) this.initialized = true
        return this.send({ jsonrpc: '2.0', id: m.id, ...outcome })
      }
      call.id = m.id
      call.responder = new Responder(send, controller.signal, finish)
      if (this.app.hasInitialize && !this.initialized && m.method !== 'initialize') {
        void call.responder.respondWithError(RequestError.invalidRequest(undefined, `ACP connection must be initialized before '${m.method}'`)).catch((e) => this.close(e))
        return
      }
    }
    if (this.held) this.held.push(call)
    else this.dispatch(call)
  }

  /**
   * Parses a call's params and starts its handler; one whose params only the SDK's schemas can
   * take holds back the calls after it until they have.
   * @param {Call} call
   */
  dispatch(call) {
    if (this.signal.aborted) return
    const entry = call.responder ? this.app.requests.get(call.method) : this.app.notifications.get(call.method)
    if (!entry) {
      if (call.responder) void call.responder.respondWithError(RequestError.methodNotFound(call.method)).catch((e) => this.close(e))
      return
    }
    /** @type {unknown} */
    let params
    try {
      params = entry.parse(call.params)
    } catch (error) {
      void this.failed(call, error)
      return
    }
    if (params !== NOT_HERE) {
      void this.run(call, entry, params)
      return
    }
    this.held = []
    /** @type {(schemas: SdkSchemas) => Promise<{ params: unknown } | { error: unknown } | { dropped: true }>} */
    const parse = (schemas) => (call.responder ? schemas.request(call.method, call.params) : schemas.notification(call.method, call.params))
    void sdkSchemas().then(parse).then(
      (parsed) => {
        if (this.signal.aborted) return
        if ('params' in parsed) void this.run(call, entry, parsed.params)
        else if (call.responder && 'error' in parsed) void call.responder.respondWith({ error: /** @type {ErrorObject} */ (parsed.error) }).catch((e) => this.close(e))
      },
      (error) => void this.failed(call, error),
    ).finally(() => {
      /** @type {Call[]} */
      const held = this.held ?? []
      this.held = null
      for (let i = 0; i < held.length; i++) {
        if (this.held) {
          /** @type {Call[]} */ (this.held).push(...held.slice(i))
          break
        }
        this.dispatch(held[i])
      }
    })
  }

  /**
   * @param {Call} call
   * @param {Registration} entry
   * @param {unknown} params
   */
  async run(call, entry, params) {
    try {
      if (call.responder) {
        const { responder } = call
        const answer = await entry.handler({ method: call.method, params, requestId: call.id, signal: responder.signal, client: new AgentContext(this, call.id) })
        await responder.respond(entry.mapResponse ? entry.mapResponse(answer) : answer)
      } else {
        await entry.handler({ method: call.method, params, signal: this.signal, client: new AgentContext(this) })
      }
    } catch (error) {
      await this.failed(call, error)
    }
  }

  /**
   * A call whose params or handler failed: a request is answered with the error, a
   * notification's is logged (its code and message only: params can hold credentials).
   * @param {Call} call
   * @param {unknown} error
   */
  async failed(call, error) {
    try {
      if (this.signal.aborted) return
      if (call.responder && !call.responder.responded) {
        await call.responder.respondWith(requestErrorResult(error, call.responder.signal))
      } else {
        const { error: e } = errorResult(error)
        console.error('Error handling notification', { method: call.method, code: e.code, message: e.message })
      }
    } catch (e) {
      this.close(e)
    }
  }

  /** An answer to one of the agent's requests. @param {Record<string, any>} m */
  answer(m) {
    const pending = this.pending.get(m.id)
    if (!pending) {
      console.error('Got response to unknown request', m.id)
      return
    }
    this.pending.delete(m.id)
    pending.cleanup?.()
    if (pending.abandoned) return
    if (!isResponse(m)) pending.reject(RequestError.invalidRequest(m))
    else if ('result' in m) pending.resolve(m.result)
    else pending.reject(new RequestError(m.error.code, m.error.message, m.error.data))
  }

  /**
   * @param {string} method
   * @param {unknown} params
   * @param {((value: unknown) => unknown) | undefined} mapResponse
   * @param {{ cancellationSignal?: AbortSignal, stopWaitingOnCancel?: boolean }} [options]
   */
  sendRequest(method, params, mapResponse, options = {}) {
    if (this.signal.aborted) return rejected(this.closedReason())
    const id = this.nextId++
    let cancel = () => {}
    const response = new Promise((resolve, reject) => {
      /** @type {any} */
      const pending = {
        /** @param {unknown} value */
        resolve: (value) => {
          try {
            resolve(mapResponse ? mapResponse(value) : value)
          } catch (e) {
            reject(e)
          }
        },
        reject,
      }
      cancel = () => {
        if (pending.cancellationSent) return
        pending.cancellationSent = true
        pending.cleanup?.()
        void this.sendNotification('$/cancel_request', { requestId: id }).catch(() => {})
        if (options.stopWaitingOnCancel) {
          // Kept among the pending ones, so that the client's late answer is dropped quietly.
          pending.abandoned = true
          reject(cancelledError(options.cancellationSignal?.reason))
        }
      }
      options.cancellationSignal?.addEventListener('abort', cancel, { once: true })
      pending.cleanup = () => options.cancellationSignal?.removeEventListener('abort', cancel)
      this.pending.set(id, pending)
    })
    response.catch(() => {})
    void this.send({ jsonrpc: '2.0', id, method, params }).catch(() => {})
    if (options.cancellationSignal?.aborted) cancel()
    return response
  }

  /**
   * @param {string} method
   * @param {unknown} params
   */
  sendNotification(method, params) {
    if (this.signal.aborted) return rejected(this.closedReason())
    return this.send({ jsonrpc: '2.0', method, params })
  }

  /**
   * Writes a message after those before it (at once: see `JsonLines`); a failed write closes
   * the connection.
   * @param {Record<string, any>} message
   * @returns {Promise<void>}
   */
  send(message) {
    if (this.signal.aborted) return rejected(this.closedReason())
    return this.closingOnFailure(this.stream.write(message))
  }

  /**
   * Writes notifications serialized already (the addon's lines of a turn's updates) after the
   * messages before them, as `send` writes a message.
   * @param {Uint8Array} lines
   * @returns {Promise<void>}
   */
  sendLines(lines) {
    if (this.signal.aborted) return rejected(this.closedReason())
    return this.closingOnFailure(this.stream.writeLines(lines))
  }

  /**
   * `written`, closing the connection if it fails.
   * @param {Promise<void>} written
   */
  closingOnFailure(written) {
    return written === WRITTEN ? written : written.catch((error) => {
      this.close(error)
      throw error
    })
  }

  /** @param {unknown} [error] */
  close(error) {
    if (this.signal.aborted) return
    const reason = error ?? new Error('ACP connection closed')
    this.abort.abort(reason)
    for (const pending of this.pending.values()) {
      pending.cleanup?.()
      pending.reject(reason)
    }
    this.pending.clear()
    for (const controller of this.incoming.values()) controller.abort(reason)
    this.incoming.clear()
    this.stream.cancel()
  }
}

// ---------- the app ----------

/**
 * @typedef {object} Registration
 * @property {(params: unknown) => unknown} parse  the params the handler gets, or NOT_HERE
 * @property {(context: any) => unknown} handler
 * @property {(value: unknown) => unknown} [mapResponse]
 */

/** The agent's handlers; `connect` serves them on a stream of messages. */
class App {
  constructor() {
    /** @type {Map<string, Registration>} */
    this.requests = new Map()
    /** @type {Map<string, Registration>} */
    this.notifications = new Map()
    /** @type {((connection: any) => unknown)[]} */
    this.connectHandlers = []
    this.hasInitialize = false
  }

  /** @param {(connection: any) => unknown} handler */
  onConnect(handler) {
    this.connectHandlers.push(handler)
    return this
  }

  /**
   * A request handler: for one of the protocol's methods, its params checked as the SDK's
   * schema checks them; for any other, `parse` (required) gives them.
   * @param {string} method
   * @param {Function} parseOrHandler
   * @param {Function} [handler]
   */
  onRequest(method, parseOrHandler, handler) {
    if (handler) return this.#register(this.requests, method, { parse: /** @type {any} */ (parseOrHandler), handler: /** @type {any} */ (handler) })
    if (!REQUEST_METHODS.includes(method)) throw new Error(`Unknown ACP request method '${method}'. Pass a params parser for custom methods.`)
    if (method === 'initialize') this.hasInitialize = true
    return this.#register(this.requests, method, {
      parse: (params) => requestParams(method, params),
      handler: /** @type {any} */ (parseOrHandler),
      ...(EMPTY_OBJECT_ANSWERS.has(method) && { mapResponse: emptyObject }),
    })
  }

  /**
   * @param {string} method
   * @param {Function} parseOrHandler
   * @param {Function} [handler]
   */
  onNotification(method, parseOrHandler, handler) {
    if (handler) return this.#register(this.notifications, method, { parse: /** @type {any} */ (parseOrHandler), handler: /** @type {any} */ (handler) })
    if (!NOTIFICATION_METHODS.includes(method)) throw new Error(`Unknown ACP notification method '${method}'. Pass a params parser for custom methods.`)
    return this.#register(this.notifications, method, { parse: (params) => notificationParams(method, params), handler: /** @type {any} */ (parseOrHandler) })
  }

  /**
   * The first handler registered for a method is the one called.
   * @param {Map<string, Registration>} map
   * @param {string} method
   * @param {Registration} registration
   */
  #register(map, method, registration) {
    if (!map.has(method)) map.set(method, registration)
    return this
  }

  /**
   * Serves the handlers on `stream`; the connection handlers run before its first message.
   * @param {JsonLines} stream
   */
  connect(stream) {
    const connection = new Connection(stream, this)
    const handle = {
      client: new AgentContext(connection),
      get signal() {
        return connection.signal
      },
      get closed() {
        return connection.closed
      },
      /** @param {unknown} [error] */
      close: (error) => connection.close(error),
    }
    for (const handler of this.connectHandlers) {
      let result
      try {
        result = handler(handle)
      } catch (error) {
        connection.close(error)
        throw error
      }
      void Promise.resolve(result).catch((error) => connection.close(error))
    }
    return handle
  }
}

/**
 * An agent app, used as the SDK's `agent()` is (the parts of it the agent uses).
 * @param {{ name?: string }} [_options]
 * @returns {import('@agentclientprotocol/sdk').AgentApp}
 */
export function agent(_options) {
  return /** @type {any} */ (new App())
}

// ---------- the SDK's schemas, for what the hand checks leave ----------

/**
 * @typedef {object} SdkSchemas
 * @property {(method: string, params: unknown) => Promise<{ params: unknown } | { error: unknown }>} request
 *   the params the SDK's handler for `method` would get, or the error its connection answers with
 * @property {(method: string, params: unknown) => Promise<{ params: unknown } | { dropped: true }>} notification
 *   the params, or dropped (the SDK logged why, as its connection does)
 */

/** @type {Promise<SdkSchemas> | undefined} */
let schemas

/**
 * The SDK's own checks, loaded on first use: an app of the SDK whose handlers hand back the params
 * they are called with, on a connection of its own in memory. Its first message is an
 * `initialize`, so that it takes every other method.
 * @returns {Promise<SdkSchemas>}
 */
function sdkSchemas() {
  schemas ??= (async () => {
    const sdk = await import('@agentclientprotocol/sdk')
    /** @type {Map<string, (outcome: { params: unknown } | { error: unknown }) => void>} */
    const waiting = new Map()
    /** @type {{ params: unknown } | null} */
    let notified = null
    const app = sdk.agent({ name: 'cursor-acp-native params' })
    for (const method of REQUEST_METHODS) {
      /** @type {any} */ (app).onRequest(method, async (/** @type {{ params: unknown, requestId: string }} */ { params, requestId }) => {
        waiting.get(requestId)?.({ params })
        return {}
      })
    }
    for (const method of NOTIFICATION_METHODS) {
      /** @type {any} */ (app).onNotification(method, (/** @type {{ params: unknown }} */ { params }) => {
        notified = { params }
      })
    }
    /** @type {TransformStream<AnyMessage, AnyMessage>} */
    const input = new TransformStream()
    /** @type {TransformStream<AnyMessage, AnyMessage>} */
    const output = new TransformStream()
    app.connect({ readable: input.readable, writable: output.writable })
    const writer = input.writable.getWriter()
    void (async () => {
      const reader = output.readable.getReader()
      for (;;) {
        const { value, done } = await reader.read()
        if (done) return
        const m = /** @type {Record<string, any>} */ (value)
        if ('error' in m) waiting.get(m.id)?.({ error: m.error })
      }
    })()
    let nextId = 0
    /** @type {SdkSchemas['request']} */
    const request = (method, params) => new Promise((resolve) => {
      const id = `params-${nextId++}`
      waiting.set(id, (outcome) => {
        waiting.delete(id)
        resolve(outcome)
      })
      void writer.write(/** @type {AnyMessage} */ ({ jsonrpc: '2.0', id, method, params }))
    })
    await request('initialize', { protocolVersion: 1 })
    return {
      request,
      async notification(method, params) {
        notified = null
        await writer.write(/** @type {AnyMessage} */ ({ jsonrpc: '2.0', method, params }))
        // The SDK handles it in promise jobs alone (no I/O in memory): all done by the next turn.
        await new Promise((resolve) => setImmediate(resolve))
        const got = /** @type {{ params: unknown } | null} */ (notified)
        return got ?? { dropped: true }
      },
    }
  })()
  return schemas
}
