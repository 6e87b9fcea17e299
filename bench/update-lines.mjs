#!/usr/bin/env node
// @ts-check
// What writing a turn's updates to an editor costs the agent's JavaScript thread, the two ways
// the addon offers: `nextBatch` (an object per update, which the agent serialized as a JSON-RPC
// line with `JSON.stringify` and wrote, as it did before `nextLines`) and `nextLines` (the
// batch as the core serialized it, written as it is). One process, the embedded backend in a
// process of its own, a turn of `UPDATES` updates that do not merge (thinking and text in
// turn), written to a pipe a `cat` drains; rounds alternate the two ways. Figures, medians:
// the event loop's active time over the turn (`performance.eventLoopUtilization`), this
// process's CPU (all its threads), the wall; and the lines each way wrote, which must agree.
//
//   node bench/update-lines.mjs [--runs 6] [--updates 20000]
//
// Prints one JSON line. Not part of `bench/run.mjs`: a probe of one cost, measured beside its
// baseline in the same run.
import { spawn } from 'node:child_process'
import fs from 'node:fs'
import { createRequire } from 'node:module'
import os from 'node:os'
import path from 'node:path'
import { parseArgs } from 'node:util'

import { startBackend } from './acp-pipe.mjs'

const require = createRequire(import.meta.url)
const { values: opts } = parseArgs({ options: { runs: { type: 'string', default: '6' }, updates: { type: 'string', default: '20000' } } })
const runs = Number(opts.runs)
const UPDATES = Number(opts.updates)
const BATCH = 256 // the agent's batch (cli/session.mjs)
const SESSION_ID = '0b6c3f0e-6a52-4c3e-9d51-5b7f3f2d9a10'

const tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'acp-update-lines-'))
const steps = Array.from({ length: UPDATES }, (_, i) => ({ type: i % 2 ? 'text' : 'thinking', text: `word ${i} ` }))
const backend = await startBackend(tmp, 'update-lines', { record: false, steps: [...steps, { type: 'turnEnded' }] })
const { AgentClient } = require('../index.js')
const client = new AgentClient({ baseUrl: backend.url })
const reader = spawn('cat', [], { stdio: ['pipe', 'ignore', 'inherit'] })
const out = reader.stdin
const drained = () => new Promise((resolve) => (out.writableNeedDrain ? out.once('drain', resolve) : resolve(undefined)))
const newlines = (/** @type {Uint8Array | string} */ chunk) => {
  let n = 0
  for (const c of typeof chunk === 'string' ? Buffer.from(chunk) : chunk) if (c === 10) n++
  return n
}

/** The agent's way before `nextLines`: objects, serialized here. @returns {Promise<number>} lines written */
async function viaObjects(/** @type {any} */ turn) {
  let lines = 0
  for (let batch = await turn.nextBatch(BATCH); batch.length; batch = await turn.nextBatch(BATCH)) {
    let text = ''
    for (const update of batch) text += `${JSON.stringify({ jsonrpc: '2.0', method: 'session/update', params: { sessionId: SESSION_ID, update } })}\n`
    lines += newlines(text)
    if (!out.write(text)) await drained()
  }
  return lines
}

/** The agent's way now: the core's lines, written as they are. @returns {Promise<number>} lines written */
async function viaLines(/** @type {any} */ turn) {
  let lines = 0
  for (let bytes = await turn.nextLines(BATCH, SESSION_ID); bytes.length; bytes = await turn.nextLines(BATCH, SESSION_ID)) {
    lines += newlines(bytes)
    if (!out.write(bytes)) await drained()
  }
  return lines
}

const median = (/** @type {number[]} */ xs) => {
  const s = [...xs].sort((a, b) => a - b)
  return s.length % 2 ? s[(s.length - 1) / 2] : (s[s.length / 2 - 1] + s[s.length / 2]) / 2
}
/** @type {Record<string, { loopMs: number[], cpuMs: number[], wallMs: number[], lines: number[] }>} */
const samples = { objects: { loopMs: [], cpuMs: [], wallMs: [], lines: [] }, lines: { loopMs: [], cpuMs: [], wallMs: [], lines: [] } }
try {
  for (let round = 0; round < runs; round++) {
    const order = round % 2 ? [['lines', viaLines], ['objects', viaObjects]] : [['objects', viaObjects], ['lines', viaLines]]
    for (const [name, write] of /** @type {[string, (turn: any) => Promise<number>][]} */ (order)) {
      const session = client.newSession({ cwd: tmp })
      const loop0 = performance.eventLoopUtilization()
      const cpu0 = process.cpuUsage()
      const t0 = performance.now()
      const lines = await write(session.prompt('updates'))
      const wallMs = performance.now() - t0
      const cpu = process.cpuUsage(cpu0)
      const s = samples[name]
      s.loopMs.push(performance.eventLoopUtilization(loop0).active)
      s.cpuMs.push((cpu.user + cpu.system) / 1000)
      s.wallMs.push(wallMs)
      s.lines.push(lines)
    }
  }
  const summary = Object.fromEntries(Object.entries(samples).map(([name, s]) => [name, { loopMs: median(s.loopMs), cpuMs: median(s.cpuMs), wallMs: median(s.wallMs), lines: median(s.lines), samples: s }]))
  if (summary.objects.lines !== summary.lines.lines) throw new Error(`the two ways wrote ${summary.objects.lines} and ${summary.lines.lines} lines`)
  console.log(JSON.stringify({ runs, updates: UPDATES, loopRatio: summary.lines.loopMs / summary.objects.loopMs, cpuRatio: summary.lines.cpuMs / summary.objects.cpuMs, ...summary }))
} finally {
  out.end()
  backend.stop()
  fs.rmSync(tmp, { recursive: true, force: true })
}
process.exit(0)
