// @ts-check
// The agent's side of ACP on newline-delimited JSON-RPC, without the ACP SDK: the SDK's `agent()`
// app and `ndJsonStream`, as far as the agent uses them, with the same answers and errors and the
// same order. The SDK builds a zod schema for every type of the protocol as it loads: 17 MiB of
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
/** @typedef {import('@agentclientprotocol/sdk').Stream} Stream */
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

/** The SDK's default limit of a line, in bytes (stdio.mjs refuses longer lines before this). */
const DEFAULT_MAX_MESSAGE_BYTES = 32 * 1024 * 1024

class MessageTooLargeError extends Error {
  /** @param {number} limit */
  constructor(limit) {
    super(`Incoming ACP data exceeds the configured ${limit} byte limit`)
    this.name = 'MessageTooLargeError'
  }
}

/**
 * The messages of `input`, a line of JSON each, and a writable that writes messages to `output`
 * as lines. A line that is not JSON, or not an object, is answered on `output` and dropped.
 * @param {WritableStream<Uint8Array>} output
 * @param {ReadableStream<Uint8Array>} input
 * @param {{ maxMessageBytes?: number }} [options]
 * @returns {Stream}
 */
export function ndJsonStream(output, input, { maxMessageBytes = DEFAULT_MAX_MESSAGE_BYTES } = {}) {
  const encoder = new TextEncoder()
  const decoder = new TextDecoder()
  let cancelled = false
  /** @type {ReadableStreamDefaultReader<Uint8Array> | undefined} */
  let inputReader
  let writes = Promise.resolve()
  /** @param {unknown} message */
  const writeJson = (message) => {
    const line = `${JSON.stringify(message)}\n`
    const write = writes.then(async () => {
      const writer = output.getWriter()
      try {
        await writer.write(encoder.encode(line))
      } finally {
        writer.releaseLock()
      }
    })
    writes = write.catch(() => {})
    return write
  }
  /** @type {ReadableStream<AnyMessage>} */
  const readable = new ReadableStream({
    async start(controller) {
      /** @param {Uint8Array} bytes */
      const enqueueLine = async (bytes) => {
        const text = decoder.decode(bytes).trim()
        if (!text) return
        let message
        try {
          message = JSON.parse(text)
        } catch {
          await writeJson(protocolError(RequestError.parseError()))
          return
        }
        // ACP has no batches: an array is answered once, and none of it is read.
        if (Array.isArray(message)) await writeJson(protocolError(RequestError.invalidRequest(undefined, 'JSON-RPC batches are not supported')))
        else if (isRecord(message)) controller.enqueue(/** @type {AnyMessage} */ (message))
        else await writeJson(protocolError(RequestError.invalidRequest(message)))
      }
      const lines = new Lines(maxMessageBytes)
      const reader = input.getReader()
      inputReader = reader
      try {
        for (;;) {
          const { value, done } = await reader.read()
          if (cancelled) return
          if (done) break
          if (!value) continue
          for (const line of lines.push(value)) {
            await enqueueLine(line)
            if (cancelled) return
          }
        }
        if (cancelled) return
        const last = lines.flush()
        if (last) await enqueueLine(last)
      } catch (e) {
        if (cancelled) return
        controller.error(e)
        void reader.cancel(e).catch(() => {})
        return
      } finally {
        if (inputReader === reader) inputReader = undefined
        reader.releaseLock()
      }
      if (!cancelled) controller.close()
    },
    cancel(reason) {
      cancelled = true
      return inputReader?.cancel(reason)
    },
  })
  /** @type {WritableStream<AnyMessage>} */
  const writable = new WritableStream({ write: (message) => writeJson(message) })
  return { readable, writable }
}

/** Bytes split into lines at LF (a CR before it dropped), each at most `limit` bytes. */
class Lines {
  /** @param {number} limit */
  constructor(limit) {
    this.limit = limit
    /** The current line's bytes so far. @type {Uint8Array[]} */
    this.parts = []
    this.size = 0
  }

  /**
   * The lines `chunk` completes.
   * @param {Uint8Array} chunk
   * @returns {Uint8Array[]}
   */
  push(chunk) {
    const out = []
    let start = 0
    for (let newline = chunk.indexOf(0x0a); newline >= 0; newline = chunk.indexOf(0x0a, start)) {
      out.push(this.#take(chunk.subarray(start, newline)))
      start = newline + 1
    }
    if (start < chunk.length) {
      const tail = chunk.subarray(start)
      this.#check(tail)
      this.parts.push(tail)
      this.size += tail.length
    }
    return out
  }

  /** The last line, without a newline, if any. */
  flush() {
    if (this.size === 0) return undefined
    return withoutCr(this.#take(new Uint8Array(0)))
  }

  /** @param {Uint8Array} tail */
  #take(tail) {
    this.#check(tail)
    const line = this.parts.length === 0 ? tail : Buffer.concat([...this.parts, tail])
    this.parts = []
    this.size = 0
    return withoutCr(line)
  }

  /** A line longer than the limit (a CR at its end not counted) fails the input, as the SDK's. @param {Uint8Array} tail */
  #check(tail) {
    const last = tail.length > 0 ? tail[tail.length - 1] : this.parts.at(-1)?.at(-1)
    if (this.size + tail.length - (last === 0x0d ? 1 : 0) > this.limit) {
      this.parts = []
      this.size = 0
      throw new MessageTooLargeError(this.limit)
    }
  }
}

/** @param {Uint8Array} line */
const withoutCr = (line) => (line[line.length - 1] === 0x0d ? line.subarray(0, -1) : line)

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
   * @param {Stream} stream
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
    /** @type {Promise<void>} */
    this.writes = Promise.resolve()
    this.initialized = false
    /**
     * The calls received after one whose params wait for the SDK's schemas, in order: each is
     * dispatched after it, as the SDK would have handled them in the order they came.
     * @type {Call[] | null}
     */
    this.held = null
    /** @type {ReadableStreamDefaultReader<AnyMessage> | undefined} */
    this.reader = undefined
    void this.receive()
  }

  get signal() {
    return this.abort.signal
  }

  closedReason() {
    return this.abort.signal.reason ?? new Error('ACP connection closed')
  }

  async receive() {
    /** @type {unknown} */
    let error
    try {
      const reader = this.stream.readable.getReader()
      this.reader = reader
      try {
        while (!this.signal.aborted) {
          const { value, done } = await reader.read()
          if (this.signal.aborted || done) break
          this.receiveMessage(value)
        }
      } finally {
        if (this.reader === reader) this.reader = undefined
        reader.releaseLock()
      }
    } catch (e) {
      error = e
    } finally {
      this.close(error)
    }
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
   * Writes a message after those before it; a failed write closes the connection.
   * @param {unknown} message
   * @returns {Promise<void>}
   */
  send(message) {
    if (this.signal.aborted) return rejected(this.closedReason())
    this.writes = this.writes
      .then(async () => {
        if (this.signal.aborted) throw this.closedReason()
        const writer = this.stream.writable.getWriter()
        try {
          await writer.write(/** @type {AnyMessage} */ (message))
        } finally {
          writer.releaseLock()
        }
      })
      .catch((error) => {
        this.close(error)
        throw error
      })
    return this.writes
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
    void this.reader?.cancel(reason).catch(() => {})
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
   * @param {Stream} stream
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
