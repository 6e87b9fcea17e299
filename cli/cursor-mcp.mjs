// @ts-check
// MCP servers from the Cursor set-up users already have: `.cursor/mcp.json` of the project (the
// session's cwd and each folder above it up to its git root, the nearest file winning a name)
// and the user's `~/.cursor/mcp.json`. They join the servers the editor hands to the session:
// the editor's entry wins a name, then the project's, then the user's.
//
// A project's file comes with the code, from whoever wrote the repository, and its servers are
// programs run on this machine: they start only once the user allowed them for the workspace
// (a permission prompt at the session's first turn, the answer remembered in a private file of
// the agent's config folder, asked again when the project's servers change). The user's own
// file needs no prompt. A file that cannot be read as Cursor's format (not JSON, wrong types)
// is skipped, as is an entry of the wrong shape, with a warning in the log: it never fails a
// session.
//
// The format, as Cursor reads it: `{ "mcpServers": { "<name>": { "command", "args"?, "env"? }
// | { "url", "headers"?, "type"? } } }`, with `${env:NAME}`, `${userHome}`,
// `${workspaceFolder}`, `${workspaceFolderBasename}`, `${pathSeparator}` and `${/}` replaced
// in `command`, `args`, `env`, `url` and `headers`.

import { projectFolders } from './commands.mjs'
import { askClient } from './permissions.mjs'
import { serverEnvironment } from './mcp.mjs'
import { replacePrivateJson } from './private-files.mjs'
import { readTextOrNull } from './text-files.mjs'
import { builtin } from './builtin.mjs'

const fs = builtin('node:fs')
const { createRequire } = builtin('node:module')
const os = builtin('node:os')
const path = builtin('node:path')

/** @typedef {import('@agentclientprotocol/sdk').McpServer} McpServerConfig */
/** @typedef {import('@agentclientprotocol/sdk').PermissionOption} PermissionOption */
/** @typedef {import('@agentclientprotocol/sdk').AgentContext} AgentContext */
/** @typedef {import('../index.js').Session} NativeSession */
/** @typedef {import('../index.js').ToolCard} Card */
/** @typedef {import('./update-relay.mjs').UpdateRelay} UpdateRelay */

/** A larger mcp.json is not read (a configuration, not data). */
const MCP_JSON_LIMIT_BYTES = 1024 * 1024
/** The file in the agent's config folder that holds the users' answers, per workspace. */
const APPROVALS_FILE = 'mcp-approvals.json'

/**
 * One server entry of an mcp.json, as it was checked (before interpolation).
 * @typedef {{ command: string, args: string[], env: Record<string, string> } | { url: string, headers: Record<string, string>, sse: boolean }} CursorServer
 */

/**
 * The servers of one mcp.json: its entries, checked, with what `${workspaceFolder}` means in it.
 * @typedef {object} McpFile
 * @property {string} file
 * @property {string} workspaceFolder  the folder that holds its `.cursor` (the session's cwd for the user's file)
 * @property {Map<string, CursorServer>} servers
 */

/**
 * What a session starts, from the editor's list and the Cursor files.
 * @typedef {object} SessionMcpServers
 * @property {McpServerConfig[]} now  the editor's servers and the user's: started at once
 * @property {ProjectServers | null} project  the project's servers, which wait for the user's answer
 */

/**
 * The servers of the project's files that the editor does not name, waiting for the user.
 * @typedef {object} ProjectServers
 * @property {string} workspace  the project's root (its git root, or the session's cwd outside git)
 * @property {string[]} files  the project's mcp.json files that name them
 * @property {string} fingerprint  of their definitions as written: a change asks again
 * @property {McpServerConfig[]} servers  started once allowed
 * @property {ShownServer[]} shown  the same as the question shows them
 * @property {McpServerConfig[]} declined  the user's servers they hide, started instead when not allowed
 */

/**
 * A server as written in its file, as the user is asked about it: what runs or is reached,
 * the names of the variables and headers it sets but not their values (`${env:…}` is not
 * replaced: the question never shows a secret of the environment).
 * @typedef {{ name: string, command?: string, args?: string[], url?: string, env?: string[], headers?: string[] }} ShownServer
 */

/**
 * @param {unknown} value
 * @returns {value is Record<string, unknown>}
 */
const isObject = (value) => typeof value === 'object' && value !== null && !Array.isArray(value)

/**
 * @param {unknown} value
 * @returns {value is Record<string, string>}
 */
const isStringMap = (value) => isObject(value) && Object.values(value).every((v) => typeof v === 'string')

/**
 * One server entry checked, or the reason it is not one.
 * @param {unknown} entry
 * @returns {CursorServer | string}
 */
function checkServer(entry) {
  if (!isObject(entry)) return 'not an object'
  const { command, args = [], env = {}, url, headers = {}, type } = entry
  if (typeof command === 'string' && command) {
    if (!Array.isArray(args) || !args.every((a) => typeof a === 'string')) return '"args" must be an array of strings'
    if (!isStringMap(env)) return '"env" must be an object of strings'
    if (type !== undefined && type !== 'stdio') return `"type" ${JSON.stringify(type)} does not go with "command"`
    return { command, args, env }
  }
  if (typeof url === 'string' && url) {
    if (!isStringMap(headers)) return '"headers" must be an object of strings'
    if (type !== undefined && !['http', 'streamableHttp', 'streamable-http', 'sse'].includes(/** @type {string} */ (type))) return `"type" ${JSON.stringify(type)} is not http or sse`
    return { url, headers, sse: type === 'sse' }
  }
  return 'neither "command" nor "url" is a non-empty string'
}

/**
 * The servers of one mcp.json, or null when it is absent or unreadable as Cursor's format
 * (warned). Entries of the wrong shape are left out (warned); the rest of the file stands.
 * @param {string} file
 * @param {string} workspaceFolder
 * @param {import('./log.mjs').Logger} log
 * @returns {McpFile | null}
 */
export function readMcpFile(file, workspaceFolder, log) {
  if (!fs.existsSync(file)) return null
  const text = readTextOrNull(file, MCP_JSON_LIMIT_BYTES)
  if (text === null) {
    log.warn(`${file} skipped: not a readable text file of at most ${MCP_JSON_LIMIT_BYTES} bytes`)
    return null
  }
  let value
  try {
    value = JSON.parse(text)
  } catch (e) {
    log.warn(`${file} skipped: not JSON (${e instanceof Error ? e.message : String(e)})`)
    return null
  }
  if (!isObject(value) || (value.mcpServers !== undefined && !isObject(value.mcpServers))) {
    log.warn(`${file} skipped: "mcpServers" must be an object of servers by name`)
    return null
  }
  /** @type {Map<string, CursorServer>} */
  const servers = new Map()
  for (const [name, entry] of Object.entries(value.mcpServers ?? {})) {
    const server = checkServer(entry)
    if (typeof server === 'string') log.warn(`${file}: MCP server ${JSON.stringify(name)} skipped: ${server}`)
    else servers.set(name, server)
  }
  return { file, workspaceFolder, servers }
}

/**
 * `text` with Cursor's variables replaced; an unknown `${…}` is left as written, an unset
 * environment variable is empty.
 * @param {string} text
 * @param {{ env: NodeJS.ProcessEnv, home: string, workspaceFolder: string }} vars
 */
export function interpolate(text, { env, home, workspaceFolder }) {
  return text.replace(/\$\{([^}]*)\}/g, (whole, name) => {
    if (name.startsWith('env:')) return env[name.slice(4)] ?? ''
    if (name === 'userHome') return home
    if (name === 'workspaceFolder') return workspaceFolder
    if (name === 'workspaceFolderBasename') return path.basename(workspaceFolder)
    if (name === 'pathSeparator' || name === '/') return path.sep
    return whole
  })
}

/**
 * A checked entry as ACP names an MCP server, its variables replaced.
 * @param {string} name
 * @param {CursorServer} server
 * @param {{ env: NodeJS.ProcessEnv, home: string, workspaceFolder: string }} vars
 * @returns {McpServerConfig}
 */
function toAcp(name, server, vars) {
  const fill = (/** @type {string} */ text) => interpolate(text, vars)
  const pairs = (/** @type {Record<string, string>} */ map) => Object.entries(map).map(([key, value]) => ({ name: key, value: fill(value) }))
  if ('command' in server) return { name, command: fill(server.command), args: server.args.map(fill), env: pairs(server.env) }
  return { type: server.sse ? 'sse' : 'http', name, url: fill(server.url), headers: pairs(server.headers) }
}

/**
 * The servers of the files, nearest file first, each name from the first file that has it.
 * @param {McpFile[]} files
 * @param {{ env: NodeJS.ProcessEnv, home: string }} o
 * @returns {Map<string, { config: McpServerConfig, file: string, written: CursorServer }>}
 */
function serversOf(files, { env, home }) {
  /** @type {Map<string, { config: McpServerConfig, file: string, written: CursorServer }>} */
  const out = new Map()
  for (const { file, workspaceFolder, servers } of files) {
    for (const [name, server] of servers) {
      if (!out.has(name)) out.set(name, { config: toAcp(name, server, { env, home, workspaceFolder }), file, written: server })
    }
  }
  return out
}

/**
 * The MCP servers of a session: the editor's, then the Cursor files' (see the module's notes).
 * @param {McpServerConfig[]} editor
 * @param {object} o
 * @param {string} o.cwd
 * @param {import('./log.mjs').Logger} o.log
 * @param {string} [o.home]  the user's home folder (`os.homedir()`, which follows HOME)
 * @param {NodeJS.ProcessEnv} [o.env]  for `${env:NAME}`: what a server's own environment would
 *   be (this product's credentials are not in it, so a file cannot hand them to a server either)
 * @returns {SessionMcpServers}
 */
export function sessionMcpServers(editor, { cwd, log, home = os.homedir(), env = serverEnvironment() }) {
  const folders = projectFolders(cwd)
  const projectFiles = folders.map((dir) => readMcpFile(path.join(dir, '.cursor', 'mcp.json'), dir, log)).filter((f) => f !== null)
  const userFile = readMcpFile(path.join(home, '.cursor', 'mcp.json'), cwd, log)
  const taken = new Set(editor.map((s) => s.name))
  const project = [...serversOf(projectFiles, { env, home })].filter(([name]) => !taken.has(name))
  const user = [...serversOf(userFile ? [userFile] : [], { env, home })].filter(([name]) => !taken.has(name))
  const projectNames = new Set(project.map(([name]) => name))
  const now = [...editor, ...user.filter(([name]) => !projectNames.has(name)).map(([, s]) => s.config)]
  if (project.length === 0) return { now, project: null }
  const written = project.map(([name, s]) => [name, s.file, s.written]).sort(([a], [b]) => String(a).localeCompare(String(b)))
  return {
    now,
    project: {
      workspace: folders.at(-1) ?? cwd,
      files: [...new Set(project.map(([, s]) => s.file))],
      fingerprint: sha256Hex(JSON.stringify(written)),
      servers: project.map(([, s]) => s.config),
      shown: project.map(([name, { written }]) => shownServer(name, written)),
      declined: user.filter(([name]) => projectNames.has(name)).map(([, s]) => s.config),
    },
  }
}

/**
 * The users' answers about projects' MCP servers, per workspace: a private file in the agent's
 * config folder (0600 in 0700), read at every question (another agent process may have written
 * it since) and written whole through a temporary and a rename.
 */
export class McpApprovals {
  /** @param {string} dir  the agent's config folder */
  constructor(dir) {
    this.dir = dir
    this.file = path.join(dir, APPROVALS_FILE)
  }

  /** @returns {Record<string, { fingerprint: string, allowed: boolean, decidedAt: string }>} */
  #read() {
    try {
      const value = JSON.parse(fs.readFileSync(this.file, 'utf8'))
      return isObject(value?.workspaces) ? /** @type {any} */ (value.workspaces) : {}
    } catch {
      return {}
    }
  }

  /**
   * The remembered answer for these servers of `workspace`: true, false, or undefined when
   * there is none for them (never asked, or they changed since).
   * @param {string} workspace
   * @param {string} fingerprint
   * @returns {boolean | undefined}
   */
  answer(workspace, fingerprint) {
    const entry = this.#read()[workspace]
    return entry?.fingerprint === fingerprint && typeof entry.allowed === 'boolean' ? entry.allowed : undefined
  }

  /**
   * @param {string} workspace
   * @param {string} fingerprint
   * @param {boolean} allowed
   */
  remember(workspace, fingerprint, allowed) {
    const workspaces = { ...this.#read(), [workspace]: { fingerprint, allowed, decidedAt: new Date().toISOString() } }
    replacePrivateJson(this.dir, APPROVALS_FILE, { workspaces })
  }
}

/** @type {PermissionOption[]} */
export const PROJECT_MCP_OPTIONS = [
  { optionId: 'allow-always', name: 'Allow in this workspace', kind: 'allow_always' },
  { optionId: 'allow-once', name: 'Allow for this session', kind: 'allow_once' },
  { optionId: 'reject-once', name: 'Not now', kind: 'reject_once' },
  { optionId: 'reject-always', name: 'Never in this workspace', kind: 'reject_always' },
]

/**
 * @param {string} name
 * @param {CursorServer} written
 * @returns {ShownServer}
 */
function shownServer(name, written) {
  if ('command' in written) return { name, command: written.command, args: written.args, env: Object.keys(written.env) }
  return { name, url: written.url, headers: Object.keys(written.headers) }
}

/**
 * One server as a line of the question.
 * @param {ShownServer} server
 */
function describe(server) {
  const what = server.url ?? [server.command, ...(server.args ?? [])].join(' ')
  const sets = [...(server.env ?? []), ...(server.headers ?? [])]
  return `${server.name}: ${what}${sets.length ? ` (sets ${sets.join(', ')})` : ''}`
}

/**
 * One `session/request_permission` on a card of the host's own, in the running turn: the
 * chosen optionId, or null when no turn runs, or the request was cancelled or failed. The card
 * is opened and settled through the addon, which owns the cards.
 * @param {object} o
 * @param {string} o.sessionId
 * @param {() => AgentContext} o.client
 * @param {UpdateRelay} o.relay  its turn scope withdraws the request on cancel
 * @param {NativeSession} o.cards
 * @param {string} o.key  the card's name in the addon's session
 * @param {Card} o.card
 * @param {PermissionOption[]} o.options
 * @param {import('./log.mjs').Logger} o.log
 * @returns {Promise<string | null>}
 */
export async function askOnCard({ sessionId, client, relay, cards, key, card, options, log }) {
  const turn = relay.turn
  if (turn.cancelled || turn.over) return null
  const id = await cards.openCard(key, { ...card, status: 'pending' })
  if (!id) return null
  const toolCall = { ...card, toolCallId: id, status: 'pending' }
  const answer = await askClient({ client, sessionId, toolCall, options, signal: turn.signal, log })
  const chosen = turn.cancelled ? null : answer
  const kind = options.find((o) => o.optionId === chosen)?.kind
  if (!turn.over) cards.settleCard(key, { status: kind?.startsWith('allow') ? 'completed' : 'failed' })
  return chosen
}

/**
 * The project's servers of one session, until they are decided: started at once when the
 * user allowed them for the workspace before, else asked about at the session's first turn.
 */
export class ProjectMcpGate {
  /**
   * @param {object} o
   * @param {ProjectServers | null} o.project
   * @param {McpApprovals | null} o.approvals  null: nothing is remembered (asked in every session)
   * @param {(servers: McpServerConfig[]) => void} o.start  adds servers to the session's
   * @param {(card: Card, options: PermissionOption[]) => Promise<string | null>} o.ask  a prompt in the running turn
   * @param {import('./log.mjs').Logger} o.log
   */
  constructor({ project, approvals, start, ask, log }) {
    this.project = project
    this.approvals = approvals
    this.start = start
    this.ask = ask
    this.log = log
    /** Whether the project's servers are decided for this session (started, or not). */
    this.decided = project === null
    /** @type {Promise<void> | null} */
    this.asking = null
    if (project) {
      const remembered = approvals?.answer(project.workspace, project.fingerprint)
      if (remembered !== undefined) this.#decide(remembered)
    }
  }

  /** @param {boolean} allowed */
  #decide(allowed) {
    const project = /** @type {ProjectServers} */ (this.project)
    this.decided = true
    if (allowed) this.log.info(`MCP servers of ${project.files.join(', ')} allowed in ${project.workspace}`)
    this.start(allowed ? project.servers : project.declined)
  }

  /**
   * Before a turn's request context: the project's servers decided, asking the user if no
   * answer is known (one question at a time; a cancelled one is asked again at the next turn).
   * @returns {Promise<void>}
   */
  beforeTurn() {
    if (this.decided) return Promise.resolve()
    this.asking ??= this.#askUser().finally(() => { this.asking = null })
    return this.asking
  }

  async #askUser() {
    const project = /** @type {ProjectServers} */ (this.project)
    const list = project.shown.map(describe).join('\n')
    /** @type {Card} */
    const card = {
      title: `Start the MCP servers of ${project.files.map((f) => path.relative(project.workspace, f) || f).join(', ')}?`,
      kind: 'execute',
      content: [{ type: 'content', content: { type: 'text', text: `This project's Cursor set-up starts these MCP servers on your machine:\n${list}` } }],
      locations: project.files.map((f) => ({ path: f })),
      rawInput: { workspace: project.workspace, files: project.files, servers: project.shown },
    }
    const chosen = await this.ask(card, PROJECT_MCP_OPTIONS)
    if (chosen === null || this.decided) return
    const allowed = chosen === 'allow-always' || chosen === 'allow-once'
    if (chosen === 'allow-always' || chosen === 'reject-always') {
      try {
        this.approvals?.remember(project.workspace, project.fingerprint, allowed)
      } catch (e) {
        this.log.warn('could not remember the answer about the MCP servers:', e)
      }
    }
    this.#decide(allowed)
  }
}

/**
 * The SHA-256 of `text`, in hex. node:crypto is loaded here, for the projects that have an
 * mcp.json, not with the module: every session imports this one, and the crypto module is
 * about 1 MiB of an idle agent's memory.
 * @param {string} text
 */
function sha256Hex(text) {
  const { createHash } = createRequire(import.meta.url)('node:crypto')
  return createHash('sha256').update(text).digest('hex')
}
