#!/usr/bin/env node
// cursor-acp-native: an Agent Client Protocol agent over stdio, backed by Cursor's agent
// backend (or a local gateway, or the embedded backend with --embedded). stdout carries only
// ACP JSON lines; everything else goes to stderr.
import fs from 'node:fs'
import { Readable, Writable } from 'node:stream'
import { parseArgs } from 'node:util'
import { createRequire } from 'node:module'
import { ndJsonStream } from '@agentclientprotocol/sdk'

import { createAgent } from '../cli/agent.mjs'
import { isCursorHost } from '../cli/auth.mjs'
import { DEMO_SCENARIO } from '../cli/demo.mjs'
import { createLogger, parseLevel } from '../cli/log.mjs'
import { SessionStore, defaultCacheDir } from '../cli/store.mjs'

// Anything printed by accident must not corrupt the protocol stream.
for (const name of ['log', 'info', 'debug']) console[name] = (...args) => console.error(...args)

const require = createRequire(import.meta.url)
const { version } = require('../package.json')

const USAGE = `Usage: cursor-acp-native [options]

An ACP agent over stdio (for Zed, JetBrains, Neovim, Emacs, …) backed by Cursor's agent backend.

Options:
  --base-url <url>       backend or local gateway (default https://api2.cursor.sh, env CURSOR_ACP_BASE_URL)
  --model <id>           model for new sessions (default "default", i.e. Auto; env CURSOR_ACP_MODEL)
  --models <a,b,…>       extra models offered in the model picker (env CURSOR_ACP_MODELS)
  --transport <mode>     auto (default): Run over HTTP/2 where the server speaks it, else
                         RunSSE + BidiAppend over HTTP/1.1; sse or h2: only that one
  --embedded             run against the built-in embedded backend (no account, no network)
  --scenario <file>      with --embedded: the scenario JSON to play instead of the demo turn
  --record <file>        with --embedded: write what the backend received there on exit
  --cache-dir <dir>      where sessions are saved (env CURSOR_ACP_CACHE_DIR)
  --log-level <level>    error, warn (default), info or debug; logs go to stderr
  --version, --help

Credentials: CURSOR_ACCESS_TOKEN, or CURSOR_API_KEY (exchanged for a token). Local gateways and
--embedded need none.`

function fail(message) {
  process.stderr.write(`cursor-acp-native: ${message}\n\n${USAGE}\n`)
  process.exit(2)
}

let args
try {
  args = parseArgs({
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
      version: { type: 'boolean', default: false },
      help: { type: 'boolean', default: false },
    },
    strict: true,
  }).values
} catch (e) {
  fail(e.message)
}
if (args.help) {
  process.stdout.write(`${USAGE}\n`)
  process.exit(0)
}
if (args.version) {
  process.stdout.write(`${version}\n`)
  process.exit(0)
}

const env = process.env
let log
try {
  log = createLogger(parseLevel(args['log-level'] ?? env.CURSOR_ACP_LOG))
  require('../index.js').setLogLevel(log.level) // the addon's own events, to stderr at the same level
} catch (e) {
  fail(e.message)
}
const transport = args.transport ?? 'auto'
if (!['auto', 'sse', 'h2'].includes(transport)) fail(`--transport must be auto, sse or h2, got ${JSON.stringify(transport)}`)
if (args.scenario && !args.embedded) fail('--scenario needs --embedded')
if (args.record && !args.embedded) fail('--record needs --embedded')

let baseUrl = args['base-url'] ?? env.CURSOR_ACP_BASE_URL ?? 'https://api2.cursor.sh'
let backend = null
if (args.embedded) {
  const { startEmbeddedBackend } = require('../index.js')
  let scenario = DEMO_SCENARIO
  if (args.scenario) {
    try {
      scenario = JSON.parse(fs.readFileSync(args.scenario, 'utf8'))
    } catch (e) {
      fail(`cannot read the scenario ${args.scenario}: ${e.message}`)
    }
  }
  if (args.record) scenario = { ...scenario, record: true }
  try {
    backend = await startEmbeddedBackend({ scenario })
  } catch (e) {
    fail(`invalid scenario: ${e.message}`)
  }
  baseUrl = backend.url
  log.info(`embedded backend on ${baseUrl}`)
}

let clientOptions = {}
if (env.CURSOR_ACP_CLIENT_OPTIONS) {
  try {
    clientOptions = JSON.parse(env.CURSOR_ACP_CLIENT_OPTIONS)
  } catch (e) {
    fail(`CURSOR_ACP_CLIENT_OPTIONS is not JSON: ${e.message}`)
  }
}

const store = new SessionStore(args['cache-dir'] ?? defaultCacheDir(env))
const config = {
  baseUrl,
  transport,
  needsAuth: !args.embedded && isCursorHost(baseUrl),
  model: args.model ?? env.CURSOR_ACP_MODEL ?? 'default',
  models: (args.models ?? env.CURSOR_ACP_MODELS ?? '').split(',').map((m) => m.trim()).filter(Boolean),
  clientOptions,
  store,
  log,
  env,
}

const stream = ndJsonStream(Writable.toWeb(process.stdout), Readable.toWeb(process.stdin))
const connection = createAgent(config).connect(stream)
log.info(`cursor-acp-native ${version} ready (${baseUrl}, sessions in ${store.dir})`)

const shutdown = () => {
  connection.close()
  backend?.close()
}
process.on('SIGTERM', shutdown)
process.on('SIGINT', shutdown)
await connection.closed
if (args.record) {
  try {
    fs.writeFileSync(args.record, JSON.stringify(backend.records()))
  } catch (e) {
    log.error(`cannot write ${args.record}: ${e.message}`)
  }
}
backend?.close()
// Native handles (sockets, timers of finished turns) must not keep a stdio agent alive.
setTimeout(() => process.exit(0), 100).unref()
