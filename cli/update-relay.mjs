// @ts-check
// A session's `session/update` notifications to the client, and the tool cards of its turns.
//
// ACP tool call ids are unique per session, but the server's are only unique per turn (the
// embedded backend's demo announces `demo-ls` in every turn; a server may reuse its ids), and
// clients look a card up by id and update an old turn's card in place. So every id the server
// or this agent uses for a card (a "local" id) is mapped, per turn, to an id no earlier turn of
// the session used: the first time as it is, then with `~2`, `~3`, …. Every update, permission
// request and form about a card names it by its mapped id.
//
// Each turn has a `TurnCards`: which cards the client has been told of in this turn (a request
// about a card waits for it; the server's card may reach the client a moment after the exec
// that belongs to it), which have ended (a card that ended `failed`, by the user's rejection or
// by cancel, is never flipped to `completed` by a later update), and whether the user cancelled
// (then no more assistant text goes out). Nothing of it outlives the turn.
/** @typedef {import('@agentclientprotocol/sdk').SessionUpdate} SessionUpdate */
/** @typedef {import('@agentclientprotocol/sdk').AgentContext} AgentContext */
/** @typedef {Extract<SessionUpdate, { sessionUpdate: 'tool_call' | 'tool_call_update' }>} CardUpdate */

/** Updates that are the model's words: none after the user cancelled. */
const WORDS = new Set(['agent_message_chunk', 'agent_thought_chunk'])

/** The cards of one turn (or of a `session/load` replay), and its cancellation. */
export class TurnCards {
  /** @param {Set<string>} used  ACP ids the session has used, shared by its turns */
  constructor(used) {
    this.used = used
    /** local id → ACP id */
    this.ids = /** @type {Map<string, string>} */ (new Map())
    /** Local ids whose `tool_call` has gone out in this turn. */
    this.announced = /** @type {Set<string>} */ (new Set())
    /** Local ids whose card has ended (`completed` or `failed`). */
    this.ended = /** @type {Set<string>} */ (new Set())
    /** @type {Map<string, ((seen: boolean) => void)[]>} */
    this.waiters = new Map()
    this.controller = new AbortController()
    this.over = false
  }

  /** Aborted once the user cancels this turn (withdraws its permission requests and forms). */
  get signal() {
    return this.controller.signal
  }

  get cancelled() {
    return this.controller.signal.aborted
  }

  cancel() {
    this.controller.abort()
    this.wakeAll()
  }

  /** The turn is over: requests still waiting for a card stop waiting. */
  end() {
    this.over = true
    this.wakeAll()
  }

  /**
   * The ACP id of a card, assigned on first use.
   * @param {string} local
   */
  acpId(local) {
    let id = this.ids.get(local)
    if (id) return id
    id = local
    for (let n = 2; this.used.has(id); n++) id = `${local}~${n}`
    this.used.add(id)
    this.ids.set(local, id)
    return id
  }

  /** @param {string} local */
  isAnnounced(local) {
    return this.announced.has(local)
  }

  /**
   * Resolves true once the card has gone out in this turn (at once if it has), false after
   * `ms`, or when the turn is cancelled or over.
   * @param {string} local
   * @param {number} ms
   * @returns {Promise<boolean>}
   */
  waitForCard(local, ms) {
    if (this.announced.has(local)) return Promise.resolve(true)
    if (this.over || this.cancelled) return Promise.resolve(false)
    return new Promise((resolve) => {
      const waiters = this.waiters.get(local) ?? []
      waiters.push(resolve)
      this.waiters.set(local, waiters)
      setTimeout(() => resolve(false), ms).unref?.()
    })
  }

  wakeAll() {
    for (const waiters of this.waiters.values()) for (const wake of waiters) wake(false)
    this.waiters.clear()
  }

  /**
   * The update as the client gets it, or null when it must not go out: the model's words after
   * a cancel, a new card after a cancel, any change to a card that has ended.
   * @param {SessionUpdate} update
   * @returns {SessionUpdate | null}
   */
  admit(update) {
    if (this.cancelled && WORDS.has(update.sessionUpdate)) return null
    if (update.sessionUpdate !== 'tool_call' && update.sessionUpdate !== 'tool_call_update') return update
    const local = update.toolCallId
    if (update.sessionUpdate === 'tool_call' && this.cancelled && !this.announced.has(local)) return null
    if (this.ended.has(local)) return null
    if (update.status === 'completed' || update.status === 'failed') this.ended.add(local)
    return withAcpIds(update, (id) => this.acpId(id))
  }

  /** @param {SessionUpdate} update  as it went out (local ids) */
  sent(update) {
    if (update.sessionUpdate !== 'tool_call') return
    this.announced.add(update.toolCallId)
    for (const wake of this.waiters.get(update.toolCallId) ?? []) wake(true)
    this.waiters.delete(update.toolCallId)
  }
}

/**
 * A card update with every id that names a card (its own, its terminal's, its parent's)
 * mapped to the ACP id.
 * @param {CardUpdate} update
 * @param {(local: string) => string} map
 * @returns {CardUpdate}
 */
function withAcpIds(update, map) {
  const out = { ...update, toolCallId: map(update.toolCallId) }
  if (out.content) {
    out.content = out.content.map((c) => (c.type === 'terminal' ? { ...c, terminalId: map(c.terminalId) } : c))
  }
  const meta = /** @type {Record<string, any> | null | undefined} */ (out._meta)
  if (meta) {
    const mapped = { ...meta }
    for (const key of ['terminal_info', 'terminal_output', 'terminal_exit']) {
      if (typeof mapped[key]?.terminal_id === 'string') mapped[key] = { ...mapped[key], terminal_id: map(mapped[key].terminal_id) }
    }
    if (typeof mapped.parentToolCallId === 'string') mapped.parentToolCallId = map(mapped.parentToolCallId)
    out._meta = mapped
  }
  return out
}

export class UpdateRelay {
  /**
   * @param {() => AgentContext} client  the connection to the client
   * @param {string} sessionId
   */
  constructor(client, sessionId) {
    this.client = client
    this.sessionId = sessionId
    /** ACP tool call ids this session has used, in any turn. */
    this.used = /** @type {Set<string>} */ (new Set())
    /** The cards of the running turn (or of the last one, or of a replay). */
    this.turn = new TurnCards(this.used)
  }

  /** A new turn: its cards, its cancellation. The previous turn's end with it. */
  beginTurn() {
    this.turn.end()
    this.turn = new TurnCards(this.used)
    return this.turn
  }

  /**
   * Sends an update of the current turn (tool call ids local, mapped here).
   * @param {SessionUpdate} update
   */
  async send(update) {
    const turn = this.turn
    const admitted = turn.admit(update)
    if (!admitted) return
    await this.client().notify('session/update', { sessionId: this.sessionId, update: admitted })
    turn.sent(update)
  }
}
