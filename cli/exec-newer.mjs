// @ts-check
// The exec requests of the 2026 schema, answered for one session (exec-mapping.mjs hands over
// what it does not know itself):
// - the pi tools and mini-swe-agent's bash on the built-in tools: reads, searches and git diffs
//   at once; bash, edit and write behind the same permission prompts as shells and writes;
// - the allowlist prechecks from the session's permission policy: in agent mode, whatever an
//   "Always allow" rule covers (every program of a shell command, an MCP server's tool, fetches);
//   nothing in ask or plan mode, nothing the user has not allowed for good;
// - conversation search over the sessions this agent saved;
// - MCP resources and server state through the session's MCP client.
// Everything else stays with the addon (its typed defaults, or throw + close).
import { ruleKey } from './permissions.mjs'
import { readTextOrNull } from './text-files.mjs'

/** @typedef {import('../index.js').ExecRequest} ExecRequest */
/** @typedef {import('../index.js').ExecAnswer} ExecAnswer */
/** @typedef {import('../index.js').ExecContext} ExecContext */
/** @typedef {import('../index.js').LocalTools} LocalTools */
/** @typedef {import('../index.js').agent.ConversationSearchHit} ConversationSearchHit */
/** @typedef {import('./permissions.mjs').PermissionFlow} PermissionFlow */
/** @typedef {import('./permissions.mjs').CardRequest} CardRequest */
/** @typedef {import('./mcp.mjs').McpServers} McpServers */
/** @typedef {import('./store.mjs').SessionStore} SessionStore */
/** @template {ExecRequest['kind']} K @typedef {Extract<ExecRequest, { kind: K }>} ExecOf */

const SEARCH_LIMIT = 10

export class NewerExecs {
  /**
   * @param {object} o
   * @param {string} o.sessionId
   * @param {LocalTools} o.tools
   * @param {McpServers} o.mcp
   * @param {PermissionFlow} o.permissions
   * @param {() => string} o.mode  the session's mode now
   * @param {SessionStore | undefined} o.store  the saved sessions, when the agent keeps them
   * @param {(req: ExecRequest, previousText?: string | null) => CardRequest} o.about  the card a
   *   request is about (exec-mapping.mjs: the core's card source)
   * @param {(p: string | undefined) => { abs: string } | { reason: string }} o.resolve
   */
  constructor({ sessionId, tools, mcp, permissions, mode, store, about, resolve }) {
    this.sessionId = sessionId
    this.tools = tools
    this.mcp = mcp
    this.permissions = permissions
    this.mode = mode
    this.store = store
    this.about = about
    this.resolve = resolve
  }

  /**
   * The answer to a request of the 2026 schema, or undefined for one this agent leaves to the addon.
   * @param {ExecRequest} req
   * @param {ExecContext} ctx
   * @returns {Promise<ExecAnswer | null> | undefined}
   */
  run(req, ctx) {
    switch (req.kind) {
      case 'piRead':
      case 'piGrep':
      case 'piFind':
      case 'piLs':
      case 'gitDiffRequest':
        return this.tools.run(req, ctx)
      case 'piBash':
      case 'miniSweAgentBash':
        return this.shell(req, ctx)
      case 'piWrite':
      case 'piEdit':
        return this.edit(req, ctx)
      case 'shellAllowlistPrecheck':
        return Promise.resolve({ allowlisted: this.shellAllowlisted(req.args ?? {}) })
      case 'mcpAllowlistPrecheck': {
        const a = req.args ?? {}
        return Promise.resolve({ allowlisted: this.mode() === 'agent' && this.permissions.allows(`mcp:${a.providerIdentifier}:${a.toolName}`) })
      }
      case 'webFetchAllowlistPrecheck':
        return Promise.resolve({ allowlisted: this.permissions.allows('fetch') })
      case 'conversationSearch':
        return Promise.resolve(this.searchConversations(req.args ?? {}))
      case 'listMcpResources':
        return this.mcp.listResources(req.args?.server)
      case 'readMcpResource':
        return this.mcp.readResource(req.args ?? {}, ctx?.signal)
      case 'mcpState':
        return this.mcp.state(req.args?.serverIdentifiers ?? [])
      default:
        return undefined
    }
  }

  /**
   * Whether every program of a command is covered by an "Always allow" rule (agent mode only;
   * a command the server could not parse is never allowlisted).
   * @param {import('../index.js').agent.ShellAllowlistPrecheckArgs} args
   */
  shellAllowlisted(args) {
    if (this.mode() !== 'agent' || args.parsingResult?.parsingFailed) return false
    const parsed = (args.parsingResult?.executableCommands ?? []).map((c) => c.name ?? '').filter(Boolean)
    const programs = parsed.length > 0 ? parsed : [args.command ?? '']
    return programs.every((p) => p.trim() !== '' && this.permissions.allows(ruleKey('execute', p)))
  }

  /**
   * @param {ExecOf<'piBash' | 'miniSweAgentBash'>} req
   * @param {ExecContext} ctx
   */
  shell(req, ctx) {
    const command = req.args?.command ?? ''
    const rejected = req.kind === 'piBash'
      ? (/** @type {string} */ reason) => ({ error: { error: reason } })
      : (/** @type {string} */ reason) => ({ rejected: { command, reason } })
    return this.permissions.runIfAllowed({ ...this.about(req), key: ruleKey('execute', command) }, () => this.tools.run(req, ctx), rejected)
  }

  /**
   * A pi write or edit, behind the prompt with its diff.
   * @param {ExecOf<'piWrite' | 'piEdit'>} req
   * @param {ExecContext} ctx
   */
  edit(req, ctx) {
    const a = req.args ?? {}
    const where = this.resolve(a.path)
    if (!('abs' in where)) return Promise.resolve({ rejected: { reason: where.reason } })
    const about = this.about({ ...req, args: { ...a, path: where.abs } }, readTextOrNull(where.abs))
    return this.permissions.runIfAllowed({ ...about, key: 'edit' }, () => this.tools.run(req, ctx), (reason) => ({ rejected: { reason } }))
  }

  /**
   * The saved sessions (other than this one) whose title holds every word of the query, newest first.
   * @param {import('../index.js').agent.ConversationSearchArgs} args
   * @returns {import('../index.js').agent.ConversationSearchResult}
   */
  searchConversations(args) {
    if (!this.store) return { error: { error: 'This agent keeps no past conversations.' } }
    const words = (args.query ?? '').toLowerCase().split(/\s+/).filter(Boolean)
    const limit = args.limit && args.limit > 0 ? args.limit : SEARCH_LIMIT
    /** @type {ConversationSearchHit[]} */
    const hits = []
    let truncated = false
    for (const record of this.store.list()) {
      if (record.sessionId === this.sessionId || !record.title) continue
      const title = record.title.toLowerCase()
      if (!words.every((w) => title.includes(w))) continue
      if (hits.length >= limit) {
        truncated = true
        break
      }
      /** @type {ConversationSearchHit} */
      const hit = { conversationId: record.conversationId ?? record.sessionId, title: record.title, source: 'CONVERSATION_SEARCH_SOURCE_LOCAL' }
      if (record.updatedAt) hit.updatedAtMs = String(Date.parse(record.updatedAt))
      hits.push(hit)
    }
    return { success: { hits, truncated } }
  }
}
