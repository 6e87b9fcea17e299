// The benchmark's first yardstick: a pure-JavaScript client of the same protocol (RunSSE +
// BidiAppend over Node's http, or Run over Node's http2, Connect framing by hand; protobuf by
// @bufbuild/protobuf generated from the project's proto/), doing what the addon does for the
// bench scenarios: decoding every server message, answering execs and KV, heartbeats, cancel
// with a bound, producing ACP updates (turn.mjs, shared with the Connect baseline).
// Not a product surface; `bench/run.mjs` checks that it produces the same updates as the addon.
import http from 'node:http'
import http2 from 'node:http2'
import { randomUUID } from 'node:crypto'
import { create, fromBinary, toBinary } from '@bufbuild/protobuf'
import * as pb from './gen/agent_v1_pb.js'
import * as ai from './gen/aiserver_v1_pb.js'
import { Turn, turnHeaders } from './turn.mjs'

const RUN_SSE = '/agent.v1.AgentService/RunSSE'
const RUN = '/agent.v1.AgentService/Run'
const BIDI_APPEND = '/aiserver.v1.BidiService/BidiAppend'

const keepAlive = new http.Agent({ keepAlive: true, maxSockets: Infinity })

function envelope(payload) {
  const out = Buffer.allocUnsafe(5 + payload.length)
  out[0] = 0
  out.writeUInt32BE(payload.length, 1)
  out.set(payload, 5)
  return out
}

/**
 * Incremental Connect envelope decoder over arbitrary chunking. Chunks are only joined once the
 * next frame is whole, so a large frame arriving in many small chunks (HTTP/2 DATA frames are
 * 16 KiB) is copied once, not once per chunk.
 */
class FrameDecoder {
  constructor(maxFrame = 16 * 1024 * 1024) {
    this.chunks = []
    this.length = 0
    this.need = 5
    this.max = maxFrame
  }

  *push(chunk) {
    this.chunks.push(chunk)
    this.length += chunk.length
    if (this.length < this.need) return
    const buf = this.chunks.length === 1 ? this.chunks[0] : Buffer.concat(this.chunks, this.length)
    let off = 0
    this.need = 5
    while (buf.length - off >= 5) {
      const flags = buf[off]
      const len = buf.readUInt32BE(off + 1)
      if (len > this.max) throw new Error(`frame of ${len} bytes exceeds the limit`)
      if (buf.length - off - 5 < len) {
        this.need = 5 + len
        break
      }
      yield { flags, data: buf.subarray(off + 5, off + 5 + len) }
      off += 5 + len
    }
    const rest = buf.subarray(off)
    this.chunks = rest.length ? [rest] : []
    this.length = rest.length
  }
}

// Run streams go to an HTTP/2 connection carrying fewer than 100 streams, or to a new one, with
// the addon's receive windows (8 MiB per stream, 16 MiB per connection), so neither client is
// held to a smaller window than the other.
const H2_STREAMS_PER_CONNECTION = 100
const h2Connections = new Map()

function runStream(origin, headers) {
  const connections = h2Connections.get(origin) ?? []
  h2Connections.set(origin, connections)
  let connection = connections.find((c) => c.streams < H2_STREAMS_PER_CONNECTION && !c.session.closed && !c.session.destroyed)
  if (!connection) {
    const session = http2.connect(origin, { settings: { initialWindowSize: 8 * 1024 * 1024 } })
    session.on('connect', () => session.setLocalWindowSize(16 * 1024 * 1024))
    session.on('error', () => {})
    connection = { session, streams: 0 }
    connections.push(connection)
  }
  connection.streams++
  const stream = connection.session.request({ ':method': 'POST', ':path': RUN, ...headers })
  stream.on('close', () => { connection.streams-- })
  return stream
}

function post(url, headers, body) {
  return new Promise((resolve, reject) => {
    const req = http.request(url, { method: 'POST', agent: keepAlive, headers: { ...headers, 'content-length': body.length } }, (res) => {
      res.resume()
      res.on('end', () => (res.statusCode === 200 ? resolve() : reject(new Error(`HTTP ${res.statusCode}`))))
    })
    req.on('error', reject)
    req.end(body)
  })
}

export class BaselineClient {
  /**
   * @param {object} o
   * @param {string} o.baseUrl
   * @param {(req: {kind: string, args: object}) => Promise<object> | object} [o.exec]  returns the result message init
   * @param {number} [o.cancelTimeoutMs]
   * @param {'sse' | 'h2'} [o.transport]
   */
  constructor({ baseUrl, exec, cancelTimeoutMs = 2000, transport = 'sse' }) {
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
    const { requestId, headers: turnIds } = turnHeaders()
    const headers = { 'content-type': 'application/proto', 'connect-protocol-version': '1', ...turnIds }
    const h2 = this.transport === 'h2'
    let seqno = 0
    let stream
    const send = (message) => {
      const encoded = toBinary(pb.AgentClientMessageSchema, create(pb.AgentClientMessageSchema, { message }))
      if (h2) {
        return new Promise((resolve, reject) => {
          if (stream.destroyed || stream.writableEnded) return reject(new Error('the Run stream is closed'))
          stream.write(envelope(encoded), (err) => (err ? reject(err) : resolve()))
        })
      }
      const data = Buffer.from(encoded).toString('hex')
      const body = toBinary(ai.BidiAppendRequestSchema, create(ai.BidiAppendRequestSchema, { data, requestId: { requestId }, appendSeqno: BigInt(seqno++) }))
      return post(this.baseUrl + BIDI_APPEND, headers, Buffer.from(body))
    }
    const turn = new Turn({ conversation: this.conversation, onUpdate, send, close: () => stream.destroy() })

    const decoder = new FrameDecoder()
    const onData = (c) => {
      try {
        for (const frame of decoder.push(c)) {
          if (frame.flags & 0x02) return turn.finish('end_turn')
          turn.handle(fromBinary(pb.AgentServerMessageSchema, frame.data))
        }
      } catch {
        turn.finish('end_turn')
      }
    }
    const streamHeaders = { ...headers, 'content-type': 'application/connect+proto' }
    if (h2) {
      stream = runStream(new URL(this.baseUrl).origin, { ...streamHeaders, te: 'trailers' })
      stream.on('response', (h) => { if (h[':status'] !== 200) turn.finish('end_turn') })
      stream.on('data', onData)
      stream.on('end', () => turn.finish('end_turn'))
      stream.on('error', () => turn.finish('end_turn'))
    } else {
      stream = http.request(this.baseUrl + RUN_SSE, {
        method: 'POST',
        agent: keepAlive,
        headers: { ...streamHeaders, 'x-cursor-streaming': 'true' },
      }, (res) => {
        res.on('data', onData)
        res.on('end', () => turn.finish('end_turn'))
        res.on('error', () => turn.finish('end_turn'))
      })
      stream.on('error', () => turn.finish('end_turn'))
      stream.end(envelope(toBinary(ai.BidiRequestIdSchema, create(ai.BidiRequestIdSchema, { requestId }))))
    }
    turn.start(text)
    return { result: turn.result, cancel: () => turn.cancel() }
  }
}
