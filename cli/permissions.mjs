// @ts-check
// The permission flow of one session. Tools that change things (edit, delete, execute, fetch,
// MCP) and some interaction queries ask the user first: one `session/request_permission` per
// call, about a tool call card the client knows — the server's own once it has reached the
// client, or else one this flow announces itself and settles when the tool has run. Allow /
// Always allow / Reject; "always allow" is remembered for the session (shells by their
// program, everything else by tool). A request the client cancels, or one that fails, means
// "stop": it cancels the turn rather than denying and going on.
/** @typedef {import('@agentclientprotocol/sdk').AgentContext} AgentContext */
/** @typedef {import('@agentclientprotocol/sdk').PermissionOption} PermissionOption */
/** @typedef {import('@agentclientprotocol/sdk').ToolCallStatus} ToolCallStatus */
/** @typedef {import('@agentclientprotocol/sdk').ToolCall} ToolCall */
/** @typedef {import('@agentclientprotocol/sdk').ToolCallUpdate} ToolCallUpdate */
/** @typedef {import('./update-relay.mjs').UpdateRelay} UpdateRelay */

/**
 * What a permission request shows: the tool call's title, kind, input and content (a diff, a
 * plan), as the card it is attached to.
 * @typedef {Pick<ToolCall, 'title' | 'kind' | 'rawInput' | 'content' | 'locations'>} Card
 */

/**
 * The running turn, as the permission flow needs it.
 * @typedef {object} TurnControl
 * @property {() => AbortSignal} cancellation  aborted once the running (or last) turn is cancelled
 * @property {() => void} cancel  cancels the running turn, as `session/cancel` does
 */

/**
 * What the user decided. `finish` settles the card this flow announced, once the tool has run.
 * @typedef {{ outcome: 'allow', finish: (result: unknown) => Promise<void> } | { outcome: 'reject' } | { outcome: 'cancelled' }} Decision
 */

/** @type {PermissionOption[]} */
export const PERMISSION_OPTIONS = [
  { optionId: 'allow-once', name: 'Allow', kind: 'allow_once' },
  { optionId: 'allow-always', name: 'Always allow', kind: 'allow_always' },
  { optionId: 'reject-once', name: 'Reject', kind: 'reject_once' },
]

/** How long a permission request waits for its tool call to reach the client before announcing its own. */
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

export class PermissionFlow {
  /**
   * @param {object} o
   * @param {string} o.sessionId
   * @param {() => AgentContext} o.client
   * @param {UpdateRelay} o.relay
   * @param {TurnControl} o.turn
   * @param {import('./log.mjs').Logger} o.log
   */
  constructor({ sessionId, client, relay, turn, log }) {
    this.sessionId = sessionId
    this.client = client
    this.relay = relay
    this.turn = turn
    this.log = log
    /** "Always allow" rules (see `ruleKey`). */
    this.rules = /** @type {Set<string>} */ (new Set())
    /** Cards this flow announced itself and has not settled yet. */
    this.ownCards = /** @type {Set<string>} */ (new Set())
  }

  /**
   * Whether an "Always allow" rule covers `key` (see `ruleKey`), without asking.
   * @param {string} key
   */
  allows(key) {
    return this.rules.has(key)
  }

  /**
   * The card a request is about: the server's tool call, once the client has it, or one this
   * flow announces (Cursor sometimes sends an exec without its tool call).
   * @param {string | undefined} toolCallId
   * @param {string} fallbackKey  names the card of our own when there is no tool call
   * @param {Card} card
   * @returns {Promise<{ id: string, own: boolean }>}
   */
  async cardFor(toolCallId, fallbackKey, card) {
    if (toolCallId && (await this.relay.waitForAnnouncement(toolCallId, ANNOUNCE_WAIT_MS))) return { id: toolCallId, own: false }
    const id = `exec-${fallbackKey || toolCallId || Date.now()}`
    await this.relay.send({ sessionUpdate: 'tool_call', toolCallId: id, status: 'pending', ...card })
    this.ownCards.add(id)
    return { id, own: true }
  }

  /**
   * Asks the user about one call, unless an "always allow" rule covers it.
   * @param {{ toolCallId?: string, execId: string, key: string, card: Card }} request
   * @returns {Promise<Decision>}
   */
  async permit({ toolCallId, execId, key, card }) {
    if (this.rules.has(key)) return { outcome: 'allow', finish: async () => {} }
    if (this.turn.cancellation().aborted) return { outcome: 'cancelled' }
    const { id, own } = await this.cardFor(toolCallId, execId, card)
    /** @param {ToolCallStatus} status @param {Partial<ToolCallUpdate>} [extra] */
    const settle = async (status, extra = {}) => {
      if (!own || !this.ownCards.has(id)) return
      this.ownCards.delete(id)
      await this.relay.send({ sessionUpdate: 'tool_call_update', toolCallId: id, status, ...extra })
    }
    const chosen = await this.ask(id, card, PERMISSION_OPTIONS)
    if (!chosen || this.turn.cancellation().aborted) {
      await settle('failed')
      return { outcome: 'cancelled' }
    }
    if (chosen === 'allow-always') this.rules.add(key)
    if (chosen === 'allow-always' || chosen === 'allow-once') {
      return { outcome: 'allow', finish: (result) => settle(isSuccess(result) ? 'completed' : 'failed') }
    }
    await this.relay.send({ sessionUpdate: 'tool_call_update', toolCallId: id, status: 'failed', content: [textContent('Rejected by the user')] })
    this.ownCards.delete(id)
    return { outcome: 'reject' }
  }

  /**
   * Runs `run` if the user allows it; otherwise answers with `rejected(reason)`.
   * @template R
   * @param {{ toolCallId?: string, execId: string, key: string, card: Card }} request
   * @param {() => Promise<R>} run
   * @param {(reason: string) => R} rejected
   * @returns {Promise<R>}
   */
  async runIfAllowed(request, run, rejected) {
    const decision = await this.permit(request)
    if (decision.outcome !== 'allow') return rejected(decision.outcome === 'cancelled' ? CANCELLED_BY_USER : REJECTED_BY_USER)
    const result = await run()
    await decision.finish(result)
    return result
  }

  /**
   * A choice between options of the caller's own (answers to a question, "switch mode?") on a
   * card; resolves the chosen optionId, or null when the request was cancelled.
   * @param {string | undefined} toolCallId
   * @param {string} fallbackKey
   * @param {Card} card
   * @param {PermissionOption[]} options
   * @returns {Promise<string | null>}
   */
  async choose(toolCallId, fallbackKey, card, options) {
    const { id, own } = await this.cardFor(toolCallId, fallbackKey, card)
    const chosen = await this.ask(id, card, options)
    if (own) {
      this.ownCards.delete(id)
      const kind = options.find((o) => o.optionId === chosen)?.kind ?? 'reject_once'
      await this.relay.send({ sessionUpdate: 'tool_call_update', toolCallId: id, status: kind.startsWith('allow') ? 'completed' : 'failed' })
    }
    return chosen
  }

  /**
   * One `session/request_permission` about card `id`: the chosen optionId, or null when the
   * request was cancelled or failed — which cancels the turn.
   * @param {string} id
   * @param {Card} card
   * @param {PermissionOption[]} options
   * @returns {Promise<string | null>}
   */
  async ask(id, card, options) {
    let response
    try {
      response = await this.client().request(
        'session/request_permission',
        { sessionId: this.sessionId, toolCall: { toolCallId: id, status: 'pending', ...card }, options },
        { cancellationSignal: this.turn.cancellation() },
      )
    } catch (e) {
      this.log.warn('permission request failed:', e)
    }
    const outcome = response?.outcome
    const chosen = outcome?.outcome === 'selected' ? outcome.optionId : null
    if (!chosen) this.turn.cancel()
    return chosen
  }

  /** Cards this flow announced and nothing settled end `failed` before the turn does. */
  async settleOwnCards() {
    for (const id of this.ownCards) {
      await this.relay.send({ sessionUpdate: 'tool_call_update', toolCallId: id, status: 'failed' }).catch(() => {})
    }
    this.ownCards.clear()
  }
}

/** @param {unknown} result */
function isSuccess(result) {
  return typeof result === 'object' && result !== null && 'success' in result
}
