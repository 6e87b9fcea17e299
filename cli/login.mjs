// @ts-check
// The terminal commands: `login` (the official CLI's browser sign-in), `logout`, `status` and
// `--list-models`. Their output is for a person and goes to stdout; none of them prints a
// token, a refresh token or an API key.
//
// The sign-in: a 32-byte random verifier (base64url), challenge = base64url(SHA-256(verifier))
// and a UUID; the user opens `<website>/loginDeepControl?challenge=…&uuid=…&mode=login&
// redirectTarget=cli` and signs in; meanwhile `GET <api>/auth/poll?uuid=…&verifier=…` answers
// 404 while pending, and `{ accessToken, refreshToken }` once signed in. Polls back off from 1 s
// by 1.2× up to 10 s, at most 150 of them, and stop after 3 failures in a row that are not 404.
// Each poll is the core's (the addon's `Account.pollLogin`, through the same HTTP stack as turns);
// the schedule and when to give up are decided here.

import { AlwaysAllowed } from './always-allowed.mjs'
import { SIGN_IN, accountFor, claims, expiresAt, isCursorHost } from './auth.mjs'
import { builtin } from './builtin.mjs'

const { spawn } = builtin('node:child_process')
const crypto = builtin('node:crypto')
const path = builtin('node:path')

/** The official CLI's polling. */
export const POLLING = /** @type {const} */ ({ firstDelayMs: 1000, factor: 1.2, maxDelayMs: 10_000, maxAttempts: 150, maxErrorsInARow: 3 })

export class LoginError extends Error {}

/** @param {Buffer} bytes */
const base64url = (bytes) => bytes.toString('base64url')

/** A new sign-in: the verifier stays here, the challenge and UUID go in the URL. */
export function loginParams() {
  const verifier = base64url(crypto.randomBytes(32))
  const challenge = base64url(crypto.createHash('sha256').update(verifier).digest())
  return { verifier, challenge, uuid: crypto.randomUUID() }
}

/**
 * Where the user signs in: cursor.com for Cursor's service, else the backend itself (a gateway
 * or the embedded backend serves the page); `CURSOR_ACP_LOGIN_URL` overrides it.
 * @param {string} baseUrl
 * @param {NodeJS.ProcessEnv} env
 */
export function websiteFor(baseUrl, env) {
  if (env.CURSOR_ACP_LOGIN_URL) return env.CURSOR_ACP_LOGIN_URL
  return isCursorHost(baseUrl) ? 'https://cursor.com' : baseUrl
}

/**
 * @param {string} website
 * @param {{ challenge: string, uuid: string }} params
 */
export function loginUrl(website, { challenge, uuid }) {
  const url = new URL('/loginDeepControl', website)
  for (const [k, v] of Object.entries({ challenge, uuid, mode: 'login', redirectTarget: 'cli' })) url.searchParams.set(k, v)
  return url.toString()
}

/**
 * Polls until the sign-in completes.
 * @param {object} o
 * @param {string} o.baseUrl
 * @param {string} o.uuid
 * @param {string} o.verifier
 * @param {Partial<typeof POLLING>} [o.polling]  (tests shorten the delays)
 * @param {AbortSignal} [o.signal]
 * @param {Partial<import('../index.js').AgentClientOptions>} [o.clientOptions]  client headers sent with each poll
 * @returns {Promise<{ accessToken: string, refreshToken: string }>}
 */
export async function pollForLogin({ baseUrl, uuid, verifier, polling = {}, signal, clientOptions }) {
  const p = { ...POLLING, ...polling }
  let account
  try {
    account = accountFor(baseUrl, clientOptions)
  } catch (e) {
    throw new LoginError(`cannot poll the sign-in service: ${e instanceof Error ? e.message : String(e)}`)
  }
  let errorsInARow = 0
  let lastError = ''
  for (let attempt = 0; attempt < p.maxAttempts; attempt++) {
    if (attempt > 0) await sleep(Math.min(p.firstDelayMs * p.factor ** (attempt - 1), p.maxDelayMs), signal)
    let tokens
    try {
      tokens = await abortable(account.pollLogin(uuid, verifier), signal)
    } catch (e) {
      if (signal?.aborted) throw new LoginError('the sign-in was cancelled')
      const error = /** @type {{ code?: string, httpStatus?: number, message?: string }} */ (e)
      // A success without tokens will not get better; a bad request neither.
      if (error.code === 'E_PROTOCOL') throw new LoginError('the sign-in service answered without tokens')
      if (error.code === 'E_INVALID') throw new LoginError(`cannot poll the sign-in service: ${error.message}`)
      lastError = error.code === 'E_SERVER' && error.httpStatus
        ? `the sign-in service answered HTTP ${error.httpStatus}`
        : `cannot reach the sign-in service (${error.message ?? String(e)})`
      if (++errorsInARow >= p.maxErrorsInARow) break
      continue
    }
    if (tokens === null) {
      // Pending: the user has not signed in yet.
      errorsInARow = 0
      continue
    }
    return { accessToken: tokens.accessToken, refreshToken: tokens.refreshToken ?? '' }
  }
  if (errorsInARow >= p.maxErrorsInARow) throw new LoginError(`giving up after ${errorsInARow} failed polls in a row: ${lastError}`)
  throw new LoginError(`the sign-in did not complete (no answer after ${p.maxAttempts} polls): run login again`)
}

/**
 * `promise`, or a rejection as soon as `signal` aborts (the call itself ends within its own
 * time limit; its answer is then ignored).
 * @template T
 * @param {Promise<T>} promise
 * @param {AbortSignal} [signal]
 * @returns {Promise<T>}
 */
function abortable(promise, signal) {
  if (!signal) return promise
  if (signal.aborted) return Promise.reject(new LoginError('the sign-in was cancelled'))
  return new Promise((resolve, reject) => {
    const onAbort = () => reject(new LoginError('the sign-in was cancelled'))
    signal.addEventListener('abort', onAbort, { once: true })
    promise.then(resolve, reject).finally(() => signal.removeEventListener('abort', onAbort))
  })
}

/**
 * @param {number} ms
 * @param {AbortSignal} [signal]
 */
function sleep(ms, signal) {
  return new Promise((resolve, reject) => {
    const timer = setTimeout(resolve, ms)
    signal?.addEventListener('abort', () => {
      clearTimeout(timer)
      reject(new LoginError('the sign-in was cancelled'))
    }, { once: true })
  })
}

/**
 * Opens `url` in the desktop's browser when there is a desktop; never required (the URL is
 * printed either way).
 * @param {string} url
 * @param {NodeJS.ProcessEnv} env
 * @returns {boolean} whether a browser was started
 */
export function openBrowser(url, env) {
  /** @type {[string, string[]] | null} */
  let command = null
  if (process.platform === 'darwin') command = ['open', [url]]
  else if (process.platform === 'win32') command = ['cmd', ['/c', 'start', '""', url]]
  else if (env.DISPLAY || env.WAYLAND_DISPLAY) command = ['xdg-open', [url]]
  if (!command) return false
  try {
    const child = spawn(command[0], command[1], { stdio: 'ignore', detached: true })
    child.on('error', () => {})
    child.unref()
    return true
  } catch {
    return false
  }
}

/**
 * What a command needs.
 * @typedef {object} CommandContext
 * @property {string} baseUrl
 * @property {NodeJS.ProcessEnv} env
 * @property {import('./credentials.mjs').CredentialStore} store
 * @property {import('./auth.mjs').Credentials} credentials
 * @property {(text: string) => void} print
 * @property {boolean} [browser]  open a browser (default true; `--no-browser`)
 * @property {Partial<typeof POLLING>} [polling]
 * @property {Partial<import('../index.js').AgentClientOptions>} [clientOptions]  client headers for the account calls
 */

/**
 * `cursor-acp-native login`.
 * @param {CommandContext} ctx
 * @returns {Promise<number>} the exit status
 */
export async function login({ baseUrl, env, store, print, browser = true, polling, clientOptions }) {
  const params = loginParams()
  const url = loginUrl(websiteFor(baseUrl, env), params)
  print(`To sign in to Cursor, open this URL in a browser:\n\n  ${url}\n`)
  if (browser && openBrowser(url, env)) print('(A browser was opened for you.)')
  print('Waiting for the sign-in to complete…')
  const controller = new AbortController()
  const stop = () => controller.abort()
  process.once('SIGINT', stop)
  try {
    const tokens = await pollForLogin({ baseUrl, uuid: params.uuid, verifier: params.verifier, polling, signal: controller.signal, clientOptions })
    store.write({ ...tokens, baseUrl })
    const who = claims(tokens.accessToken)?.sub
    print(`Signed in${who ? ` as ${who}` : ''}. The login is saved in ${store.file} (readable by you only) and refreshed as needed.`)
    return 0
  } catch (e) {
    print(`Sign-in failed: ${e instanceof Error ? e.message : String(e)}`)
    return 1
  } finally {
    process.off('SIGINT', stop)
  }
}

/**
 * `cursor-acp-native logout`.
 * @param {CommandContext} ctx
 */
export function logout({ store, print, env }) {
  print(store.remove() ? `Signed out: removed ${store.file}.` : `Not signed in (there is no ${store.file}).`)
  if (env.CURSOR_API_KEY || env.CURSOR_ACCESS_TOKEN) print('CURSOR_API_KEY / CURSOR_ACCESS_TOKEN in the environment still apply.')
  return 0
}

/**
 * `cursor-acp-native status`: who and what is configured, without a secret.
 * @param {CommandContext} ctx
 */
export function status({ baseUrl, store, credentials, print }) {
  print(`Backend: ${baseUrl}`)
  const remembered = Object.entries(new AlwaysAllowed(store.dir).all()).filter(([, rules]) => rules.length > 0)
  if (remembered.length === 0) print('Always allowed: nothing remembered.')
  for (const [folder, rules] of remembered) print(`Always allowed in ${folder}: ${rules.join(', ')}`)
  const source = credentials.source()
  /** @param {string} token */
  const about = (token) => {
    const c = claims(token)
    const at = expiresAt(token)
    const parts = []
    if (c?.sub) parts.push(`account ${c.sub}`)
    if (at !== null) parts.push(at > Date.now() ? `access token valid for ${Math.round((at - Date.now()) / 60_000)} min` : 'access token expired')
    return parts.length ? ` (${parts.join(', ')})` : ''
  }
  switch (source) {
    case 'access-token':
      print(`Credentials: CURSOR_ACCESS_TOKEN from the environment${about(credentials.env.CURSOR_ACCESS_TOKEN ?? '')}; it is not renewed.`)
      break
    case 'api-key':
      print('Credentials: CURSOR_API_KEY from the environment, exchanged for access tokens as they are needed.')
      break
    case 'login': {
      const stored = /** @type {import('./credentials.mjs').StoredLogin} */ (credentials.storedLogin())
      print(`Credentials: the login saved in ${store.file}${about(stored.accessToken)}, refreshed as needed.`)
      break
    }
    case 'none':
      if (!credentials.needsAuth) {
        print('Credentials: none needed (a local gateway or the embedded backend).')
        break
      }
      print(`Not signed in: ${SIGN_IN}.`)
      return 1
  }
  return 0
}

/**
 * `cursor-acp-native permissions clear [folder]`: forgets the "Always allow" answers of one
 * workspace (a folder, as sessions named it), or of all.
 * @param {CommandContext & { folder?: string }} ctx
 */
export function clearPermissions({ store, print, folder }) {
  const workspace = folder === undefined ? undefined : path.resolve(folder)
  const gone = new AlwaysAllowed(store.dir).clear(workspace)
  print(`Forgot ${gone} "Always allow" ${gone === 1 ? 'answer' : 'answers'}${workspace ? ` for ${workspace}` : ''}.`)
  return 0
}

/**
 * `cursor-acp-native --list-models`: the account's models, one per line (`id<TAB>name`).
 * @param {{ client: import('../index.js').AgentClient, print: (text: string) => void }} o
 */
export async function listModels({ client, print }) {
  try {
    const models = await client.listModels()
    print(`default\tAuto`)
    for (const m of models) if (m.modelId !== 'default') print(`${m.modelId}\t${m.displayName}${m.maxMode ? ' (MAX)' : ''}`)
    return 0
  } catch (e) {
    const coded = /** @type {{ code?: string, message?: string }} */ (e)
    print(`Cannot list the models: ${coded.code ? `${coded.code}: ` : ''}${coded.message ?? String(e)}`)
    return 1
  }
}
