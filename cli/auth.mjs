// @ts-check
// Where the agent's access tokens come from, and how they are kept valid, as the official CLI
// does: `CURSOR_ACCESS_TOKEN` as it is; `CURSOR_API_KEY` exchanged at
// `/auth/exchange_user_api_key`, and exchanged again when the token's JWT `exp` is less than
// five minutes away or the server refused it; a stored login (`cursor-acp-native login`)
// refreshed the same way with its refresh token at `/oauth/token`. The addon asks
// `token({ reason })` before every stream, so a long session outlives any one token. No token
// is needed by local gateways and the embedded backend. Secrets never reach a log or an error.
import { AUTH_METHOD_IDS } from './initialize.mjs'
import { RequestError } from './sdk.mjs'

const REQUEST_TIMEOUT_MS = 30_000
/** A token this close to its `exp` is renewed before use. */
const RENEW_MARGIN_MS = 5 * 60_000
/**
 * The public client id Cursor's own clients refresh login tokens with (the refresh-token grant
 * at `/oauth/token`).
 */
export const CURSOR_CLIENT_ID = 'KbZUR41cY7W6zRSdpSUJ7I7mLYBKOCmB'
/** What to do when signed out. */
export const SIGN_IN = 'run `cursor-acp-native login` in a terminal, or set CURSOR_API_KEY'

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

/**
 * The claims of a JWT-shaped token (not verified: for its expiry and subject only), or null.
 * @param {string} token
 * @returns {{ exp?: number, sub?: string } | null}
 */
export function claims(token) {
  try {
    const payload = JSON.parse(Buffer.from(token.split('.')[1] ?? '', 'base64url').toString('utf8'))
    return payload && typeof payload === 'object' ? payload : null
  } catch {
    return null
  }
}

/**
 * When `token` expires (ms since the epoch), or null when it does not say.
 * @param {string} token
 */
export function expiresAt(token) {
  const exp = claims(token)?.exp
  return typeof exp === 'number' && Number.isFinite(exp) ? exp * 1000 : null
}

/**
 * @param {string} a
 * @param {string} b
 */
export function sameOrigin(a, b) {
  try {
    return new URL(a).origin === new URL(b).origin
  } catch {
    return false
  }
}

/** @param {string} token */
function expiringSoon(token) {
  const at = expiresAt(token)
  return at !== null && at - Date.now() < RENEW_MARGIN_MS
}

/**
 * Where the credentials come from right now.
 * @typedef {'access-token' | 'api-key' | 'login' | 'none'} CredentialSource
 */

export class Credentials {
  /**
   * @param {object} o
   * @param {string} o.baseUrl
   * @param {NodeJS.ProcessEnv} [o.env]
   * @param {boolean} o.needsAuth  whether the backend refuses requests without credentials
   * @param {import('./credentials.mjs').CredentialStore} o.store  the stored login
   * @param {import('./log.mjs').Logger} o.log
   */
  constructor({ baseUrl, env = process.env, needsAuth, store, log }) {
    this.baseUrl = baseUrl
    this.env = env
    this.needsAuth = needsAuth
    this.store = store
    this.log = log
    /** The API key's current access token. @type {string | null} */
    this.exchanged = null
    /** One renewal at a time: streams starting together share it. @type {Promise<string> | null} */
    this.renewing = null
  }

  /** @returns {CredentialSource} */
  source() {
    if (this.env.CURSOR_ACCESS_TOKEN) return 'access-token'
    if (this.env.CURSOR_API_KEY) return 'api-key'
    if (this.storedLogin()) return 'login'
    return 'none'
  }

  /** The stored login, when it is for this agent's backend (a login is for one service). */
  storedLogin() {
    const login = this.store.read()
    return login && sameOrigin(login.baseUrl, this.baseUrl) ? login : null
  }

  /**
   * The addon's `accessToken` function: a token valid for the next stream, or null where none
   * is needed. `reason: 'unauthenticated'` (the server refused the last one) renews it.
   * @param {{ reason?: 'request' | 'unauthenticated' }} [request]
   * @returns {Promise<string | null>}
   */
  async token({ reason = 'request' } = {}) {
    const refused = reason === 'unauthenticated'
    switch (this.source()) {
      case 'access-token':
        // Nothing to renew it with: a refusal is reported, saying how to sign in.
        return this.env.CURSOR_ACCESS_TOKEN ?? null
      case 'api-key':
        if (this.exchanged && !refused && !expiringSoon(this.exchanged)) return this.exchanged
        return this.once(() => this.exchange())
      case 'login': {
        const login = this.storedLogin()
        if (!login) return null
        if (!refused && !expiringSoon(login.accessToken)) return login.accessToken
        return this.once(() => this.refresh(login))
      }
      case 'none':
        return null
    }
  }

  /** Whether `token()` answers without a request and without an error. */
  tokenAtHand() {
    if (this.env.CURSOR_ACCESS_TOKEN) return true
    if (this.env.CURSOR_API_KEY) return this.exchanged !== null
    return !this.needsAuth
  }

  /**
   * Runs `renew` unless a renewal is under way, whose token is shared.
   * @param {() => Promise<string>} renew
   */
  once(renew) {
    if (!this.renewing) this.renewing = renew().finally(() => { this.renewing = null })
    return this.renewing
  }

  /** `session/new` on Cursor's service without any credentials: auth_required. */
  ensure() {
    if (this.needsAuth && this.source() === 'none') throw RequestError.authRequired(undefined, `Not signed in to Cursor: ${SIGN_IN}`)
  }

  /**
   * `authenticate`: succeeds whenever the agent can work (no credentials needed, or some that
   * work), fails with what to do otherwise.
   * @param {string} methodId
   */
  async authenticate(methodId) {
    if (!Object.values(AUTH_METHOD_IDS).includes(/** @type {any} */ (methodId))) {
      throw RequestError.invalidParams({ methodId }, `unknown auth method ${JSON.stringify(methodId)}`)
    }
    const source = this.source()
    if (source === 'none') {
      if (!this.needsAuth) return
      throw RequestError.authRequired(undefined, `Not signed in to Cursor: ${SIGN_IN}`)
    }
    try {
      await this.token()
    } catch (e) {
      throw RequestError.authRequired({ code: 'E_AUTH' }, e instanceof Error ? e.message : String(e))
    }
  }

  /** Exchanges the API key for a new access token. */
  async exchange() {
    const response = await this.post('/auth/exchange_user_api_key', {}, { authorization: `Bearer ${this.env.CURSOR_API_KEY}` }, 'exchange the API key')
    if (response.status === 401 || response.status === 403) {
      throw new Error(`the API key was refused (HTTP ${response.status}): check CURSOR_API_KEY`)
    }
    if (!response.ok) throw new Error(`the API key exchange failed with HTTP ${response.status}`)
    const body = /** @type {{ accessToken?: unknown }} */ (await response.json().catch(() => ({})))
    if (typeof body.accessToken !== 'string' || !body.accessToken) throw new Error('the API key exchange answered without an accessToken')
    this.log.info('exchanged the API key for an access token')
    this.exchanged = body.accessToken
    return body.accessToken
  }

  /**
   * Refreshes a stored login's access token and stores it.
   * @param {import('./credentials.mjs').StoredLogin} login
   */
  async refresh(login) {
    const grant = { grant_type: 'refresh_token', client_id: CURSOR_CLIENT_ID, refresh_token: login.refreshToken }
    const response = await this.post('/oauth/token', grant, {}, 'refresh the login')
    const body = /** @type {Record<string, unknown>} */ (await response.json().catch(() => ({})))
    if (response.status === 400 || response.status === 401 || response.status === 403 || body.shouldLogout === true) {
      throw new Error(`the Cursor login has expired or was revoked: ${SIGN_IN}`)
    }
    if (!response.ok) throw new Error(`refreshing the Cursor login failed with HTTP ${response.status}`)
    const accessToken = body.access_token ?? body.accessToken
    const refreshToken = body.refresh_token ?? body.refreshToken
    if (typeof accessToken !== 'string' || !accessToken) throw new Error('the login refresh answered without an access token')
    this.store.write({ accessToken, refreshToken: typeof refreshToken === 'string' && refreshToken ? refreshToken : login.refreshToken, baseUrl: login.baseUrl })
    this.log.info('refreshed the Cursor login')
    return accessToken
  }

  /**
   * A JSON POST to the backend; network failures say what was being done, never with a secret.
   * @param {string} path
   * @param {object} body
   * @param {Record<string, string>} headers
   * @param {string} doing
   */
  async post(path, body, headers, doing) {
    const url = new URL(path, this.baseUrl)
    try {
      return await fetch(url, {
        method: 'POST',
        headers: { 'content-type': 'application/json', ...headers },
        body: JSON.stringify(body),
        signal: AbortSignal.timeout(REQUEST_TIMEOUT_MS),
      })
    } catch (e) {
      const error = /** @type {{ name?: string, cause?: { code?: string } }} */ (e)
      throw new Error(`cannot reach ${url.origin} to ${doing} (${error.cause?.code ?? error.name})`)
    }
  }
}
