// `npm run bench`: the addon against two pure-JavaScript baselines (a hand-written client and
// the Connect client for Node) on the embedded backend (in a process of its own), scenario by
// scenario, each measurement in a fresh worker process; and the stdio agent's start-up against
// `node -e 0` and two other ACP agents (bench/startup.mjs); its latency through a delaying TLS
// relay (bench/latency.mjs), its relay cost (bench/relay.mjs), its weight beside the same agents
// (bench/memory.mjs) and the size of the download (bench/size.mjs).
// Prints the tables, writes bench/results.json (or --out), and checks the issues' targets.
// `--smoke` runs tiny sizes (part of `npm test`: it proves the harness works, not the speed).
// `--download <file>`: the addon the download figures and their target are of (default: the one
// the run used, which carries `bench` and the embedded backend; the figures name what it carries;
// a smoke run sizes that build stripped).
import { spawn, spawnSync } from 'node:child_process'
import fs from 'node:fs'
import os from 'node:os'
import path from 'node:path'
import { fileURLToPath } from 'node:url'
import { createRequire } from 'node:module'
import { parseArgs } from 'node:util'

import { hostPlatform } from '../scripts/pack.mjs'

const require = createRequire(import.meta.url)
const here = path.dirname(fileURLToPath(import.meta.url))
const { values: opts } = parseArgs({ options: { smoke: { type: 'boolean', default: false }, out: { type: 'string' }, only: { type: 'string' }, download: { type: 'string' } } })

// Fixed before measuring (the issue's scenarios); --smoke only shrinks them.
const FULL = {
  runs: 5,
  stream: { count: 200_000, text: 'tok ' },
  streamFrames: { count: 20_000, text: 'tok ' },
  large: { bytes: 12 * 1024 * 1024 },
  many: { sessions: 1000, deltas: 100 },
  // Pairs of many and many-10k run alternately: a single pair's ratio spreads over ±20% here.
  // The baselines get fewer pairs: theirs are context, not a target, and the Connect client's
  // 10,000 sessions take about 20 s a run.
  many10k: { sessions: 10_000, deltas: 100, pairs: 9, baselinePairs: 3 },
  cancel: { cancels: 200, boundMs: 500 },
  first: { prompts: 50 },
  startup: { runs: 15 },
}
const SMOKE = {
  runs: 1,
  stream: { count: 2_000, text: 'tok ' },
  streamFrames: { count: 200, text: 'tok ' },
  large: { bytes: 256 * 1024 },
  many: { sessions: 20, deltas: 100 },
  many10k: { sessions: 200, deltas: 100, pairs: 2, baselinePairs: 1 },
  cancel: { cancels: 5, boundMs: 200 },
  first: { prompts: 5 },
  startup: { runs: 1 },
}
const size = opts.smoke ? SMOKE : FULL
// The addon and the two baselines: `baseline`, hand-written on node:http2 / node:http
// (bench/baseline/client.mjs), and `connect`, the Connect client for Node
// (bench/baseline/connect-client.mjs); both share the turn above the transport (turn.mjs).
const IMPLS = ['addon', 'baseline', 'connect']
const BASELINES = ['baseline', 'connect']

const scenarios = {
  check: () => ({ steps: [
    { type: 'thinking', text: 'Let me ' },
    { type: 'thinking', text: 'check.' },
    { type: 'thinkingCompleted', durationMs: 5 },
    { type: 'text', text: 'Reading ' },
    { type: 'text', text: 'the file.' },
    { type: 'toolCallStarted', callId: 'c1', toolCall: { readToolCall: { args: { path: '/bench/a.txt' } } } },
    { type: 'exec', id: 1, args: { readArgs: { path: '/bench/a.txt', toolCallId: 'c1' } } },
    { type: 'toolCallCompleted', callId: 'c1', toolCall: { readToolCall: { args: { path: '/bench/a.txt' }, result: { success: {} } } } },
    { type: 'checkpoint', state: { tokenDetails: { usedTokens: 1200, maxTokens: 200000 } } },
    { type: 'textBurst', text: 'ok ', count: 50 },
    { type: 'turnEnded' },
  ] }),
  stream: () => ({ record: false, steps: [{ type: 'textBurst', text: size.stream.text, count: size.stream.count }, { type: 'turnEnded' }] }),
  // The deltas as a model streams them: each one written alone, so each is a DATA frame (and a
  // read) of its own, where `stream` writes them 64 KiB at a time.
  'stream-frames': () => ({ record: false, steps: [...Array.from({ length: size.streamFrames.count }, () => ({ type: 'text', text: size.streamFrames.text })), { type: 'turnEnded' }] }),
  'large-up': () => ({ record: false, steps: [{ type: 'exec', id: 1, args: { readArgs: { path: '/bench/big.txt' } } }, { type: 'turnEnded' }] }),
  'large-down': () => ({ record: false, steps: [
    { type: 'text', text: 'start' },
    { type: 'checkpoint', state: { turns: [Buffer.alloc(size.large.bytes, 7).toString('base64')] } },
    { type: 'turnEnded' },
  ] }),
  many: () => ({ record: false, waitTimeoutMs: 300_000, steps: [
    { type: 'textBurst', text: 'tok ', count: size.many.deltas },
    { type: 'exec', id: 1, args: { readArgs: { path: '/bench/a.txt' } } },
    { type: 'turnEnded' },
  ] }),
  'cancel-ack': () => ({ record: false, steps: [{ type: 'text', text: 'streaming' }, { type: 'awaitClient', kind: 'conversationAction' }, { type: 'turnEnded' }] }),
  // A server that ignores cancel_action: a stall (a sleep would end the stream on the cancel, as Cursor's does).
  'cancel-silent': () => ({ record: false, steps: [{ type: 'text', text: 'streaming' }, { type: 'stall', ms: 3_600_000 }] }),
  first: () => ({ record: false, steps: [{ type: 'text', text: 'hi' }, { type: 'turnEnded' }] }),
  // The same turn as many's, for ten times the sessions.
  'many-10k': () => scenarios.many(),
  // Not the embedded backend: the transport floor's server (bench/server.mjs).
  floor: () => ({ floorServer: true }),
}

const sizeFor = {
  check: {}, stream: size.stream, 'stream-frames': size.streamFrames, 'large-up': size.large, 'large-down': size.large, many: size.many, 'many-10k': size.many10k, floor: size.many,
  'cancel-ack': size.cancel, 'cancel-silent': size.cancel, first: size.first,
}

const tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'acp-bench-'))

/**
 * The addon bench/size.mjs sizes: `--download`'s, else the one this run used. A smoke run sizes
 * a copy of the test build stripped of its symbols and debug info (binutils' strip, where there
 * is one): a debug build is mostly debug info, about 300 MB, and gzipping that at level 9 took
 * most of the smoke run's minute and a half while proving nothing more about the harness.
 */
function downloadArgs() {
  if (opts.download) return [opts.download]
  if (!opts.smoke || process.platform !== 'linux') return []
  const name = `cursor-acp-native.${hostPlatform()}.node`
  const stripped = path.join(fs.mkdtempSync(path.join(tmp, 'download-')), name)
  const r = spawnSync('strip', ['--strip-all', '-o', stripped, path.join(here, '..', name)], { stdio: 'ignore' })
  return r.status === 0 ? [stripped] : []
}

async function startServer(name) {
  const file = path.join(tmp, `${name}.json`)
  fs.writeFileSync(file, JSON.stringify(scenarios[name]()))
  const child = spawn(process.execPath, [path.join(here, 'server.mjs'), file], { stdio: ['pipe', 'pipe', 'inherit'] })
  const url = await new Promise((resolve, reject) => {
    let out = ''
    child.stdout.on('data', (c) => {
      out += c
      if (out.includes('\n')) resolve(JSON.parse(out).url)
    })
    child.on('exit', (code) => reject(new Error(`server for ${name} exited with ${code}`)))
  })
  return { url, pid: child.pid, stop: () => child.stdin.end() }
}

/**
 * Resolves once the server has been idle for a moment: a worker's exit leaves the server
 * closing its connections and freeing its streams (10,000 of them after many-10k), and a run
 * started meanwhile would be charged for that. Idle is under 1 ms of CPU in 100 ms (from
 * /proc, so Linux); elsewhere a fixed pause. Gives up waiting after 5 s. Only for many-10k's
 * block: elsewhere a worker's own start-up outlasts the teardown, and waiting longer cost
 * large-up a tenth of its MB/s on this host (7 pairs of runs, each slower after the wait).
 */
async function quiesce(server) {
  const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms))
  const cpuMs = () => {
    try {
      const dir = `/proc/${server.pid}/task`
      return fs.readdirSync(dir).reduce((sum, tid) => sum + Number(fs.readFileSync(`${dir}/${tid}/schedstat`, 'utf8').split(' ')[0]) / 1e6, 0)
    } catch {
      return undefined
    }
  }
  let last = cpuMs()
  if (last === undefined) return sleep(500)
  const deadline = performance.now() + 5000
  while (performance.now() < deadline) {
    await sleep(100)
    const now = cpuMs()
    if (now === undefined || now - last < 1) return
    last = now
  }
}

function worker(impl, scenario, url, extra = {}) {
  const spec = JSON.stringify({ impl, scenario, url, size: sizeFor[scenario], ...extra })
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, ['--expose-gc', path.join(here, 'worker.mjs'), spec], { stdio: ['ignore', 'pipe', 'inherit'] })
    let out = ''
    child.stdout.on('data', (c) => { out += c })
    child.on('exit', (code) => (code === 0 ? resolve(JSON.parse(out)) : reject(new Error(`${impl} ${scenario} failed (exit ${code})`))))
  })
}

const median = (xs) => {
  const s = [...xs].sort((a, b) => a - b)
  return s.length % 2 ? s[(s.length - 1) / 2] : (s[s.length / 2 - 1] + s[s.length / 2]) / 2
}

/**
 * Runs every arm (`{ key, impl, scenario, extra }`) `runs` times against one server of `script`,
 * the arms in turn and in reverse order every other round; returns each arm's runs by its key.
 * `beforeEach(server)` is awaited before every worker.
 */
async function alternate(script, arms, runs, beforeEach = async () => {}) {
  const server = await startServer(script)
  const out = Object.fromEntries(arms.map((arm) => [arm.key, []]))
  try {
    for (let i = 0; i < runs; i++) {
      for (const arm of i % 2 ? [...arms].reverse() : arms) {
        await beforeEach(server)
        out[arm.key].push(await worker(arm.impl, arm.scenario, server.url, arm.extra))
      }
    }
  } finally {
    server.stop()
  }
  return out
}

/**
 * Runs a scenario `runs` times per implementation (alternating), returning per-impl runs.
 * `impls: ['addon']` for what has no baseline side; `extra` goes into each worker's spec.
 */
function measure(name, runs, { impls = IMPLS, extra = {} } = {}) {
  return alternate(name, impls.map((impl) => ({ key: impl, impl, scenario: name, extra })), runs)
}

/**
 * Two scenarios of the same server script, run by one implementation alternately against one
 * server, `runs` times each, `first` leading in even rounds and `second` in odd ones, each
 * worker started on an idle server. For a ratio between the two: this host's speed drifts by
 * more than a target's margin from one minute to the next, and two blocks measured minutes
 * apart compare the drift as much as the scenarios.
 */
function measureAlternated(first, second, runs, impl = 'addon') {
  if (JSON.stringify(scenarios[first]()) !== JSON.stringify(scenarios[second]())) {
    throw new Error(`${first} and ${second} do not share a server script`)
  }
  const arms = [first, second].map((name) => ({ key: name, impl, scenario: name }))
  return alternate(first, arms, runs, quiesce)
}

/** Median of each numeric field over runs, and the transport the runs' turns used. */
function summarize(runs) {
  const out = {}
  for (const key of Object.keys(runs[0])) {
    if (typeof runs[0][key] === 'number') out[key] = median(runs.map((r) => r[key]))
  }
  out.transport = [...new Set(runs.map((r) => r.transport))].join('+')
  return out
}

const wanted = opts.only ? opts.only.split(',') : null
const want = (name) => !wanted || wanted.includes(name)
const results = {}
const samples = {}
const log = (s) => process.stderr.write(`${s}\n`)

log(`bench (${opts.smoke ? 'smoke' : 'full'}): scenarios run in worker processes against the embedded backend in its own process`)

// All clients run every scenario on the same transport: the addon on its default ('auto'),
// which settles on h2 against the embedded backend, the baselines on h2 (the RunSSE rows below
// are the addon's alone). A run where they differ is not a comparison; it fails.
const transports = new Set()
const sameTransport = (name, result) => {
  const used = IMPLS.map((impl) => result[impl].transport)
  used.forEach((t) => transports.add(t))
  if (new Set(used).size !== 1 || used[0].includes('+')) {
    log(`${name}: the clients ran on different transports (${used.join(' vs ')})`)
    process.exitCode = 1
  }
}

// Correctness first: every client must produce the same updates.
const checkRuns = await measure('check', 1)
const checked = Object.fromEntries(IMPLS.map((impl) => [impl, checkRuns[impl][0]]))
const checkPass = BASELINES.every((impl) => JSON.stringify(checked.addon) === JSON.stringify(checked[impl]))
results.check = { pass: checkPass, ...checked }
sameTransport('check', results.check)
if (!checkPass) {
  log(`check FAILED: the clients disagree\n${IMPLS.map((impl) => `${impl}: ${JSON.stringify(checked[impl])}`).join('\n')}`)
  process.exitCode = 1
}

for (const name of ['stream', 'stream-frames', 'large-up', 'large-down', 'many', 'cancel-ack', 'cancel-silent', 'first']) {
  if (!want(name)) continue
  log(`  ${name}…`)
  const runs = ['cancel-ack', 'cancel-silent', 'first'].includes(name) ? 1 : size.runs
  const raw = await measure(name, runs)
  results[name] = { ...Object.fromEntries(IMPLS.map((impl) => [impl, summarize(raw[impl])])), runs }
  sameTransport(name, results[name])
  if (name === 'stream') {
    samples.stream = Object.fromEntries(IMPLS.flatMap((impl) => [[impl, raw[impl].map((r) => r.wallMs)], [`${impl}Busy`, raw[impl].map((r) => r.busyMs)]]))
  }
  if (name.startsWith('cancel') || name === 'first') samples[name] = Object.fromEntries(IMPLS.map((impl) => [impl, raw[impl][0].samples]))
}

// Ten times many's sessions in one process. Its wall is read against `many`'s (1,000
// sessions) run alternately with it in this block, pair by pair: the median of the pairs'
// ratios. The addon's pairs come first, in a block of their own; then each baseline's, as
// context for the addon's ratio and wall (no target rests on them).
if (want('many-10k')) {
  log('  many-10k…')
  const alternatedPairs = async (impl, count) => {
    const pairs = await measureAlternated('many', 'many-10k', count, impl)
    const wallRatios = pairs['many-10k'].map((run, i) => run.wallMs / pairs.many[i].wallMs)
    return {
      ...summarize(pairs['many-10k']),
      alternatedManyWallMs: median(pairs.many.map((run) => run.wallMs)),
      wallRatio: median(wallRatios),
      wallRatios,
    }
  }
  results.many10k = { addon: await alternatedPairs('addon', size.many10k.pairs) }
  for (const base of BASELINES) results.many10k[base] = await alternatedPairs(base, size.many10k.baselinePairs)
  sameTransport('many-10k', results.many10k)
}

// Addon-only context, measured right after: `many` on `transport: 'sse'` (RunSSE + BidiAppend
// over HTTP/1.1, what 'auto' falls back to where a server or proxy speaks no HTTP/2), which
// needs a connection per running turn, and the floor under it (the same number of turns'
// HTTP/1.1 setup through the addon's reqwest client against a server that does nothing else).
if (want('many')) results.manySse = summarize((await measure('many', size.runs, { impls: ['addon'], extra: { transport: 'sse' } })).addon)
if (want('many')) results.floor = summarize((await measure('floor', size.runs, { impls: ['addon'] })).addon)

// `large-up` on RunSSE too, whose upload is a hex-encoded BidiAppend body rather than one frame
// on the Run stream: a regression in either path shows in its own row.
if (want('large-up')) results.largeUpSse = summarize((await measure('large-up', size.runs, { impls: ['addon'], extra: { transport: 'sse' } })).addon)

// Start-up of the stdio agent (bench/startup.mjs), with the peers where a network namespace can
// keep them off the network; without one they are left out and their targets say so.
if (want('startup')) {
  log('  startup…')
  const startupRun = (peers) => spawnSync(process.execPath, [path.join(here, 'startup.mjs'), '--json', '--runs', String(size.startup.runs), ...(peers ? ['--peers'] : [])], { encoding: 'utf8', stdio: ['ignore', 'pipe', 'inherit'] })
  let run = startupRun(true)
  if (run.status === 3) run = startupRun(false)
  if (run.status !== 0) throw new Error(`bench/startup.mjs failed (exit ${run.status})`)
  results.startup = JSON.parse(run.stdout)
}

// A network that has latency (bench/latency.mjs): TLS through a relay that delays every byte,
// the stdio agent and the Connect client from cold, in round trips; and the agent's relay cost
// (bench/relay.mjs): its JSON lines against the addon alone on the same turns.
const script = (name, args) => {
  const run = spawnSync(process.execPath, [path.join(here, name), ...args], { encoding: 'utf8', stdio: ['ignore', 'pipe', 'inherit'] })
  if (run.status !== 0) throw new Error(`bench/${name} failed (exit ${run.status})`)
  return JSON.parse(run.stdout)
}
if (want('latency')) {
  log('  latency…')
  results.latency = script('latency.mjs', opts.smoke ? ['--smoke'] : [])
}
if (want('relay')) {
  log('  relay…')
  results.relay = script('relay.mjs', opts.smoke ? ['--smoke'] : [])
}
// The agent's weight (bench/memory.mjs): RSS after initialize + session/new and after a session
// of turns, beside node idle and the peers; and what the download is (bench/size.mjs).
if (want('memory')) {
  log('  memory…')
  results.memory = script('memory.mjs', opts.smoke ? ['--smoke'] : ['--peers'])
}
if (want('download')) {
  log('  download…')
  results.download = script('size.mjs', downloadArgs())
}

// The decode ceiling (the core codec alone) is measured by each addon stream worker right after
// its turn; the share below is the median of the runs' own shares.
if (results.stream) results.decodeCeiling = { framesPerSec: results.stream.addon.ceilingFramesPerSec }

// ---------- targets (issues #5, #31 and #43), as ratios measured in this run ----------
// The first round's 13 (the ceiling share raised from 0.5 to 0.85), each ratio against the
// baseline held against the Connect client too, then many-10k's and the start-up's.
const targets = []
const target = (name, value, limit, pass, unit = '') => targets.push({ name, value, limit, pass, unit })
const r = results
if (r.stream) {
  for (const base of BASELINES) {
    target(`stream: JS-thread busy, addon / ${base}`, r.stream.addon.busyMs / r.stream[base].busyMs, '≤ 0.2', r.stream.addon.busyMs / r.stream[base].busyMs <= 0.2, '×')
    target(`stream: wall, addon / ${base}`, r.stream.addon.wallMs / r.stream[base].wallMs, '≤ 0.5', r.stream.addon.wallMs / r.stream[base].wallMs <= 0.5, '×')
  }
  const share = r.stream.addon.ceilingShare
  target('stream: end-to-end frames/s / decode ceiling', share, '≥ 0.85', share >= 0.85, '×')
}
for (const dir of ['large-up', 'large-down']) {
  if (!r[dir]) continue
  target(`${dir}: addon MB/s`, r[dir].addon.mbPerSec, '≥ 300', r[dir].addon.mbPerSec >= 300, 'MB/s')
  target(`${dir}: addon peak RSS above idle / payload`, r[dir].addon.peakRssAboveIdleMiB / r[dir].addon.payloadMiB, '≤ 3', r[dir].addon.peakRssAboveIdleMiB / r[dir].addon.payloadMiB <= 3, '×')
}
if (r.many) {
  target('many: addon sessions completed', r.many.addon.completed, `= ${size.many.sessions}`, r.many.addon.completed === size.many.sessions)
  target('many: addon p99 first update', r.many.addon.firstP99Ms, '≤ 250', r.many.addon.firstP99Ms <= 250, 'ms')
  target('many: addon RSS per idle session', r.many.addon.perIdleSessionKiB, '≤ 64', r.many.addon.perIdleSessionKiB <= 64, 'KiB')
}
if (r['cancel-silent']) target('cancel (silent server): addon p99', r['cancel-silent'].addon.p99Ms, `≤ ${size.cancel.boundMs + 50}`, r['cancel-silent'].addon.p99Ms <= size.cancel.boundMs + 50, 'ms')
if (r['cancel-ack']) target('cancel (acknowledging server): addon p99', r['cancel-ack'].addon.p99Ms, '≤ 20', r['cancel-ack'].addon.p99Ms <= 20, 'ms')
if (r.first) {
  for (const base of BASELINES) target(`first update: addon p50 / ${base} p50`, r.first.addon.p50Ms / r.first[base].p50Ms, '≤ 1', r.first.addon.p50Ms <= r.first[base].p50Ms, '×')
}
if (r.many10k) {
  const addon = r.many10k.addon
  target('many-10k: addon sessions completed', addon.completed, `= ${size.many10k.sessions}`, addon.completed === size.many10k.sessions)
  target('many-10k: total wall / many\'s (1,000 sessions), run alternately', addon.wallRatio, '≤ 10', addon.wallRatio <= 10, '×')
  target('many-10k: addon RSS per idle session', addon.perIdleSessionKiB, '≤ 32', addon.perIdleSessionKiB <= 32, 'KiB')
}
if (r.startup) {
  const s = r.startup
  target('startup: initialize answered / node -e 0', s.initializeRatio, '≤ 1.5', s.initializeRatio <= 1.5, '×')
  const claude = s.peers['claude-agent-acp']
  if (claude) target('startup: initialize answered / claude-agent-acp\'s', s.initializeMs / claude, '≤ 0.5', s.initializeMs / claude <= 0.5, '×')
  else target('startup: initialize answered / claude-agent-acp\'s', 'not measured (no network namespace, or bench/peers not installed)', '≤ 0.5', false)
  target('startup: session/new answered after initialize / node -e 0', s.sessionNewRatio, '≤ 0.5', s.sessionNewRatio <= 0.5, '×')
}

if (r.latency) {
  const l = r.latency
  target('latency: first prompt 500 ms after session/new → first chunk, in RTT', l.first500.rtt, '≤ 1.3', l.first500.rtt <= 1.3, 'RTT')
  target('latency: first prompt at once after session/new → first chunk, in RTT', l.first0.rtt, '≤ 3', l.first0.rtt <= 3, 'RTT')
  target('latency: a later prompt → first chunk, in RTT', l.second.rtt, '≤ 1.2', l.second.rtt <= 1.2, 'RTT')
  target('latency: resume, drop seen → first chunk, in RTT', l.resume.rtt, '≤ 3.5', l.resume.rtt <= 3.5, 'RTT')
}
if (r.relay) {
  for (const name of ['stream', 'many']) {
    const x = r.relay[name]
    target(`relay (${name}): agent wall / addon alone`, x.wallRatio, '≤ 1.5', x.wallRatio <= 1.5, '×')
  }
}
if (r.memory) {
  const m = r.memory
  target('memory: agent RSS after initialize + session/new / node idle', m.agent.afterNewRatio, '≤ 1.5', m.agent.afterNewRatio <= 1.5, '×')
  // claude-agent-acp's main process, the one an editor starts (its session runs a program of its own too).
  const claude = m.peers['claude-agent-acp']
  if (claude) target('memory: agent RSS after initialize + session/new / claude-agent-acp\'s', m.agent.afterNewMiB / claude.mainMiB, '< 1', m.agent.afterNewMiB < claude.mainMiB, '×')
  else target('memory: agent RSS after initialize + session/new / claude-agent-acp\'s', `not measured (${m.peersMissing})`, '< 1', false)
}
/** The optional parts (`embedded`, `bench`) an addon carries, in words ('' for none). */
function carried(features) {
  return Object.entries(features ?? {}).filter(([, on]) => on).map(([name]) => (name === 'embedded' ? 'the embedded backend' : `\`${name}\``)).join(' and ')
}
/** Issue 43's addon, unpacked: the size the download target is read against. */
const ISSUE_43_ADDON_BYTES = 25.8e6
if (r.download) {
  const ratio = r.download.addon.bytes / ISSUE_43_ADDON_BYTES
  const parts = carried(r.download.addon.features)
  target(`download: release addon unpacked / 25.8 MB (issue 43)${parts ? `, measured with ${parts}` : ''}`, ratio, '≤ 0.6', ratio <= 0.6, '×')
}

// ---------- report ----------
const fmt = (v) => (typeof v !== 'number' ? String(v) : Math.abs(v) >= 100 ? v.toFixed(0) : Math.abs(v) >= 1 ? v.toFixed(2) : v.toFixed(3))
const rows = []
/** A row of figures: the addon's, then each baseline's (absent: an addon-only row), then the ratios. */
const row = (scenario, metric, a, ...bases) => rows.push([scenario, metric, fmt(a), ...BASELINES.map((_, i) => (bases[i] === undefined ? '—' : fmt(bases[i]))), ...BASELINES.map((_, i) => (bases[i] ? `${fmt(a / bases[i])}×` : ''))])
/** A row of figures already formatted, one per client, with no ratios between them. */
const figures = (scenario, metric, ...cells) => rows.push([scenario, metric, ...cells, ...BASELINES.map(() => '')])
const addonOnly = (scenario, metric, text) => rows.push([scenario, metric, text, ...BASELINES.map(() => '—'), ...BASELINES.map(() => '')])
const each = (name, key) => [r[name].addon[key], ...BASELINES.map((base) => r[name][base][key])]
if (r.stream) {
  row('stream', 'wall ms', ...each('stream', 'wallMs'))
  row('stream', 'JS-thread busy ms', ...each('stream', 'busyMs'))
  row('stream', 'updates delivered', ...each('stream', 'updates'))
  row('stream', 'frames/s (decode ceiling ' + fmt(r.decodeCeiling.framesPerSec) + ')', ...each('stream', 'framesPerSec'))
}
if (r['stream-frames']) {
  row('stream-frames', 'wall ms', ...each('stream-frames', 'wallMs'))
  row('stream-frames', 'JS-thread busy ms', ...each('stream-frames', 'busyMs'))
  row('stream-frames', 'frames/s', ...each('stream-frames', 'framesPerSec'))
}
for (const dir of ['large-up', 'large-down']) {
  if (!r[dir]) continue
  row(dir, 'MB/s', ...each(dir, 'mbPerSec'))
  row(dir, 'peak RSS above idle MiB', ...each(dir, 'peakRssAboveIdleMiB'))
  const budgetMs = (r[dir].addon.payloadMiB / 300) * 1000
  if (dir === 'large-up') {
    addonOnly(dir, "on transport 'sse': MB/s / peak RSS above idle MiB", `${fmt(r.largeUpSse.mbPerSec)} / ${fmt(r.largeUpSse.peakRssAboveIdleMiB)}`)
    row(dir, `V8 alone: fresh string read ms (of the ${fmt(budgetMs)} ms that 300 MB/s allows)`, ...each(dir, 'stringReadMs'))
  }
}
if (r.many) {
  row('many', 'completed', ...each('many', 'completed'))
  row('many', 'total wall ms', ...each('many', 'wallMs'))
  row('many', 'first update p50 ms', ...each('many', 'firstP50Ms'))
  row('many', 'first update p99 ms', ...each('many', 'firstP99Ms'))
  addonOnly('many', "on transport 'sse': total wall ms / first update p99 ms", `${fmt(r.manySse.wallMs)} / ${fmt(r.manySse.firstP99Ms)}`)
  addonOnly('many', "HTTP/1.1 floor under 'sse': first byte p99 ms (reqwest alone, do-nothing server)", fmt(r.floor.firstP99Ms))
  row('many', 'RSS per idle session KiB', ...each('many', 'perIdleSessionKiB'))
}
if (r.many10k) {
  row('many-10k', 'completed', ...each('many10k', 'completed'))
  row('many-10k', 'total wall ms', ...each('many10k', 'wallMs'))
  row('many-10k', 'many run alternately with it: total wall ms', ...each('many10k', 'alternatedManyWallMs'))
  figures('many-10k', 'total wall / many\'s: median of the pairs', ...each('many10k', 'wallRatio').map((x) => `${fmt(x)}×`))
  figures('many-10k', 'total wall / many\'s, pair by pair', ...each('many10k', 'wallRatios').map((xs) => xs.map((x) => `${fmt(x)}×`).join(', ')))
  addonOnly('many-10k', 'first update p50 / p99 ms', `${fmt(r.many10k.addon.firstP50Ms)} / ${fmt(r.many10k.addon.firstP99Ms)}`)
  addonOnly('many-10k', 'RSS per idle session KiB', fmt(r.many10k.addon.perIdleSessionKiB))
}
for (const name of ['cancel-ack', 'cancel-silent', 'first']) {
  if (!r[name]) continue
  row(name, 'p50 ms', ...each(name, 'p50Ms'))
  row(name, 'p99 ms', ...each(name, 'p99Ms'))
}
const table = [['scenario', 'metric', 'addon', 'baseline', 'connect', 'addon / baseline', 'addon / connect'], ...rows]
const markdown = [
  `| ${table[0].join(' | ')} |`,
  `|${table[0].map(() => '---').join('|')}|`,
  ...rows.map((cells) => `| ${cells.join(' | ')} |`),
].join('\n')
let startupMd = ''
if (r.startup) {
  const s = r.startup
  const line = (what, ms) => `| ${what} | ${fmt(ms)} | ${fmt(ms / s.nodeMs)}× |`
  startupMd = [
    `| start-up, median of ${s.runs} | ms | / node -e 0 |`,
    '|---|---|---|',
    line('node -e 0: spawn → exit', s.nodeMs),
    line('cursor-acp-native: spawn → initialize answered', s.initializeMs),
    line('cursor-acp-native: session/new sent on that answer → answered', s.sessionNewMs),
    line(`cursor-acp-native, ${s.history.sessions.toLocaleString('en-US')} saved sessions: spawn → initialize answered`, s.history.initializeMs),
    line(`cursor-acp-native, ${s.history.sessions.toLocaleString('en-US')} saved sessions: session/new → answered`, s.history.sessionNewMs),
    ...Object.entries(s.peers).map(([name, ms]) => line(`${name}: spawn → initialize answered`, ms)),
    ...(Object.keys(s.peers).length ? [] : ['| claude-agent-acp, codex-acp | not measured: no network namespace to keep them off the network, or not installed (npm run bench:peers) | |']),
  ].join('\n')
}
let latencyMd = ''
if (r.latency) {
  const l = r.latency
  const line = (what, f) => `| ${what} | ${fmt(f.ms)} | ${fmt(f.rtt)} |`
  latencyMd = [
    `| latency: TLS through a relay of ${l.oneWayMs} ms each way (measured RTT ${fmt(l.rttMs)} ms), median of ${l.runs} | ms | RTT |`,
    '|---|---|---|',
    line('agent, new process: first prompt sent at once after session/new → first chunk', l.first0),
    line('agent, new process: first prompt sent 500 ms after session/new → first chunk', l.first500),
    line('agent: a later prompt of the same session → first chunk', l.second),
    line('agent: resume, the connection reset mid-stream → first chunk of the resumed turn', l.resume),
    line('connect, new process: first prompt → first update', l.connectFirst),
    line('connect: a later prompt → first update', l.connectSecond),
  ].join('\n')
}
let relayMd = ''
if (r.relay) {
  const x = r.relay
  relayMd = [
    `| relay: the stdio agent's JSON lines, median of ${x.runs} | stream (${(x.stream.size.blocks * (x.stream.size.per + 1)).toLocaleString('en-US')} deltas) | many (${x.many.size.sessions} sessions) |`,
    '|---|---|---|',
    `| agent wall ms | ${fmt(x.stream.agentWallMs)} | ${fmt(x.many.agentWallMs)} |`,
    `| addon alone wall ms | ${fmt(x.stream.addonWallMs)} | ${fmt(x.many.addonWallMs)} |`,
    `| agent / addon alone (median of the runs' ratios) | ${fmt(x.stream.wallRatio)}× | ${fmt(x.many.wallRatio)}× |`,
    `| agent CPU ms | ${fmt(x.stream.agentCpuMs)} | ${fmt(x.many.agentCpuMs)} |`,
    `| updates the agent wrote | ${fmt(x.stream.agentUpdates)} | ${fmt(x.many.agentUpdates)} |`,
    `| agent CPU ms per 1,000 updates | ${fmt(x.stream.agentCpuPer1000Updates)} | ${fmt(x.many.agentCpuPer1000Updates)} |`,
    `| every update whole and in order | ${x.stream.intact ? 'yes' : 'no'} | ${x.many.intact ? 'yes' : 'no'} |`,
  ].join('\n')
}
let memoryMd = ''
if (r.memory) {
  const m = r.memory
  const mib = (x) => `${fmt(x)} MiB`
  const line = (what, x) => `| ${what} | ${fmt(x)} | ${fmt(x / m.nodeIdleMiB)}× |`
  const peerLine = ([name, p]) => `| ${name}: after ${p.stage === 'session/new' ? 'initialize + session/new' : `initialize only (${p.note})`}; main process (whole tree: ${mib(p.treeMiB)}, ${p.processes.join(' + ')}) | ${fmt(p.mainMiB)} | ${fmt(p.mainMiB / m.nodeIdleMiB)}× |`
  memoryMd = [
    `| memory: RSS, median of ${m.runs}, each settled ${m.settleMs} ms | MiB | / node idle |`,
    '|---|---|---|',
    line('node idle (waiting on its stdin)', m.nodeIdleMiB),
    line('node with the addon loaded', m.addonIdleMiB),
    line('cursor-acp-native: after initialize + session/new', m.agent.afterNewMiB),
    line(`cursor-acp-native: after a session of ${m.turns} turns`, m.agent.afterTurnsMiB),
    line(`cursor-acp-native: peak over those ${m.turns} turns (VmHWM)`, m.agent.peakMiB),
    ...(m.agent.afterIdleMiB == null ? [] : [line(`cursor-acp-native: then idle for ${fmt((m.idleMs + m.settleMs) / 1000)} s (it collects its garbage once idle)`, m.agent.afterIdleMiB)]),
    ...Object.entries(m.peers).map(peerLine),
    ...(Object.keys(m.peers).length ? [] : [`| claude-agent-acp, codex-acp | not measured: ${m.peersMissing} | |`]),
    '',
    '| module (RSS and V8 heap after a full GC, before and after loading it) | RSS MiB, alone | heap MiB, alone | ms, alone | RSS MiB, in the agent\'s order |',
    '|---|---|---|---|---|',
    ...m.modules.alone.map((a) => {
      const inOrder = m.modules.inOrder.find((x) => x.name === a.name)
      return `| ${a.name} | ${fmt(a.rssMiB)} | ${fmt(a.heapMiB)} | ${fmt(a.ms)} | ${inOrder ? fmt(inOrder.rssMiB) : '—'} |`
    }),
  ].join('\n')
}
let downloadMd = ''
if (r.download) {
  const d = r.download
  const mb = (b) => `${(b / 1e6).toFixed(2)} MB`
  downloadMd = [
    `| download: ${d.binary}${carried(d.addon.features) ? ` (with ${carried(d.addon.features)})` : ' (client only)'} | size |`,
    '|---|---|',
    `| addon, unpacked | ${mb(d.addon.bytes)} (${fmt(d.addon.bytes / ISSUE_43_ADDON_BYTES)}× issue 43's 25.8 MB) |`,
    `| addon, gzip -9 | ${mb(d.addon.gzipBytes)} |`,
    `| ${d.platformPackage.name} (npm pack): packed / unpacked | ${mb(d.platformPackage.packedBytes)} / ${mb(d.platformPackage.unpackedBytes)} (${d.platformPackage.files.join(', ')}) |`,
    `| cursor-acp-native (npm pack, ${d.rootPackage.files} files): packed / unpacked | ${mb(d.rootPackage.packedBytes)} / ${mb(d.rootPackage.unpackedBytes)} |`,
    ...(d.sections ? [`| the addon's largest sections | ${d.sections.map((x) => `${x.name} ${mb(x.bytes)}`).join(', ')} |`] : []),
    ...(d.stripHeadroomBytes !== null ? [`| what \`strip --strip-all\` still takes off | ${d.stripHeadroomBytes} bytes |`] : []),
  ].join('\n')
}
const targetsMd = [
  '| target | measured | limit | met |',
  '|---|---|---|---|',
  ...targets.map((t) => `| ${t.name} | ${fmt(t.value)} ${t.unit} | ${t.limit} | ${t.pass ? 'yes' : '**no**'} |`),
].join('\n')
const transportLine = `All three clients on ${[...transports].join(' and ')}: the addon on its default transport ('auto'), the baselines on the same.`
process.stdout.write(`\n${transportLine}\n\n${markdown}\n\n${startupMd}\n\n${latencyMd}\n\n${relayMd}\n\n${memoryMd}\n\n${downloadMd}\n\n${targetsMd}\n\ncheck (same updates from all three clients): ${checkPass ? 'pass' : 'FAIL'}\n`)

const cpus = os.cpus()
const machine = {
  cpus: cpus.length,
  cpuModel: cpus[0]?.model ?? 'unknown',
  memoryGiB: Math.round(os.totalmem() / 2 ** 30),
  platform: `${os.type()} ${os.release()} ${os.arch()}`,
  node: process.version,
}
const outFile = opts.out ?? path.join(here, 'results.json')
fs.writeFileSync(outFile, `${JSON.stringify({ date: new Date().toISOString(), mode: opts.smoke ? 'smoke' : 'full', machine, size, results, targets, samples, markdown, startupMd, latencyMd, relayMd, memoryMd, downloadMd, targetsMd }, null, 2)}\n`)
log(`wrote ${outFile}`)
fs.rmSync(tmp, { recursive: true, force: true })
if (!opts.smoke && !opts.out) {
  // The latest full run goes into bench/README.md between its markers.
  const readme = path.join(here, 'README.md')
  const text = fs.readFileSync(readme, 'utf8')
  const section = [
    '<!-- results:start -->',
    `Latest run: ${new Date().toISOString().slice(0, 10)} on ${machine.cpus} × ${machine.cpuModel}, ${machine.memoryGiB} GiB, ${machine.platform}, Node ${machine.node}; addon release build.`,
    transportLine,
    '',
    markdown,
    '',
    startupMd,
    '',
    latencyMd,
    '',
    relayMd,
    '',
    memoryMd,
    '',
    downloadMd,
    '',
    targetsMd,
    '',
    `Check (all three clients produce the same updates on the check scenario): ${checkPass ? 'pass' : 'FAIL'}.`,
    '<!-- results:end -->',
  ].join('\n')
  fs.writeFileSync(readme, text.replace(/<!-- results:start -->[\s\S]*<!-- results:end -->/, section))
  log(`updated ${readme}`)
}
if (!opts.smoke) {
  const plot = spawnSync('python3', [path.join(here, 'plot.py'), outFile, path.join(here, 'distributions.png')], { stdio: 'inherit' })
  if (plot.status !== 0) log('plot skipped (python3 with matplotlib not available: run `npm run bench:plot`)')
}
