// @ts-check
// The permission policy of one session. The addon's built-in tools ask it (`decide`) before a
// call that changes things (edit, delete, execute, fetch, MCP), about a card the core already
// shows, and for the server's allowlist prechecks; some interaction queries ask it too
// (`permit`, `choose`), about a card the client already shows in this turn — the server's own
// once the addon says it is out, or else one this flow opens through the addon and settles
// (the addon fails it at turn end if nothing settled it). Allow / Always allow / Reject (one
// option of each kind: clients that key options by kind keep them all); "always allow" is
// remembered for the workspace (always-allowed.mjs), keyed by what ACP names: the card's kind,
// a shell's program, an MCP server's tool. Before a question come the user's Cursor rules
// (permission-rules.mjs; deny wins) and the session's approval mode (ask / edits / full).
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
/** @typedef {import('../index.js').PermissionRequest} PermissionRequest */
/** @typedef {import('../index.js').PermissionAnswer} PermissionAnswer */

import { verdict } from './permission-rules.mjs'
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

/**
 * The rules a call needs, all of them, to run without a question: every program of a shell
 * command, an MCP server's tool, else the card's kind (`edit`, `delete`, `fetch`).
 * @param {PermissionRequest} request
 * @returns {string[]}
 */
export function rulesFor(request) {
  if (request.mcpServer !== undefined) return [`mcp:${request.mcpServer}:${request.mcpTool ?? ''}`]
  if (request.kind !== 'execute') return [request.kind]
  const programs = request.programs.filter((p) => p.trim() !== '')
  if (programs.length > 0) return programs.map((p) => ruleKey('execute', p))
  return request.command?.trim() ? [ruleKey('execute', request.command)] : []
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
   * @param {() => string} [o.mode]  the session's mode now: prechecks allow nothing outside agent mode
   * @param {() => string} [o.approval]  the session's approval mode: `ask`, `edits` (edits run
   *   without a question) or `full` (everything does)
   * @param {import('./permission-rules.mjs').RuleSet} [o.cursorRules]  the user's Cursor rules
   * @param {{ store: import('./always-allowed.mjs').AlwaysAllowed, workspace: string } | null} [o.remembered]
   *   where "Always allow" answers are kept across sessions
   * @param {import('./log.mjs').Logger} o.log
   */
  constructor({ sessionId, client, relay, cards, turn, mode = () => 'agent', approval = () => 'ask', cursorRules = { allow: [], deny: [] }, remembered = null, log }) {
    this.sessionId = sessionId
    this.client = client
    this.relay = relay
    this.cards = cards
    this.turn = turn
    this.mode = mode
    this.approval = approval
    this.cursorRules = cursorRules
    this.remembered = remembered
    this.log = log
    /** "Always allow" rules (see `ruleKey`): the workspace's remembered ones, then this session's. */
    this.rules = /** @type {Set<string>} */ (new Set(remembered?.store.of(remembered.workspace) ?? []))
  }

  /**
   * Adds "Always allow" rules, remembered for the workspace when the agent keeps them.
   * @param {string[]} rules
   */
  allowAlways(rules) {
    for (const r of rules) this.rules.add(r)
    if (!this.remembered) return
    try {
      this.remembered.store.add(this.remembered.workspace, rules)
    } catch (e) {
      this.log.warn('could not remember the "Always allow" answer for the workspace:', e)
    }
  }

  /**
   * Whether an "Always allow" rule covers `key` (see `ruleKey`), without asking.
   * @param {string} key
   */
  allows(key) {
    return this.rules.has(key)
  }

  /**
   * The policy's answer about one call of the built-in tools (the addon's `permission`
   * callback): allowed at once when "Always allow" rules cover it; for a precheck
   * (`mayAsk: false`) never a question (and, but for fetches, nothing outside agent mode);
   * else the user is asked about the card the core shows. No answer cancels the turn.
   * @param {PermissionRequest} request
   * @param {AbortSignal} [signal]  the exec's: aborted with the turn or by the server
   * @returns {Promise<PermissionAnswer>}
   */
  async decide(request, signal) {
    // The user's Cursor rules first: a deny rule refuses, whatever else allows.
    const ruled = verdict(this.cursorRules, request)
    if (ruled?.outcome === 'deny') {
      return { outcome: 'reject', reason: `Denied by the permission rule ${ruled.rule.text} in ${ruled.rule.source}` }
    }
    const rules = rulesFor(request)
    const approval = this.approval()
    const free = approval === 'full' || (approval === 'edits' && request.kind === 'edit')
    const covered = ruled?.outcome === 'allow' || (rules.length > 0 && rules.every((r) => this.rules.has(r)))
    if (!request.mayAsk) return (covered || free) && (request.kind === 'fetch' || this.mode() === 'agent') ? 'allow' : 'reject'
    if (covered || free) return 'allow'
    const turn = this.relay.turn
    if (turn.cancelled || turn.over) return 'cancelled'
    await this.relay.queued()
    const chosen = await this.request(request.toolCall, PERMISSION_OPTIONS, signal ? AbortSignal.any([turn.signal, signal]) : turn.signal, turn)
    if (!chosen || turn.cancelled) return 'cancelled'
    if (chosen === 'allow-always') this.allowAlways(rules)
    return chosen === 'reject-once' ? 'reject' : 'allow'
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
    if (chosen === 'allow-always') this.allowAlways([request.key])
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
  ask(ref, card, options) {
    return this.request({ ...card, toolCallId: ref.id, status: 'pending' }, options, ref.turn.signal, ref.turn)
  }

  /**
   * One `session/request_permission` about `toolCall`, withdrawn when `signal` aborts.
   * @param {PermissionRequest['toolCall']} toolCall
   * @param {PermissionOption[]} options
   * @param {AbortSignal} signal
   * @param {TurnScope} turn  the turn it belongs to (no answer cancels it)
   * @returns {Promise<string | null>}
   */
  async request(toolCall, options, signal, turn) {
    let response
    try {
      response = await this.client().request(
        'session/request_permission',
        { sessionId: this.sessionId, toolCall: /** @type {import('@agentclientprotocol/sdk').ToolCallUpdate} */ (toolCall), options },
        { cancellationSignal: signal, stopWaitingOnCancel: true },
      )
    } catch (e) {
      if (!turn.cancelled && !signal.aborted) this.log.warn('permission request failed:', e)
    }
    const outcome = response?.outcome
    const chosen = outcome?.outcome === 'selected' ? outcome.optionId : null
    // The user dismissed it (or the client failed): stop the turn. A question withdrawn
    // because its exec was aborted or the turn cancelled stops nothing more.
    if (!chosen && !turn.over && !signal.aborted) this.turn.cancel()
    return chosen
  }
}
