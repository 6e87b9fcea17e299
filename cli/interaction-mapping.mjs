// @ts-check
// The server's interaction queries, answered for one session: web search and fetch approvals
// and mode switches are permission prompts; a plan asks whether to implement it (and switches
// to agent mode when it is accepted); questions become `elicitation/create` forms when the
// client offers them, else a message asking the user to answer in their next prompt, with a
// clear rejection to the server (a question's answers are never permission options: clients
// that keep one option of each kind would show one of them). Image generation is a permission
// prompt. Anything else gets the addon's explicit rejection. The cards come from the core's one
// card source (`describeInteraction`).
import { loadAddon } from './addon.mjs'
import { CANCELLED_BY_USER, REJECTED_BY_USER } from './permissions.mjs'
import { isMode } from './session-config.mjs'

/** @typedef {import('@agentclientprotocol/sdk').AgentContext} AgentContext */
/** @typedef {import('@agentclientprotocol/sdk').ClientCapabilities} ClientCapabilities */
/** @typedef {import('@agentclientprotocol/sdk').CreateElicitationRequest} CreateElicitationRequest */
/** @typedef {import('@agentclientprotocol/sdk').ElicitationPropertySchema} ElicitationPropertySchema */
/** @typedef {import('../index.js').InteractionQuery} InteractionQuery */
/** @typedef {import('../index.js').InteractionAnswer} InteractionAnswer */
/** @typedef {import('../index.js').agent.AskQuestionInteractionQuery} AskQuestionQuery */
/** @typedef {import('../index.js').agent.AskQuestionInteractionResponse} AskQuestionResponse */
/** @typedef {import('../index.js').agent.CreatePlanRequestResponse} CreatePlanResponse */
/** @typedef {import('../index.js').agent.SwitchModeRequestResponse} SwitchModeResponse */
/** @typedef {import('./permissions.mjs').PermissionFlow} PermissionFlow */
/** @typedef {import('./permissions.mjs').CardRequest} CardRequest */
/** @typedef {import('./update-relay.mjs').UpdateRelay} UpdateRelay */
/** @template {InteractionQuery['kind']} K @typedef {Extract<InteractionQuery, { kind: K }>} QueryOf */

/** How long a form waits for its question's card to reach the client before going without it. */
const CARD_WAIT_MS = 500

/**
 * The session's mode, as interaction queries read and change it.
 * @typedef {object} ModeControl
 * @property {() => string} current
 * @property {(modeId: string) => Promise<void>} switchTo  sets the mode and tells the client
 */

export class InteractionMapping {
  /**
   * @param {object} o
   * @param {string} o.sessionId
   * @param {string} o.cwd
   * @param {() => AgentContext} o.client
   * @param {() => ClientCapabilities} o.capabilities
   * @param {UpdateRelay} o.relay
   * @param {PermissionFlow} o.permissions
   * @param {ModeControl} o.mode
   * @param {import('./log.mjs').Logger} o.log
   */
  constructor({ sessionId, cwd, client, capabilities, relay, permissions, mode, log }) {
    this.sessionId = sessionId
    this.cwd = cwd
    this.client = client
    this.capabilities = capabilities
    this.relay = relay
    this.permissions = permissions
    this.mode = mode
    this.log = log
  }

  /**
   * The `interaction` callback: the answer, or null for the addon's explicit rejection.
   * @param {InteractionQuery} q
   * @returns {Promise<InteractionAnswer | null>}
   */
  async answer(q) {
    switch (q.kind) {
      case 'webSearch':
        return this.approval(this.about(q, q.query?.args?.toolCallId), 'web_search')
      case 'webFetch':
        if (q.query?.skipApproval) return { approved: {} }
        return this.approval(this.about(q, q.query?.args?.toolCallId), 'fetch')
      case 'switchMode':
        return this.switchMode(q)
      case 'createPlan':
        return this.createPlan(q)
      case 'askQuestion':
        return this.askQuestion(q)
      case 'generateImage': {
        const answer = await this.approval(this.about(q, q.query?.toolCallId), 'generate_image')
        return 'approved' in answer ? { approved: { description: q.query?.args?.description ?? '' } } : answer
      }
      default:
        // Setup VM, PR management, MCP auth, SCM connection, environments: this agent cannot
        // do them, so the addon's explicit rejection says so.
        return null
    }
  }

  /**
   * What a request about this query is about: the server's card for it, else one of its own.
   * @param {InteractionQuery} q
   * @param {string | undefined} toolCallId
   * @returns {CardRequest}
   */
  about(q, toolCallId) {
    const card = loadAddon().describeInteraction(q, { cwd: this.cwd })
    return { toolCallId: toolCallId || undefined, ownKey: `${q.kind}-${q.id}`, card }
  }

  /**
   * @param {CardRequest} about
   * @param {string} key
   * @returns {Promise<{ approved: {} } | { rejected: { reason: string } }>}
   */
  async approval(about, key) {
    const decision = await this.permissions.permit({ ...about, key })
    if (decision.outcome === 'allow') {
      decision.finish({ success: {} })
      return { approved: {} }
    }
    return { rejected: { reason: decision.outcome === 'cancelled' ? CANCELLED_BY_USER : REJECTED_BY_USER } }
  }

  /**
   * @param {QueryOf<'switchMode'>} q
   * @returns {Promise<SwitchModeResponse>}
   */
  async switchMode(q) {
    const args = q.query?.args ?? {}
    const target = args.targetModeId ?? ''
    if (!isMode(target)) return { rejected: { reason: `unknown mode ${target}` } }
    const chosen = await this.permissions.choose(this.about(q, args.toolCallId), [
      { optionId: 'switch', name: `Yes, switch to ${target}`, kind: 'allow_once' },
      { optionId: 'stay', name: `No, stay in ${this.mode.current()}`, kind: 'reject_once' },
    ])
    if (chosen !== 'switch') return { rejected: { reason: chosen ? 'The user chose to stay in the current mode' : CANCELLED_BY_USER } }
    await this.mode.switchTo(target)
    return { approved: {} }
  }

  /**
   * @param {QueryOf<'createPlan'>} q
   * @returns {Promise<CreatePlanResponse>}
   */
  async createPlan(q) {
    const chosen = await this.permissions.choose(this.about(q, q.query?.toolCallId), [
      { optionId: 'implement', name: 'Yes, implement this plan', kind: 'allow_once' },
      { optionId: 'keep-planning', name: 'No, keep planning', kind: 'reject_once' },
    ])
    if (chosen !== 'implement') {
      return { result: { error: { error: chosen ? 'The user chose to keep planning' : CANCELLED_BY_USER } } }
    }
    if (this.mode.current() !== 'agent') await this.mode.switchTo('agent')
    return { result: { success: {} } }
  }

  /**
   * @param {QueryOf<'askQuestion'>} q
   * @returns {Promise<AskQuestionResponse>}
   */
  async askQuestion(q) {
    const query = q.query ?? {}
    const args = query.args ?? {}
    const questions = args.questions ?? []
    /** @param {string} reason @returns {AskQuestionResponse} */
    const reject = (reason) => ({ result: { rejected: { reason } } })
    if (this.capabilities().elicitation?.form != null) return this.askWithForm(query, reject)
    // Without forms: the questions in the thread, answered in the user's next prompt.
    const lines = questions.map((question, i) => {
      const answers = (question.options ?? []).map((o) => o.label ?? o.id).filter(Boolean)
      const choice = answers.length ? ` (${question.allowMultiple ? 'any of' : 'one of'}: ${answers.join(', ')})` : ''
      return `${i + 1}. ${question.prompt ?? ''}${choice}`
    })
    // The host's own words: none once the user cancelled.
    if (this.relay.turn.cancelled) return reject(CANCELLED_BY_USER)
    await this.relay.send({
      sessionUpdate: 'agent_message_chunk',
      content: { type: 'text', text: `\n\n**${args.title || 'The agent has questions'}** — please answer in your next message:\n${lines.join('\n')}\n` },
    })
    return reject('This editor cannot show the questions; the user will answer in the next message')
  }

  /**
   * The questions as one `elicitation/create` form: a select per question (multi-select when
   * it allows several answers). Declining rejects the question; cancelling also stops the turn.
   * @param {AskQuestionQuery} query
   * @param {(reason: string) => AskQuestionResponse} reject
   * @returns {Promise<AskQuestionResponse>}
   */
  async askWithForm(query, reject) {
    const args = query.args ?? {}
    const questions = args.questions ?? []
    /** @type {Record<string, ElicitationPropertySchema>} */
    const properties = {}
    for (const q of questions) {
      const choices = (q.options ?? []).map((o) => ({ const: asSent(o.id ?? o.label), title: asSent(o.label ?? o.id) }))
      properties[String(q.id)] = q.allowMultiple
        ? { type: 'array', title: q.prompt, items: { anyOf: choices } }
        : { type: 'string', title: q.prompt, oneOf: choices }
    }
    /** @type {CreateElicitationRequest} */
    const params = {
      mode: 'form',
      sessionId: this.sessionId,
      message: args.title || 'The agent has a question',
      requestedSchema: { type: 'object', properties, required: questions.map((q) => asSent(q.id)) },
    }
    const turn = this.relay.turn
    // The form names its card only once the client shows it, by the id the client knows.
    const cardId = query.toolCallId ? await this.permissions.cards().cardAnnounced(query.toolCallId, CARD_WAIT_MS) : null
    if (cardId) params.toolCallId = cardId
    if (turn.cancelled) return reject(CANCELLED_BY_USER)
    let response
    try {
      response = await this.client().request('elicitation/create', params, { cancellationSignal: turn.signal, stopWaitingOnCancel: true })
    } catch (e) {
      if (!turn.cancelled) this.log.warn('elicitation failed:', e)
    }
    if (response?.action !== 'accept') {
      if (response?.action !== 'decline' && !turn.over) this.permissions.turn.cancel()
      return reject(response?.action === 'decline' ? 'The user declined to answer' : CANCELLED_BY_USER)
    }
    const content = /** @type {Record<string, unknown>} */ (response.content ?? {})
    const answers = questions.map((q) => {
      const value = content[String(q.id)]
      return { questionId: q.id, selectedOptionIds: Array.isArray(value) ? value.map(String) : value == null ? [] : [String(value)] }
    })
    return { result: { success: { answers } } }
  }
}

/**
 * A string field of the server's message, passed on as it came: proto3 JSON leaves empty
 * strings out, and what was left out stays out of the JSON sent on.
 * @param {string | undefined} value
 * @returns {string}
 */
function asSent(value) {
  return /** @type {string} */ (value)
}
