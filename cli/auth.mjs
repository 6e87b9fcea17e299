// @ts-check
// Where the agent's access tokens come from, and how they are kept valid, as the official CLI
// does: `CURSOR_ACCESS_TOKEN` as it is; `CURSOR_API_KEY` exchanged at
// `/auth/exchange_user_api_key`, and exchanged again when the token's JWT `exp` is less than
// five minutes away or the server refused it; a stored login (`cursor-acp-native login`)
// refreshed the same way with its refresh token at `/oauth/token`. The addon asks
// `token({ reason })` before every stream, so a long session outlives any one token. No token
// is needed by local gateways and the embedded backend. Secrets never reach a log or an error.
//
// The calls themselves are the core's (the addon's `Account`): they go through the same HTTP
// stack as turns (the system's proxy settings and certificate store, errors naming the cause).
// This file keeps the policy: which source wins, when to renew, one renewal at a time, storage.
import { loadAddon } from './addon.mjs'
import { AUTH_METHOD_IDS } from './initialize.mjs'
import { echo } from './request-errors.mjs'
import { RequestError } from './acp.mjs'

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
 * The account calls to `baseUrl`, with the client headers the agent's turns send. Loads the
 * addon: call it only when a call is about to be made.
 * @param {string} baseUrl
 * @param {Partial<import('../index.js').AgentClientOptions>} [clientOptions]
 * @returns {import('../index.js').Account}
 */
export function accountFor(baseUrl, clientOptions = {}) {
  const { Account } = loadAddon()
  const { clientVersion, clientType, headers } = clientOptions
  return new Account({ baseUrl, clientVersion, clientType, headers })
}

/**
 * An error of the addon's account calls, said as what was being done, keeping its code.
 * @param {unknown} e
 * @param {string} message
 */
export function accountError(e, message) {
  const coded = /** @type {{ code?: string, httpStatus?: number }} */ (e)
  const error = /** @type {Error & { code?: string, httpStatus?: number }} */ (new Error(message, { cause: e }))
  if (coded?.code) error.code = coded.code
  if (coded?.httpStatus) error.httpStatus = coded.httpStatus
  return error
}

/** @param {unknown} e */
const messageOf = (e) => (e instanceof Error ? e.message : String(e))

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
   * @param {Partial<import('../index.js').AgentClientOptions>} [o.clientOptions]  the client
   *   headers (`clientVersion`, `clientType`, `headers`) the account calls send too
   */
  constructor({ baseUrl, env = process.env, needsAuth, store, log, clientOptions = {} }) {
    this.baseUrl = baseUrl
    this.clientOptions = clientOptions
    /** Made on the first call (it loads the addon). @type {import('../index.js').Account | null} */
    this.calls = null
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
      throw RequestError.invalidParams(undefined, `unknown auth method ${echo(methodId)}`)
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

  /** The addon's account calls, made once. */
  account() {
    return (this.calls ??= accountFor(this.baseUrl, this.clientOptions))
  }

  /** Exchanges the API key for a new access token. */
  async exchange() {
    let tokens
    try {
      tokens = await this.account().exchangeApiKey(this.env.CURSOR_API_KEY ?? '')
    } catch (e) {
      // A refused key says so (and to check CURSOR_API_KEY); anything else, what failed.
      throw accountError(e, /** @type {{ code?: string }} */ (e)?.code === 'E_AUTH' ? messageOf(e) : `cannot exchange the API key: ${messageOf(e)}`)
    }
    this.log.info('exchanged the API key for an access token')
    this.exchanged = tokens.accessToken
    return tokens.accessToken
  }

  /**
   * Refreshes a stored login's access token and stores it.
   * @param {import('./credentials.mjs').StoredLogin} login
   */
  async refresh(login) {
    let tokens
    try {
      tokens = await this.account().refresh(login.refreshToken, CURSOR_CLIENT_ID)
    } catch (e) {
      if (/** @type {{ code?: string }} */ (e)?.code === 'E_AUTH') throw accountError(e, `the Cursor login has expired or was revoked: ${SIGN_IN}`)
      throw accountError(e, `cannot refresh the Cursor login: ${messageOf(e)}`)
    }
    this.store.write({ accessToken: tokens.accessToken, refreshToken: tokens.refreshToken || login.refreshToken, baseUrl: login.baseUrl })
    this.log.info('refreshed the Cursor login')
    return tokens.accessToken
  }
}
