// @ts-check
// `session/fork`, as far as it is not the agent's session lifecycle: its params checked and the
// fork's saved record. The method is in ACP v1's unstable schema only; the agent's app (acp.mjs)
// checks the stable schema's methods (the unstable one changes the types every module shares, MCP
// servers of kinds this agent does not run included) and takes this one with the parser below,
// which checks what the unstable schema says a fork's params are.
import { echo } from './request-errors.mjs'
import { RequestError } from './acp.mjs'

/** @typedef {import('@agentclientprotocol/sdk').McpServer} McpServerConfig */
/** @typedef {import('./store.mjs').SessionRecord} SessionRecord */

/**
 * What this agent reads of `session/fork`'s params (`systemPrompt` is not advertised, so not read).
 * @typedef {object} ForkParams
 * @property {string} sessionId
 * @property {string} cwd
 * @property {string[]} [additionalDirectories]
 * @property {McpServerConfig[]} [mcpServers]
 */

/**
 * @param {unknown} value
 * @returns {value is Record<string, unknown>}
 */
const isObject = (value) => typeof value === 'object' && value !== null && !Array.isArray(value)

/**
 * @param {unknown} list
 * @returns {boolean}
 */
const isPairs = (list) => Array.isArray(list) && list.every((p) => isObject(p) && typeof p.name === 'string' && typeof p.value === 'string')

/**
 * Whether `server` is an MCP server of a kind ACP's stable schema has (stdio, http, sse).
 * @param {unknown} server
 * @returns {server is McpServerConfig}
 */
function isMcpServer(server) {
  if (!isObject(server) || typeof server.name !== 'string') return false
  if (server.type === 'http' || server.type === 'sse') return typeof server.url === 'string' && isPairs(server.headers)
  if (server.type !== undefined && server.type !== 'stdio') return false
  return typeof server.command === 'string' && Array.isArray(server.args) && server.args.every((a) => typeof a === 'string') && isPairs(server.env)
}

/**
 * The params of `session/fork`, checked as the schema has them; otherwise an invalid-params
 * error (-32602), before anything is read or written.
 * @param {unknown} params
 * @returns {ForkParams}
 */
export function forkParams(params) {
  const bad = (/** @type {string} */ what) => RequestError.invalidParams(undefined, `session/fork: ${what}`)
  if (!isObject(params)) throw bad(`params must be an object, got ${echo(params)}`)
  const { sessionId, cwd, additionalDirectories, mcpServers } = params
  if (typeof sessionId !== 'string') throw bad(`sessionId must be a string, got ${echo(sessionId)}`)
  if (typeof cwd !== 'string') throw bad(`cwd must be a string, got ${echo(cwd)}`)
  if (additionalDirectories != null && (!Array.isArray(additionalDirectories) || !additionalDirectories.every((d) => typeof d === 'string'))) {
    throw bad('additionalDirectories must be an array of strings')
  }
  if (mcpServers != null && (!Array.isArray(mcpServers) || !mcpServers.every(isMcpServer))) throw bad('mcpServers must be an array of stdio, http or sse MCP servers')
  return {
    sessionId,
    cwd,
    ...(additionalDirectories != null ? { additionalDirectories: /** @type {string[]} */ (additionalDirectories) } : {}),
    ...(mcpServers != null ? { mcpServers: /** @type {McpServerConfig[]} */ (mcpServers) } : {}),
  }
}

/**
 * The record of a fork of `source`: its conversation (checkpoint, the card ids it used, mode,
 * model) and its title as they were last saved, under a new session id, which is also the
 * fork's conversation id (the server sees a conversation of its own, as for a new session),
 * in the fork's own workspace.
 * @param {SessionRecord} source
 * @param {{ sessionId: string, cwd: string, additionalDirectories: string[] }} fork
 * @returns {SessionRecord}
 */
export function forkRecord(source, { sessionId, cwd, additionalDirectories }) {
  return {
    ...source,
    sessionId,
    cwd,
    additionalDirectories,
    updatedAt: new Date().toISOString(),
    ...(source.saved ? { saved: { ...source.saved, conversationId: sessionId, cwd } } : {}),
  }
}
