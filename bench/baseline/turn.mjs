// What a turn of either baseline does above its transport: decoded server messages become ACP
// updates (delivered by callback), execs and KV are answered, heartbeats sent, cancel bounded.
// The transports (client.mjs: node:http2 / node:http by hand; connect-client.mjs: Connect for
// Node) only carry messages: `send(message)` takes an `AgentClientMessage` oneof case as
// `{ case, value }` and `close()` ends the stream.
import { randomUUID } from 'node:crypto'

const HEARTBEAT_MS = 5000

/**
 * The state a client keeps across its turns.
 * @typedef {object} Conversation
 * @property {string} conversationId
 * @property {object | undefined} checkpoint  the latest ConversationStateStructure
 * @property {Map<string, Uint8Array>} blobs  the KV store, by hex blob id
 * @property {(req: { kind: string, args: object }) => Promise<object> | object | undefined} [exec]
 * @property {number} cancelTimeoutMs
 */

export class Turn {
  /**
   * @param {object} o
   * @param {Conversation} o.conversation
   * @param {(update: object) => void} o.onUpdate
   * @param {(message: { case: string, value: object }) => Promise<void>} o.send
   * @param {() => void} o.close
   */
  constructor({ conversation, onUpdate, send, close }) {
    this.conversation = conversation
    this.onUpdate = onUpdate
    this.send = send
    this.close = close
    this.messageId = randomUUID()
    this.lastKind = null
    this.open = new Set()
    this.finished = false
    this.cancelled = false
    this.heartbeat = null
    this.result = new Promise((resolve) => { this.settle = resolve })
  }

  /** Sends the run request and starts the heartbeats. */
  start(text) {
    const { conversation } = this
    this.send({
      case: 'runRequest',
      value: {
        conversationState: conversation.checkpoint ?? {},
        action: { action: { case: 'userMessageAction', value: { userMessage: { text, messageId: randomUUID() } } } },
        modelDetails: { modelId: 'default' },
        conversationId: conversation.conversationId,
      },
    }).catch(() => this.finish('end_turn'))
    this.heartbeat = setInterval(() => this.send({ case: 'clientHeartbeat', value: {} }).catch(() => {}), HEARTBEAT_MS)
  }

  cancel() {
    if (this.finished || this.cancelled) return
    this.cancelled = true
    this.send({ case: 'conversationAction', value: { action: { case: 'cancelAction', value: {} } } }).catch(() => {})
    // Resolve within the bound even if the server never answers.
    setTimeout(() => this.finish('cancelled'), this.conversation.cancelTimeoutMs).unref()
  }

  finish(stopReason) {
    if (this.finished) return
    this.finished = true
    clearInterval(this.heartbeat)
    for (const id of this.open) this.onUpdate({ sessionUpdate: 'tool_call_update', toolCallId: id, status: 'failed' })
    this.open.clear()
    try { this.close() } catch {}
    this.settle({ stopReason: this.cancelled ? 'cancelled' : stopReason })
  }

  chunk(sessionUpdate, text) {
    if (this.lastKind !== sessionUpdate) this.messageId = randomUUID()
    this.lastKind = sessionUpdate
    this.onUpdate({ sessionUpdate, content: { type: 'text', text }, messageId: this.messageId })
  }

  /** One decoded `AgentServerMessage`. */
  handle(m) {
    switch (m.message.case) {
      case 'interactionUpdate': {
        const u = m.message.value.message
        switch (u.case) {
          case 'textDelta': return this.chunk('agent_message_chunk', u.value.text)
          case 'thinkingDelta': return this.chunk('agent_thought_chunk', u.value.text)
          case 'thinkingCompleted': this.lastKind = null; return
          case 'toolCallStarted': {
            this.lastKind = null
            this.open.add(u.value.callId)
            return this.onUpdate({ sessionUpdate: 'tool_call', toolCallId: u.value.callId, title: u.value.toolCall?.tool.case ?? 'tool', status: 'in_progress' })
          }
          case 'toolCallCompleted': {
            this.open.delete(u.value.callId)
            return this.onUpdate({ sessionUpdate: 'tool_call_update', toolCallId: u.value.callId, status: 'completed' })
          }
          case 'turnEnded': return this.finish('end_turn')
          default: return
        }
      }
      case 'execServerMessage':
        this.exec(m.message.value).catch(() => {})
        return
      case 'kvServerMessage': {
        const kv = m.message.value
        const { blobs } = this.conversation
        if (kv.message.case === 'getBlobArgs') {
          const data = blobs.get(Buffer.from(kv.message.value.blobId).toString('hex'))
          this.send({ case: 'kvClientMessage', value: { id: kv.id, message: { case: 'getBlobResult', value: { blobData: data } } } }).catch(() => {})
        } else if (kv.message.case === 'setBlobArgs') {
          blobs.set(Buffer.from(kv.message.value.blobId).toString('hex'), kv.message.value.blobData)
          this.send({ case: 'kvClientMessage', value: { id: kv.id, message: { case: 'setBlobResult', value: {} } } }).catch(() => {})
        }
        return
      }
      case 'conversationCheckpointUpdate': {
        const checkpoint = m.message.value
        this.conversation.checkpoint = checkpoint
        const t = checkpoint.tokenDetails
        if (t) this.onUpdate({ sessionUpdate: 'usage_update', used: t.usedTokens, size: t.maxTokens })
        return
      }
      default:
        return
    }
  }

  async exec(e) {
    const kind = e.message.case.replace(/Args$/, '')
    let value
    try {
      value = await this.conversation.exec?.({ kind, args: e.message.value })
    } catch (err) {
      value = { result: { case: 'error', value: { error: String(err?.message ?? err) } } }
    }
    if (value === undefined || value === null) {
      await this.send({ case: 'execClientControlMessage', value: { message: { case: 'throw', value: { id: e.id, error: `No handler for ${kind}` } } } })
    } else {
      await this.send({ case: 'execClientMessage', value: { id: e.id, execId: e.execId, message: { case: `${kind}Result`, value } } })
    }
    await this.send({ case: 'execClientControlMessage', value: { message: { case: 'streamClose', value: { id: e.id } } } })
  }
}

/** The headers both baselines send with every request of a turn. */
export function turnHeaders() {
  const requestId = randomUUID()
  return {
    requestId,
    headers: {
      'x-request-id': requestId,
      'x-original-request-id': requestId,
      'x-cursor-client-type': 'cli',
      'x-ghost-mode': 'true',
    },
  }
}
