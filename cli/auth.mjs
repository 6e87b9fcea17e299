// Credentials for the backend: CURSOR_ACCESS_TOKEN as is, or CURSOR_API_KEY exchanged once for an
// access token, or none for a local gateway. Secrets never reach logs or error messages.
import { RequestError } from '@agentclientprotocol/sdk'

export const AUTH_METHODS = [
  { id: 'cursor-access-token', name: 'Cursor access token', description: 'Set CURSOR_ACCESS_TOKEN in the agent environment' },
  { id: 'cursor-api-key', name: 'Cursor API key', description: 'Set CURSOR_API_KEY in the agent environment; it is exchanged for an access token' },
]

/** Whether `baseUrl` is Cursor's own service (which needs credentials) rather than a local gateway. */
export function isCursorHost(baseUrl) {
  try {
    const host = new URL(baseUrl).hostname
    return host === 'cursor.sh' || host.endsWith('.cursor.sh') || host.endsWith('.cursor.com')
  } catch {
    return false
  }
}

export class Credentials {
  constructor({ baseUrl, env = process.env, needsAuth, log }) {
    this.baseUrl = baseUrl
    this.env = env
    this.needsAuth = needsAuth
    this.log = log
    this.exchanged = null
  }

  /** The access token to use, exchanging an API key on first use; null for local gateways. */
  async token() {
    if (this.env.CURSOR_ACCESS_TOKEN) return this.env.CURSOR_ACCESS_TOKEN
    if (this.env.CURSOR_API_KEY) return this.exchange()
    if (this.needsAuth) throw RequestError.authRequired(undefined, 'Set CURSOR_ACCESS_TOKEN or CURSOR_API_KEY for the agent')
    return null
  }

  /** `authenticate`: checks that the chosen method's secret is present (and works, for API keys). */
  async authenticate(methodId) {
    if (methodId === 'cursor-access-token') {
      if (!this.env.CURSOR_ACCESS_TOKEN) throw RequestError.invalidParams(undefined, 'CURSOR_ACCESS_TOKEN is not set in the agent environment')
      return
    }
    if (methodId === 'cursor-api-key') {
      if (!this.env.CURSOR_API_KEY) throw RequestError.invalidParams(undefined, 'CURSOR_API_KEY is not set in the agent environment')
      this.exchanged = null
      await this.exchange()
      return
    }
    throw RequestError.invalidParams({ methodId }, `unknown auth method ${JSON.stringify(methodId)}`)
  }

  async exchange() {
    if (this.exchanged) return this.exchanged
    const url = new URL('/auth/exchange_user_api_key', this.baseUrl)
    let response
    try {
      response = await fetch(url, {
        method: 'POST',
        headers: { authorization: `Bearer ${this.env.CURSOR_API_KEY}`, 'content-type': 'application/json' },
        body: '{}',
        signal: AbortSignal.timeout(30_000),
      })
    } catch (e) {
      throw RequestError.internalError({ code: 'E_NETWORK', message: `API key exchange failed: ${e.cause?.code ?? e.name}` })
    }
    if (response.status === 401 || response.status === 403) {
      throw RequestError.internalError({ code: 'E_AUTH', message: `the API key was refused (HTTP ${response.status})` })
    }
    if (!response.ok) throw RequestError.internalError({ code: 'E_SERVER', message: `API key exchange failed with HTTP ${response.status}` })
    const body = await response.json().catch(() => ({}))
    if (typeof body.accessToken !== 'string' || !body.accessToken) {
      throw RequestError.internalError({ code: 'E_PROTOCOL', message: 'API key exchange answered without an accessToken' })
    }
    this.log.info('exchanged the API key for an access token')
    this.exchanged = body.accessToken
    return this.exchanged
  }
}
