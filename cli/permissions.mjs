// @ts-check
// The permission policy of one session. The addon's core asks it (`decide`) before a call of
// its built-in tools that changes things (edit, delete, execute, fetch, MCP) and before the
// server's approvals (web search, fetch, image generation), about a card the core already
// shows, and for the server's allowlist prechecks; a choice the core asks for (switch modes?
// implement the plan?) goes through `chooseFor`. Allow / Always allow / Reject (one
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




/** @type {PermissionOption[]} */
export const PERMISSION_OPTIONS = [
  { optionId: 'allow-once', name: 'Allow', kind: 'allow_once' },
  { optionId: 'allow-always', name: 'Always allow', kind: 'allow_always' },
  { optionId: 'reject-once', name: 'Reject', kind: 'reject_once' },
]


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



export class PermissionFlow {
  /**
   * @param {object} o
   * @param {string} o.sessionId
   * @param {() => AgentContext} o.client
   * @param {UpdateRelay} o.relay
   * @param {TurnControl} o.turn
   * @param {() => string} [o.mode]  the session's mode now: prechecks allow nothing outside agent mode
   * @param {() => string} [o.approval]  the session's approval mode: `ask`, `edits` (edits run
   *   without a question) or `full` (everything does)
   * @param {import('./permission-rules.mjs').RuleSet} [o.cursorRules]  the user's Cursor rules
   * @param {{ store: import('./always-allowed.mjs').AlwaysAllowed, workspace: string } | null} [o.remembered]
   *   where "Always allow" answers are kept across sessions
   * @param {import('./log.mjs').Logger} o.log
   */
  constructor({ sessionId, client, relay, turn, mode = () => 'agent', approval = () => 'ask', cursorRules = { allow: [], deny: [] }, remembered = null, log }) {
    this.sessionId = sessionId
    this.client = client
    this.relay = relay
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
    const chosen = await this.ask(request.toolCall, PERMISSION_OPTIONS, signal)
    if (!chosen) return 'cancelled'
    if (chosen === 'allow-always') this.allowAlways(rules)
    return chosen === 'reject-once' ? 'reject' : 'allow'
  }

  /**
   * A choice the core asks for (the addon's `choose` hook: switch modes? implement the plan?),
   * about a card the client already shows; the chosen optionId, or null when the user dismissed
   * it (which stops the turn).
   * @param {import('../index.js').ChoiceRequest} request
   * @param {AbortSignal} [signal]
   * @returns {Promise<string | null>}
   */
  chooseFor(request, signal) {
    /** @type {PermissionOption[]} */
    const options = request.options.map(({ optionId, name, kind }) => ({ optionId, name, kind }))
    return this.ask(request.toolCall, options, signal)
  }

  /**
   * One `session/request_permission` in the running turn about `toolCall`, once the updates
   * handed out so far (the card among them) are queued; withdrawn when the turn is cancelled
   * or `signal` aborts. The chosen optionId, or null: no turn runs, it was cancelled, or the
   * user dismissed the question, which stops the turn (a question withdrawn because its exec
   * was aborted stops nothing more).
   * @param {PermissionRequest['toolCall']} toolCall
   * @param {PermissionOption[]} options
   * @param {AbortSignal} [signal]
   * @returns {Promise<string | null>}
   */
  async ask(toolCall, options, signal) {
    const turn = this.relay.turn
    if (turn.cancelled || turn.over) return null
    await this.relay.queued()
    const withdrawn = signal ? AbortSignal.any([turn.signal, signal]) : turn.signal
    const chosen = await askClient({ client: this.client, sessionId: this.sessionId, toolCall, options, signal: withdrawn, log: this.log })
    if (!chosen && !turn.over && !withdrawn.aborted) this.turn.cancel()
    return turn.cancelled ? null : chosen
  }
}

/**
 * One `session/request_permission` to the client: the chosen optionId, or null when the user
 * dismissed it, the client failed (a warning, unless `signal` withdrew it) or it was withdrawn.
 * @param {object} o
 * @param {() => AgentContext} o.client
 * @param {string} o.sessionId
 * @param {PermissionRequest['toolCall']} o.toolCall
 * @param {PermissionOption[]} o.options
 * @param {AbortSignal} o.signal  withdraws the request (`$/cancel_request`) and stops waiting
 * @param {import('./log.mjs').Logger} o.log
 * @returns {Promise<string | null>}
 */
export async function askClient({ client, sessionId, toolCall, options, signal, log }) {
  let response
  try {
    response = await client().request(
      'session/request_permission',
      { sessionId, toolCall: /** @type {import('@agentclientprotocol/sdk').ToolCallUpdate} */ (toolCall), options },
      { cancellationSignal: signal, stopWaitingOnCancel: true },
    )
  } catch (e) {
    if (!signal.aborted) log.warn('permission request failed:', e)
  }
  const outcome = response?.outcome
  return outcome?.outcome === 'selected' ? outcome.optionId : null
}
