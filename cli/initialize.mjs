// @ts-check
// The agent's answer to `initialize`: the protocol version, what it implements, how to log in
// and who it is. This module loads nothing but the package version, so that stdio.mjs can
// answer the first `initialize` before the ACP SDK is loaded; the SDK's `initialize` handler
// answers with the same function.
import { VERSION } from './version.mjs'

/** @typedef {import('@agentclientprotocol/sdk').InitializeRequest} InitializeRequest */
/** @typedef {import('@agentclientprotocol/sdk').InitializeResponse} InitializeResponse */
/** @typedef {import('@agentclientprotocol/sdk').AuthMethod} AuthMethod */

/**
 * The newest ACP version this agent speaks. Its type is the SDK's own constant, so an SDK that
 * speaks another version fails the type check here until this is brought along.
 * @type {typeof import('@agentclientprotocol/sdk').PROTOCOL_VERSION}
 */
export const PROTOCOL_VERSION = 1

/** The auth methods' ids, as `authenticate` receives them. */
export const AUTH_METHOD_IDS = /** @type {const} */ ({ accessToken: 'cursor-access-token', apiKey: 'cursor-api-key' })

/** @type {AuthMethod[]} */
export const AUTH_METHODS = [
  { id: AUTH_METHOD_IDS.accessToken, name: 'Cursor access token', description: 'Set CURSOR_ACCESS_TOKEN in the agent environment' },
  { id: AUTH_METHOD_IDS.apiKey, name: 'Cursor API key', description: 'Set CURSOR_API_KEY in the agent environment; it is exchanged for an access token' },
]

/**
 * @param {Pick<InitializeRequest, 'protocolVersion'>} request
 * @returns {InitializeResponse}
 */
export function initializeResponse({ protocolVersion }) {
  return {
    protocolVersion: Math.min(protocolVersion, PROTOCOL_VERSION),
    agentCapabilities: {
      loadSession: true,
      promptCapabilities: { image: true, audio: false, embeddedContext: true },
      mcpCapabilities: { http: true, sse: true },
      sessionCapabilities: { list: {}, resume: {}, close: {}, delete: {} },
    },
    authMethods: AUTH_METHODS,
    agentInfo: { name: 'cursor-acp-native', title: 'Cursor (native)', version: VERSION },
  }
}
