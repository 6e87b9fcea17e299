// @ts-check
// The server's exec requests, answered for one session: `read` through the editor's
// `fs/read_text_file` when it offers it (it may hold unsaved text), else from disk; `write`
// after a permission prompt with the diff, through `fs/write_text_file` when offered (so the
// editor's review tracks it), else on disk; `delete`, shells, background shells and `fetch`
// behind a permission prompt; `ls`, `grep` and `writeShellStdin` by the built-in tools at once;
// `mcp` by the session's MCP servers, behind a prompt. Every path stays inside the workspace.
// A request to the editor about a tool (permission, fs) goes out once the tool's card is
// there; the cards come from the core's one card source (`describeExec`, `describeExecResult`).
import { loadAddon } from './addon.mjs'
import { NewerExecs } from './exec-newer.mjs'
import { ruleKey } from './permissions.mjs'
import { readTextOrNull } from './text-files.mjs'

/** @typedef {import('@agentclientprotocol/sdk').AgentContext} AgentContext */
/** @typedef {import('@agentclientprotocol/sdk').ClientCapabilities} ClientCapabilities */
/** @typedef {import('../index.js').ExecRequest} ExecRequest */
/** @typedef {import('../index.js').ExecAnswer} ExecAnswer */
/** @typedef {import('../index.js').ExecContext} ExecContext */
/** @typedef {import('../index.js').ExecResult} ExecResult */
/** @typedef {import('../index.js').LocalTools} LocalTools */
/** @typedef {import('../index.js').ToolCard} Card */
/** @typedef {import('../index.js').agent.FetchResult} FetchResult */
/** @typedef {import('../index.js').agent.McpResult} McpResult */
/** @typedef {import('../index.js').agent.WriteSuccess} WriteSuccess */
/** @typedef {import('./permissions.mjs').PermissionFlow} PermissionFlow */
/** @typedef {import('./permissions.mjs').CardRequest} CardRequest */
/** @typedef {import('./mcp.mjs').McpServers} McpServers */
/** @template {ExecRequest['kind']} K @typedef {Extract<ExecRequest, { kind: K }>} ExecOf */

const FETCH_LIMIT_BYTES = 1024 * 1024
const FETCH_TIMEOUT_MS = 30_000

/** @param {string} s */
function lineCount(s) {
  if (!s) return 0
  return s.split('\n').length - (s.endsWith('\n') ? 1 : 0)
}

export class ExecMapping {
  /**
   * @param {object} o
   * @param {string} o.sessionId
   * @param {string} o.cwd
   * @param {() => AgentContext} o.client
   * @param {() => ClientCapabilities} o.capabilities  the client's, from its latest `initialize`
   * @param {LocalTools} o.tools
   * @param {McpServers} o.mcp
   * @param {PermissionFlow} o.permissions
   * @param {() => string} [o.mode]  the session's mode now (for the allowlist prechecks)
   * @param {import('./store.mjs').SessionStore} [o.store]  saved sessions (for conversation search)
   * @param {import('./log.mjs').Logger} o.log
   */
  constructor({ sessionId, cwd, client, capabilities, tools, mcp, permissions, mode = () => 'agent', store, log }) {
    this.sessionId = sessionId
    this.cwd = cwd
    this.client = client
    this.capabilities = capabilities
    this.tools = tools
    this.mcp = mcp
    this.permissions = permissions
    this.log = log
    /** The 2026 schema's exec kinds (exec-newer.mjs). */
    this.newer = new NewerExecs({ sessionId, tools, mcp, permissions, mode, store, about: (r, previousText) => this.about(r, previousText), resolve: (p) => this.resolve(p) })
  }

  /**
   * The `exec` callback: the answer, or null for a kind this agent does not handle (the addon
   * then answers throw + stream_close, as Cursor's own CLI does).
   * @param {ExecRequest} req
   * @param {ExecContext} ctx
   * @returns {Promise<ExecAnswer | null>}
   */
  async run(req, ctx) {
    switch (req.kind) {
      case 'read':
        return this.read(req, ctx)
      case 'write':
        return this.write(req, ctx)
      case 'delete':
        return this.remove(req, ctx)
      case 'shell':
      case 'shellStream':
      case 'backgroundShellSpawn':
        return this.shell(req, ctx)
      case 'writeShellStdin':
      case 'ls':
      case 'grep':
        return this.tools.run(req, ctx)
      case 'fetch': {
        const a = req.args ?? {}
        return this.permissions.runIfAllowed(
          { ...this.about(req), key: 'fetch' },
          () => fetchUrl(a.url, ctx),
          (reason) => ({ error: { url: a.url ?? '', error: reason } }),
        )
      }
      case 'mcp':
        return this.callMcp(req, ctx)
      case 'diagnostics':
        return { error: { path: req.args?.path ?? '', error: 'diagnostics are not available through this agent' } }
      default: {
        const newer = this.newer.run(req, ctx)
        if (newer) return newer
        this.log.info(`exec ${req.kind} is not supported`)
        return null
      }
    }
  }

  /**
   * What a request about this exec is about: the server's card, else a card of the request's
   * own, settled from the result.
   * @param {ExecRequest} req  with its path resolved, for the card
   * @param {string | null} [previousText]  a write's or delete's old text, for the diff
   * @returns {CardRequest}
   */
  about(req, previousText = null) {
    const { describeExec, describeExecResult } = loadAddon()
    const options = { cwd: this.cwd, previousText }
    const card = describeExec(req, options) ?? { title: req.kind }
    const args = /** @type {{ toolCallId?: string }} */ (req.args ?? {})
    return {
      toolCallId: args.toolCallId || undefined,
      ownKey: req.execId || String(req.id),
      card,
      outcome: (result) => describeExecResult(req, /** @type {ExecResult} */ (result), options),
    }
  }

  /**
   * @param {ExecOf<'read'>} req
   * @param {ExecContext} ctx
   */
  async read(req, ctx) {
    const local = /** @type {import('../index.js').agent.ReadResult | null} */ (await this.tools.run(req, ctx))
    const s = local?.success
    const a = req.args ?? {}
    // Text the editor may hold unsaved: ask it, keeping the local answer's checks and counts.
    if (!s || typeof s.content !== 'string' || s.truncated || !this.capabilities().fs?.readTextFile || (a.offset ?? 0) < 0) return local
    // The editor hears about the read after the card that leads to it.
    const about = this.about({ ...req, args: { ...a, path: s.path ?? a.path } })
    const ref = await this.permissions.card(about)
    if (!ref) return local
    /** @type {typeof local} */
    let answer = local
    try {
      /** @type {import('@agentclientprotocol/sdk').ReadTextFileRequest} */
      const params = { sessionId: this.sessionId, path: s.path ?? '' }
      if ((a.offset ?? 0) > 0) params.line = a.offset
      if ((a.limit ?? 0) > 0) params.limit = a.limit
      const { content } = await this.client().request('fs/read_text_file', params)
      if (typeof content === 'string') answer = { success: { ...s, content } }
    } catch (e) {
      this.log.debug('fs/read_text_file failed, using the file on disk:', e)
    }
    this.permissions.settle(ref, about.outcome?.(answer) ?? { status: 'completed' })
    return answer
  }

  /**
   * @param {ExecOf<'write'>} req
   * @param {ExecContext} ctx
   */
  async write(req, ctx) {
    const a = req.args ?? {}
    const where = this.resolve(a.path)
    if (!('abs' in where)) return { rejected: { path: a.path ?? '', reason: where.reason } }
    const abs = where.abs
    const binary = typeof a.fileBytes === 'string' && a.fileBytes.length > 0
    const content = a.fileText ?? ''
    /** @returns {Promise<ExecAnswer | null>} */
    const run = async () => {
      if (binary || !this.capabilities().fs?.writeTextFile) return this.tools.run(req, ctx)
      // Through the editor, so its review (Keep / Reject) tracks the change.
      try {
        await this.client().request('fs/write_text_file', { sessionId: this.sessionId, path: abs, content })
      } catch (e) {
        return { error: { path: abs, error: `the editor did not write the file: ${errorMessage(e)}` } }
      }
      /** @type {WriteSuccess} */
      const success = { path: abs, linesCreated: lineCount(content), fileSize: Buffer.byteLength(content) }
      if (a.returnFileContentAfterWrite) success.fileContentAfterWrite = content
      return { success }
    }
    const about = this.about({ ...req, args: { ...a, path: abs } }, binary ? null : readTextOrNull(abs))
    return this.permissions.runIfAllowed({ ...about, key: 'edit' }, run, (reason) => ({
      rejected: { path: a.path ?? '', reason },
    }))
  }

  /**
   * @param {ExecOf<'delete'>} req
   * @param {ExecContext} ctx
   */
  async remove(req, ctx) {
    const a = req.args ?? {}
    const where = this.resolve(a.path)
    if (!('abs' in where)) return { rejected: { path: a.path ?? '', reason: where.reason } }
    const about = this.about({ ...req, args: { ...a, path: where.abs } }, readTextOrNull(where.abs))
    return this.permissions.runIfAllowed(
      { ...about, key: 'delete' },
      () => this.tools.run(req, ctx),
      (reason) => ({ rejected: { path: a.path ?? '', reason } }),
    )
  }

  /**
   * @param {ExecOf<'shell' | 'shellStream' | 'backgroundShellSpawn'>} req
   * @param {ExecContext} ctx
   */
  async shell(req, ctx) {
    const a = req.args ?? {}
    const where = this.resolve(a.workingDirectory)
    const forCard = 'abs' in where ? { ...req, args: { ...a, workingDirectory: where.abs } } : req
    return this.permissions.runIfAllowed(
      { ...this.about(forCard), key: ruleKey('execute', a.command) },
      () => this.tools.run(req, ctx),
      (reason) => ({ rejected: { command: a.command ?? '', workingDirectory: a.workingDirectory ?? '', reason } }),
    )
  }

  /**
   * @param {ExecOf<'mcp'>} req
   * @param {ExecContext} ctx
   * @returns {Promise<McpResult>}
   */
  async callMcp(req, ctx) {
    const a = req.args ?? {}
    await this.mcp.ready
    const found = this.mcp.find(a)
    if ('result' in found) return found.result
    // The card names the server and tool the call resolved to.
    const about = this.about({ ...req, args: { ...a, providerIdentifier: found.server, toolName: found.tool.name } })
    const request = { ...about, key: `mcp:${found.server}:${found.tool.name}` }
    /** @param {string} reason @returns {McpResult} */
    const rejected = (reason) => ({ rejected: { reason } })
    // `smartModeApprovalOnly`: Cursor only asks whether this call may run; the answer is
    // `approved` or `rejected`, and the tool itself is not run.
    if (a.smartModeApprovalOnly) return this.permissions.runIfAllowed(request, async () => /** @type {McpResult} */ ({ approved: {} }), rejected)
    return this.permissions.runIfAllowed(request, () => this.mcp.call(found, a.args, ctx?.signal), rejected)
  }

  /**
   * The workspace path `p` names, or the model-visible reason it names none.
   * @param {string | undefined} p
   * @returns {{ abs: string } | { reason: string }}
   */
  resolve(p) {
    try {
      return { abs: this.tools.resolve(p ?? '') }
    } catch (e) {
      return { reason: errorMessage(e) }
    }
  }
}

/**
 * @param {string | undefined} url
 * @param {ExecContext | undefined} ctx
 * @returns {Promise<FetchResult>}
 */
async function fetchUrl(url, ctx) {
  try {
    const signals = [AbortSignal.timeout(FETCH_TIMEOUT_MS)]
    if (ctx?.signal) signals.push(ctx.signal)
    const response = await fetch(String(url), { signal: AbortSignal.any(signals), redirect: 'follow' })
    const body = await response.text()
    return {
      success: {
        url: String(url),
        content: body.length > FETCH_LIMIT_BYTES ? `${body.slice(0, FETCH_LIMIT_BYTES)}\n[… truncated …]` : body,
        statusCode: response.status,
        contentType: response.headers.get('content-type') ?? '',
      },
    }
  } catch (e) {
    const error = /** @type {{ message?: string, cause?: { message?: string } }} */ (e)
    return { error: { url: url ?? '', error: error.cause?.message ?? error.message } }
  }
}

/** @param {unknown} e */
function errorMessage(e) {
  return e instanceof Error ? e.message : String(e)
}
