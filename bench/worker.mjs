// One measurement in a fresh process (so peak RSS and event-loop figures belong to it alone):
// `node --expose-gc bench/worker.mjs '<spec json>'` prints one JSON result line.
// spec: { impl: 'addon' | 'baseline' | 'connect', scenario, url, size }
import { createRequire } from 'node:module'
import { performance } from 'node:perf_hooks'

import { relayText } from './acp-pipe.mjs'

const require = createRequire(import.meta.url)
const spec = JSON.parse(process.argv[2])
const mib = 1024 * 1024

// ---------- the three implementations behind one shape ----------

// The implementation a measurement made, for the transport its turns used.
let made

async function implementation(impl, url, { content = 'bench file\n', cancelTimeoutMs = 2000, transport } = {}) {
  if (impl === 'addon') {
    const { AgentClient } = require('../index.js')
    const client = new AgentClient({
      baseUrl: url,
      cancelTimeoutMs,
      ...(transport && { transport }),
      exec: (req) => (req.kind === 'read' ? { success: { path: req.args.path, content: exec.content() } } : undefined),
    })
    const exec = { content: () => content }
    return made = {
      exec,
      // The transport its turns used ('h2' or 'sse'); `transport: 'auto'` settles on one.
      transport: () => client.transport,
      session() {
        const session = client.newSession({ cwd: '/bench' })
        return {
          turn(text, onUpdate) {
            const t = session.prompt(text)
            const done = (async () => {
              for (;;) {
                const batch = await t.nextBatch(1024)
                if (batch.length === 0) break
                for (const u of batch) onUpdate(u)
              }
              return t.result
            })()
            return { done, cancel: () => t.cancel() }
          },
          keep: session,
        }
      },
    }
  }
  // Both baselines: the hand-written one (baseline) and the Connect client (connect).
  const BaselineClient = impl === 'connect'
    ? (await import('./baseline/connect-client.mjs')).ConnectBaselineClient
    : (await import('./baseline/client.mjs')).BaselineClient
  const exec = { content: () => content }
  // The addon's default, 'auto', settles on h2 against the embedded backend: the baselines go
  // the same way, and run.mjs checks that all did.
  const baselineTransport = transport === 'sse' ? 'sse' : 'h2'
  return made = {
    exec,
    transport: () => baselineTransport,
    session() {
      const client = new BaselineClient({
        baseUrl: url,
        cancelTimeoutMs,
        transport: baselineTransport,
        exec: ({ kind, args }) => (kind === 'read' ? { result: { case: 'success', value: { path: args.path, output: { case: 'content', value: exec.content() } } } } : undefined),
      })
      return {
        turn(text, onUpdate) {
          const t = client.prompt(text, onUpdate)
          return { done: t.result, cancel: t.cancel }
        },
        keep: client,
      }
    },
  }
}

const rss = () => process.memoryUsage().rss
const gc = () => { if (global.gc) { global.gc(); global.gc() } }
const percentile = (xs, p) => {
  const s = [...xs].sort((a, b) => a - b)
  return s[Math.min(s.length - 1, Math.floor((p / 100) * s.length))]
}

// ---------- scenarios ----------

async function stream() {
  const impl = await implementation(spec.impl, spec.url, { transport: spec.transport })
  const session = impl.session()
  let updates = 0
  let chars = 0
  const elu0 = performance.eventLoopUtilization()
  const t0 = performance.now()
  const { done } = session.turn('stream', (u) => {
    updates++
    if (u.sessionUpdate === 'agent_message_chunk') chars += u.content.text.length
  })
  const result = await done
  const wallMs = performance.now() - t0
  const elu = performance.eventLoopUtilization(elu0)
  const expectedChars = spec.size.count * spec.size.text.length
  if (chars !== expectedChars) throw new Error(`${spec.impl} delivered ${chars} of ${expectedChars} characters`)
  const framesPerSec = spec.size.count / (wallMs / 1000)
  const out = { wallMs, busyMs: elu.active, updates, frames: spec.size.count, framesPerSec, stopReason: result.stopReason }
  if (spec.impl === 'addon' && spec.scenario === 'stream') {
    // The decode ceiling (the core codec alone on the same frames), measured here, right after
    // the turn, so that each run's share of it compares two figures taken at the same moment on
    // this noisy VM (the ceiling alone moves between 5 and 9 M frames/s from minute to minute).
    const { bench } = require('../testing.js')
    const ceilings = [0, 1, 2].map(() => {
      const c = bench.decodeTextFrames(spec.size.count, spec.size.text)
      return c.frames / (c.nanos / 1e9)
    })
    out.ceilingFramesPerSec = ceilings.sort((a, b) => a - b)[1]
    out.ceilingShare = framesPerSec / out.ceilingFramesPerSec
  }
  return out
}

async function largeUp() {
  const content = 'a'.repeat(spec.size.bytes)
  const impl = await implementation(spec.impl, spec.url, { content, transport: spec.transport })
  const session = impl.session()
  gc()
  const idle = rss()
  let returnedAt = 0
  impl.exec.content = () => {
    returnedAt = performance.now()
    return content
  }
  const { done } = session.turn('upload', () => {})
  await done
  const seconds = (performance.now() - returnedAt) / 1000
  const peakRssAboveIdleMiB = (process.resourceUsage().maxRSS * 1024 - idle) / mib
  // What V8 alone takes to hand over a fresh string like `content` (flatten, then a UTF-8 copy
  // into new memory), as any client must before encoding a byte: the part of the upload's time
  // outside both clients' code, measured after the turn so it cannot warm the measured one.
  const probe = 'b'.repeat(spec.size.bytes)
  const readStart = performance.now()
  Buffer.from(probe, 'utf8')
  const stringReadMs = performance.now() - readStart
  return { mbPerSec: spec.size.bytes / mib / seconds, peakRssAboveIdleMiB, payloadMiB: spec.size.bytes / mib, stringReadMs }
}

async function largeDown() {
  const impl = await implementation(spec.impl, spec.url, { transport: spec.transport })
  const session = impl.session()
  gc()
  const idle = rss()
  let firstAt = 0
  const { done } = session.turn('download', () => { if (!firstAt) firstAt = performance.now() })
  await done
  const seconds = (performance.now() - firstAt) / 1000
  return { mbPerSec: spec.size.bytes / mib / seconds, peakRssAboveIdleMiB: (process.resourceUsage().maxRSS * 1024 - idle) / mib, payloadMiB: spec.size.bytes / mib }
}

async function many() {
  const impl = await implementation(spec.impl, spec.url, { transport: spec.transport })
  gc()
  const before = rss()
  const sessions = Array.from({ length: spec.size.sessions }, () => impl.session())
  const firsts = []
  const t0 = performance.now()
  const results = await Promise.all(sessions.map(async (s) => {
    const start = performance.now()
    let first = 0
    const { done } = s.turn('many', () => { if (!first) first = performance.now() - start })
    const r = await done
    firsts.push(first)
    return r.stopReason
  }))
  const wallMs = performance.now() - t0
  const completed = results.filter((r) => r === 'end_turn').length
  await new Promise((r) => setTimeout(r, 200))
  gc()
  const perIdleSessionKiB = (rss() - before) / 1024 / sessions.length
  return { sessions: sessions.length, completed, wallMs, firstP50Ms: percentile(firsts, 50), firstP99Ms: percentile(firsts, 99), perIdleSessionKiB, kept: sessions.length }
}

// The transport floor under `many` (addon only): the same number of turns' HTTP/1.1 setup
// through the addon's reqwest client, against a server that does nothing else.
async function floor() {
  const { bench } = require('../testing.js')
  const s = await bench.floorTurns(spec.url, spec.size.sessions)
  return { wallMs: s.wallMs, firstP50Ms: s.firstP50Ms, firstP99Ms: s.firstP99Ms }
}

async function cancel() {
  const impl = await implementation(spec.impl, spec.url, { cancelTimeoutMs: spec.size.boundMs, transport: spec.transport })
  const samples = []
  for (let i = 0; i < spec.size.cancels; i++) {
    const session = impl.session()
    let resolveFirst
    const first = new Promise((r) => { resolveFirst = r })
    const t = session.turn('cancel me', () => resolveFirst())
    await first
    const start = performance.now()
    t.cancel()
    const r = await t.done
    if (r.stopReason !== 'cancelled') throw new Error(`${spec.impl}: stop reason ${r.stopReason} after cancel`)
    samples.push(performance.now() - start)
  }
  return { p50Ms: percentile(samples, 50), p99Ms: percentile(samples, 99), samples }
}

async function first() {
  const impl = await implementation(spec.impl, spec.url, { transport: spec.transport })
  const session = impl.session()
  const samples = []
  for (let i = 0; i < spec.size.prompts; i++) {
    const start = performance.now()
    let at = 0
    const { done } = session.turn('hello', () => { if (!at) at = performance.now() - start })
    await done
    samples.push(at)
  }
  return { p50Ms: percentile(samples, 50), p99Ms: percentile(samples, 99), samples }
}

// relay.mjs's stream turn through the addon alone, the figure the agent's is read against:
// wall from prompt() to the result, this process's CPU, and every character in order.
async function relayStream() {
  const impl = await implementation(spec.impl, spec.url, { transport: spec.transport })
  const session = impl.session()
  let text = ''
  let updates = 0
  const cpu0 = process.cpuUsage()
  const t0 = performance.now()
  const { done } = session.turn('stream', (u) => {
    updates++
    if (u.sessionUpdate === 'agent_message_chunk') text += u.content.text
  })
  await done
  const wallMs = performance.now() - t0
  const cpu = process.cpuUsage(cpu0)
  const intact = text === relayText(spec.size)
  if (!intact) throw new Error(`the addon delivered ${text.length} characters, not the turn's text in order`)
  return { wallMs, cpuMs: (cpu.user + cpu.system) / 1000, updates, intact }
}

// From cold (latency.mjs, through its relay): a new client's first prompt → first update, then
// a second prompt on the same session, as an editor's first thread.
async function cold() {
  const impl = await implementation(spec.impl, spec.url, { transport: spec.transport })
  const session = impl.session()
  const timed = async () => {
    const start = performance.now()
    let at = 0
    const { done } = session.turn('hello', () => { if (!at) at = performance.now() - start })
    await done
    return at
  }
  const firstMs = await timed()
  const secondMs = await timed()
  return { firstMs, secondMs }
}

/** Both implementations on one scenario: the updates they produce, normalized for comparison. */
async function check() {
  const impl = await implementation(spec.impl, spec.url, { transport: spec.transport })
  const session = impl.session()
  const updates = []
  const { done } = session.turn('check', (u) => updates.push(u))
  const r = await done
  const out = []
  for (const u of updates) {
    const last = out.at(-1)
    switch (u.sessionUpdate) {
      case 'agent_message_chunk':
      case 'agent_thought_chunk':
        if (last?.kind === u.sessionUpdate) last.text += u.content.text
        else out.push({ kind: u.sessionUpdate, text: u.content.text })
        break
      case 'tool_call':
        out.push({ kind: 'tool_call', id: u.toolCallId, status: u.status })
        break
      case 'tool_call_update':
        if (u.status) out.push({ kind: 'tool_call_update', id: u.toolCallId, status: u.status })
        break
      case 'usage_update':
        out.push({ kind: 'usage_update', used: u.used, size: u.size })
        break
    }
  }
  return { stopReason: r.stopReason, updates: out }
}

const run = { stream, 'stream-frames': stream, 'large-up': largeUp, 'large-down': largeDown, many, 'many-10k': many, floor, 'cancel-ack': cancel, 'cancel-silent': cancel, first, cold, 'relay-stream': relayStream, check }[spec.scenario]
try {
  const result = await run()
  if (made) result.transport = made.transport()
  process.stdout.write(`${JSON.stringify(result)}\n`)
  process.exit(0)
} catch (e) {
  process.stderr.write(`${e.stack ?? e}\n`)
  process.exit(1)
}
