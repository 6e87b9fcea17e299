// @ts-check
// A session's `session/update` notifications to the client, and which tool calls the client
// has been told of: a permission request or a form is attached to a tool call the client knows,
// and the server's tool call may reach the client a moment after the exec that belongs to it.
/** @typedef {import('@agentclientprotocol/sdk').SessionUpdate} SessionUpdate */
/** @typedef {import('@agentclientprotocol/sdk').AgentContext} AgentContext */

export class UpdateRelay {
  /**
   * @param {() => AgentContext} client  the connection to the client
   * @param {string} sessionId
   */
  constructor(client, sessionId) {
    this.client = client
    this.sessionId = sessionId
    /** @type {Set<string>} */
    this.announced = new Set()
    /** @type {Map<string, ((seen: boolean) => void)[]>} */
    this.waiters = new Map()
  }

  /** @param {SessionUpdate} update */
  async send(update) {
    await this.client().notify('session/update', { sessionId: this.sessionId, update })
    if (update.sessionUpdate === 'tool_call') {
      this.announced.add(update.toolCallId)
      for (const wake of this.waiters.get(update.toolCallId) ?? []) wake(true)
      this.waiters.delete(update.toolCallId)
    }
  }

  /** @param {string} toolCallId */
  announcedToClient(toolCallId) {
    return this.announced.has(toolCallId)
  }

  /**
   * Resolves true once the tool call has gone out (at once if it has), false after `ms`.
   * @param {string} toolCallId
   * @param {number} ms
   * @returns {Promise<boolean>}
   */
  waitForAnnouncement(toolCallId, ms) {
    if (this.announced.has(toolCallId)) return Promise.resolve(true)
    return new Promise((resolve) => {
      const waiters = this.waiters.get(toolCallId) ?? []
      waiters.push(resolve)
      this.waiters.set(toolCallId, waiters)
      setTimeout(() => resolve(false), ms).unref?.()
    })
  }
}
