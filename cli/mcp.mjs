// @ts-check
// The MCP servers an editor hands to `session/new` (stdio, streamable HTTP, SSE), connected with
// the MCP client SDK: their tools are advertised to Cursor in the request context, and the
// server's `mcp` exec requests call them (behind a permission prompt, see exec-mapping.mjs).
// The MCP client SDK is loaded with the first server: it takes longer to load than Node takes
// to start, and most sessions have no MCP servers.
import { VERSION } from './version.mjs'

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

/**
 * A server's tool an `mcp` exec names.
 * @typedef {{ server: string, tool: Tool, client: Client }} FoundTool
 */

const CONNECT_TIMEOUT_MS = 30_000
const CALL_TIMEOUT_MS = 10 * 60_000

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
  const { StdioClientTransport } = await import('@modelcontextprotocol/client/stdio')
  return new StdioClientTransport({ command: stdio.command, args: stdio.args ?? [], env: { ...cleanEnv(process.env), ...pairs(stdio.env) }, cwd, stderr: 'ignore' })
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
    /** @type {Map<string, { client: Client, tools: Tool[], instructions: string | undefined }>} */
    this.servers = new Map()
    this.ready = Promise.all((configs ?? []).map((config) => this.connect(config, cwd)))
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
      client = new Client({ name: 'cursor-acp-native', version: VERSION })
      await withTimeout(client.connect(await transportFor(config, cwd)), CONNECT_TIMEOUT_MS, `MCP server ${config.name}`)
      const { tools } = await withTimeout(client.listTools(), CONNECT_TIMEOUT_MS, `MCP server ${config.name}`)
      this.servers.set(config.name, { client, tools, instructions: client.getInstructions() })
      this.log.info(`MCP server ${config.name}: ${tools.length} tools`)
    } catch (e) {
      this.log.warn(`MCP server ${config.name} is unavailable: ${e instanceof Error ? e.message : String(e)}`)
      client?.close().catch(() => {})
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

  async close() {
    await Promise.all([...this.servers.values()].map((s) => s.client.close().catch(() => {})))
    this.servers.clear()
  }
}
