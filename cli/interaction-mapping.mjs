// @ts-check
// The server's interaction queries, answered for one session: web search and fetch approvals
// and mode switches are permission prompts; a plan asks "Implement this plan?" (and switches to
// agent mode when it is accepted); questions become `elicitation/create` forms when the client
// offers them, a permission prompt of the answers for a single-choice question otherwise, and
// else a clear rejection plus a message asking the user to answer in the next prompt. Image
// generation is a permission prompt. Anything else gets the addon's explicit rejection.
import { CANCELLED_BY_USER, REJECTED_BY_USER, textContent } from './permissions.mjs'
import { isMode } from './session-config.mjs'

/** @typedef {import('@agentclientprotocol/sdk').AgentContext} AgentContext */
/** @typedef {import('@agentclientprotocol/sdk').ClientCapabilities} ClientCapabilities */
/** @typedef {import('@agentclientprotocol/sdk').CreateElicitationRequest} CreateElicitationRequest */
/** @typedef {import('@agentclientprotocol/sdk').ElicitationPropertySchema} ElicitationPropertySchema */
/** @typedef {import('@agentclientprotocol/sdk').PermissionOption} PermissionOption */
/** @typedef {import('../index.js').InteractionQuery} InteractionQuery */
/** @typedef {import('../index.js').InteractionAnswer} InteractionAnswer */
/** @typedef {import('../index.js').agent.AskQuestionInteractionQuery} AskQuestionQuery */
/** @typedef {import('../index.js').agent.AskQuestionInteractionResponse} AskQuestionResponse */
/** @typedef {import('../index.js').agent.CreatePlanRequestQuery} CreatePlanQuery */
/** @typedef {import('../index.js').agent.CreatePlanRequestResponse} CreatePlanResponse */
/** @typedef {import('../index.js').agent.SwitchModeArgs} SwitchModeArgs */
/** @typedef {import('../index.js').agent.SwitchModeRequestResponse} SwitchModeResponse */
/** @typedef {import('./permissions.mjs').PermissionFlow} PermissionFlow */
/** @typedef {import('./permissions.mjs').Card} Card */
/** @typedef {import('./permissions.mjs').TurnControl} TurnControl */
/** @typedef {import('./update-relay.mjs').UpdateRelay} UpdateRelay */

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
   * @param {() => AgentContext} o.client
   * @param {() => ClientCapabilities} o.capabilities
   * @param {UpdateRelay} o.relay
   * @param {PermissionFlow} o.permissions
   * @param {TurnControl} o.turn
   * @param {ModeControl} o.mode
   * @param {import('./log.mjs').Logger} o.log
   */
  constructor({ sessionId, client, capabilities, relay, permissions, turn, mode, log }) {
    this.sessionId = sessionId
    this.client = client
    this.capabilities = capabilities
    this.relay = relay
    this.permissions = permissions
    this.turn = turn
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
      case 'webSearch': {
        const args = q.query?.args ?? {}
        const card = { title: `Search web: "${args.searchTerm ?? ''}"`, kind: /** @type {const} */ ('fetch'), rawInput: args }
        return this.approval(args.toolCallId, q.id, 'web_search', card)
      }
      case 'webFetch': {
        if (q.query?.skipApproval) return { approved: {} }
        const args = q.query?.args ?? {}
        const card = { title: `Fetch ${args.url ?? ''}`, kind: /** @type {const} */ ('fetch'), rawInput: args }
        return this.approval(args.toolCallId, q.id, 'fetch', card)
      }
      case 'switchMode':
        return this.switchMode(q.query?.args ?? {}, q.id)
      case 'createPlan':
        return this.createPlan(q.query ?? {}, q.id)
      case 'askQuestion':
        return this.askQuestion(q.query ?? {}, q.id)
      case 'generateImage': {
        // The server makes the image; the user decides whether it may.
        const args = q.query?.args ?? {}
        const card = { title: `Generate image: ${args.description ?? ''}`, kind: /** @type {const} */ ('other'), rawInput: args }
        const answer = await this.approval(q.query?.toolCallId, q.id, 'generate_image', card)
        return 'approved' in answer ? { approved: { description: args.description ?? '' } } : answer
      }
      default:
        // Setup VM, PR management, MCP auth, SCM connection, environments: this agent cannot
        // do them, so the addon's explicit rejection says so.
        return null
    }
  }

  /**
   * @param {string | undefined} toolCallId
   * @param {number} id
   * @param {string} key
   * @param {Card} card
   * @returns {Promise<{ approved: {} } | { rejected: { reason: string } }>}
   */
  async approval(toolCallId, id, key, card) {
    const decision = await this.permissions.permit({ toolCallId, execId: `q${id}`, key, card })
    if (decision.outcome === 'allow') {
      await decision.finish({ success: {} })
      return { approved: {} }
    }
    return { rejected: { reason: decision.outcome === 'cancelled' ? CANCELLED_BY_USER : REJECTED_BY_USER } }
  }

  /**
   * @param {SwitchModeArgs} args
   * @param {number} id
   * @returns {Promise<SwitchModeResponse>}
   */
  async switchMode(args, id) {
    const target = args.targetModeId ?? ''
    if (!isMode(target)) return { rejected: { reason: `unknown mode ${target}` } }
    /** @type {Card} */
    const card = { title: `Switch to ${target} mode`, kind: 'switch_mode', rawInput: args, content: args.explanation ? [textContent(args.explanation)] : [] }
    const chosen = await this.permissions.choose(args.toolCallId, `mode-${id}`, card, [
      { optionId: 'switch', name: `Yes, switch to ${target}`, kind: 'allow_once' },
      { optionId: 'stay', name: `No, stay in ${this.mode.current()}`, kind: 'reject_once' },
    ])
    if (chosen !== 'switch') return { rejected: { reason: chosen ? 'The user chose to stay in the current mode' : CANCELLED_BY_USER } }
    await this.mode.switchTo(target)
    return { approved: {} }
  }

  /**
   * @param {CreatePlanQuery} query
   * @param {number} id
   * @returns {Promise<CreatePlanResponse>}
   */
  async createPlan(query, id) {
    const args = query.args ?? {}
    /** @type {Card} */
    const card = {
      title: `Plan: ${args.name ?? 'untitled'}`,
      kind: 'think',
      rawInput: { name: args.name, overview: args.overview },
      content: args.plan ? [textContent(args.plan)] : [],
    }
    const chosen = await this.permissions.choose(query.toolCallId, `plan-${id}`, card, [
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
   * @param {AskQuestionQuery} query
   * @param {number} id
   * @returns {Promise<AskQuestionResponse>}
   */
  async askQuestion(query, id) {
    const args = query.args ?? {}
    const questions = args.questions ?? []
    /** @param {string} reason @returns {AskQuestionResponse} */
    const reject = (reason) => ({ result: { rejected: { reason } } })
    if (this.capabilities().elicitation?.form != null) return this.askWithForm(query, reject)
    // Without forms (Zed today): one single-choice question becomes a permission prompt of its answers.
    const only = questions[0]
    const choices = only?.options ?? []
    if (questions.length === 1 && !only.allowMultiple && choices.length > 0) {
      /** @type {PermissionOption[]} */
      const options = choices.map((o, i) => ({ optionId: `answer-${i}`, name: asSent(o.label ?? o.id), kind: 'allow_once' }))
      options.push({ optionId: 'skip', name: 'Skip', kind: 'reject_once' })
      const card = { title: only.prompt || args.title || 'Question', kind: /** @type {const} */ ('other'), rawInput: args }
      const chosen = await this.permissions.choose(query.toolCallId, `question-${id}`, card, options)
      if (!chosen || chosen === 'skip') return reject(chosen ? 'The user skipped the question' : CANCELLED_BY_USER)
      const option = choices[Number(chosen.slice('answer-'.length))]
      return { result: { success: { answers: [{ questionId: only.id, selectedOptionIds: [asSent(option.id ?? option.label)] }] } } }
    }
    await this.relay.send({
      sessionUpdate: 'agent_message_chunk',
      content: { type: 'text', text: `\n\n${args.title ?? 'The agent asked questions'} — this editor cannot show the form; please answer in your next message:\n${questions.map((q) => `- ${q.prompt}`).join('\n')}\n` },
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
    if (query.toolCallId && this.relay.announcedToClient(query.toolCallId)) params.toolCallId = query.toolCallId
    let response
    try {
      response = await this.client().request('elicitation/create', params, { cancellationSignal: this.turn.cancellation() })
    } catch (e) {
      this.log.warn('elicitation failed:', e)
    }
    if (response?.action !== 'accept') {
      if (response?.action !== 'decline') this.turn.cancel()
      return reject('The user declined to answer')
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
