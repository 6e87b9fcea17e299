// @ts-check
// Credentials for the backend: CURSOR_ACCESS_TOKEN as is, or CURSOR_API_KEY exchanged once for an
// access token, or none for a local gateway. Secrets never reach logs or error messages.
import { AUTH_METHOD_IDS } from './initialize.mjs'
import { RequestError } from './sdk.mjs'

const EXCHANGE_TIMEOUT_MS = 30_000

/**
 * Whether `baseUrl` is Cursor's own service (which needs credentials) rather than a local gateway.
 * @param {string} baseUrl
 */
export function isCursorHost(baseUrl) {
  try {
    const host = new URL(baseUrl).hostname
    return host === 'cursor.sh' || host.endsWith('.cursor.sh') || host.endsWith('.cursor.com')
  } catch {
    return false
  }
}

export class Credentials {
  /**
   * @param {object} o
   * @param {string} o.baseUrl
   * @param {NodeJS.ProcessEnv} [o.env]
   * @param {boolean} o.needsAuth  whether the backend refuses requests without credentials
   * @param {import('./log.mjs').Logger} o.log
   */
  constructor({ baseUrl, env = process.env, needsAuth, log }) {
    this.baseUrl = baseUrl
    this.env = env
    this.needsAuth = needsAuth
    this.log = log
    /** @type {string | null} */
    this.exchanged = null
  }

  /**
   * The access token to use, exchanging an API key on first use; null for local gateways.
   * @returns {Promise<string | null>}
   */
  async token() {
    if (this.env.CURSOR_ACCESS_TOKEN) return this.env.CURSOR_ACCESS_TOKEN
    if (this.env.CURSOR_API_KEY) return this.exchange()
    if (this.needsAuth) throw RequestError.authRequired(undefined, 'Set CURSOR_ACCESS_TOKEN or CURSOR_API_KEY for the agent')
    return null
  }

  /** Whether `token()` answers without a request and without an error. */
  tokenAtHand() {
    if (this.env.CURSOR_ACCESS_TOKEN) return true
    if (this.env.CURSOR_API_KEY) return this.exchanged !== null
    return !this.needsAuth
  }

  /**
   * `authenticate`: checks that the chosen method's secret is present (and works, for API keys).
   * @param {string} methodId
   */
  async authenticate(methodId) {
    if (methodId === AUTH_METHOD_IDS.accessToken) {
      if (!this.env.CURSOR_ACCESS_TOKEN) throw RequestError.invalidParams(undefined, 'CURSOR_ACCESS_TOKEN is not set in the agent environment')
      return
    }
    if (methodId === AUTH_METHOD_IDS.apiKey) {
      if (!this.env.CURSOR_API_KEY) throw RequestError.invalidParams(undefined, 'CURSOR_API_KEY is not set in the agent environment')
      this.exchanged = null
      await this.exchange()
      return
    }
    throw RequestError.invalidParams({ methodId }, `unknown auth method ${JSON.stringify(methodId)}`)
  }

  /** @returns {Promise<string>} */
  async exchange() {
    if (this.exchanged) return this.exchanged
    const url = new URL('/auth/exchange_user_api_key', this.baseUrl)
    let response
    try {
      response = await fetch(url, {
        method: 'POST',
        headers: { authorization: `Bearer ${this.env.CURSOR_API_KEY}`, 'content-type': 'application/json' },
        body: '{}',
        signal: AbortSignal.timeout(EXCHANGE_TIMEOUT_MS),
      })
    } catch (e) {
      const error = /** @type {{ name?: string, cause?: { code?: string } }} */ (e)
      throw RequestError.internalError({ code: 'E_NETWORK', message: `API key exchange failed: ${error.cause?.code ?? error.name}` })
    }
    if (response.status === 401 || response.status === 403) {
      throw RequestError.internalError({ code: 'E_AUTH', message: `the API key was refused (HTTP ${response.status})` })
    }
    if (!response.ok) throw RequestError.internalError({ code: 'E_SERVER', message: `API key exchange failed with HTTP ${response.status}` })
    const body = /** @type {{ accessToken?: unknown }} */ (await response.json().catch(() => ({})))
    if (typeof body.accessToken !== 'string' || !body.accessToken) {
      throw RequestError.internalError({ code: 'E_PROTOCOL', message: 'API key exchange answered without an accessToken' })
    }
    this.log.info('exchanged the API key for an access token')
    this.exchanged = body.accessToken
    return body.accessToken
  }
}
