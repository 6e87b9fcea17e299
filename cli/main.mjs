// @ts-check
// The agent's command line (bin/cursor-acp-native.mjs loads it): an Agent Client Protocol agent
// over stdio, backed by Cursor's agent backend (or a local gateway, or the embedded backend with
// --embedded), and the login, logout, status and permissions commands. stdout carries only ACP
// JSON lines; everything else goes to stderr.
//
// Start-up is kept short: editors start an agent per thread and wait for `initialize`, then
// `session/new`. What is loaded here is small; the addon comes once the first line is answered,
// the agent with the first session, the ACP SDK right after it (or after the first
// `initialize`, see cli/stdio.mjs), the MCP client SDK with the first MCP server.

import { loadAddon, loadTesting, setCoreLogLevel } from './addon.mjs'
import { CredentialStore } from './credentials.mjs'
import { setInvocation } from './initialize.mjs'
import { createLogger, parseLevel } from './log.mjs'
import { deferOptimizing } from './optimizer.mjs'
import { serveStdio } from './stdio.mjs'
import { SessionStore } from './store.mjs'
import { defaultCacheDir, defaultConfigDir } from './user-folders.mjs'
import { writePrivateFile } from './private-files.mjs'
import { VERSION } from './version.mjs'
import { flushCompileCache } from './compile-cache.mjs'
import { builtin } from './builtin.mjs'

const fs = builtin('node:fs')
const { parseArgs } = builtin('node:util')

// No optimizing compiler until the first turn (cli/optimizer.mjs says why).
deferOptimizing()

// Anything printed by accident must not corrupt the protocol stream.
for (const name of /** @type {const} */ (['log', 'info', 'debug'])) console[name] = (...args) => console.error(...args)

// The core's default base URL (the addon's DEFAULT_BASE_URL; a test checks they agree), mirrored
// here because the agent prints it and decides from it whether credentials are needed before
// the addon is loaded, and reading it from the addon would load the addon at every start. It is
// never sent as an option: a client without `baseUrl` gets the core's own default.
const DEFAULT_BASE_URL = 'https://api2.cursor.sh'

const USAGE = `Usage: cursor-acp-native [options]           the ACP agent over stdio
       cursor-acp-native login [--no-browser]   sign in to Cursor in a browser
       cursor-acp-native logout                 remove the stored login
       cursor-acp-native status                 what credentials are configured (no secrets shown)
                                                and the "Always allow" answers kept per workspace
       cursor-acp-native permissions clear [dir]  forget the "Always allow" answers (of one workspace)
       cursor-acp-native --list-models          the account's models

An ACP agent over stdio (for Zed, JetBrains, Neovim, Emacs, …) backed by Cursor's agent backend.

Options:
  --base-url <url>         backend or local gateway (default ${DEFAULT_BASE_URL}, env CURSOR_ACP_BASE_URL)
  --model <id>             model for new sessions (default "default", i.e. Auto; env CURSOR_ACP_MODEL)
  --models <a,b,…>         extra models offered in the model picker, besides the account's (env CURSOR_ACP_MODELS)
  --transport <mode>       auto (default): Run over HTTP/2 where the server speaks it, else
                           RunSSE + BidiAppend over HTTP/1.1; sse or h2: only that one
  --client-version <v>     the x-cursor-client-version sent (env CURSOR_ACP_CLIENT_VERSION)
  --embedded               run against the built-in embedded backend (no account, no network)
  --scenario <file>        with --embedded: the scenario JSON to play instead of the demo turn
  --record <file>          with --embedded: write what the backend received there on exit
  --cache-dir <dir>        where sessions are saved (env CURSOR_ACP_CACHE_DIR)
  --log-level <level>      error, warn (default), info or debug; logs go to stderr
  --no-browser             with login: only print the sign-in URL
  --version, --help

Credentials, first found wins: CURSOR_ACCESS_TOKEN (used as it is); CURSOR_API_KEY (exchanged for
access tokens, again before they expire); the login saved by \`login\` (in the config directory,
env CURSOR_ACP_CONFIG_DIR; refreshed before it expires). Local gateways and --embedded need none.

More client options (timeouts, headers, compression, …) as JSON in CURSOR_ACP_CLIENT_OPTIONS,
e.g. '{"stallTimeoutMs":60000}'; the flags above win over it.`

/**
 * @param {string} message
 * @returns {never}
 */
function fail(message) {
  process.stderr.write(`cursor-acp-native: ${message}\n\n${USAGE}\n`)
  process.exit(2)
}

/** @type {ReturnType<typeof parseOptions>['values']} */
let args
function parseOptions() {
  return parseArgs({
    options: {
      'base-url': { type: 'string' },
      model: { type: 'string' },
      models: { type: 'string' },
      transport: { type: 'string' },
      embedded: { type: 'boolean', default: false },
      scenario: { type: 'string' },
      record: { type: 'string' },
      'cache-dir': { type: 'string' },
      'log-level': { type: 'string' },
      'client-version': { type: 'string' },
      'list-models': { type: 'boolean', default: false },
      'no-browser': { type: 'boolean', default: false },
      version: { type: 'boolean', default: false },
      help: { type: 'boolean', default: false },
    },
    strict: true,
    allowPositionals: true,
  })
}
/** @type {string[]} */
let positionals
try {
  ;({ values: args, positionals } = parseOptions())
} catch (e) {
  fail(errorMessage(e))
}
const COMMANDS = ['login', 'logout', 'status']
const clearsPermissions = positionals[0] === 'permissions' && positionals[1] === 'clear' && positionals.length <= 3
if (!clearsPermissions && (positionals.length > 1 || (positionals.length === 1 && !COMMANDS.includes(positionals[0])))) {
  fail(`unknown command ${JSON.stringify(positionals.join(' '))} (login, logout, status or permissions clear [dir])`)
}
/** @type {'login' | 'logout' | 'status' | 'permissions' | 'list-models' | null} */
const command = /** @type {any} */ (positionals[0] ?? (args['list-models'] ? 'list-models' : null))
if (args.help) {
  process.stdout.write(`${USAGE}\n`)
  process.exit(0)
}
if (args.version) {
  process.stdout.write(`${VERSION}\n`)
  process.exit(0)
}

const env = process.env
/** @type {import('./log.mjs').Logger} */
let log
try {
  log = createLogger(parseLevel(args['log-level'] ?? env.CURSOR_ACP_LOG))
  setCoreLogLevel(log.level) // the addon's own events, to stderr at the same level, once it loads
} catch (e) {
  fail(errorMessage(e))
}
if (args.scenario && !args.embedded) fail('--scenario needs --embedded')
if (args.record && !args.embedded) fail('--record needs --embedded')
if (args['no-browser'] && command !== 'login') fail('--no-browser goes with login')

/**
 * The client's options: CURSOR_ACP_CLIENT_OPTIONS, then the flags (and their variables) over it.
 * The core checks them all, with one message each (`checkClientOptions`, as `new AgentClient`
 * would): a bad value stops the agent with status 2 before it makes any session, rather than
 * failing every session. The check needs the addon, whose load is a good share of start-up, so
 * the agent answers `initialize` first and checks right after (`checkOptionsOnce`), while the
 * editor reads that answer; the commands and `--embedded`, which load the addon anyway, check
 * at once.
 * @type {Partial<import('../index.js').AgentClientOptions>}
 */
let clientOptions = {}
let optionsUnchecked = false
/** Checks the client's options the first time it is called (when there are any). */
const checkOptionsOnce = () => {
  if (!optionsUnchecked) return
  optionsUnchecked = false
  try {
    loadAddon().checkClientOptions(/** @type {Record<string, unknown>} */ (clientOptions))
  } catch (e) {
    fail(errorMessage(e))
  }
}
if (env.CURSOR_ACP_CLIENT_OPTIONS) {
  try {
    clientOptions = JSON.parse(env.CURSOR_ACP_CLIENT_OPTIONS)
  } catch (e) {
    fail(`CURSOR_ACP_CLIENT_OPTIONS is not JSON: ${errorMessage(e)}`)
  }
  optionsUnchecked = true
  // Options that are not an object get the core's own message at once.
  if (clientOptions === null || typeof clientOptions !== 'object' || Array.isArray(clientOptions)) checkOptionsOnce()
  // The agent's shell is its built-in tools' (the request context names that one).
  if ('shell' in clientOptions) fail('CURSOR_ACP_CLIENT_OPTIONS cannot set shell: the agent runs commands in its built-in tools\' shell (bash, else sh)')
}
const flagOptions = {
  baseUrl: args['base-url'] ?? env.CURSOR_ACP_BASE_URL,
  transport: args.transport,
  clientVersion: args['client-version'] ?? env.CURSOR_ACP_CLIENT_VERSION,
}
if (Object.values(flagOptions).some((v) => v !== undefined)) {
  for (const [name, value] of Object.entries(flagOptions)) if (value !== undefined) clientOptions = { ...clientOptions, [name]: value }
  optionsUnchecked = true
}
if (command || args.embedded) checkOptionsOnce()
/** @type {'auto' | 'sse' | 'h2'} */
const transport = /** @type {any} */ (clientOptions.transport) // undefined: the core's default

let baseUrl = clientOptions.baseUrl ?? DEFAULT_BASE_URL
if (args.embedded && (command === 'login' || command === 'logout')) {
  process.stdout.write('The embedded backend needs no login.\n')
  process.exit(0)
}
/** @type {import('../testing.js').EmbeddedBackend | null} */
let backend = null
if (args.embedded) {
  /** @type {typeof import('../testing.js').startEmbeddedBackend} */
  let startEmbeddedBackend
  try {
    ;({ startEmbeddedBackend } = loadTesting())
  } catch (e) {
    fail(`--embedded: ${errorMessage(e)}`) // a build without the embedded backend says so
  }
  /** @type {import('../index.js').Scenario} */
  let scenario
  if (args.scenario) {
    try {
      scenario = JSON.parse(fs.readFileSync(args.scenario, 'utf8'))
    } catch (e) {
      fail(`cannot read the scenario ${args.scenario}: ${errorMessage(e)}`)
    }
  } else {
    scenario = (await import('./demo.mjs')).DEMO_SCENARIO
  }
  if (args.record) scenario = { ...scenario, record: true }
  try {
    backend = await startEmbeddedBackend({ scenario })
  } catch (e) {
    fail(`invalid scenario: ${errorMessage(e)}`)
  }
  baseUrl = backend.url
  clientOptions = { ...clientOptions, baseUrl }
  log.info(`embedded backend on ${baseUrl}`)
}

const credentialStore = new CredentialStore(defaultConfigDir(env))

if (command) {
  // (Loaded here only: the agent itself loads them after answering `initialize`.)
  const { Credentials, isCursorHost } = await import('./auth.mjs')
  const credentials = new Credentials({ baseUrl, env, needsAuth: !args.embedded && isCursorHost(baseUrl), store: credentialStore, log, clientOptions })
  const commands = await import('./login.mjs')
  /** @param {string} text */
  const print = (text) => process.stdout.write(`${text}\n`)
  const ctx = { baseUrl, env, store: credentialStore, credentials, print, browser: !args['no-browser'], clientOptions }
  let exitCode
  if (command === 'login') exitCode = await commands.login(ctx)
  else if (command === 'logout') exitCode = commands.logout(ctx)
  else if (command === 'status') exitCode = commands.status(ctx)
  else if (command === 'permissions') exitCode = commands.clearPermissions({ ...ctx, folder: positionals[2] })
  else {
    const { AgentClient } = loadAddon()
    const client = new AgentClient({ baseUrl, transport, accessToken: (r) => credentials.token(r), ...clientOptions })
    exitCode = await commands.listModels({ client, print })
  }
  backend?.close()
  process.exit(exitCode)
}
// A client may run `login` in a terminal the way it started this agent.
setInvocation(process.execPath, process.argv.slice(1))

const store = new SessionStore(args['cache-dir'] ?? defaultCacheDir(env))
/** @type {import('./agent.mjs').AgentConfig} */
const config = {
  baseUrl,
  transport,
  embedded: args.embedded ?? false,
  model: args.model ?? env.CURSOR_ACP_MODEL ?? 'default',
  models: (args.models ?? env.CURSOR_ACP_MODELS ?? '').split(',').map((m) => m.trim()).filter(Boolean),
  clientOptions,
  store,
  credentialStore,
  configDir: credentialStore.dir,
  log,
  env,
}

/** @type {import('@agentclientprotocol/sdk').AgentConnection | null} */
let connection = null
let stopping = false
/** Reading stdin failed (rather than ended): the agent exits with 1, the editor may say so. */
let inputFailed = false
const shutdown = () => {
  stopping = true
  // Before the first request, the agent waits on stdin: ending it ends the agent.
  if (connection) connection.close()
  else process.stdin.destroy()
  backend?.close()
}
process.on('SIGTERM', shutdown)
process.on('SIGINT', shutdown)
log.debug('reading the client on stdin')

/**
 * The options are checked right after the first line is answered; a client that sends nothing
 * (a person at a terminal) hears of a bad option this long after start all the same.
 */
const OPTIONS_CHECK_IDLE_MS = 100
const idleCheck = setTimeout(checkOptionsOnce, OPTIONS_CHECK_IDLE_MS)
idleCheck.unref()

/** @type {Promise<import('./agent.mjs').Agent> | undefined} */
let agent
const loadAgent = () => (agent ??= import('./agent.mjs').then(({ createAgent }) => createAgent(config)))
connection = await serveStdio({
  input: process.stdin,
  output: process.stdout,
  loadAgent: async () => (await loadAgent()).app(),
  newSessionEarly: async (initialize, params) => (await loadAgent()).newSessionEarly(initialize, params),
  log,
  onInputFailure: () => { inputFailed = true },
  afterFirstLine: () => {
    clearTimeout(idleCheck)
    checkOptionsOnce()
    // Every session needs the addon: loaded now, while the client reads the answer, and its
    // TLS setup (the system's certificate store) made on a thread of its own meanwhile. One
    // that does not load is reported by the first session, as it would be without this.
    try {
      loadAddon().prepareTls()
    } catch {}
  },
})
log.info(`cursor-acp-native ${VERSION} ready (${baseUrl}, sessions in ${store.dir})`)
// Now that the first requests are answered: a visit to every saved session, in the background.
void store.tidy()
// The modules a session loads are compiled by now: into the compile cache while the user types,
// not only at exit (an editor may end the agent with a signal).
setTimeout(flushCompileCache, 1000).unref()
if (stopping) connection.close()
await connection.closed
if (args.record && backend) {
  try {
    // What the agent sent: prompts, files, command output. Credentials are redacted by the
    // backend's records, and the file is the user's alone.
    writePrivateFile(args.record, JSON.stringify(backend.records()))
  } catch (e) {
    log.error(`cannot write ${args.record}: ${errorMessage(e)}`)
  }
}
backend?.close()
// Native handles (sockets, timers of finished turns) must not keep a stdio agent alive.
setTimeout(() => process.exit(inputFailed ? 1 : 0), 100).unref()

/** @param {unknown} e */
function errorMessage(e) {
  return e instanceof Error ? e.message : String(e)
}
