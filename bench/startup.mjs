#!/usr/bin/env node
// @ts-check
// Start-up of the stdio agent as an editor sees it: spawn `cursor-acp-native`, send `initialize`
// at once, time its answer; then send `session/new` the moment that answer arrives and time its
// answer. Both again with a history: a cache holding `HISTORY_SESSIONS` saved sessions, as a
// user's grows over months (start-up must not grow with it). Beside it, in the same run, the
// floor of any Node program (spawn `node -e 0`, wait for it to exit) and, with `--peers`, the agents an editor would start instead: the
// `@zed-industries/claude-agent-acp` and `@zed-industries/codex-acp` packages' commands (as
// `npx` runs them), spawn → `initialize` answered. Prints medians and the ratios the start-up
// targets are read against. `npm run bench` runs it as its `startup` scenario; speed is
// measured, never asserted.
//
//   node bench/startup.mjs [--runs 15] [--peers] [--embedded] [--json] [--agent path/to/cursor-acp-native.mjs]
//
// Nothing reaches the network. The agent runs against a local gateway URL nobody listens on
// (neither initialize nor session/new contacts the backend); `--embedded` starts the built-in
// backend first, as `npx cursor-acp-native --embedded` does. The peers run without credentials,
// with a home folder of their own, and only inside a network namespace with no interface up:
// with `--peers` this script re-runs itself under `unshare --net` (every process it measures,
// `node -e 0` included, then starts alike) and exits with status 3, measuring nothing, where no
// such namespace can be made.
import { spawn, spawnSync } from 'node:child_process'
import fs from 'node:fs'
import { createRequire } from 'node:module'
import os from 'node:os'
import path from 'node:path'
import { fileURLToPath } from 'node:url'
import { parseArgs } from 'node:util'

import { SessionStore } from '../cli/store.mjs'
import { readJsonLines } from './json-lines.mjs'

const { values: options } = parseArgs({
  options: {
    runs: { type: 'string', default: '15' },
    peers: { type: 'boolean', default: false },
    embedded: { type: 'boolean', default: false },
    json: { type: 'boolean', default: false },
    agent: { type: 'string' },
  },
})

/** Exit status when `--peers` is asked for and cannot be had: no network namespace, or the peers not installed. */
const NO_ISOLATION = 3

/** True when no network interface but loopback has an address: nothing outside is reachable. */
const isolated = () => Object.values(os.networkInterfaces()).flat().every((i) => i?.internal)

if (options.peers && !isolated()) {
  // Root makes a network namespace directly; elsewhere a user namespace may allow it.
  for (const flags of [['--net'], ['--net', '--map-root-user']]) {
    if (spawnSync('unshare', [...flags, 'true'], { stdio: 'ignore' }).status !== 0) continue
    const child = spawnSync('unshare', [...flags, process.execPath, ...process.execArgv, fileURLToPath(import.meta.url), ...process.argv.slice(2)], { stdio: 'inherit' })
    process.exit(child.status ?? 1)
  }
  process.stderr.write('startup: --peers needs a network namespace (unshare --net), and none can be made here\n')
  process.exit(NO_ISOLATION)
}

/**
 * The peers' commands, from `bench/peers` (`npm run bench:peers` installs them; `npm ci` does
 * not: together they are ~280 MB). Resolved only when they are measured, and before anything
 * is written, since without them the script exits.
 * @returns {Record<string, string[]>}
 */
function peerCommands() {
  const fromPeers = createRequire(new URL('./peers/package.json', import.meta.url))
  try {
    return {
      'claude-agent-acp': [fromPeers.resolve('@zed-industries/claude-agent-acp/dist/index.js')],
      'codex-acp': [fromPeers.resolve('@zed-industries/codex-acp/bin/codex-acp.js')],
    }
  } catch {
    process.stderr.write('startup: --peers needs the peers installed in bench/peers: npm run bench:peers\n')
    process.exit(NO_ISOLATION)
  }
}
const peers = options.peers ? peerCommands() : {}

const runs = Number(options.runs)
const agentPath = options.agent ? path.resolve(options.agent) : fileURLToPath(new URL('../bin/cursor-acp-native.mjs', import.meta.url))
const workspace = fileURLToPath(new URL('..', import.meta.url))
const scratch = fs.mkdtempSync(path.join(os.tmpdir(), 'startup-bench-'))
const cacheDir = path.join(scratch, 'cache')
const historyCacheDir = path.join(scratch, 'history-cache')

/** Saved sessions in the history's cache. */
const HISTORY_SESSIONS = 1000
{
  // Saved by the agent's own store, each with a 4 KiB checkpoint.
  const history = new SessionStore(historyCacheDir)
  const checkpoint = Buffer.alloc(3072, 7).toString('base64')
  for (let i = 0; i < HISTORY_SESSIONS; i++) {
    const sessionId = `history-${i}`
    const updatedAt = new Date(Date.UTC(2026, 0, 1) + i * 60_000).toISOString()
    history.put({ sessionId, cwd: workspace, title: `Thread ${i}`, updatedAt, mode: 'agent', model: 'default', saved: { conversationId: sessionId, checkpoint, blobs: [] } })
  }
}
const env = { ...process.env, CURSOR_ACCESS_TOKEN: '', CURSOR_API_KEY: '' }

// The peers get a home of their own (their settings and state go there, none of the user's are
// read) and an environment without any credentials.
const peerHome = path.join(scratch, 'home')
fs.mkdirSync(path.join(peerHome, '.codex'), { recursive: true })
/** @type {NodeJS.ProcessEnv} */
const peerEnv = { PATH: process.env.PATH, HOME: peerHome, CODEX_HOME: path.join(peerHome, '.codex'), LANG: 'C.UTF-8' }

const nowMs = () => Number(process.hrtime.bigint()) / 1e6
const INITIALIZE = { id: 1, method: 'initialize', params: { protocolVersion: 1, clientCapabilities: {}, clientInfo: { name: 'startup-bench', version: '1' } } }

/**
 * Spawn → exit of `node -e 0`.
 * @returns {Promise<number>}
 */
function bareNode() {
  return new Promise((resolve, reject) => {
    const start = nowMs()
    const child = spawn(process.execPath, ['-e', '0'], { stdio: 'ignore' })
    child.on('error', reject)
    child.on('exit', () => resolve(nowMs() - start))
  })
}

/**
 * An agent on a pipe: the JSON-RPC messages it writes, one at a time.
 * @param {string[]} args  node's arguments
 * @param {NodeJS.ProcessEnv} childEnv
 */
function spawnAgent(args, childEnv) {
  // A process group of its own, so that a package's launcher and the program it starts end together.
  const child = spawn(process.execPath, args, { stdio: ['pipe', 'pipe', 'ignore'], env: childEnv, detached: true })
  /** @type {(message: any) => void} */
  let onMessage = () => {}
  /** @type {(error: Error) => void} */
  let onError = () => {}
  child.on('error', (e) => onError(e))
  child.on('exit', (code) => onError(new Error(`${args[0]} exited with ${code} before answering`)))
  readJsonLines(child.stdout, (message) => onMessage(message))
  return {
    child,
    /** @param {object} message */
    send: (message) => child.stdin.write(`${JSON.stringify({ jsonrpc: '2.0', ...message })}\n`),
    /**
     * The answer to request `id`, and when it arrived.
     * @param {number} id
     * @returns {Promise<{ at: number, message: any }>}
     */
    answer: (id) => new Promise((resolve, reject) => {
      onError = reject
      onMessage = (message) => {
        if (message.id !== id || 'method' in message) return
        if (message.error) reject(new Error(`${args[0]} answered ${JSON.stringify(message.error)}`))
        else resolve({ at: nowMs(), message })
      }
    }),
    /** Ends the whole group and waits for the process to go. */
    kill: () => new Promise((resolve) => {
      onError = () => {}
      child.once('exit', resolve)
      if (child.exitCode !== null || child.signalCode !== null) return resolve(undefined)
      try { process.kill(-(/** @type {number} */ (child.pid)), 'SIGKILL') } catch { child.kill('SIGKILL') }
    }),
  }
}

/**
 * Spawn → `initialize` answered, then `session/new` sent → answered.
 * @param {string} cache  the agent's cache folder
 * @returns {Promise<{ initialize: number, sessionNew: number }>}
 */
async function agent(cache) {
  const args = [agentPath, '--cache-dir', cache, ...(options.embedded ? ['--embedded'] : ['--base-url', 'http://127.0.0.1:9'])]
  const start = nowMs()
  const a = spawnAgent(args, env)
  a.send(INITIALIZE)
  const initialized = await a.answer(1)
  a.send({ id: 2, method: 'session/new', params: { cwd: workspace, mcpServers: [] } })
  const created = await a.answer(2)
  // The agent ends with its input, as under an editor.
  const exited = new Promise((resolve) => a.child.once('exit', resolve))
  a.child.stdin.end()
  await exited
  return { initialize: initialized.at - start, sessionNew: created.at - initialized.at }
}

/**
 * Spawn → `initialize` answered, for a peer.
 * @param {string} name
 * @returns {Promise<number>}
 */
async function peer(name) {
  const start = nowMs()
  const a = spawnAgent(peers[name], peerEnv)
  a.send(INITIALIZE)
  try {
    const { at } = await a.answer(1)
    return at - start
  } finally {
    await a.kill()
  }
}

/** @param {number[]} xs */
const median = (xs) => {
  const s = [...xs].sort((a, b) => a - b)
  const mid = s.length >> 1
  return s.length % 2 ? s[mid] : (s[mid - 1] + s[mid]) / 2
}

const peerNames = options.peers ? Object.keys(peers) : []
// One warm-up of each (file cache, the addon's first load, the peers' first-run state), then
// interleaved runs so that the machine's drift during the run hits every side alike.
await bareNode()
await agent(cacheDir)
await agent(historyCacheDir)
for (const name of peerNames) await peer(name)
/** @type {number[]} */
const node = []
/** @type {number[]} */
const initialize = []
/** @type {number[]} */
const sessionNew = []
/** @type {number[]} */
const historyInitialize = []
/** @type {number[]} */
const historySessionNew = []
/** @type {Record<string, number[]>} */
const peerInitialize = Object.fromEntries(peerNames.map((name) => [name, []]))
for (let i = 0; i < runs; i++) {
  node.push(await bareNode())
  const a = await agent(cacheDir)
  initialize.push(a.initialize)
  sessionNew.push(a.sessionNew)
  const h = await agent(historyCacheDir)
  historyInitialize.push(h.initialize)
  historySessionNew.push(h.sessionNew)
  for (const name of peerNames) peerInitialize[name].push(await peer(name))
}
fs.rmSync(scratch, { recursive: true, force: true })

const nodeMs = median(node)
const initializeMs = median(initialize)
const sessionNewMs = median(sessionNew)
const figures = {
  runs,
  mode: options.embedded ? 'embedded' : 'local gateway',
  nodeMs,
  initializeMs,
  sessionNewMs,
  initializeRatio: initializeMs / nodeMs,
  sessionNewRatio: sessionNewMs / nodeMs,
  /** The same two with `history.sessions` saved sessions in the cache. */
  history: { sessions: HISTORY_SESSIONS, initializeMs: median(historyInitialize), sessionNewMs: median(historySessionNew) },
  /** @type {Record<string, number>} the peers' median spawn → initialize answered, ms */
  peers: Object.fromEntries(peerNames.map((name) => [name, median(peerInitialize[name])])),
  samples: { node, initialize, sessionNew, historyInitialize, historySessionNew, peers: peerInitialize },
}
if (options.json) {
  process.stdout.write(`${JSON.stringify(figures)}\n`)
} else {
  /** @param {number} x */
  const ms = (x) => `${x.toFixed(1)} ms`
  process.stdout.write(
    `start-up, median of ${runs} (${figures.mode}, Node ${process.version})\n` +
      `  node -e 0                      ${ms(figures.nodeMs)}\n` +
      `  initialize answered            ${ms(figures.initializeMs)}  ${figures.initializeRatio.toFixed(2)}× node -e 0  (target ≤ 1.5×)\n` +
      `  session/new after initialize   ${ms(figures.sessionNewMs)}  ${figures.sessionNewRatio.toFixed(2)}× node -e 0  (target ≤ 0.5×)\n` +
      `  the same, ${HISTORY_SESSIONS.toLocaleString('en-US')} saved sessions ${ms(figures.history.initializeMs)}, ${ms(figures.history.sessionNewMs)}  (${(figures.history.initializeMs / initializeMs).toFixed(2)}× and ${(figures.history.sessionNewMs / sessionNewMs).toFixed(2)}× without)\n` +
      Object.entries(figures.peers)
        .map(([name, peerMs]) => `  ${`${name} initialize`.padEnd(31)}${ms(peerMs)}  (ours ${(initializeMs / peerMs).toFixed(2)}×${name === 'claude-agent-acp' ? ', target ≤ 0.5×' : ''})\n`)
        .join(''),
  )
}
