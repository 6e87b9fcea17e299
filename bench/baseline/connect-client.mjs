// The benchmark's second yardstick: the library a user would pick to write a client of this
// protocol in Node, the official Connect client (`@connectrpc/connect` with
// `@connectrpc/connect-node`'s transport; 2.1.x, the last line that runs on Node 20), on code
// generated from proto/ (messages and services) by protoc-gen-es. `Run` over HTTP/2,
// or RunSSE + BidiAppend over HTTP/1.1; the turn above the transport is the first baseline's
// (turn.mjs), so both do the same work per scenario.
import { create, toBinary } from '@bufbuild/protobuf'
import { createClient } from '@connectrpc/connect'
import { createConnectTransport, Http2SessionManager } from '@connectrpc/connect-node'
import http from 'node:http'
import { randomUUID } from 'node:crypto'
import * as pb from './gen/agent_v1_pb.js'
import { BidiService } from './gen/aiserver_v1_pb.js'
import { Turn, turnHeaders } from './turn.mjs'

// A Connect transport keeps one HTTP/2 connection. As in the first baseline (and the addon), a
// connection carries at most 100 turns, with the addon's receive windows: 8 MiB per stream
// (a setting of the connection) and 16 MiB per connection (set once its first stream opens).
const TURNS_PER_CONNECTION = 100
const STREAM_WINDOW = 8 * 1024 * 1024
const CONNECTION_WINDOW = 16 * 1024 * 1024
const h2Pools = new Map()

/** connect-node's session manager, widening each connection's window the first time it is used. */
function withConnectionWindow(manager) {
  const widened = new WeakSet()
  return {
    get authority() { return manager.authority },
    async request(method, path, headers, options) {
      const stream = await manager.request(method, path, headers, options)
      if (!widened.has(stream.session)) {
        widened.add(stream.session)
        stream.session.setLocalWindowSize(CONNECTION_WINDOW)
      }
      return stream
    },
    notifyResponseByteRead: (stream) => manager.notifyResponseByteRead(stream),
  }
}

/** An `AgentService` client on a connection with room for one more turn; `release()` gives it back. */
function h2Client(baseUrl) {
  const pool = h2Pools.get(baseUrl) ?? []
  h2Pools.set(baseUrl, pool)
  let entry = pool.find((e) => e.turns < TURNS_PER_CONNECTION)
  if (!entry) {
    const sessionManager = withConnectionWindow(new Http2SessionManager(baseUrl, {}, { settings: { initialWindowSize: STREAM_WINDOW } }))
    const transport = createConnectTransport({ baseUrl, httpVersion: '2', sessionManager })
    entry = { client: createClient(pb.AgentService, transport), turns: 0 }
    pool.push(entry)
  }
  entry.turns++
  let released = false
  return { client: entry.client, release: () => { if (!released) { released = true; entry.turns-- } } }
}

const h1Pools = new Map()

/** The RunSSE and BidiAppend clients over HTTP/1.1 with kept-alive connections. */
function h1Clients(baseUrl) {
  let clients = h1Pools.get(baseUrl)
  if (!clients) {
    const transport = createConnectTransport({ baseUrl, httpVersion: '1.1', nodeOptions: { agent: new http.Agent({ keepAlive: true, maxSockets: Infinity }) } })
    clients = { agent: createClient(pb.AgentService, transport), bidi: createClient(BidiService, transport) }
    h1Pools.set(baseUrl, clients)
  }
  return clients
}

/**
 * The client's messages of one `Run` call, as the async iterable Connect reads them from.
 * `push` resolves at once: Connect writes them in order, under HTTP/2 flow control.
 */
class Outbox {
  constructor() {
    this.queued = []
    this.wake = null
    this.closed = false
  }

  push(message) {
    if (this.closed) return Promise.reject(new Error('the Run stream is closed'))
    this.queued.push(message)
    this.wake?.()
    return Promise.resolve()
  }

  close() {
    this.closed = true
    this.wake?.()
  }

  async *[Symbol.asyncIterator]() {
    for (;;) {
      if (this.queued.length) yield this.queued.shift()
      else if (this.closed) return
      else await new Promise((resolve) => { this.wake = resolve })
      this.wake = null
    }
  }
}

export class ConnectBaselineClient {
  /**
   * @param {object} o
   * @param {string} o.baseUrl
   * @param {(req: {kind: string, args: object}) => Promise<object> | object} [o.exec]  returns the result message init
   * @param {number} [o.cancelTimeoutMs]
   * @param {'sse' | 'h2'} [o.transport]
   */
  constructor({ baseUrl, exec, cancelTimeoutMs = 2000, transport = 'h2' }) {
    this.baseUrl = baseUrl
    this.transport = transport
    /** @type {import('./turn.mjs').Conversation} */
    this.conversation = { conversationId: randomUUID(), checkpoint: undefined, blobs: new Map(), exec, cancelTimeoutMs }
  }

  /**
   * Runs one turn. `onUpdate(update)` gets each ACP update; resolves `{ stopReason }`.
   * `cancel()` on the returned handle cancels.
   */
  prompt(text, onUpdate) {
    const { requestId, headers } = turnHeaders()
    const abort = new AbortController()
    let responses
    let turn
    if (this.transport === 'h2') {
      const { client, release } = h2Client(this.baseUrl)
      const outbox = new Outbox()
      turn = new Turn({
        conversation: this.conversation,
        onUpdate,
        send: (message) => outbox.push({ message }),
        close: () => {
          release()
          outbox.close()
          abort.abort()
        },
      })
      responses = client.run(outbox, { headers, signal: abort.signal })
    } else {
      const { agent, bidi } = h1Clients(this.baseUrl)
      let seqno = 0
      turn = new Turn({
        conversation: this.conversation,
        onUpdate,
        // BidiAppend carries the message hex-encoded in `data`, as the protocol's fallback does.
        send: async (message) => {
          const data = Buffer.from(encodeClientMessage(message)).toString('hex')
          await bidi.bidiAppend({ data, requestId: { requestId }, appendSeqno: BigInt(seqno++) }, { headers })
        },
        close: () => abort.abort(),
      })
      responses = agent.runSSE({ requestId }, { headers: { ...headers, 'x-cursor-streaming': 'true' }, signal: abort.signal })
    }
    ;(async () => {
      try {
        for await (const m of responses) turn.handle(m)
      } catch {}
      turn.finish('end_turn')
    })()
    turn.start(text)
    return { result: turn.result, cancel: () => turn.cancel() }
  }
}

/** An `AgentClientMessage` in its binary form, as a BidiAppend's `data` carries it. */
function encodeClientMessage(message) {
  return toBinary(pb.AgentClientMessageSchema, create(pb.AgentClientMessageSchema, { message }))
}
