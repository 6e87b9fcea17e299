// One ACP session of the stdio agent: the addon's session plus the built-in tools, with the
// server's exec requests and interaction queries mapped onto the ACP client (permissions,
// fs/read_text_file, fs/write_text_file, elicitation) as acp-mapping.md §4.3–§4.4 describe.
import fs from 'node:fs'
import os from 'node:os'
import path from 'node:path'
import { createRequire } from 'node:module'
import { RequestError } from '@agentclientprotocol/sdk'

import { McpServers } from './mcp.mjs'
import { OPTIONS, Permissions, ruleKey } from './permissions.mjs'

const require = createRequire(import.meta.url)
const { AgentClient, LocalTools } = require('../index.js')

export const MODES = [
  { id: 'agent', name: 'Agent', description: 'Reads, edits files and runs commands' },
  { id: 'plan', name: 'Plan', description: 'Researches and proposes a plan before changing anything' },
  { id: 'ask', name: 'Ask', description: 'Answers questions without changing anything' },
]

export const COMMANDS = [
  { name: 'summarize', description: 'Summarize the conversation so far to free context' },
]

/** How long an exec waits for its tool call to reach the client before announcing its own. */
const ANNOUNCE_WAIT_MS = 500
const FETCH_LIMIT_BYTES = 1024 * 1024
const RULE_LIMIT_BYTES = 64 * 1024

const text = (t) => ({ type: 'content', content: { type: 'text', text: t } })

function lineCount(s) {
  if (!s) return 0
  return s.split('\n').length - (s.endsWith('\n') ? 1 : 0)
}

function readTextOrNull(file, limit = 4 * 1024 * 1024) {
  try {
    const stat = fs.statSync(file)
    if (!stat.isFile() || stat.size > limit) return null
    const data = fs.readFileSync(file)
    if (data.includes(0)) return null
    return data.toString('utf8')
  } catch {
    return null
  }
}

/** Addon errors → JSON-RPC errors (acp-mapping §4.6, §5 #15). */
export function toRequestError(e) {
  if (e instanceof RequestError) return e
  const data = { code: e?.code ?? 'E_INTERNAL', message: e?.message ?? String(e) }
  if (e?.cursorError) data.cursorError = e.cursorError
  if (e?.connectCode) data.connectCode = e.connectCode
  if (e?.code === 'E_AUTH') return RequestError.authRequired(data, data.message)
  if (e?.code === 'E_INVALID') return RequestError.invalidParams(data, data.message)
  return RequestError.internalError(data, data.message)
}

function firstText(blocks) {
  for (const b of blocks) {
    if (b.type === 'text' && b.text.trim()) return b.text.trim()
    if (b.type === 'resource_link') return b.name
  }
  return null
}

export class AgentSession {
  /**
   * @param {object} o
   * @param {string} o.sessionId
   * @param {string} o.cwd
   * @param {string[]} o.additionalDirectories
   * @param {object} o.agent  `{ conn, caps, config, store, log, token }`
   * @param {object} [o.record]  a stored session to continue
   */
  constructor({ sessionId, cwd, additionalDirectories = [], mcpServers = [], agent, record }) {
    this.sessionId = sessionId
    this.cwd = cwd
    this.additionalDirectories = additionalDirectories
    this.agent = agent
    this.log = agent.log
    this.mode = record?.mode ?? agent.config.mode ?? 'agent'
    this.model = record?.model ?? agent.config.model ?? 'default'
    this.title = record?.title ?? null
    this.permissions = new Permissions()
    this.announced = new Set()
    this.announceWaiters = new Map()
    this.synthetic = new Set()
    this.turn = null
    this.turnAbort = null
    this.cancelled = false

    this.mcp = new McpServers(mcpServers, { cwd, log: this.log })
    const roots = [cwd, ...additionalDirectories]
    const terminalsDir = path.join(agent.store.dir, 'terminals', sessionId)
    this.tools = new LocalTools({ roots, terminalsDir })
    const caps = agent.caps
    this.client = new AgentClient({
      baseUrl: agent.config.baseUrl,
      accessToken: agent.token ?? undefined,
      transport: agent.config.transport,
      blobDir: path.join(agent.store.blobDir, sessionId),
      exec: (req, ctx) => this.exec(req, ctx),
      interaction: (q) => this.interaction(q),
      requestContext: () => this.requestContext(),
      terminalOutput: caps._meta?.terminal_output === true,
      notices: caps.session?.notices != null,
      compactionUpdates: caps.session?.compaction != null,
      ...agent.config.clientOptions,
    })
    this.native = record?.saved
      ? this.client.loadSession({ ...record.saved, model: this.model, mode: this.mode, cwd })
      : this.client.newSession({ cwd, model: this.model, mode: this.mode, conversationId: sessionId })
  }

  get conn() {
    return this.agent.conn
  }

  // ---------- session state ----------

  modes() {
    return { currentModeId: this.mode, availableModes: MODES.map(({ id, name, description }) => ({ id, name, description })) }
  }

  modelChoices() {
    const ids = ['default', ...(this.agent.config.models ?? []), this.model]
    return [...new Set(ids)].map((id) => ({ value: id, name: id === 'default' ? 'Auto' : id }))
  }

  configOptions() {
    return [
      {
        id: 'mode', name: 'Mode', category: 'mode', type: 'select', currentValue: this.mode,
        options: MODES.map(({ id, name, description }) => ({ value: id, name, description })),
      },
      { id: 'model', name: 'Model', category: 'model', type: 'select', currentValue: this.model, options: this.modelChoices() },
    ]
  }

  setMode(modeId) {
    if (!MODES.some((m) => m.id === modeId)) {
      throw RequestError.invalidParams({ modeId }, `unknown mode ${JSON.stringify(modeId)} (agent, plan or ask)`)
    }
    this.mode = modeId
    this.native.setMode(modeId)
    this.persist()
  }

  setConfigOption(configId, value) {
    if (typeof value !== 'string') throw RequestError.invalidParams({ configId }, `${configId} takes a string value`)
    if (configId === 'mode') return this.setMode(value)
    if (configId !== 'model') throw RequestError.invalidParams({ configId }, `unknown config option ${JSON.stringify(configId)}`)
    if (!value.trim()) throw RequestError.invalidParams({ configId }, 'the model id is empty')
    this.model = value
    this.native.setModel(value)
    this.persist()
  }

  async announceModeChange() {
    await this.update({ sessionUpdate: 'current_mode_update', currentModeId: this.mode })
    await this.update({ sessionUpdate: 'config_option_update', configOptions: this.configOptions() })
  }

  persist() {
    const saved = this.native.save()
    // Blobs live in the session's blob folder already; the record keeps only the rest.
    this.agent.store.put({
      sessionId: this.sessionId,
      cwd: this.cwd,
      additionalDirectories: this.additionalDirectories,
      title: this.title,
      updatedAt: new Date().toISOString(),
      mode: this.mode,
      model: this.model,
      saved: { ...saved, blobs: [] },
    })
  }

  // ---------- updates ----------

  /** Sends one `session/update`, remembering announced tool calls. */
  async update(update) {
    await this.conn.notify('session/update', { sessionId: this.sessionId, update })
    if (update.sessionUpdate === 'tool_call') {
      this.announced.add(update.toolCallId)
      for (const wake of this.announceWaiters.get(update.toolCallId) ?? []) wake(true)
      this.announceWaiters.delete(update.toolCallId)
    }
  }

  async sendCommands() {
    await this.update({ sessionUpdate: 'available_commands_update', availableCommands: COMMANDS })
  }

  async replay() {
    for (const update of await this.native.replay()) await this.update(update)
  }

  // ---------- prompt / cancel ----------

  async prompt(blocks, requestSignal) {
    if (this.turn) {
      throw RequestError.invalidParams(undefined, 'a prompt is already running in this session; cancel it first')
    }
    this.cancelled = false
    this.turnAbort = new AbortController()
    const first = firstText(blocks)
    let turn
    try {
      turn = first === '/summarize' ? this.native.summarize() : this.native.prompt(blocks)
    } catch (e) {
      this.turnAbort = null
      throw toRequestError(e)
    }
    this.turn = turn
    const onAbort = () => this.cancel()
    requestSignal?.addEventListener('abort', onAbort, { once: true })
    try {
      if (!this.title && first && first !== '/summarize') {
        this.title = first.length > 80 ? `${first.slice(0, 79)}…` : first
        await this.update({ sessionUpdate: 'session_info_update', title: this.title, updatedAt: new Date().toISOString() })
      }
      for await (const update of turn) await this.update(update)
      const result = await turn.result
      await this.sweep()
      const response = { stopReason: this.cancelled ? 'cancelled' : result.stopReason }
      if (result.usage) response._meta = { cursor: { usage: result.usage } }
      return response
    } catch (e) {
      await this.sweep()
      if (this.cancelled) return { stopReason: 'cancelled' }
      this.log.warn('turn failed:', e)
      throw toRequestError(e)
    } finally {
      requestSignal?.removeEventListener('abort', onAbort)
      this.turn = null
      this.turnAbort = null
      try {
        this.persist()
      } catch (e) {
        this.log.warn('could not save the session:', e)
      }
    }
  }

  /** `session/cancel`: stops the turn, its tools and any permission request still open. */
  cancel() {
    if (!this.turn) return
    this.cancelled = true
    this.turnAbort?.abort()
    this.turn.cancel()
  }

  close() {
    this.cancel()
    this.native.close()
    this.tools.close()
    this.mcp.close()
  }

  /** Tool calls this agent announced itself end completed or failed before the turn does. */
  async sweep() {
    for (const id of this.synthetic) {
      await this.update({ sessionUpdate: 'tool_call_update', toolCallId: id, status: 'failed' }).catch(() => {})
    }
    this.synthetic.clear()
  }

  // ---------- permissions ----------

  /** The tool call a permission request is about: the server's, once the client has it, or one of ours. */
  async toolCallFor(toolCallId, execId, card) {
    if (toolCallId) {
      if (this.announced.has(toolCallId)) return { id: toolCallId, synthetic: false }
      const seen = await new Promise((resolve) => {
        const waiters = this.announceWaiters.get(toolCallId) ?? []
        waiters.push(resolve)
        this.announceWaiters.set(toolCallId, waiters)
        setTimeout(() => resolve(false), ANNOUNCE_WAIT_MS).unref?.()
      })
      if (seen) return { id: toolCallId, synthetic: false }
    }
    // Cursor sometimes sends an exec without its display block: announce one so the permission
    // request (and its outcome) has a card to attach to.
    const id = `exec-${execId || toolCallId || Date.now()}`
    await this.update({ sessionUpdate: 'tool_call', toolCallId: id, status: 'pending', ...card })
    this.synthetic.add(id)
    return { id, synthetic: true }
  }

  /**
   * Asks the user (unless an "always allow" rule covers it). Resolves
   * `{ outcome: 'allow' | 'reject' | 'cancelled', finish(result) }`; `finish` settles a card this
   * agent announced itself once the tool has run.
   */
  async permit({ toolCallId, execId, key, card }) {
    const noop = { finish: async () => {} }
    if (this.permissions.allows(key)) return { outcome: 'allow', ...noop }
    if (this.cancelled) return { outcome: 'cancelled', ...noop }
    const { id, synthetic } = await this.toolCallFor(toolCallId, execId, card)
    const settle = async (status, extra = {}) => {
      if (!synthetic || !this.synthetic.has(id)) return
      this.synthetic.delete(id)
      await this.update({ sessionUpdate: 'tool_call_update', toolCallId: id, status, ...extra })
    }
    const chosen = await this.ask(id, card, OPTIONS)
    if (!chosen || this.cancelled) {
      await settle('failed')
      return { outcome: 'cancelled', ...noop }
    }
    if (chosen === 'allow-always') this.permissions.remember(key)
    if (chosen === 'allow-always' || chosen === 'allow-once') {
      return { outcome: 'allow', finish: (result) => settle(result && 'success' in result ? 'completed' : 'failed') }
    }
    await this.update({ sessionUpdate: 'tool_call_update', toolCallId: id, status: 'failed', content: [text('Rejected by the user')] })
    this.synthetic.delete(id)
    return { outcome: 'reject', ...noop }
  }

  /** Runs `run` if the user allows it; otherwise answers with `rejected(reason)`. */
  async gated(req, spec, run, rejected) {
    const decision = await this.permit({ toolCallId: req.args?.toolCallId, execId: req.execId, ...spec })
    if (decision.outcome !== 'allow') {
      return rejected(decision.outcome === 'cancelled' ? 'The user cancelled the turn' : 'User rejected')
    }
    const result = await run()
    await decision.finish(result)
    return result
  }

  rel(abs) {
    const r = path.relative(this.cwd, abs)
    return r && !r.startsWith('..') && !path.isAbsolute(r) ? r : abs
  }

  /** The workspace path `p` names, or null with the model-visible reason. */
  resolve(p) {
    try {
      return { abs: this.tools.resolve(p ?? '') }
    } catch (e) {
      return { reason: e.message }
    }
  }

  // ---------- exec requests ----------

  async exec(req, ctx) {
    const a = req.args ?? {}
    switch (req.kind) {
      case 'read':
        return this.read(req, ctx)
      case 'write':
        return this.write(req, ctx)
      case 'delete':
        return this.remove(req, ctx)
      case 'shell':
      case 'shellStream':
      case 'backgroundShellSpawn': {
        const where = this.resolve(a.workingDirectory)
        const cwd = where.abs ?? a.workingDirectory ?? ''
        const card = { title: a.command ?? '', kind: 'execute', rawInput: { command: a.command, cwd } }
        return this.gated(req, { key: ruleKey('execute', a.command), card }, () => this.tools.run(req, ctx), (reason) => ({
          rejected: { command: a.command ?? '', workingDirectory: a.workingDirectory ?? '', reason },
        }))
      }
      case 'writeShellStdin':
      case 'ls':
      case 'grep':
        return this.tools.run(req, ctx)
      case 'fetch': {
        const card = { title: `Fetch ${a.url}`, kind: 'fetch', rawInput: { url: a.url } }
        return this.gated(req, { key: 'fetch', card }, () => this.fetchUrl(a.url, ctx), (reason) => ({ error: { url: a.url ?? '', error: reason } }))
      }
      case 'mcp':
        return this.callMcp(req, ctx)
      case 'diagnostics':
        return { error: { path: a.path ?? '', error: 'diagnostics are not available through this agent' } }
      default:
        // Not handled here: the addon answers throw + stream_close, as Cursor's own CLI does.
        this.log.info(`exec ${req.kind} is not supported`)
        return null
    }
  }

  async callMcp(req, ctx) {
    const a = req.args ?? {}
    await this.mcp.ready
    const found = this.mcp.find(a)
    if (found.result) return found.result
    const card = { title: `${found.server}: ${found.tool.name}`, kind: 'other', rawInput: a.args ?? {} }
    const spec = { key: `mcp:${found.server}:${found.tool.name}`, card }
    const rejected = (reason) => ({ rejected: { reason } })
    // An approval probe: ask, answer, do not run the tool (client-behaviour §3.4).
    if (a.smartModeApprovalOnly) return this.gated(req, spec, async () => ({ approved: {} }), rejected)
    return this.gated(req, spec, () => this.mcp.call(found, a.args, ctx?.signal), rejected)
  }

  async read(req, ctx) {
    const local = await this.tools.run(req, ctx)
    const s = local?.success
    const a = req.args ?? {}
    // Text the editor may hold unsaved: ask it, keeping the local answer's checks and counts.
    if (!s || typeof s.content !== 'string' || s.truncated || !this.agent.caps.fs?.readTextFile || (a.offset ?? 0) < 0) return local
    try {
      const params = { sessionId: this.sessionId, path: s.path }
      if (a.offset > 0) params.line = a.offset
      if (a.limit > 0) params.limit = a.limit
      const { content } = await this.conn.request('fs/read_text_file', params)
      if (typeof content === 'string') return { success: { ...s, content } }
    } catch (e) {
      this.log.debug('fs/read_text_file failed, using the file on disk:', e)
    }
    return local
  }

  async write(req, ctx) {
    const a = req.args ?? {}
    const where = this.resolve(a.path)
    if (!where.abs) return { rejected: { path: a.path ?? '', reason: where.reason } }
    const abs = where.abs
    const binary = typeof a.fileBytes === 'string' && a.fileBytes.length > 0
    const content = a.fileText ?? ''
    const card = {
      title: `Write ${this.rel(abs)}`,
      kind: 'edit',
      rawInput: { path: abs },
      content: binary ? [] : [{ type: 'diff', path: abs, oldText: readTextOrNull(abs), newText: content }],
      locations: [{ path: abs }],
    }
    return this.gated(req, { key: 'edit', card }, async () => {
      if (binary || !this.agent.caps.fs?.writeTextFile) return this.tools.run(req, ctx)
      // Through the editor, so its review (Keep / Reject) tracks the change.
      try {
        await this.conn.request('fs/write_text_file', { sessionId: this.sessionId, path: abs, content })
      } catch (e) {
        return { error: { path: abs, error: `the editor did not write the file: ${e.message}` } }
      }
      const success = { path: abs, linesCreated: lineCount(content), fileSize: Buffer.byteLength(content) }
      if (a.returnFileContentAfterWrite) success.fileContentAfterWrite = content
      return { success }
    }, (reason) => ({ rejected: { path: a.path ?? '', reason } }))
  }

  async remove(req, ctx) {
    const a = req.args ?? {}
    const where = this.resolve(a.path)
    if (!where.abs) return { rejected: { path: a.path ?? '', reason: where.reason } }
    const abs = where.abs
    const old = readTextOrNull(abs)
    const card = {
      title: `Delete ${this.rel(abs)}`,
      kind: 'delete',
      rawInput: { path: abs },
      content: old === null ? [] : [{ type: 'diff', path: abs, oldText: old, newText: '' }],
      locations: [{ path: abs }],
    }
    return this.gated(req, { key: 'delete', card }, () => this.tools.run(req, ctx), (reason) => ({ rejected: { path: a.path ?? '', reason } }))
  }

  async fetchUrl(url, ctx) {
    try {
      const signals = [AbortSignal.timeout(30_000)]
      if (ctx?.signal) signals.push(ctx.signal)
      const response = await fetch(url, { signal: AbortSignal.any(signals), redirect: 'follow' })
      const body = await response.text()
      return {
        success: {
          url,
          content: body.length > FETCH_LIMIT_BYTES ? `${body.slice(0, FETCH_LIMIT_BYTES)}\n[… truncated …]` : body,
          statusCode: response.status,
          contentType: response.headers.get('content-type') ?? '',
        },
      }
    } catch (e) {
      return { error: { url: url ?? '', error: e.cause?.message ?? e.message } }
    }
  }

  // ---------- interaction queries ----------

  async interaction(q) {
    const args = q.query?.args ?? {}
    switch (q.kind) {
      case 'webSearch': {
        const card = { title: `Search web: "${args.searchTerm ?? ''}"`, kind: 'fetch', rawInput: args }
        return this.approval(args.toolCallId, q.id, 'web_search', card)
      }
      case 'webFetch': {
        if (q.query?.skipApproval) return { approved: {} }
        const card = { title: `Fetch ${args.url ?? ''}`, kind: 'fetch', rawInput: args }
        return this.approval(args.toolCallId, q.id, 'fetch', card)
      }
      case 'switchMode':
        return this.switchMode(args, q.id)
      case 'createPlan':
        return this.createPlan(q.query ?? {}, q.id)
      case 'askQuestion':
        return this.askQuestion(q.query ?? {}, q.id)
      default:
        // The addon's explicit rejection for everything else (setup VM, PR management, …).
        return null
    }
  }

  async approval(toolCallId, id, key, card) {
    const decision = await this.permit({ toolCallId, execId: `q${id}`, key, card })
    if (decision.outcome === 'allow') {
      await decision.finish({ success: {} })
      return { approved: {} }
    }
    return { rejected: { reason: decision.outcome === 'cancelled' ? 'The user cancelled the turn' : 'User rejected' } }
  }

  /**
   * One `session/request_permission` about card `id`: the chosen optionId, or null when the
   * request was cancelled or failed — which cancels the turn: a cancelled permission request
   * means "stop", not "deny and go on" (acp-mapping §5 #3).
   */
  async ask(id, card, options) {
    let response
    try {
      response = await this.conn.request(
        'session/request_permission',
        { sessionId: this.sessionId, toolCall: { toolCallId: id, status: 'pending', ...card }, options },
        { cancellationSignal: this.turnAbort?.signal },
      )
    } catch (e) {
      this.log.warn('permission request failed:', e)
    }
    const outcome = response?.outcome
    const chosen = outcome?.outcome === 'selected' ? outcome.optionId : null
    if (!chosen) this.cancel()
    return chosen
  }

  /** A choice between custom options on a card; resolves the chosen optionId or null. */
  async choose(toolCallId, key, card, options) {
    const { id, synthetic } = await this.toolCallFor(toolCallId, key, card)
    const chosen = await this.ask(id, card, options)
    if (synthetic) {
      this.synthetic.delete(id)
      const kind = options.find((o) => o.optionId === chosen)?.kind ?? 'reject_once'
      await this.update({ sessionUpdate: 'tool_call_update', toolCallId: id, status: kind.startsWith('allow') ? 'completed' : 'failed' })
    }
    return chosen
  }

  async switchMode(args, id) {
    const target = args.targetModeId ?? ''
    if (!MODES.some((m) => m.id === target)) return { rejected: { reason: `unknown mode ${target}` } }
    const card = { title: `Switch to ${target} mode`, kind: 'switch_mode', rawInput: args, content: args.explanation ? [text(args.explanation)] : [] }
    const chosen = await this.choose(args.toolCallId, `mode-${id}`, card, [
      { optionId: 'switch', name: `Yes, switch to ${target}`, kind: 'allow_once' },
      { optionId: 'stay', name: `No, stay in ${this.mode}`, kind: 'reject_once' },
    ])
    if (chosen !== 'switch') return { rejected: { reason: chosen ? 'The user chose to stay in the current mode' : 'The user cancelled the turn' } }
    this.setMode(target)
    await this.announceModeChange()
    return { approved: {} }
  }

  async createPlan(query, id) {
    const args = query.args ?? {}
    const card = {
      title: `Plan: ${args.name ?? 'untitled'}`,
      kind: 'think',
      rawInput: { name: args.name, overview: args.overview },
      content: args.plan ? [text(args.plan)] : [],
    }
    const chosen = await this.choose(query.toolCallId, `plan-${id}`, card, [
      { optionId: 'implement', name: 'Yes, implement this plan', kind: 'allow_once' },
      { optionId: 'keep-planning', name: 'No, keep planning', kind: 'reject_once' },
    ])
    if (chosen !== 'implement') {
      return { result: { error: { error: chosen ? 'The user chose to keep planning' : 'The user cancelled the turn' } } }
    }
    if (this.mode !== 'agent') {
      this.setMode('agent')
      await this.announceModeChange()
    }
    return { result: { success: {} } }
  }

  async askQuestion(query, id) {
    const args = query.args ?? {}
    const questions = args.questions ?? []
    const reject = (reason) => ({ result: { rejected: { reason } } })
    if (this.agent.caps.elicitation?.form != null) {
      const properties = {}
      for (const q of questions) {
        const choices = (q.options ?? []).map((o) => ({ const: o.id ?? o.label, title: o.label ?? o.id }))
        properties[q.id] = q.allowMultiple
          ? { type: 'array', title: q.prompt, items: { anyOf: choices } }
          : { type: 'string', title: q.prompt, oneOf: choices }
      }
      const params = {
        mode: 'form',
        sessionId: this.sessionId,
        message: args.title || 'The agent has a question',
        requestedSchema: { type: 'object', properties, required: questions.map((q) => q.id) },
      }
      if (query.toolCallId && this.announced.has(query.toolCallId)) params.toolCallId = query.toolCallId
      let response
      try {
        response = await this.conn.request('elicitation/create', params, { cancellationSignal: this.turnAbort?.signal })
      } catch (e) {
        this.log.warn('elicitation failed:', e)
      }
      if (response?.action !== 'accept') {
        if (response?.action !== 'decline') this.cancel()
        return reject('The user declined to answer')
      }
      const answers = questions.map((q) => {
        const value = response.content?.[q.id]
        return { questionId: q.id, selectedOptionIds: Array.isArray(value) ? value.map(String) : value == null ? [] : [String(value)] }
      })
      return { result: { success: { answers } } }
    }
    // Fallback (Zed today): one single-choice question becomes a permission prompt of its answers.
    const only = questions[0]
    if (questions.length === 1 && !only.allowMultiple && (only.options ?? []).length > 0) {
      const options = only.options.map((o, i) => ({ optionId: `answer-${i}`, name: o.label ?? o.id, kind: 'allow_once' }))
      options.push({ optionId: 'skip', name: 'Skip', kind: 'reject_once' })
      const card = { title: only.prompt || args.title || 'Question', kind: 'other', rawInput: args }
      const chosen = await this.choose(query.toolCallId, `question-${id}`, card, options)
      if (!chosen || chosen === 'skip') return reject(chosen ? 'The user skipped the question' : 'The user cancelled the turn')
      const option = only.options[Number(chosen.slice('answer-'.length))]
      return { result: { success: { answers: [{ questionId: only.id, selectedOptionIds: [option.id ?? option.label] }] } } }
    }
    await this.update({
      sessionUpdate: 'agent_message_chunk',
      content: { type: 'text', text: `\n\n${args.title ?? 'The agent asked questions'} — this editor cannot show the form; please answer in your next message:\n${questions.map((q) => `- ${q.prompt}`).join('\n')}\n` },
    })
    return reject('This editor cannot show the questions; the user will answer in the next message')
  }

  // ---------- request context ----------

  async requestContext() {
    await this.mcp.ready
    const roots = [this.cwd, ...this.additionalDirectories]
    const rules = []
    const addRule = (file) => {
      const content = readTextOrNull(file, RULE_LIMIT_BYTES)
      if (content?.trim()) rules.push({ fullPath: file, content })
    }
    for (const root of roots) {
      addRule(path.join(root, 'AGENTS.md'))
      addRule(path.join(root, '.cursorrules'))
      const dir = path.join(root, '.cursor', 'rules')
      try {
        for (const name of fs.readdirSync(dir).sort()) if (name.endsWith('.mdc') || name.endsWith('.md')) addRule(path.join(dir, name))
      } catch {}
    }
    let timeZone
    try {
      timeZone = Intl.DateTimeFormat().resolvedOptions().timeZone
    } catch {}
    return {
      rules,
      tools: this.mcp.definitions(),
      mcpInstructions: this.mcp.instructions(),
      env: {
        osVersion: `${os.type()} ${os.release()}`,
        workspacePaths: roots,
        shell: process.env.SHELL || (process.platform === 'win32' ? 'cmd.exe' : '/bin/sh'),
        timeZone,
        projectFolder: this.cwd,
        terminalsFolder: this.tools.terminalsDir,
      },
    }
  }
}
