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

/**
 * The auth methods' ids, as `authenticate` receives them. `cursor_login` is the id Cursor's own
 * `agent acp` gives its login.
 */
export const AUTH_METHOD_IDS = /** @type {const} */ ({ login: 'cursor_login', accessToken: 'cursor-access-token', apiKey: 'cursor-api-key' })

/**
 * How this agent was started, for a client to run `login` the same way in a terminal: the
 * program and its arguments (the subcommand is appended). Set once by bin/ before `initialize`.
 * @type {{ command: string, args: string[] }}
 */
const invocation = { command: process.execPath, args: [] }

/**
 * @param {string} command
 * @param {string[]} args
 */
export function setInvocation(command, args) {
  invocation.command = command
  invocation.args = args
}

const LOGIN_DESCRIPTION = 'Sign in with your Cursor account in a browser (`cursor-acp-native login`); the login is stored for you only and refreshed as needed'

/**
 * The methods an editor can sign in with. The login is a terminal command: as ACP's own
 * `terminal` method where the client says it runs those (`clientCapabilities.auth.terminal`),
 * and with Zed's `_meta["terminal-auth"]` launch hint where the client asks for that; for any
 * other client an ordinary method, which `authenticate` accepts whenever the agent can work.
 * Only the request is read: nothing here may touch a file (this answers the first
 * `initialize` before anything else is loaded).
 * @param {InitializeRequest['clientCapabilities']} [capabilities]
 * @returns {AuthMethod[]}
 */
export function authMethods(capabilities) {
  const meta = /** @type {Record<string, unknown> | undefined} */ (capabilities?._meta)
  const launch = meta?.['terminal-auth'] === true
    ? { 'terminal-auth': { label: 'Log in to Cursor', command: invocation.command, args: [...invocation.args, 'login'], env: {} } }
    : undefined
  const name = 'Log in with Cursor'
  /** @type {AuthMethod} */
  const login = capabilities?.auth?.terminal === true
    ? { type: 'terminal', id: AUTH_METHOD_IDS.login, name, description: LOGIN_DESCRIPTION, args: ['login'], env: {}, ...(launch ? { _meta: launch } : {}) }
    : { id: AUTH_METHOD_IDS.login, name, description: LOGIN_DESCRIPTION, ...(launch ? { _meta: launch } : {}) }
  return [
    login,
    { id: AUTH_METHOD_IDS.apiKey, name: 'Cursor API key', description: 'Set CURSOR_API_KEY in the agent environment; it is exchanged for access tokens as needed' },
    { id: AUTH_METHOD_IDS.accessToken, name: 'Cursor access token', description: 'Set CURSOR_ACCESS_TOKEN in the agent environment (it is not renewed)' },
  ]
}

/**
 * The session methods beyond new, load and prompt. `fork` is in ACP v1's unstable schema only,
 * whose type has it (the stable one's does not; a client that does not know it ignores it).
 * @returns {import('@agentclientprotocol/sdk/unstable').SessionCapabilities}
 */
function sessionCapabilities() {
  return { list: {}, resume: {}, close: {}, delete: {}, additionalDirectories: {}, fork: {} }
}

/**
 * @param {Pick<InitializeRequest, 'protocolVersion'> & Partial<Pick<InitializeRequest, 'clientCapabilities'>>} request
 * @returns {InitializeResponse}
 */
export function initializeResponse({ protocolVersion, clientCapabilities }) {
  return {
    protocolVersion: Math.min(protocolVersion, PROTOCOL_VERSION),
    agentCapabilities: {
      loadSession: true,
      promptCapabilities: { image: true, audio: false, embeddedContext: true },
      mcpCapabilities: { http: true, sse: true },
      sessionCapabilities: sessionCapabilities(),
      auth: { logout: {} },
      // Extension methods: `_cursor/steer` sends a message into the running turn.
      _meta: { cursor: { steer: true } },
    },
    authMethods: authMethods(clientCapabilities),
    agentInfo: { name: 'cursor-acp-native', title: 'Cursor (native)', version: VERSION },
  }
}
