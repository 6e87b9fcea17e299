// @ts-check
// The MCP servers an editor hands to `session/new` (stdio, streamable HTTP, SSE), and those of
// the user's Cursor set-up (cursor-mcp.mjs), connected with
// the MCP client SDK: their tools are advertised to Cursor in the request context, and the
// server's `mcp` exec requests call them (the core asks the permission policy first, see permissions.mjs);
// `list_mcp_resources`, `read_mcp_resource` and `mcp_state` read their resources and state.
// The MCP client SDK is loaded with the first server: it takes longer to load than Node takes
// to start, and most sessions have no MCP servers.
//
// A stdio server ends with the agent however the agent ends (stdin closed, a signal, SIGKILL):
// on Unix it runs as the leader of a process group of its own, which the core's reaper (the
// watcher that also ends the built-in shells) is told of as it starts and as it ends.

import { loadAddon } from './addon.mjs'
import { VERSION } from './version.mjs'
import { builtin } from './builtin.mjs'

/** @typedef {import('@agentclientprotocol/sdk').McpServer} McpServerConfig */
/** @typedef {import('@modelcontextprotocol/client').Client} Client */
/** @typedef {import('@modelcontextprotocol/client').Transport} Transport */
/** @typedef {Awaited<ReturnType<Client['listTools']>>['tools'][number]} Tool */
/** @typedef {import('../index.js').agent.McpArgs} McpArgs */
/** @typedef {import('../index.js').agent.McpResult} McpResult */
/** @typedef {import('../index.js').agent.McpSuccess} McpSuccess */
/** @typedef {import('../index.js').agent.McpToolDefinition} McpToolDefinition */
/** @typedef {import('../index.js').agent.McpInstructions} McpInstructions */
/** @typedef {import('../index.js').agent.McpToolResultContentItem} McpContentItem */
/** @typedef {import('../index.js').agent.ListMcpResourcesExecResult} ListResourcesResult */
/** @typedef {import('../index.js').agent.ReadMcpResourceExecArgs} ReadResourceArgs */
/** @typedef {import('../index.js').agent.ReadMcpResourceExecResult} ReadResourceResult */
/** @typedef {import('../index.js').agent.McpStateExecResult} McpStateResult */

/** MCP's JSON-RPC error for a resource a server does not have. */
const RESOURCE_NOT_FOUND = -32002

/**
 * A server's tool an `mcp` exec names.
 * @typedef {{ server: string, tool: Tool, client: Client }} FoundTool
 */

const CONNECT_TIMEOUT_MS = 30_000
const CALL_TIMEOUT_MS = 10 * 60_000
/**
 * How long a stdio server has to exit once its stdin is closed, before its process group is
 * sent SIGTERM, then again before SIGKILL (MCP's stdio shutdown, shorter than the SDK's: the
 * agent ending waits for it).
 */
const EXIT_GRACE_MS = 1000

/** @type {Promise<typeof import('@modelcontextprotocol/client')> | undefined} */
let mcpClientSdk
const loadMcpClientSdk = () => (mcpClientSdk ??= import('@modelcontextprotocol/client'))

/**
 * @param {{ name: string, value: string }[] | undefined} list
 * @returns {Record<string, string>}
 */
const pairs = (list) => Object.fromEntries((list ?? []).map(({ name, value }) => [name, value]))

/**
 * @param {McpServerConfig} config
 * @param {string} cwd
 * @returns {Promise<Transport>}
 */
async function transportFor(config, cwd) {
  if ('type' in config && config.type === 'http') {
    const { StreamableHTTPClientTransport } = await loadMcpClientSdk()
    return new StreamableHTTPClientTransport(new URL(config.url), { requestInit: { headers: pairs(config.headers) } })
  }
  if ('type' in config && config.type === 'sse') {
    const { SSEClientTransport } = await loadMcpClientSdk()
    return new SSEClientTransport(new URL(config.url), { requestInit: { headers: pairs(config.headers) } })
  }
  const stdio = /** @type {import('@agentclientprotocol/sdk').McpServerStdio} */ (config)
  // The agent's own credentials stay with the agent (the model drives this server's tools); a
  // server whose configuration sets one gets it.
  const server = { command: stdio.command, args: stdio.args ?? [], env: { ...serverEnvironment(), ...pairs(stdio.env) }, cwd }
  if (process.platform !== 'win32') {
    const { ReadBuffer, serializeMessage } = await loadMcpClientSdk()
    // Loaded with the first stdio server, as the MCP client is (1 MiB for a session without).
    const { spawn } = builtin('node:child_process')
    const addon = loadAddon()
    return new ProcessGroupTransport(server, { ReadBuffer, serializeMessage, spawn, watch: (pgid) => addon.watchProcessGroup(pgid), forget: (pgid) => addon.forgetProcessGroup(pgid) })
  }
  // Windows: the SDK's transport (cross-spawn runs `npx.cmd` and the like through cmd.exe), the
  // server put in a job object of its own as soon as it runs.
  const { StdioClientTransport } = await import('@modelcontextprotocol/client/stdio')
  return heldInJob(new StdioClientTransport({ ...server, stderr: 'ignore' }), loadAddon())
}

/**
 * Windows has no process groups; a job object holds a process tree together instead. The core
 * puts the server in a job of its own (`watchProcessGroup`) the moment its spawn is reported,
 * before it has had time to start anything, so what it starts joins the job too: an `npx`
 * server's node.exe under cmd.exe, say. Windows ends the job's processes when the agent ends,
 * however it ends; closing the server ends them at once (the SDK's close ends only the process
 * it spawned, which for a `.cmd` server is cmd.exe).
 * @template {{ start(): Promise<void>, close(): Promise<void>, onerror?: (error: Error) => void, readonly pid: number | null }} T
 * @param {T} transport
 * @param {{ watchProcessGroup(pid: number): void, forgetProcessGroup(pid: number): void }} addon
 * @returns {T}
 */
function heldInJob(transport, addon) {
  const start = transport.start.bind(transport)
  const close = transport.close.bind(transport)
  /** @type {number | undefined} */
  let held
  transport.start = async () => {
    await start()
    const pid = transport.pid ?? undefined
    if (pid === undefined) return
    try {
      addon.watchProcessGroup(pid)
      held = pid
    } catch (e) {
      // The server still runs and is still ended by close(), only not what it started.
      transport.onerror?.(e instanceof Error ? e : new Error(String(e)))
    }
  }
  // MCP's stdio shutdown: stdin closed and a grace, then the whole tree ended at once. (Left to
  // itself, the SDK would end cmd.exe only, then wait for pipes its children still hold.)
  transport.close = async () => {
    const pid = held
    held = undefined
    const closing = close()
    if (pid === undefined) return closing
    await Promise.race([closing, new Promise((resolve) => setTimeout(resolve, EXIT_GRACE_MS).unref())])
    addon.forgetProcessGroup(pid)
    await closing
  }
  return transport
}

/**
 * A stdio MCP server (newline-delimited JSON-RPC on its stdin and stdout), as the SDK's
 * `StdioClientTransport` runs it, but spawned as the leader of a process group of its own that
 * the core's reaper watches from the moment it starts: the group is sent SIGTERM, then SIGKILL,
 * when the agent ends without closing it (a signal, SIGKILL, a crash). Closing it is MCP's
 * stdio shutdown: stdin closed, then SIGTERM, then SIGKILL, each to the whole group.
 * @implements {Transport}
 */
class ProcessGroupTransport {
  /**
   * @param {{ command: string, args: string[], env: Record<string, string>, cwd: string }} server
   * @param {{ ReadBuffer: typeof import('@modelcontextprotocol/client').ReadBuffer, serializeMessage: typeof import('@modelcontextprotocol/client').serializeMessage, spawn: typeof import('node:child_process').spawn, watch: (pgid: number) => void, forget: (pgid: number) => void }} o
   */
  constructor(server, { ReadBuffer, serializeMessage, spawn, watch, forget }) {
    this.server = server
    this.spawn = spawn
    this.readBuffer = new ReadBuffer()
    this.serializeMessage = serializeMessage
    this.watch = watch
    this.forget = forget
    /** @type {import('node:child_process').ChildProcess | undefined} */
    this.child = undefined
    /** Resolves once the server's process has exited (its group is then killed and forgotten). */
    this.exited = Promise.resolve()
    /** @type {Transport['onclose']} */
    this.onclose = undefined
    /** @type {Transport['onerror']} */
    this.onerror = undefined
    /** @type {Transport['onmessage']} */
    this.onmessage = undefined
  }

  /** @returns {Promise<void>} */
  start() {
    if (this.child) return Promise.reject(new Error('the MCP server is started already'))
    const { command, args, env, cwd } = this.server
    // detached: the child calls setsid, so it leads a new process group (and session) whose id
    // is its pid, and what it starts stays in that group.
    const child = this.spawn(command, args, { env, cwd, stdio: ['pipe', 'pipe', 'ignore'], detached: true, shell: false })
    this.child = child
    this.exited = new Promise((resolve) => child.once('exit', () => resolve(undefined)))
    return new Promise((resolve, reject) => {
      child.once('error', (error) => {
        reject(error)
        this.onerror?.(error)
      })
      child.once('spawn', () => {
        const pgid = /** @type {number} */ (child.pid)
        try {
          this.watch(pgid)
        } catch (e) {
          // The server still runs and is still ended by close(), only not after a crash.
          this.onerror?.(e instanceof Error ? e : new Error(String(e)))
        }
        child.once('exit', () => {
          // What the server started and left behind ends with it; then the id may be reused.
          signalGroup(pgid, 'SIGKILL')
          this.forget(pgid)
        })
        resolve()
      })
      child.once('close', () => {
        this.child = undefined
        this.onclose?.()
      })
      child.stdin?.on('error', (error) => this.onerror?.(error))
      child.stdout?.on('error', (error) => this.onerror?.(error))
      child.stdout?.on('data', (chunk) => {
        try {
          this.readBuffer.append(chunk)
          for (let message = this.readBuffer.readMessage(); message; message = this.readBuffer.readMessage()) this.onmessage?.(message)
        } catch (e) {
          // A line that is not JSON-RPC, or one over the SDK's buffer limit: the server is broken.
          this.onerror?.(e instanceof Error ? e : new Error(String(e)))
          this.close().catch(() => {})
        }
      })
    })
  }

  /**
   * @param {import('@modelcontextprotocol/client').JSONRPCMessage} message
   * @returns {Promise<void>}
   */
  send(message) {
    return new Promise((resolve, reject) => {
      const stdin = this.child?.stdin
      if (!stdin || stdin.destroyed) return reject(new Error('the MCP server is not running'))
      if (stdin.write(this.serializeMessage(message))) resolve()
      else stdin.once('drain', () => resolve())
    })
  }

  async close() {
    const child = this.child
    if (!child || child.pid === undefined) return
    const pgid = child.pid
    const exited = this.exited
    const within = (/** @type {number} */ ms) => Promise.race([exited.then(() => true), new Promise((resolve) => setTimeout(() => resolve(false), ms).unref())])
    child.stdin?.end()
    if (child.exitCode === null && child.signalCode === null && !(await within(EXIT_GRACE_MS))) {
      signalGroup(pgid, 'SIGTERM')
      if (!(await within(EXIT_GRACE_MS))) signalGroup(pgid, 'SIGKILL')
    }
    this.readBuffer.clear()
  }
}

/**
 * Sends `signal` to process group `pgid`; a group that is gone already is not an error.
 * @param {number} pgid
 * @param {NodeJS.Signals} signal
 */
function signalGroup(pgid, signal) {
  try {
    process.kill(-pgid, signal)
  } catch {
    // ESRCH: the group has ended.
  }
}

/**
 * The environment an MCP server gets from the agent: the agent's own, without the variables
 * that hold this product's credentials (the core's list).
 * @param {NodeJS.ProcessEnv} [env]
 * @returns {Record<string, string>}
 */
export function serverEnvironment(env = process.env) {
  return withoutOwnCredentials(cleanEnv(env))
}

/**
 * `env` without the variables that hold this product's own credentials (the core's list).
 * @param {Record<string, string>} env
 */
function withoutOwnCredentials(env) {
  const own = new Set(loadAddon().ownCredentialVariables().map((name) => name.toUpperCase()))
  return Object.fromEntries(Object.entries(env).filter(([name]) => !own.has(name.toUpperCase())))
}

/**
 * The environment without unset entries (the MCP SDK's type: every value a string).
 * @param {NodeJS.ProcessEnv} env
 * @returns {Record<string, string>}
 */
function cleanEnv(env) {
  return /** @type {Record<string, string>} */ (Object.fromEntries(Object.entries(env).filter(([, value]) => value !== undefined)))
}

/**
 * @template T
 * @param {Promise<T>} promise
 * @param {number} ms
 * @param {string} what
 * @returns {Promise<T>}
 */
async function withTimeout(promise, ms, what) {
  /** @type {NodeJS.Timeout | undefined} */
  let timer
  /** @type {Promise<never>} */
  const expired = new Promise((_, reject) => { timer = setTimeout(() => reject(new Error(`${what} did not answer within ${ms} ms`)), ms) })
  try {
    return await Promise.race([promise, expired])
  } finally {
    clearTimeout(timer)
  }
}

/**
 * A model sometimes sends an object argument as JSON text: parse it when the schema wants a non-string.
 * @param {Record<string, unknown> | undefined} args
 * @param {Tool['inputSchema'] | undefined} schema
 * @returns {Record<string, unknown>}
 */
function coerce(args, schema) {
  /** @type {Record<string, unknown>} */
  const out = {}
  const properties = /** @type {Record<string, { type?: unknown } | undefined> | undefined} */ (schema?.properties)
  for (const [key, value] of Object.entries(args ?? {})) {
    const type = properties?.[key]?.type
    if (typeof value === 'string' && type && type !== 'string') {
      try {
        out[key] = JSON.parse(value)
        continue
      } catch {}
    }
    out[key] = value
  }
  return out
}

/**
 * @param {any} item  an MCP content block
 * @returns {McpContentItem}
 */
function toCursorContent(item) {
  if (item.type === 'text') return { text: { text: item.text } }
  if (item.type === 'image') return { image: { data: item.data, mimeType: item.mimeType } }
  if (item.type === 'resource') return { text: { text: item.resource?.text ?? item.resource?.uri ?? '' } }
  if (item.type === 'resource_link') return { text: { text: item.uri } }
  return { text: { text: JSON.stringify(item) } }
}

export class McpServers {
  /**
   * Starts connecting to every server; `ready` settles once each is connected or given up.
   * @param {McpServerConfig[] | undefined} configs
   * @param {{ cwd: string, log: import('./log.mjs').Logger }} o
   */
  constructor(configs, { cwd, log }) {
    this.log = log
    this.cwd = cwd
    /** @type {Map<string, { client: Client, tools: Tool[], instructions: string | undefined }>} */
    this.servers = new Map()
    /** Servers that could not be connected, and why. */
    this.unavailable = /** @type {Map<string, string>} */ (new Map())
    /** Every client made, connected or still connecting: `close()` ends them all. */
    this.clients = /** @type {Set<Client>} */ (new Set())
    this.closed = false
    /** @type {Promise<unknown>} */
    this.ready = Promise.all((configs ?? []).map((config) => this.connect(config, cwd)))
  }

  /**
   * Starts connecting to more servers (a project's, once the user allowed them); `ready` then
   * settles once these are connected or given up too.
   * @param {McpServerConfig[]} configs
   */
  add(configs) {
    if (this.closed || configs.length === 0) return
    const more = Promise.all(configs.map((config) => this.connect(config, this.cwd)))
    this.ready = Promise.all([this.ready, more])
  }

  /**
   * @param {McpServerConfig} config
   * @param {string} cwd
   */
  async connect(config, cwd) {
    /** @type {Client | undefined} */
    let client
    try {
      const { Client } = await loadMcpClientSdk()
      const transport = await transportFor(config, cwd)
      // Closed while the SDK was loading: nothing is started.
      if (this.closed) return
      client = new Client({ name: 'cursor-acp-native', version: VERSION })
      this.clients.add(client)
      await withTimeout(client.connect(transport), CONNECT_TIMEOUT_MS, `MCP server ${config.name}`)
      const { tools } = await withTimeout(client.listTools(), CONNECT_TIMEOUT_MS, `MCP server ${config.name}`)
      if (this.closed) return
      this.servers.set(config.name, { client, tools, instructions: client.getInstructions() })
      this.log.info(`MCP server ${config.name}: ${tools.length} tools`)
    } catch (e) {
      const why = e instanceof Error ? e.message : String(e)
      this.unavailable.set(config.name, why)
      this.log.warn(`MCP server ${config.name} is unavailable: ${why}`)
      if (client) {
        this.clients.delete(client)
        client.close().catch(() => {})
      }
    }
  }

  /**
   * `RequestContext.tools`: every tool of every connected server.
   * @returns {McpToolDefinition[]}
   */
  definitions() {
    /** @type {McpToolDefinition[]} */
    const out = []
    for (const [server, { tools }] of this.servers) {
      for (const tool of tools) {
        out.push({ name: `${server}-${tool.name}`, providerIdentifier: server, toolName: tool.name, description: tool.description ?? '', inputSchema: tool.inputSchema ?? {} })
      }
    }
    return out
  }

  /** @returns {McpInstructions[]} */
  instructions() {
    return [...this.servers].filter(([, s]) => s.instructions).map(([server, s]) => ({ serverName: server, serverIdentifier: server, instructions: s.instructions }))
  }

  /**
   * The server and tool an `mcp` exec names, or the `McpResult` saying why there is none.
   * @param {McpArgs} args
   * @returns {FoundTool | { result: McpResult }}
   */
  find(args) {
    let server = args.providerIdentifier
    let toolName = args.toolName
    if (!server || !this.servers.has(server)) {
      // Fall back to the combined name `<server>-<tool>` of the request context.
      for (const [name, s] of this.servers) {
        const t = s.tools.find((tool) => `${name}-${tool.name}` === args.name)
        if (t) {
          server = name
          toolName = t.name
        }
      }
    }
    const entry = server === undefined ? undefined : this.servers.get(server)
    if (!server || !entry) return { result: { serverNotFound: { name: server ?? args.name ?? '', availableServers: [...this.servers.keys()] } } }
    const tool = entry.tools.find((t) => t.name === toolName)
    if (!tool) return { result: { toolNotFound: { name: toolName ?? '', availableTools: entry.tools.map((t) => t.name) } } }
    return { server, tool, client: entry.client }
  }

  /**
   * @param {FoundTool} found
   * @param {Record<string, unknown> | undefined} args
   * @param {AbortSignal | undefined} signal
   * @returns {Promise<McpResult>}
   */
  async call({ tool, client }, args, signal) {
    try {
      const result = await client.callTool({ name: tool.name, arguments: coerce(args, tool.inputSchema) }, { signal, timeout: CALL_TIMEOUT_MS })
      const content = /** @type {unknown[] | undefined} */ (result.content)
      /** @type {McpSuccess} */
      const success = { content: (content ?? []).map(toCursorContent), isError: Boolean(result.isError) }
      if (result.structuredContent) success.structuredContent = /** @type {Record<string, unknown>} */ (result.structuredContent)
      return { success }
    } catch (e) {
      return { error: { error: e instanceof Error ? e.message : String(e) } }
    }
  }

  /**
   * What the addon's core asks of the MCP client (its `mcp` callback), once the permission
   * policy allowed a tool call.
   * @param {import('../index.js').McpRequest} request
   * @param {AbortSignal | undefined} signal
   * @returns {Promise<import('../index.js').McpAnswer>}
   */
  async run(request, signal) {
    await this.ready
    switch (request.op) {
      case 'callTool': {
        const found = this.find({ providerIdentifier: request.server, toolName: request.tool })
        return 'result' in found ? found.result : this.call(found, request.args, signal)
      }
      case 'listResources':
        return this.listResources(request.server ?? undefined)
      case 'readResource':
        return this.readResource({ server: request.server, uri: request.uri }, signal)
      case 'state':
        return this.state(request.servers)
    }
  }

  /**
   * `list_mcp_resources`: the resources of one server, or of every server that has any.
   * @param {string | undefined} server
   * @returns {Promise<ListResourcesResult>}
   */
  async listResources(server) {
    await this.ready
    if (server && !this.servers.has(server)) return { error: { error: `no MCP server named ${server} (connected: ${[...this.servers.keys()].join(', ') || 'none'})` } }
    /** @type {NonNullable<NonNullable<ListResourcesResult['success']>['resources']>} */
    const resources = []
    for (const [name, { client }] of this.servers) {
      if ((server && name !== server) || !client.getServerCapabilities()?.resources) continue
      try {
        const listed = await withTimeout(client.listResources(), CONNECT_TIMEOUT_MS, `MCP server ${name}`)
        for (const r of listed.resources) {
          /** @type {(typeof resources)[number]} */
          const resource = { uri: r.uri, server: name }
          if (r.name) resource.name = r.name
          if (r.description) resource.description = r.description
          if (r.mimeType) resource.mimeType = r.mimeType
          resources.push(resource)
        }
      } catch (e) {
        return { error: { error: `MCP server ${name}: ${e instanceof Error ? e.message : String(e)}` } }
      }
    }
    return { success: { resources } }
  }

  /**
   * `read_mcp_resource`: a resource's text or bytes (the first of its contents).
   * @param {ReadResourceArgs} args
   * @param {AbortSignal | undefined} signal
   * @returns {Promise<ReadResourceResult>}
   */
  async readResource(args, signal) {
    await this.ready
    const uri = args.uri ?? ''
    const entry = args.server ? this.servers.get(args.server) : undefined
    if (!entry) return { error: { uri, error: `no MCP server named ${args.server ?? ''}` } }
    try {
      const read = await entry.client.readResource({ uri }, { signal, timeout: CALL_TIMEOUT_MS })
      const first = /** @type {{ uri?: string, mimeType?: string, text?: string, blob?: string } | undefined} */ (read.contents[0])
      if (!first) return { notFound: { uri } }
      const about = { uri: first.uri ?? uri, ...(first.mimeType ? { mimeType: first.mimeType } : {}) }
      if (typeof first.text === 'string') return { success: { ...about, text: first.text } }
      if (typeof first.blob === 'string') return { success: { ...about, blob: first.blob } }
      return { success: about }
    } catch (e) {
      const error = /** @type {{ code?: number, message?: string }} */ (e)
      if (error.code === RESOURCE_NOT_FOUND) return { notFound: { uri } }
      return { error: { uri, error: error.message ?? String(e) } }
    }
  }

  /**
   * `mcp_state`: the servers (all, or those named), their tools, instructions and status.
   * @param {string[]} names
   * @returns {Promise<McpStateResult>}
   */
  async state(names) {
    await this.ready
    const wanted = (/** @type {string} */ name) => names.length === 0 || names.includes(name)
    const definitions = this.definitions()
    const instructions = this.instructions()
    /** @type {NonNullable<NonNullable<McpStateResult['success']>['servers']>} */
    const servers = []
    for (const name of this.servers.keys()) {
      if (!wanted(name)) continue
      servers.push({
        serverName: name,
        serverIdentifier: name,
        tools: definitions.filter((d) => d.providerIdentifier === name),
        instructions: instructions.filter((i) => i.serverIdentifier === name),
        status: 'connected',
      })
    }
    for (const [name, why] of this.unavailable) {
      if (wanted(name)) servers.push({ serverName: name, serverIdentifier: name, status: `unavailable: ${why}` })
    }
    return { success: { servers } }
  }

  /** Ends every server, those still connecting too. */
  async close() {
    this.closed = true
    const clients = [...this.clients]
    this.clients.clear()
    this.servers.clear()
    await Promise.all(clients.map((client) => client.close().catch(() => {})))
  }
}
