// @ts-check
// The server's questions for the user, asked the way the client can (the addon's
// `askQuestions` hook; the core decides when, and answers the server): one
// `elicitation/create` form when the client offers forms (a select per question, a
// multi-select where several answers are allowed; declining declines, cancelling also stops the
// turn), else the questions in the conversation for the user's next prompt. A question's
// answers are never permission options: clients that keep one option of each kind would show
// one of them.

/** @typedef {import('@agentclientprotocol/sdk').AgentContext} AgentContext */
/** @typedef {import('@agentclientprotocol/sdk').ClientCapabilities} ClientCapabilities */
/** @typedef {import('@agentclientprotocol/sdk').CreateElicitationRequest} CreateElicitationRequest */
/** @typedef {import('@agentclientprotocol/sdk').ElicitationPropertySchema} ElicitationPropertySchema */
/** @typedef {import('../index.js').QuestionsRequest} QuestionsRequest */
/** @typedef {import('../index.js').QuestionsAnswer} QuestionsAnswer */

/**
 * The addon's `askQuestions` hook for one session.
 * @param {object} o
 * @param {string} o.sessionId
 * @param {() => AgentContext} o.client
 * @param {() => ClientCapabilities} o.capabilities
 * @param {import('./update-relay.mjs').UpdateRelay} o.relay
 * @param {import('./permissions.mjs').TurnControl} o.turn  stops the running turn
 * @param {import('./log.mjs').Logger} o.log
 * @returns {(request: QuestionsRequest) => Promise<QuestionsAnswer>}
 */
export function questionAsker({ sessionId, client, capabilities, relay, turn, log }) {
  return async (request) => {
    const questions = request.questions ?? []
    const scope = relay.turn
    if (scope.cancelled) return 'cancelled'
    if (capabilities().elicitation?.form == null) {
      const lines = questions.map((question, i) => {
        const answers = (question.options ?? []).map((o) => o.label ?? o.id).filter(Boolean)
        const choice = answers.length ? ` (${question.allowMultiple ? 'any of' : 'one of'}: ${answers.join(', ')})` : ''
        return `${i + 1}. ${question.prompt ?? ''}${choice}`
      })
      await relay.send({
        sessionUpdate: 'agent_message_chunk',
        content: { type: 'text', text: `\n\n**${request.title || 'The agent has questions'}** — please answer in your next message:\n${lines.join('\n')}\n` },
      })
      return 'inConversation'
    }
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
      sessionId,
      message: request.title || 'The agent has a question',
      requestedSchema: { type: 'object', properties, required: questions.map((q) => asSent(q.id)) },
    }
    if (request.toolCallId) params.toolCallId = request.toolCallId
    await relay.queued()
    let response
    try {
      response = await client().request('elicitation/create', params, { cancellationSignal: scope.signal, stopWaitingOnCancel: true })
    } catch (e) {
      if (!scope.cancelled) log.warn('elicitation failed:', e)
    }
    if (response?.action === 'accept') {
      const content = /** @type {Record<string, unknown>} */ (response.content ?? {})
      /** @type {Record<string, string[]>} */
      const answers = {}
      for (const q of questions) {
        const value = content[String(q.id)]
        answers[String(q.id)] = Array.isArray(value) ? value.map(String) : value == null ? [] : [String(value)]
      }
      return { outcome: 'answered', answers }
    }
    if (response?.action === 'decline') return 'declined'
    if (!scope.over) turn.cancel()
    return 'cancelled'
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
