// The stdio agent's weight (issue 43), RSS from /proc, each process settled for SETTLE_MS:
//   - `node` idle: a node process waiting on its stdin, as an agent waits for its editor;
//   - the addon loaded in such a process (`require` of the package), for context;
//   - the agent (release addon), a new process, against the embedded backend in a process of
//     its own: after `initialize` + `session/new` (nothing prompted yet), then after a session
//     of `turns` turns (text, thinking, a tool call with a read, a checkpoint: the shape of a
//     real turn), its peak over the whole session (VmHWM), and (but in a smoke run) once it has
//     then been idle for the agent's idle delay, after which it collects its garbage;
//   - with `--peers`, the agents an editor would start instead (bench/peers), in a network
//     namespace with no interface up, no credentials, a home of their own, after `initialize` +
//     `session/new`: `@zed-industries/claude-agent-acp` makes its session offline;
//     `@zed-industries/codex-acp` refuses `session/new` without an account, so it is given the
//     environment-variable login its `authenticate` offers, with a placeholder key (nothing
//     reaches the network, and a session needs no request); a peer whose session cannot be made
//     is measured after `initialize` and says so. A peer's RSS is its main process's (what an
//     editor starts) and, beside it, its whole process tree's (both start programs of their own).
// Rounds alternate their order; figures are medians. Then what each JavaScript module the agent
// may load costs (`--expose-gc`, RSS and V8 heap after a full GC, before and after): each alone in
// a fresh `node`, and cumulatively in the order the agent loads them.
// Prints one JSON line. `node bench/memory.mjs [--smoke] [--runs 3] [--turns 100] [--peers]`.
import { spawn, spawnSync } from 'node:child_process'
import fs from 'node:fs'
import { createRequire } from 'node:module'
import os from 'node:os'
import path from 'node:path'
import { fileURLToPath } from 'node:url'
import { parseArgs } from 'node:util'

import { IDLE_MS } from '../cli/idle-memory.mjs'
import { agentDirs, startAgent, startBackend } from './acp-pipe.mjs'
import { readJsonLines } from './json-lines.mjs'

const { values: opts } = parseArgs({
  options: {
    smoke: { type: 'boolean', default: false },
    runs: { type: 'string' },
    turns: { type: 'string' },
    peers: { type: 'boolean', default: false },
    // Internal: one module-cost measurement, in a process of its own.
    'module-child': { type: 'string' },
  },
})

const root = fileURLToPath(new URL('..', import.meta.url))
const MIB = 1024 * 1024

/**
 * The modules the agent may load, each as it loads it. `Intl` stands for the first use of
 * `Intl` (the ICU data, built into node), which reading the time zone through it costs (the
 * agent does for a few zones only); ajv is not loaded by the agent (the MCP client bundles its
 * own copy), measured because it is the other schema validator in the dependency tree.
 */
const MODULES = {
  addon: () => createRequire(import.meta.url)('../index.js'),
  'cli/agent.mjs (the session code)': () => import('../cli/agent.mjs'),
  zod: () => import('zod/v4'),
  '@agentclientprotocol/sdk': () => import('@agentclientprotocol/sdk'),
  '@modelcontextprotocol/client': () => import('@modelcontextprotocol/client'),
  'Intl (time zone, ICU data)': () => Intl.DateTimeFormat().resolvedOptions().timeZone,
  ajv: () => import('ajv'),
}
/**
 * The order the agent loads them in, for the cumulative figures: a plain session loads the
 * first two; a session with MCP servers the MCP client on top (zod with it); params only the
 * ACP SDK's schemas take, the SDK.
 */
const AGENT_ORDER = ['addon', 'cli/agent.mjs (the session code)', '@modelcontextprotocol/client', '@agentclientprotocol/sdk']

if (opts['module-child']) {
  // RSS and V8 heap after a full GC, before and after each module, in the order given.
  const gc = /** @type {() => void} */ (globalThis.gc)
  const snap = () => {
    gc()
    gc()
    const m = process.memoryUsage()
    return { rss: m.rss, heap: m.heapUsed }
  }
  const out = []
  let before = snap()
  for (const name of JSON.parse(opts['module-child'])) {
    const start = performance.now()
    await MODULES[name]()
    const ms = performance.now() - start
    const after = snap()
    out.push({ name, rssMiB: (after.rss - before.rss) / MIB, heapMiB: (after.heap - before.heap) / MIB, ms })
    before = after
  }
  process.stdout.write(`${JSON.stringify(out)}\n`)
  process.exit(0)
}

const runs = Number(opts.runs ?? (opts.smoke ? 1 : 3))
const turns = Number(opts.turns ?? (opts.smoke ? 5 : 100))
/** How long a process is left alone before its RSS is read: the agent's prewarm and the
 * background work after its first answers (the saved sessions' tidy) settle within it. */
const SETTLE_MS = opts.smoke ? 500 : 1500
const tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'acp-memory-'))
const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms))
const log = (s) => process.stderr.write(`${s}\n`)
const median = (xs) => {
  const s = [...xs].sort((a, b) => a - b)
  return s.length % 2 ? s[(s.length - 1) / 2] : (s[s.length / 2 - 1] + s[s.length / 2]) / 2
}

/** A field of /proc/<pid>/status, MiB (VmRSS, VmHWM); undefined once the process is gone. */
function status(pid, field) {
  try {
    const kb = new RegExp(`^${field}:\\s+(\\d+) kB`, 'm').exec(fs.readFileSync(`/proc/${pid}/status`, 'utf8'))
    return kb ? Number(kb[1]) / 1024 : undefined
  } catch {
    return undefined
  }
}

/** `pid` and its descendants, from /proc. */
function tree(pid) {
  const all = [pid]
  try {
    for (const task of fs.readdirSync(`/proc/${pid}/task`)) {
      for (const child of fs.readFileSync(`/proc/${pid}/task/${task}/children`, 'utf8').split(' ').filter(Boolean)) all.push(...tree(Number(child)))
    }
  } catch {}
  return all
}

/** RSS of a process and of its tree, MiB, with each process's name. */
function rssOf(pid) {
  const processes = tree(pid).map((p) => {
    let name = '?'
    try {
      name = /^Name:\s+(\S+)/m.exec(fs.readFileSync(`/proc/${p}/status`, 'utf8'))?.[1] ?? '?'
    } catch {}
    return { name, rssMiB: status(p, 'VmRSS') ?? 0 }
  })
  return { mainMiB: processes[0]?.rssMiB ?? 0, treeMiB: processes.reduce((sum, p) => sum + p.rssMiB, 0), processes }
}

/** A `node -e` program waiting on stdin: its RSS once settled. */
async function idleNode(program) {
  const child = spawn(process.execPath, ['-e', program], { stdio: ['pipe', 'ignore', 'inherit'] })
  try {
    await sleep(SETTLE_MS)
    const rss = status(/** @type {number} */ (child.pid), 'VmRSS')
    if (rss === undefined) throw new Error(`node -e ${program} exited early`)
    return rss
  } finally {
    child.stdin.end()
    await new Promise((resolve) => child.once('exit', resolve))
  }
}

// ---------- the agent ----------

/** A real turn's shape: thinking, text, a tool call whose read the agent's own tools answer, a checkpoint, more text. */
const turnSteps = (file) => [
  { type: 'thinking', text: 'Let me look ' },
  { type: 'thinking', text: 'at the notes.' },
  { type: 'thinkingCompleted', durationMs: 5 },
  { type: 'textBurst', text: 'reading ', count: 20 },
  { type: 'toolCallStarted', callId: 'c1', toolCall: { readToolCall: { args: { path: file } } } },
  { type: 'exec', id: 1, args: { readArgs: { path: file, toolCallId: 'c1' } } },
  { type: 'toolCallCompleted', callId: 'c1', toolCall: { readToolCall: { args: { path: file }, result: { success: {} } } } },
  { type: 'checkpoint', state: { tokenDetails: { usedTokens: 1200, maxTokens: 200000 } } },
  { type: 'textBurst', text: 'done ', count: 100 },
  { type: 'turnEnded' },
]

/** One agent process: RSS after initialize + session/new, then after `turns` turns, and its peak. */
async function agentRound(url, name) {
  const { cacheDir, cwd } = agentDirs(tmp, name)
  const agent = startAgent({ baseUrl: url, cacheDir })
  try {
    const pid = /** @type {number} */ (agent.child.pid)
    await agent.initialize()
    const { sessionId } = await agent.newSession(cwd)
    await sleep(SETTLE_MS)
    const afterNewMiB = status(pid, 'VmRSS')
    for (let i = 0; i < turns; i++) {
      const { result } = await agent.prompt(sessionId, `turn ${i}`).answer
      if (result.stopReason !== 'end_turn') throw new Error(`turn ${i} ended with ${result.stopReason}`)
    }
    await sleep(SETTLE_MS)
    const afterTurnsMiB = status(pid, 'VmRSS')
    const peakMiB = status(pid, 'VmHWM')
    // Then idle, as an editor's thread between prompts: the agent collects its garbage once
    // (cli/idle-memory.mjs). Not in a smoke run (it would wait IDLE_MS).
    if (opts.smoke) return { afterNewMiB, afterTurnsMiB, peakMiB, afterIdleMiB: null }
    await sleep(IDLE_MS + SETTLE_MS)
    return { afterNewMiB, afterTurnsMiB, peakMiB, afterIdleMiB: status(pid, 'VmRSS') }
  } finally {
    await agent.stop()
  }
}

// ---------- the peers ----------

/** The flags of `unshare` that make a network namespace here, or null (none can be made). */
function namespaceFlags() {
  for (const flags of [['--net'], ['--net', '--map-root-user']]) {
    if (spawnSync('unshare', [...flags, 'true'], { stdio: 'ignore' }).status === 0) return flags
  }
  return null
}

/** The peers' entry points in bench/peers (`npm run bench:peers`), or null when not installed. */
function peerEntries() {
  const fromPeers = createRequire(new URL('./peers/package.json', import.meta.url))
  try {
    return {
      'claude-agent-acp': { main: fromPeers.resolve('@zed-industries/claude-agent-acp/dist/index.js') },
      // Its `authenticate` offers a login from CODEX_API_KEY; the key is a placeholder, and the
      // namespace keeps every request it might try off the network.
      'codex-acp': { main: fromPeers.resolve('@zed-industries/codex-acp/bin/codex-acp.js'), env: { CODEX_API_KEY: 'bench-placeholder-not-a-key' }, authenticate: 'codex-api-key' },
    }
  } catch {
    return null
  }
}

/** A peer: RSS after initialize + session/new (or after initialize, where its session cannot be made). */
async function peerRound(name, entry, flags) {
  const home = fs.mkdtempSync(path.join(tmp, `${name}-home-`))
  fs.mkdirSync(path.join(home, '.codex'))
  const env = { PATH: process.env.PATH, HOME: home, CODEX_HOME: path.join(home, '.codex'), LANG: 'C.UTF-8', ...entry.env }
  // `unshare` execs node, so the child's pid is the peer's own; a group of its own ends it whole.
  const child = spawn('unshare', [...flags, process.execPath, entry.main], { stdio: ['pipe', 'pipe', 'ignore'], env, detached: true })
  const answers = new Map()
  readJsonLines(child.stdout, (message) => {
    if (message.id !== undefined && !message.method) answers.get(message.id)?.(message)
    else if (message.id !== undefined && message.method) child.stdin.write(`${JSON.stringify({ jsonrpc: '2.0', id: message.id, error: { code: -32601, message: 'not supported by the bench' } })}\n`)
  })
  const exited = new Promise((resolve) => child.once('exit', resolve))
  let nextId = 1
  const request = (method, params, timeoutMs = 60_000) => {
    const id = nextId++
    return Promise.race([
      new Promise((resolve) => {
        answers.set(id, resolve)
        child.stdin.write(`${JSON.stringify({ jsonrpc: '2.0', id, method, params })}\n`)
      }),
      exited.then(() => ({ error: { message: `${name} exited` } })),
      sleep(timeoutMs).then(() => ({ error: { message: `${method}: no answer in ${timeoutMs} ms` } })),
    ])
  }
  try {
    const init = await request('initialize', { protocolVersion: 1, clientCapabilities: { fs: { readTextFile: true, writeTextFile: true }, terminal: true }, clientInfo: { name: 'memory-bench', version: '1' } })
    if (init.error) throw new Error(`${name} initialize: ${init.error.message}`)
    let stage = 'session/new'
    let note
    if (entry.authenticate) {
      const auth = await request('authenticate', { methodId: entry.authenticate })
      if (auth.error) note = `authenticate: ${auth.error.message}`
    }
    const created = await request('session/new', { cwd: home, mcpServers: [] })
    if (created.error) {
      stage = 'initialize'
      note = `session/new refused: ${created.error.message}`
    }
    await sleep(SETTLE_MS)
    return { stage, ...(note && { note }), ...rssOf(/** @type {number} */ (child.pid)) }
  } finally {
    try {
      process.kill(-(/** @type {number} */ (child.pid)), 'SIGKILL')
    } catch {}
    await exited
  }
}

// ---------- module costs ----------

function moduleCosts(names) {
  const r = spawnSync(process.execPath, ['--expose-gc', fileURLToPath(import.meta.url), '--module-child', JSON.stringify(names)], { cwd: root, encoding: 'utf8', stdio: ['ignore', 'pipe', 'inherit'] })
  if (r.status !== 0) throw new Error(`module costs ${names.join(', ')}: exit ${r.status}`)
  return JSON.parse(r.stdout)
}

// ---------- the run ----------

const flags = opts.peers ? namespaceFlags() : null
const entries = opts.peers ? peerEntries() : null
const peersMissing = !opts.peers ? 'not asked for (--peers)' : !flags ? 'no network namespace can be made here (unshare --net)' : !entries ? 'not installed (npm run bench:peers)' : null
const peers = peersMissing ? {} : /** @type {Record<string, any>} */ (entries)

const file = path.join(tmp, 'notes.txt')
fs.writeFileSync(file, 'Notes for the memory bench.\n'.repeat(40))
const backend = await startBackend(tmp, 'memory-turn', { record: false, steps: turnSteps(file) })
const raw = { nodeIdle: [], addonIdle: [], agent: [], peers: Object.fromEntries(Object.keys(peers).map((name) => [name, []])) }
try {
  for (let i = 0; i < runs; i++) {
    const order = ['node', 'addon', 'agent', ...Object.keys(peers)]
    for (const who of i % 2 ? order.reverse() : order) {
      log(`  memory: ${who} (round ${i + 1} of ${runs})`)
      if (who === 'node') raw.nodeIdle.push(await idleNode('process.stdin.resume()'))
      else if (who === 'addon') raw.addonIdle.push(await idleNode(`require(${JSON.stringify(path.join(root, 'index.js'))}); process.stdin.resume()`))
      else if (who === 'agent') raw.agent.push(await agentRound(backend.url, `agent-${i}`))
      else raw.peers[who].push(await peerRound(who, peers[who], /** @type {string[]} */ (flags)))
    }
  }
} finally {
  backend.stop()
}

const nodeIdleMiB = median(raw.nodeIdle)
const agent = {
  afterNewMiB: median(raw.agent.map((a) => a.afterNewMiB)),
  afterTurnsMiB: median(raw.agent.map((a) => a.afterTurnsMiB)),
  peakMiB: median(raw.agent.map((a) => a.peakMiB)),
  afterIdleMiB: opts.smoke ? null : median(raw.agent.map((a) => a.afterIdleMiB)),
}
const peerFigures = Object.fromEntries(Object.entries(raw.peers).map(([name, rounds]) => {
  const last = rounds.at(-1)
  return [name, {
    stage: last.stage,
    ...(last.note && { note: last.note }),
    mainMiB: median(rounds.map((r) => r.mainMiB)),
    treeMiB: median(rounds.map((r) => r.treeMiB)),
    processes: last.processes.map((p) => p.name),
  }]
}))

log('  memory: module costs')
const alone = Object.keys(MODULES).map((name) => {
  const samples = Array.from({ length: opts.smoke ? 1 : 3 }, () => moduleCosts([name])[0])
  return { name, rssMiB: median(samples.map((s) => s.rssMiB)), heapMiB: median(samples.map((s) => s.heapMiB)), ms: median(samples.map((s) => s.ms)) }
})
const inOrder = moduleCosts(AGENT_ORDER)

fs.rmSync(tmp, { recursive: true, force: true })
process.stdout.write(`${JSON.stringify({
  runs,
  turns,
  settleMs: SETTLE_MS,
  idleMs: IDLE_MS,
  nodeIdleMiB,
  addonIdleMiB: median(raw.addonIdle),
  agent: {
    ...agent,
    afterNewRatio: agent.afterNewMiB / nodeIdleMiB,
    afterTurnsRatio: agent.afterTurnsMiB / nodeIdleMiB,
  },
  peers: peerFigures,
  ...(peersMissing && { peersMissing }),
  modules: { alone, inOrder },
  samples: raw,
})}\n`)
