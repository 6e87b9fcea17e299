// @ts-check
// The permission flow of one session. Tools that change things (edit, delete, execute, fetch,
// MCP) and some interaction queries ask the user first: one `session/request_permission` per
// call, about a card the client already shows in this turn — the server's own once the addon
// says it is out, or else one this flow opens through the addon and settles when the tool has
// run (the addon fails it at turn end if nothing settled it). Allow / Always allow / Reject
// (one option of each kind: clients that key options by kind keep them all); "always allow" is
// remembered for the session (shells by their program, everything else by tool).
//
// A request the client cancels, or one that fails, means "stop": it cancels the turn rather
// than denying and going on. Cancelling the turn withdraws a pending request
// (`$/cancel_request`) and stops waiting for it at once, so a client that does not understand
// the withdrawal cannot hold the turn open, and its late answer is dropped: a request belongs
// to the turn that made it, and its answer never runs a tool in a later one.
/** @typedef {import('@agentclientprotocol/sdk').AgentContext} AgentContext */
/** @typedef {import('@agentclientprotocol/sdk').PermissionOption} PermissionOption */
/** @typedef {import('../index.js').ToolCard} Card */
/** @typedef {import('../index.js').ToolCardOutcome} Outcome */
/** @typedef {import('../index.js').Session} NativeSession */
/** @typedef {import('./update-relay.mjs').UpdateRelay} UpdateRelay */
/** @typedef {import('./update-relay.mjs').TurnScope} TurnScope */

/**
 * The running turn, as the permission flow needs it.
 * @typedef {object} TurnControl
 * @property {() => void} cancel  cancels the running turn, as `session/cancel` does
 */

/**
 * What a request is about: the server's card (`toolCallId`), else one of this flow's own,
 * named after `key` and showing `card`; `outcome` says how it ends from the tool's result.
 * @typedef {object} CardRequest
 * @property {string} [toolCallId]  the server's tool call, when the request names one
 * @property {string} ownKey  names the card of this flow's own when there is no server card
 * @property {Card} card
 * @property {(result: unknown) => Outcome} [outcome]
 */

/**
 * A card a request is about, in one turn.
 * @typedef {object} CardRef
 * @property {string} id  its ACP id (what the client knows it by)
 * @property {string} local  its id in the addon's session (the server's call id, or this flow's)
 * @property {boolean} own  opened by this flow, which settles it
 * @property {TurnScope} turn
 */

/**
 * What the user decided. `finish` settles the card this flow opened, once the tool has run.
 * @typedef {{ outcome: 'allow', finish: (result: unknown) => void } | { outcome: 'reject' } | { outcome: 'cancelled' }} Decision
 */

/** @type {PermissionOption[]} */
export const PERMISSION_OPTIONS = [
  { optionId: 'allow-once', name: 'Allow', kind: 'allow_once' },
  { optionId: 'allow-always', name: 'Always allow', kind: 'allow_always' },
  { optionId: 'reject-once', name: 'Reject', kind: 'reject_once' },
]

/** How long a request waits for its tool call to reach the client before announcing its own. */
const ANNOUNCE_WAIT_MS = 500

/**
 * The rule an "always allow" answer creates: `execute:npm` for `npm test`, `edit` for writes.
 * @param {string} kind
 * @param {string} [command]
 */
export function ruleKey(kind, command) {
  if (kind !== 'execute' || !command) return kind
  const program = command.trim().split(/\s+/)[0] ?? ''
  return `execute:${program}`
}

/** The model-visible reason of a rejection. */
export const REJECTED_BY_USER = 'User rejected'
export const CANCELLED_BY_USER = 'The user cancelled the turn'

/** @param {string} t */
export const textContent = (t) => /** @type {const} */ ({ type: 'content', content: { type: 'text', text: t } })

/** @param {unknown} result */
const isSuccess = (result) => typeof result === 'object' && result !== null && 'success' in result

/** @param {unknown} result @returns {Outcome} */
const byBranch = (result) => ({ status: isSuccess(result) ? 'completed' : 'failed' })

export class PermissionFlow {
  /**
   * @param {object} o
   * @param {string} o.sessionId
   * @param {() => AgentContext} o.client
   * @param {UpdateRelay} o.relay
   * @param {() => NativeSession} o.cards  the addon's session, which owns the cards
   * @param {TurnControl} o.turn
   * @param {import('./log.mjs').Logger} o.log
   */
  constructor({ sessionId, client, relay, cards, turn, log }) {
    this.sessionId = sessionId
    this.client = client
    this.relay = relay
    this.cards = cards
    this.turn = turn
    this.log = log
    /** "Always allow" rules (see `ruleKey`). */
    this.rules = /** @type {Set<string>} */ (new Set())
  }

  /**
   * Whether an "Always allow" rule covers `key` (see `ruleKey`), without asking.
   * @param {string} key
   */
  allows(key) {
    return this.rules.has(key)
  }

  /**
   * The card a request is about, once the client shows it in this turn: the server's tool
   * call, or one this flow opens (Cursor sometimes sends an exec without its tool call).
   * Null when the turn was cancelled or ended meanwhile.
   * @param {CardRequest} request
   * @returns {Promise<CardRef | null>}
   */
  async card({ toolCallId, ownKey, card }) {
    const turn = this.relay.turn
    if (toolCallId) {
      const id = await this.cards().cardAnnounced(toolCallId, ANNOUNCE_WAIT_MS)
      if (id) return { id, local: toolCallId, own: false, turn }
    }
    if (turn.cancelled || turn.over) return null
    const local = `agent-${ownKey}`
    const id = await this.cards().openCard(local, { status: 'pending', ...card })
    return id ? { id, local, own: true, turn } : null
  }

  /**
   * Ends a card of this flow's own (the server settles its cards itself).
   * @param {CardRef} ref
   * @param {Outcome} outcome
   */
  settle(ref, outcome) {
    if (ref.own && ref.turn === this.relay.turn) this.cards().settleCard(ref.local, outcome)
  }

  /**
   * Asks the user about one call, unless an "always allow" rule covers it. Either way the
   * client shows the call's card before anything about it happens.
   * @param {CardRequest & { key: string }} request
   * @returns {Promise<Decision>}
   */
  async permit(request) {
    const ref = await this.card(request)
    if (!ref) return { outcome: 'cancelled' }
    const outcome = request.outcome ?? byBranch
    /** @type {Decision} */
    const allowed = { outcome: 'allow', finish: (result) => this.settle(ref, outcome(result)) }
    if (this.rules.has(request.key)) return allowed
    const chosen = await this.ask(ref, request.card, PERMISSION_OPTIONS)
    if (!chosen || ref.turn.cancelled) {
      this.settle(ref, { status: 'failed', content: [textContent('Cancelled by the user.')] })
      return { outcome: 'cancelled' }
    }
    if (chosen === 'allow-always') this.rules.add(request.key)
    if (chosen === 'allow-always' || chosen === 'allow-once') return allowed
    // The server's card too: the user's rejection is what the client shows of it.
    if (ref.turn === this.relay.turn) this.cards().settleCard(ref.local, { status: 'failed', content: [textContent('Rejected by the user')] })
    return { outcome: 'reject' }
  }

  /**
   * Runs `run` if the user allows it; otherwise answers with `rejected(reason)`.
   * @template R
   * @param {CardRequest & { key: string }} request
   * @param {() => Promise<R>} run
   * @param {(reason: string) => R} rejected
   * @returns {Promise<R>}
   */
  async runIfAllowed(request, run, rejected) {
    const decision = await this.permit(request)
    if (decision.outcome !== 'allow') return rejected(decision.outcome === 'cancelled' ? CANCELLED_BY_USER : REJECTED_BY_USER)
    const result = await run()
    decision.finish(result)
    return result
  }

  /**
   * A choice between options of the caller's own ("switch mode?", "implement the plan?"), at
   * most one of each kind, on a card; resolves the chosen optionId, or null when the request
   * was cancelled.
   * @param {CardRequest} request
   * @param {PermissionOption[]} options
   * @returns {Promise<string | null>}
   */
  async choose(request, options) {
    const ref = await this.card(request)
    if (!ref) return null
    const chosen = await this.ask(ref, request.card, options)
    const kind = options.find((o) => o.optionId === chosen)?.kind
    this.settle(ref, { status: kind?.startsWith('allow') ? 'completed' : 'failed' })
    return ref.turn.cancelled ? null : chosen
  }

  /**
   * One `session/request_permission` about a card: the chosen optionId, or null when the
   * request was cancelled or failed — which cancels the turn.
   * @param {CardRef} ref
   * @param {Card} card
   * @param {PermissionOption[]} options
   * @returns {Promise<string | null>}
   */
  async ask(ref, card, options) {
    let response
    try {
      response = await this.client().request(
        'session/request_permission',
        { sessionId: this.sessionId, toolCall: { ...card, toolCallId: ref.id, status: 'pending' }, options },
        { cancellationSignal: ref.turn.signal, stopWaitingOnCancel: true },
      )
    } catch (e) {
      if (!ref.turn.cancelled) this.log.warn('permission request failed:', e)
    }
    const outcome = response?.outcome
    const chosen = outcome?.outcome === 'selected' ? outcome.optionId : null
    if (!chosen && !ref.turn.over) this.turn.cancel()
    return chosen
  }
}
