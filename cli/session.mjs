// @ts-check
// One ACP session of the stdio agent: the addon's session and built-in tools, its mode and
// model, and its turns — `session/prompt` streams the addon's updates to the client and answers
// with the stop reason, `session/cancel` stops the turn — saved to the store after every change.
// The server's exec requests are the addon's: its built-in tools run them, asking this agent
// only what it decides — the permission policy (permissions.mjs), the editor's file hooks
// (editor-files.mjs), the MCP client (mcp.mjs) and the saved conversations (the store).
// Interaction queries are the addon's too: it asks the policy, a choice (`chooseFor`) or the
// questions (questions.mjs). The request context comes from request-context.mjs.

import { loadAddon } from './addon.mjs'
import { editorFiles } from './editor-files.mjs'
import { questionAsker } from './questions.mjs'
import { McpApprovals, ProjectMcpGate, askOnCard, sessionMcpServers } from './cursor-mcp.mjs'
import { McpServers } from './mcp.mjs'
import { optimizeFromNow } from './optimizer.mjs'
import { agentIdleMemory } from './idle-memory.mjs'
import { PermissionFlow } from './permissions.mjs'
import { requestContext, timeZone } from './request-context.mjs'
import { echo, toRequestError } from './request-errors.mjs'
import { RequestError } from './acp.mjs'
import { available, commandFolders, expand, loadCommands, parseCall, watchCommands } from './commands.mjs'
import { loadSkills, skillFolders } from './skills.mjs'
import { readTextOrNull } from './text-files.mjs'
import { COMMANDS, checkApproval, checkMode, configOptions, modeState } from './session-config.mjs'
import { AlwaysAllowed } from './always-allowed.mjs'
import { loadRules } from './permission-rules.mjs'
import { UpdateRelay } from './update-relay.mjs'
import { builtin } from './builtin.mjs'

const { fileURLToPath } = builtin('node:url')

/** @typedef {import('@agentclientprotocol/sdk').AgentContext} AgentContext */
/** @typedef {import('@agentclientprotocol/sdk').ClientCapabilities} ClientCapabilities */
/** @typedef {import('@agentclientprotocol/sdk').ContentBlock} ContentBlock */
/** @typedef {import('@agentclientprotocol/sdk').McpServer} McpServerConfig */
/** @typedef {import('@agentclientprotocol/sdk').PromptResponse} PromptResponse */
/** @typedef {import('@agentclientprotocol/sdk').SessionUpdate} SessionUpdate */
/** @typedef {import('../index.js').AgentClientOptions} AgentClientOptions */
/** @typedef {import('../index.js').PromptTurn} PromptTurn */
/** @typedef {import('../index.js').Session} NativeSession */
/** @typedef {import('../index.js').PromptUsage} PromptUsage */
/** @typedef {import('./store.mjs').SessionRecord} SessionRecord */
/** @typedef {import('./store.mjs').SessionStore} SessionStore */

/**
 * The client at the other end of the connection, shared by its sessions.
 * @typedef {object} ClientPeer
 * @property {() => AgentContext} client  calls to the client
 * @property {() => ClientCapabilities} capabilities  from its latest `initialize`
 */

/**
 * How the agent was started, as far as a session needs it.
 * @typedef {object} SessionSettings
 * @property {string} baseUrl
 * @property {'auto' | 'sse' | 'h2'} transport
 * @property {string} [model]  for new sessions
 * @property {string} [mode]  for new sessions
 * @property {string[]} [models]  extra entries of the model picker
 * @property {Partial<AgentClientOptions>} [clientOptions]  passed to the addon's client as they are
 * @property {string} [configDir]  the agent's config folder, where the answers about projects'
 *   MCP servers are remembered (without it they are asked in every session)
 */

const TITLE_LENGTH = 80
/** The largest file a prompt's link attaches (a larger one stays a mention). */
const LINKED_FILE_LIMIT_BYTES = 1024 * 1024
/** Updates taken from the addon at a time (at most; a read takes what is there). */
const UPDATE_BATCH = 256
/** How long a new session waits for the model list. */
const MODELS_TIMEOUT_MS = 5_000

/**
 * The prompt's first text, for the title and for slash commands.
 * @param {ContentBlock[]} blocks
 */
function firstText(blocks) {
  for (const b of blocks) {
    if (b.type === 'text' && b.text.trim()) return b.text.trim()
    if (b.type === 'resource_link') return b.name
  }
  return null
}

/**
 * `blocks` with the first text that has words (the one `firstText` read) replaced by `text`.
 * @param {ContentBlock[]} blocks
 * @param {string} text
 * @returns {ContentBlock[]}
 */
function withFirstText(blocks, text) {
  const i = blocks.findIndex((b) => b.type === 'text' && b.text.trim())
  return blocks.map((b, j) => (j === i ? { type: 'text', text } : b))
}

/**
 * A session's title from its first prompt, as a list of threads shows it: the first line that
 * has words, whitespace collapsed, cut at a word boundary to at most `TITLE_LENGTH` characters
 * (an ellipsis marks the cut; a single word longer than that is cut where it must be).
 * @param {string} prompt
 */
export function titleOf(prompt) {
  const line = prompt.split('\n').map((l) => l.replace(/\s+/g, ' ').trim()).find(Boolean) ?? ''
  const chars = [...line]
  if (chars.length <= TITLE_LENGTH) return line
  const head = chars.slice(0, TITLE_LENGTH - 1).join('')
  const space = head.lastIndexOf(' ')
  const cut = space >= TITLE_LENGTH / 2 ? head.slice(0, space) : head
  return `${cut.replace(/[\s.,;:!?-]+$/, '')}…`
}

export class AgentSession {
  /**
   * @param {object} o
   * @param {string} o.sessionId
   * @param {string} o.cwd
   * @param {string[]} [o.additionalDirectories]
   * @param {McpServerConfig[]} [o.mcpServers]
   * @param {SessionRecord} [o.record]  a stored session to continue
   * @param {ClientPeer} o.peer
   * @param {SessionSettings} o.settings
   * @param {SessionStore} o.store
   * @param {import('./log.mjs').Logger} o.log
   * @param {AgentClientOptions['accessToken']} o.accessToken
   */
  constructor({ sessionId, cwd, additionalDirectories = [], mcpServers = [], record, peer, settings, store, log, accessToken }) {
    this.sessionId = sessionId
    this.cwd = cwd
    this.additionalDirectories = additionalDirectories
    this.settings = settings
    this.store = store
    /** Its folders and saves, from the store that owns them (nothing is saved once deleted). */
    this.files = store.open(sessionId)
    this.log = log
    this.mode = record?.mode ?? settings.mode ?? 'agent'
    this.model = record?.model ?? settings.model ?? 'default'
    /** How much runs without a question (`approval` config option). */
    this.approval = ['ask', 'edits', 'full'].includes(record?.approval ?? '') ? /** @type {string} */ (record?.approval) : 'ask'
    /** @type {string | null} */
    this.title = record?.title ?? null
    /** The account's models, once `loadModels` has them. @type {import('../index.js').UsableModel[]} */
    this.models = []
    /** Settled once `available_commands_update` is out (see `sendCommandsAfterResponse`). */
    this.commandsSent = Promise.resolve()
    /** The user's commands and skills as last read (`readSetup`). @type {{ commands: Map<string, import('./commands.mjs').CustomCommand>, skills: Map<string, import('./skills.mjs').Skill> } | undefined} */
    this.setup = undefined
    /** The folders `readSetup` reads, found at its first call. @type {{ commands: string[], skills: string[] } | undefined} */
    this.setupFolders = undefined
    /** The command list last sent (JSON), to send it again only when it changed. */
    this.commandsListed = ''
    /** @type {(() => void) | undefined} */
    this.unwatchCommands = undefined
    /** Prompts wait here for the turns before them (`prompt`). */
    this.queue = Promise.resolve()
    /** The prompts waiting in the queue; a cancel cancels them all. @type {Set<{ cancelled: boolean }>} */
    this.waiting = new Set()
    /** The running turn, or null between turns. */
    this.turn = /** @type {PromptTurn | null} */ (null)
    /** A prewarm is asked for and not sent yet (`prewarm`). */
    this.prewarmPending = false
    /** Closed: nothing more goes to the server. */
    this.closed = false

    const { AgentClient } = loadAddon()
    /** The session's updates, and the scope (cancellation) of its turns. */
    this.relay = new UpdateRelay(peer.client, sessionId)
    /** @type {import('./permissions.mjs').TurnControl} */
    const turn = { cancel: () => this.cancel() }
    /** @type {PermissionFlow} */
    this.permissions = new PermissionFlow({
      sessionId,
      client: peer.client,
      relay: this.relay,
      turn,
      mode: () => this.mode,
      approval: () => this.approval,
      cursorRules: loadRules({ cwd, log }),
      remembered: settings.configDir ? { store: new AlwaysAllowed(settings.configDir), workspace: cwd } : null,
      log,
    })
    // The editor's servers and the user's start now; the project's once the user allows them.
    const { now, project } = sessionMcpServers(mcpServers, { cwd, log })
    this.mcp = new McpServers(now, { cwd, log })
    this.projectMcp = new ProjectMcpGate({
      project,
      approvals: settings.configDir ? new McpApprovals(settings.configDir) : null,
      start: (servers) => this.mcp.add(servers),
      ask: (card, options) => askOnCard({ sessionId, client: peer.client, relay: this.relay, cards: this.native, key: 'cursor-mcp-json', card, options, log }),
      log,
    })
    const caps = peer.capabilities()
    /** The client takes boolean config options (ACP `session.configOptions.boolean`). */
    this.booleanOptions = /** @type {{ configOptions?: { boolean?: unknown } } | undefined} */ (caps.session)?.configOptions?.boolean != null
    this.client = new AgentClient({
      baseUrl: settings.baseUrl,
      accessToken,
      transport: settings.transport,
      blobDir: this.files.blobDir,
      tools: { roots: [cwd, ...additionalDirectories], terminalsDir: this.files.terminalsDir },
      permission: (request, ctx) => this.permissions.decide(request, ctx.signal),
      editor: editorFiles({ sessionId, client: peer.client, capabilities: caps, relay: this.relay, log }),
      mcp: (request, ctx) => this.mcp.run(request, ctx.signal),
      pastConversations: () =>
        store.list().map((r) => ({ conversationId: r.conversationId ?? r.sessionId, title: r.title ?? '', updatedAt: r.updatedAt ? Date.parse(r.updatedAt) : undefined })),
      choose: (request, ctx) => this.permissions.chooseFor(request, ctx.signal),
      modeSwitched: (modeId) => this.switchMode(modeId),
      askQuestions: questionAsker({ sessionId, client: peer.client, capabilities: peer.capabilities, relay: this.relay, turn, log }),
      requestContext: async () => {
        // A turn's tools include the project's servers once the user has answered about them.
        await this.projectMcp.beforeTurn()
        return requestContext({ cwd, additionalDirectories, mcp: this.mcp, terminalsDir: this.tools.terminalsDir, skills: [...(this.setup ?? this.readSetup()).skills.values()].map((k) => k.agentSkill) })
      },
      terminalOutput: caps._meta?.terminal_output === true,
      notices: caps.session?.notices != null,
      compactionUpdates: caps.session?.compaction != null,
      ...settings.clientOptions,
    })
    /** The built-in tools the addon runs for this session (paths, background shells). */
    this.tools = /** @type {import('../index.js').LocalTools} */ (this.client.tools)
    /** @type {import('../index.js').Session} */
    this.native = record?.saved
      ? this.client.loadSession({ ...record.saved, model: this.model, mode: this.mode, cwd })
      : this.client.newSession({ cwd, model: this.model, mode: this.mode, conversationId: sessionId })
  }

  // ---------- modes, model, config options ----------

  modes() {
    return modeState(this.mode)
  }

  configOptions() {
    return configOptions({
      mode: this.mode,
      model: this.model,
      approval: this.approval,
      models: this.models,
      extraModels: this.settings.models ?? [],
      maxMode: this.offersMaxMode() ? { on: this.native.maxMode, boolean: this.booleanOptions } : null,
    })
  }

  /**
   * Asks for the account's models (bounded), and sends the session's model with its details
   * from now on.
   * @param {() => Promise<import('../index.js').UsableModel[]>} [list]  where they come from
   *   (the agent's per-process cache); by default this session's client asks the server
   * @returns {Promise<boolean>} whether the catalogue gave the session's model its details
   */
  async loadModels(list = () => this.client.listModels()) {
    /** @type {ReturnType<typeof setTimeout> | undefined} */
    let timer
    const late = new Promise((_, reject) => { timer = setTimeout(() => reject(new Error(`no answer within ${MODELS_TIMEOUT_MS} ms`)), MODELS_TIMEOUT_MS) })
    try {
      this.models = await Promise.race([list(), late])
    } catch (e) {
      this.log.warn('could not get the account\'s models; the picker offers Auto and --models:', e)
      return false
    } finally {
      clearTimeout(timer)
    }
    const details = this.models.find((m) => m.modelId === this.model)?.details
    if (!details) return false
    // The catalogue's details for the session's model; the Max Mode the session has (chosen,
    // or kept with the saved session) stays as it is.
    const chosen = this.native.maxMode
    this.native.setModel(this.model, details)
    this.native.setMaxMode(chosen && this.offersMaxMode())
    return true
  }

  /** Whether the session's model offers Max Mode (the account's catalogue says so). */
  offersMaxMode() {
    return this.models.find((m) => m.modelId === this.model)?.maxMode === true
  }

  /** @param {string} modeId */
  setMode(modeId) {
    checkMode(modeId)
    this.mode = modeId
    this.native.setMode(modeId)
    this.persist()
    this.prewarm()
  }

  /**
   * Warms the connection to the configured server and sends it Cursor's `PrewarmRequest` (the
   * session's model and conversation), so that the next prompt finds both ready: as a session
   * is opened (new, load, resume, fork: while its answer waits for the account's models) and
   * when its mode or model changes, while the user types. Never awaited, and never ahead of an
   * answer already written (it starts once the current I/O is done: what it does on this
   * thread is a native call that queues the request, and the time zone read once per
   * process); several asked for at once are one; none while a turn runs. A failure costs the
   * next prompt nothing (it connects as usual) and is a log line.
   */
  prewarm() {
    if (this.prewarmPending || this.closed) return
    this.prewarmPending = true
    setImmediate(() => {
      this.prewarmPending = false
      if (this.closed || this.turn) return
      this.native.prewarm().catch((/** @type {unknown} */ e) => this.log.info('prewarm failed; the next prompt connects as usual:', e))
      // What the first turn's request context would otherwise wait for.
      timeZone()
    })
  }

  /**
   * @param {string} configId
   * @param {unknown} value
   */
  setConfigOption(configId, value) {
    if (configId === 'max_mode') return this.setMaxMode(value)
    if (typeof value !== 'string') throw RequestError.invalidParams(undefined, `${echo(configId)} takes a string value`)
    if (configId === 'mode') return this.setMode(value)
    if (configId === 'approval') {
      checkApproval(value)
      this.approval = value
      return this.persist()
    }
    if (configId !== 'model') throw RequestError.invalidParams(undefined, `unknown config option ${echo(configId)}`)
    if (!value.trim()) throw RequestError.invalidParams({ configId }, 'the model id is empty')
    const offered = this.offeredModels()
    // The account's catalogue, once known, says which ids exist (and `--models` adds some).
    if (offered && !offered.includes(value)) {
      throw RequestError.invalidParams({ configId, validValues: offered }, `the account does not offer the model ${echo(value)}; valid: ${offered.join(', ')}`)
    }
    this.model = value
    // The server's details where it listed the model; an id of --models goes as it is. A new
    // model starts without Max Mode.
    this.native.setModel(value, this.models.find((m) => m.modelId === value)?.details)
    this.native.setMaxMode(false)
    this.persist()
    this.prewarm()
  }

  /**
   * The `max_mode` option: a boolean from clients that take boolean options, `on` / `off` from
   * the others; refused for a model that does not offer it.
   * @param {unknown} value
   */
  setMaxMode(value) {
    const on = value === true || value === 'on' ? true : value === false || value === 'off' ? false : null
    if (on === null) throw RequestError.invalidParams({ configId: 'max_mode' }, 'max_mode takes true or false (or "on" / "off")')
    if (on && !this.offersMaxMode()) {
      throw RequestError.invalidParams({ configId: 'max_mode' }, `Max Mode is not available for the model ${echo(this.model)}`)
    }
    this.native.setMaxMode(on)
    this.persist()
    this.prewarm()
  }

  /** The model ids a session may choose, or null while the account's catalogue is unknown. */
  offeredModels() {
    if (this.models.length === 0) return null
    return [...new Set(['default', ...this.models.map((m) => m.modelId), ...(this.settings.models ?? [])])]
  }

  async announceModeChange() {
    await this.update({ sessionUpdate: 'current_mode_update', currentModeId: this.mode })
    await this.update({ sessionUpdate: 'config_option_update', configOptions: this.configOptions() })
  }

  /**
   * A mode switch the server asked for and the user accepted.
   * @param {string} modeId
   */
  async switchMode(modeId) {
    this.setMode(modeId)
    await this.announceModeChange()
  }

  // ---------- persistence ----------

  persist() {
    // Deleted (session/delete while a turn ran): the store writes nothing of it again.
    if (this.files.deleted) return
    this.files.save(this.record())
  }

  /**
   * `persist`, the file written off the JS thread: at a turn's end, before its answer, so that
   * the sessions still running are served meanwhile (a save is a new file and a rename: about
   * 0.3 ms of the JS thread done in place, more on a busy disk).
   * @returns {Promise<void>}
   */
  async persistInBackground() {
    if (this.files.deleted) return
    // The addon adds its conversation to the record, writes the file and lands it on its file
    // thread: the JS thread makes no file system call for it.
    await this.files.saveInBackground(this.recordFields(), (file, fields, into, save) => this.native.saveToFile(file, fields, into, save))
  }

  /** The session as the store saves it. @returns {import('./store.mjs').SessionRecord} */
  record() {
    // Blobs live in the session's blob folder already; the record keeps only the rest.
    return { ...this.recordFields(), saved: this.native.save({ blobs: false }) }
  }

  /**
   * The record but the addon's conversation (`saved`), as JSON writes it: a field the session
   * does not have (a title not yet given) is left out.
   * @returns {import('./store.mjs').SessionRecord}
   */
  recordFields() {
    /** @type {import('./store.mjs').SessionRecord} */
    const fields = { sessionId: this.sessionId, cwd: this.cwd, additionalDirectories: this.additionalDirectories, updatedAt: new Date().toISOString() }
    if (this.title !== undefined) fields.title = this.title
    if (this.mode !== undefined) fields.mode = this.mode
    if (this.model !== undefined) fields.model = this.model
    if (this.approval !== undefined) fields.approval = this.approval
    return fields
  }

  /**
   * `session/load`: the saved conversation as updates, before the response. Counted as a turn
   * is (idle-memory.mjs): a long history's updates grow V8's young generation as turns do.
   */
  async replay() {
    await agentIdleMemory.during(async () => {
      for (const update of await this.native.replay()) await this.update(update)
    }, this.log)
  }

  // ---------- updates ----------

  /** @param {SessionUpdate} update */
  update(update) {
    return this.relay.send(update)
  }

  /**
   * The user's set-up as it is on disk now: custom commands (commands.mjs) and skills
   * (skills.mjs), read once per turn (and when a watched folder changes) and kept in
   * `this.setup`, which the turn's command, command list and request context all read.
   */
  readSetup() {
    // Which folders those are (up to the git root, and the user's) is found once per session.
    this.setupFolders ??= { commands: commandFolders(this.cwd), skills: skillFolders([this.cwd, ...this.additionalDirectories]) }
    const commands = loadCommands(this.setupFolders.commands, { reserved: COMMANDS.map((c) => c.name), log: this.log })
    const skills = loadSkills(this.setupFolders.skills, { log: this.log })
    this.setup = { commands, skills }
    return this.setup
  }

  /**
   * `available_commands_update` with the commands of `setup` (read now unless given); sent
   * again only when the list changed since.
   * @param {boolean} [always]  send even if the list did not change
   * @param {ReturnType<AgentSession['readSetup']>} [setup]
   */
  async sendCommands(always = true, setup = this.readSetup()) {
    const skills = [...setup.skills.values()].filter((k) => !COMMANDS.some((c) => c.name === k.name) && !setup.commands.has(k.name))
    const availableCommands = [
      ...COMMANDS,
      ...available(setup.commands),
      ...skills.map((k) => ({ name: k.name, description: `Skill: ${k.description}`, input: { hint: 'what to do (optional)' } })),
    ]
    const list = JSON.stringify(availableCommands)
    if (!always && list === this.commandsListed) return
    this.commandsListed = list
    await this.update({ sessionUpdate: 'available_commands_update', availableCommands })
  }

  /**
   * `available_commands_update` once the response that made the session known is out (clients
   * drop updates for sessions they do not know yet). A prompt's updates wait for it: a prompt
   * sent at once, and answered fast, would otherwise come before it.
   * @param {{ title?: boolean }} [also]  title: a `session_info_update` with the session's
   *   title first, if it has one (a fork has its source's, which the client never got for it)
   */
  sendCommandsAfterResponse({ title = false } = {}) {
    this.commandsSent = new Promise((resolve) => setImmediate(resolve))
      .then(async () => {
        if (title && this.title) await this.update({ sessionUpdate: 'session_info_update', title: this.title, updatedAt: new Date().toISOString() })
      })
      .then(() => this.sendCommands())
      .catch((e) => this.log.debug('available_commands_update failed:', e))
    // Sent again when the command files change (and checked again before every prompt).
    this.unwatchCommands ??= watchCommands(this.cwd, () => {
      this.sendCommands(false).catch((e) => this.log.debug('available_commands_update failed:', e))
    })
  }

  // ---------- prompt / cancel ----------

  /**
   * `session/prompt`: one turn, its updates relayed as they come. A prompt sent while a turn
   * runs is queued: prompts are answered in the order they came, each with its own stop reason;
   * `session/cancel` cancels the running turn and every prompt still waiting (answered
   * `cancelled` without a turn), as does the client withdrawing a waiting prompt.
   * @param {ContentBlock[]} blocks
   * @param {AbortSignal} [requestSignal]  aborts when the client withdraws the request
   * @returns {Promise<PromptResponse>}
   */
  prompt(blocks, requestSignal) {
    optimizeFromNow()
    const waiting = { cancelled: false }
    this.waiting.add(waiting)
    const withdraw = () => { waiting.cancelled = true }
    requestSignal?.addEventListener('abort', withdraw, { once: true })
    const run = this.queue.then(() => {
      this.waiting.delete(waiting)
      requestSignal?.removeEventListener('abort', withdraw)
      if (waiting.cancelled) return /** @type {PromptResponse} */ ({ stopReason: 'cancelled' })
      // Counted, so that the process collects its garbage once it is idle (idle-memory.mjs).
      return agentIdleMemory.during(() => this.runTurn(blocks, requestSignal), this.log)
    })
    this.queue = run.then(() => {}, () => {})
    return run
  }

  /**
   * `blocks` with each link to a text file inside the session's roots followed by the file,
   * read now (at most `LINKED_FILE_LIMIT_BYTES`) and attached as context, as if the editor had
   * embedded it. A link outside the roots (symbolic links followed), to a folder, a binary or a
   * larger file, or of another scheme (`https:`, `zed:`) is left a mention: never read.
   * @param {ContentBlock[]} blocks
   * @returns {ContentBlock[]}
   */
  withLinkedFiles(blocks) {
    return blocks.flatMap((block) => {
      if (block.type !== 'resource_link' || !block.uri.startsWith('file://')) return [block]
      let file
      try {
        file = this.tools.resolve(fileURLToPath(block.uri))
      } catch {
        return [block]
      }
      const text = readTextOrNull(file, LINKED_FILE_LIMIT_BYTES)
      if (text === null) return [block]
      /** @type {ContentBlock} */
      const attached = { type: 'resource', resource: { uri: block.uri, text, ...(block.mimeType ? { mimeType: block.mimeType } : {}) } }
      return [block, attached]
    })
  }

  /**
   * The turn a built-in command starts (session-config.mjs), or null when the prompt is not
   * one: `/summarize`, `/plan what` (plan mode with the request), `/shell command` (a shell
   * command turn: the server runs it through the tools), `/continue` (the goal).
   * @param {{ name: string, args: string } | null} call
   */
  builtinTurn(call) {
    if (!call) return null
    if (call.name === 'summarize') return this.native.summarize()
    if (call.name === 'plan' && call.args) return this.native.startPlan(call.args)
    if (call.name === 'shell' && call.args) return this.native.shellCommand(call.args)
    if (call.name === 'continue') return this.native.continueGoal()
    return null
  }

  /**
   * One turn of the queue.
   * @param {ContentBlock[]} blocks
   * @param {AbortSignal} [requestSignal]
   * @returns {Promise<PromptResponse>}
   */
  async runTurn(blocks, requestSignal) {
    const scope = this.relay.beginTurn()
    const first = firstText(blocks)
    blocks = this.withLinkedFiles(blocks)
    const call = first === null ? null : parseCall(first)
    // As the files are now: a command added since the last prompt works at once.
    const setup = this.readSetup()
    const custom = call ? setup.commands.get(call.name) : undefined
    const builtin = call !== null && COMMANDS.some((c) => c.name === call.name)
    const skill = call && !custom && !builtin ? setup.skills.get(call.name) : undefined
    let turn
    try {
      if (custom && call) blocks = withFirstText(blocks, expand(custom, call.args))
      /** @type {Parameters<NativeSession['prompt']>[1]} */
      let options
      if (skill && call) {
        // The skill chosen for this prompt; the words after its name are the prompt.
        blocks = withFirstText(blocks, call.args || `Use the ${skill.name} skill.`)
        options = { userMessage: { selectedContext: { selectedSkills: [skill.agentSkill] } } }
      }
      turn = this.builtinTurn(call) ?? this.native.prompt(blocks, options)
    } catch (e) {
      if (custom) throw RequestError.invalidParams({ command: custom.name }, `the command /${custom.name} could not be read: ${e instanceof Error ? e.message : String(e)}`)
      throw toRequestError(e)
    }
    this.turn = turn
    const onAbort = () => this.cancelTurn()
    requestSignal?.addEventListener('abort', onAbort, { once: true })
    try {
      await this.commandsSent
      // The list again if the files changed since it was sent.
      await this.sendCommands(false, setup).catch((e) => this.log.debug('available_commands_update failed:', e))
      if (!this.title && first && !builtin) {
        this.title = titleOf(first)
        await this.update({ sessionUpdate: 'session_info_update', title: this.title, updatedAt: new Date().toISOString() })
      }
      // In batches, each written at once as the addon serialized it (update-relay.mjs says why).
      for (let lines = await turn.nextLines(UPDATE_BATCH, this.sessionId); lines.length; lines = await turn.nextLines(UPDATE_BATCH, this.sessionId)) {
        await this.relay.sendLines(lines)
      }
      const result = await turn.result
      /** @type {PromptResponse & { usage?: PromptUsage }} */
      const response = { stopReason: scope.cancelled ? 'cancelled' : result.stopReason }
      if (result.usage) {
        // ACP's own place (the prompt response's `usage`, in the schema's newer revisions),
        // and where this agent reported it before.
        response.usage = result.usage
        response._meta = { cursor: { usage: result.usage } }
      }
      return response
    } catch (e) {
      if (scope.cancelled) return { stopReason: 'cancelled' }
      this.log.warn('turn failed:', e)
      throw toRequestError(e)
    } finally {
      requestSignal?.removeEventListener('abort', onAbort)
      scope.end()
      this.turn = null
      await this.persistInBackground().catch((e) => this.log.warn('could not save the session:', e))
    }
  }

  /**
   * `_cursor/steer`: the text of `prompt` into the running turn, for the model to take in at
   * its next step (Cursor's mid-turn user message), instead of a prompt of its own that would
   * wait for the turn to end. The turn's updates show it as a `user_message_chunk` once the
   * server delivered it. Without a running turn it is refused: send `session/prompt`.
   * @param {unknown} prompt
   * @returns {Promise<{ injectionId: string }>}
   */
  async steer(prompt) {
    if (!Array.isArray(prompt)) throw RequestError.invalidParams(undefined, '_cursor/steer: prompt must be an array of content blocks')
    const text = prompt
      .filter((b) => b && typeof b === 'object' && b.type === 'text' && typeof b.text === 'string')
      .map((b) => b.text)
      .join('\n')
      .trim()
    if (!text) throw RequestError.invalidParams(undefined, '_cursor/steer: the prompt has no text')
    if (!this.turn || this.relay.turn.cancelled) throw RequestError.invalidRequest(undefined, 'no turn is running to steer: send session/prompt')
    try {
      return { injectionId: await this.native.injectUserMessage(text) }
    } catch (e) {
      throw toRequestError(e)
    }
  }

  /**
   * `session/cancel`: cancels the prompts waiting in the queue and stops the running turn, its
   * tools and any permission request or form still open
   * (withdrawn, and no longer waited for: a client that cannot withdraw one does not hold the
   * turn), and no more of the model's text goes out.
   */
  cancel() {
    for (const waiting of this.waiting) waiting.cancelled = true
    this.cancelTurn()
  }

  /** Stops the running turn only (its own request withdrawn); the queue goes on. */
  cancelTurn() {
    if (!this.turn) return
    this.relay.turn.cancel()
    this.turn.cancel()
  }

  close() {
    this.closed = true
    this.unwatchCommands?.()
    this.cancel()
    this.native.close()
    this.tools.close()
    this.mcp.close()
  }
}
