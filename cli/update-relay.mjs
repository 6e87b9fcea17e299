// @ts-check
// A session's `session/update` notifications to the client, and the scope of its running turn.
//
// The tool cards are the addon's: it gives every card an ACP id unique in the session (kept
// across restarts with the saved session), announces a card before anything names it, keeps an
// ended card ended, and sends no new card and no words once the user cancelled. So the relay
// writes what the turn yields as it is, in order. The host's own cards (an exec without its
// tool call, a question) are opened and settled through the addon's session too
// (`openCard`, `settleCard`, `cardAnnounced`), and reach the client in the same stream.
//
// A batch of updates is written at once, as the addon serialized it (`PromptTurn.nextLines`):
// a request about a card (a permission, a form) is sent once the addon says the card is out,
// which it says after it handed over the batch that holds it; writing the whole batch at once
// keeps the card ahead of the request on the wire.
/** @typedef {import('@agentclientprotocol/sdk').SessionUpdate} SessionUpdate */
/** @typedef {import('@agentclientprotocol/sdk').AgentContext} AgentContext */
/**
 * What the agent's own connection (acp.mjs) adds to the SDK's context: notifications written
 * as the addon serialized them.
 * @typedef {{ notifyLines(lines: Uint8Array): Promise<void> }} LineNotifier
 */

/** One turn of the session, as the agent's requests to the client need it. */
export class TurnScope {
  constructor() {
    /** Made when a request of the turn first needs the signal: most turns never ask. @type {AbortController | undefined} */
    this.controller = undefined
    this.cancelledByUser = false
    this.over = false
  }

  /** Aborted once the user cancels this turn (withdraws its permission requests and forms). */
  get signal() {
    if (!this.controller) {
      this.controller = new AbortController()
      if (this.cancelledByUser) this.controller.abort()
    }
    return this.controller.signal
  }

  get cancelled() {
    return this.cancelledByUser
  }

  cancel() {
    this.cancelledByUser = true
    this.controller?.abort()
  }

  /** The turn is over: nothing of it asks the client anything any more. */
  end() {
    this.over = true
  }
}

export class UpdateRelay {
  /**
   * @param {() => AgentContext} client  the connection to the client
   * @param {string} sessionId
   */
  constructor(client, sessionId) {
    this.client = client
    this.sessionId = sessionId
    /** The running turn (or the last one). */
    this.turn = new TurnScope()
    this.turn.end()
  }

  /** A new turn; the previous one ends with it. */
  beginTurn() {
    this.turn.end()
    this.turn = new TurnScope()
    return this.turn
  }

  /**
   * Sends one update.
   * @param {SessionUpdate} update
   */
  send(update) {
    return this.client().notify('session/update', { sessionId: this.sessionId, update })
  }

  /**
   * Resolves once the updates the addon has handed out so far are queued to the client. The
   * core asks the host about a card (a permission, an editor's file call) as soon as it has
   * handed out the batch announcing it; that batch reaches this relay through a promise the
   * addon settled before it called the host, in the same turn of Node's event loop, and the
   * relay queues a whole batch at once. One `setImmediate` lets that run first, so a request
   * about a card never overtakes the card.
   * @returns {Promise<void>}
   */
  queued() {
    return new Promise((resolve) => setImmediate(resolve))
  }

  /**
   * Sends a batch of the turn's updates, serialized by the addon as this session's
   * `session/update` lines (`PromptTurn.nextLines`), all queued at once; resolves when they
   * are written.
   * @param {Uint8Array} lines
   */
  sendLines(lines) {
    return /** @type {AgentContext & LineNotifier} */ (this.client()).notifyLines(lines)
  }
}
