// The MCP servers an editor hands to `session/new` (stdio, streamable HTTP, SSE), connected with
// the MCP client SDK: their tools are advertised to Cursor in the request context, and the
// server's `mcp` exec requests call them (behind a permission prompt, in session.mjs).
import { createRequire } from 'node:module'
import { Client, SSEClientTransport, StreamableHTTPClientTransport } from '@modelcontextprotocol/client'
import { StdioClientTransport } from '@modelcontextprotocol/client/stdio'

const require = createRequire(import.meta.url)
const { version } = require('../package.json')

const CONNECT_TIMEOUT_MS = 30_000
const CALL_TIMEOUT_MS = 10 * 60_000

const pairs = (list) => Object.fromEntries((list ?? []).map(({ name, value }) => [name, value]))

function transportFor(config, cwd) {
  if (config.type === 'http') return new StreamableHTTPClientTransport(new URL(config.url), { requestInit: { headers: pairs(config.headers) } })
  if (config.type === 'sse') return new SSEClientTransport(new URL(config.url), { requestInit: { headers: pairs(config.headers) } })
  return new StdioClientTransport({ command: config.command, args: config.args ?? [], env: { ...process.env, ...pairs(config.env) }, cwd, stderr: 'ignore' })
}

async function withTimeout(promise, ms, what) {
  let timer
  const expired = new Promise((_, reject) => { timer = setTimeout(() => reject(new Error(`${what} did not answer within ${ms} ms`)), ms) })
  try {
    return await Promise.race([promise, expired])
  } finally {
    clearTimeout(timer)
  }
}

/** A model sometimes sends an object argument as JSON text: parse it when the schema wants a non-string. */
function coerce(args, schema) {
  const out = {}
  for (const [key, value] of Object.entries(args ?? {})) {
    const type = schema?.properties?.[key]?.type
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

function toCursorContent(item) {
  if (item.type === 'text') return { text: { text: item.text } }
  if (item.type === 'image') return { image: { data: item.data, mimeType: item.mimeType } }
  if (item.type === 'resource') return { text: { text: item.resource?.text ?? item.resource?.uri ?? '' } }
  if (item.type === 'resource_link') return { text: { text: item.uri } }
  return { text: { text: JSON.stringify(item) } }
}

export class McpServers {
  constructor(configs, { cwd, log }) {
    this.log = log
    this.servers = new Map()
    this.ready = Promise.all((configs ?? []).map((config) => this.connect(config, cwd)))
  }

  async connect(config, cwd) {
    const client = new Client({ name: 'cursor-acp-native', version })
    try {
      await withTimeout(client.connect(transportFor(config, cwd)), CONNECT_TIMEOUT_MS, `MCP server ${config.name}`)
      const { tools } = await withTimeout(client.listTools(), CONNECT_TIMEOUT_MS, `MCP server ${config.name}`)
      this.servers.set(config.name, { client, tools, instructions: client.getInstructions() })
      this.log.info(`MCP server ${config.name}: ${tools.length} tools`)
    } catch (e) {
      this.log.warn(`MCP server ${config.name} is unavailable: ${e.message}`)
      client.close().catch(() => {})
    }
  }

  /** `RequestContext.tools`: every tool of every connected server. */
  definitions() {
    const out = []
    for (const [server, { tools }] of this.servers) {
      for (const tool of tools) {
        out.push({ name: `${server}-${tool.name}`, providerIdentifier: server, toolName: tool.name, description: tool.description ?? '', inputSchema: tool.inputSchema ?? {} })
      }
    }
    return out
  }

  instructions() {
    return [...this.servers].filter(([, s]) => s.instructions).map(([server, s]) => ({ serverName: server, serverIdentifier: server, instructions: s.instructions }))
  }

  /** The server and tool an `mcp` exec names, or the `McpResult` saying why there is none. */
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
    const entry = this.servers.get(server)
    if (!entry) return { result: { serverNotFound: { name: server ?? args.name ?? '', availableServers: [...this.servers.keys()] } } }
    const tool = entry.tools.find((t) => t.name === toolName)
    if (!tool) return { result: { toolNotFound: { name: toolName ?? '', availableTools: entry.tools.map((t) => t.name) } } }
    return { server, tool, client: entry.client }
  }

  async call({ tool, client }, args, signal) {
    try {
      const result = await client.callTool({ name: tool.name, arguments: coerce(args, tool.inputSchema) }, { signal, timeout: CALL_TIMEOUT_MS })
      const success = { content: (result.content ?? []).map(toCursorContent), isError: Boolean(result.isError) }
      if (result.structuredContent) success.structuredContent = result.structuredContent
      return { success }
    } catch (e) {
      return { error: { error: e.message } }
    }
  }

  async close() {
    await Promise.all([...this.servers.values()].map((s) => s.client.close().catch(() => {})))
    this.servers.clear()
  }
}
