// The stdio agent's relay cost (issue 43): a turn's updates through the agent's JSON lines, read
// by a client process as an editor reads them (a pipe, a line at a time), against the addon alone
// on the same turn (bench/worker.mjs, a process of its own), both against the embedded backend
// in a process of its own, no latency:
//   - stream: one turn of 200,000 text deltas (`stream`'s, with a numbered marker after every
//     1,999, so that a lost or moved delta shows); the text must arrive whole and in order;
//   - many: `many`'s turn (100 deltas and a read exec) in 100 sessions of one agent process, all
//     prompted at once; every session's text must arrive whole, before its tool call.
// Figures: wall (prompt sent → answered; for many, the first sent → the last answered), the
// agent process's CPU (from /proc) per 1,000 updates it wrote, the updates, the addon's wall
// and CPU beside it. Prints one JSON line. `node bench/relay.mjs [--smoke] [--runs 3]`.
import { spawnSync } from 'node:child_process'
import fs from 'node:fs'
import os from 'node:os'
import path from 'node:path'
import { fileURLToPath } from 'node:url'
import { parseArgs } from 'node:util'

import { agentDirs, cpuMs, relayText, relayTurn, startAgent, startBackend } from './acp-pipe.mjs'

const here = path.dirname(fileURLToPath(import.meta.url))
const { values: opts } = parseArgs({ options: { smoke: { type: 'boolean', default: false }, runs: { type: 'string' } } })
const runs = Number(opts.runs ?? (opts.smoke ? 1 : 3))
const STREAM = opts.smoke ? { blocks: 10, per: 199, text: 'tok ' } : { blocks: 100, per: 1999, text: 'tok ' }
const MANY = opts.smoke ? { sessions: 10, deltas: 100 } : { sessions: 100, deltas: 100 }
const tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'acp-relay-'))
const median = (xs) => {
  const s = [...xs].sort((a, b) => a - b)
  return s.length % 2 ? s[(s.length - 1) / 2] : (s[s.length / 2 - 1] + s[s.length / 2]) / 2
}


function addonAlone(scenario, url, size) {
  const r = spawnSync(process.execPath, ['--expose-gc', path.join(here, 'worker.mjs'), JSON.stringify({ impl: 'addon', scenario, url, size })], { encoding: 'utf8', stdio: ['ignore', 'pipe', 'inherit'] })
  if (r.status !== 0) throw new Error(`addon ${scenario} failed (exit ${r.status})`)
  return JSON.parse(r.stdout)
}

/** The stream turn through a new agent process. */
async function agentStream(url, name) {
  const { cacheDir, cwd } = agentDirs(tmp, name)
  let text = ''
  let updates = 0
  const agent = startAgent({
    baseUrl: url,
    cacheDir,
    onUpdate: (u) => {
      updates++
      if (u.sessionUpdate === 'agent_message_chunk') text += u.content.text
    },
  })
  try {
    await agent.initialize()
    const { sessionId } = await agent.newSession(cwd)
    // The session's prewarm is out of the way (it is not what is measured).
    await new Promise((resolve) => setTimeout(resolve, 200))
    updates = 0
    const cpu0 = cpuMs(agent.child.pid)
    const p = agent.prompt(sessionId, 'stream')
    const { result, at } = await p.answer
    const cpu = cpuMs(agent.child.pid) - cpu0
    const intact = text === relayText(STREAM)
    if (!intact || result.stopReason !== 'end_turn') throw new Error(`agent stream: ${text.length} characters of ${relayText(STREAM).length}, in order: ${intact}; ${result.stopReason}`)
    return { wallMs: at - p.sentAt, cpuMs: cpu, updates, intact }
  } finally {
    await agent.stop()
  }
}

/** `many`'s turn in MANY.sessions sessions of one new agent process, prompted at once. */
async function agentMany(url, name) {
  const { cacheDir, cwd } = agentDirs(tmp, name)
  const seen = new Map()
  let updates = 0
  const agent = startAgent({
    baseUrl: url,
    cacheDir,
    onUpdate: (u, sessionId) => {
      updates++
      const s = seen.get(sessionId) ?? { text: '', textAfterTool: false, tool: false }
      seen.set(sessionId, s)
      if (u.sessionUpdate === 'agent_message_chunk') {
        s.text += u.content.text
        if (s.tool) s.textAfterTool = true
      } else if (u.sessionUpdate === 'tool_call' || u.sessionUpdate === 'tool_call_update') {
        s.tool = true
      }
    },
  })
  try {
    await agent.initialize()
    const ids = []
    for (let i = 0; i < MANY.sessions; i++) ids.push((await agent.newSession(cwd)).sessionId)
    await new Promise((resolve) => setTimeout(resolve, 300))
    updates = 0
    seen.clear()
    const cpu0 = cpuMs(agent.child.pid)
    const prompts = ids.map((id) => agent.prompt(id, 'many'))
    const answers = await Promise.all(prompts.map((p) => p.answer))
    const wallMs = Math.max(...answers.map((a) => a.at)) - prompts[0].sentAt
    const cpu = cpuMs(agent.child.pid) - cpu0
    const expected = 'tok '.repeat(MANY.deltas)
    const whole = ids.filter((id) => seen.get(id)?.text === expected && !seen.get(id).textAfterTool).length
    const completed = answers.filter((a) => a.result.stopReason === 'end_turn').length
    if (whole !== ids.length || completed !== ids.length) throw new Error(`agent many: ${whole} of ${ids.length} sessions whole and in order, ${completed} ended`)
    return { wallMs, cpuMs: cpu, updates, completed, intact: true }
  } finally {
    await agent.stop()
  }
}

const out = { runs, stream: { size: STREAM }, many: { size: MANY } }
const streamBackend = await startBackend(tmp, 'relay-stream', { record: false, steps: relayTurn(STREAM) })
const manyBackend = await startBackend(tmp, 'relay-many', {
  record: false,
  waitTimeoutMs: 300_000,
  steps: [{ type: 'textBurst', text: 'tok ', count: MANY.deltas }, { type: 'exec', id: 1, args: { readArgs: { path: path.join(tmp, 'a.txt') } } }, { type: 'turnEnded' }],
})
fs.writeFileSync(path.join(tmp, 'a.txt'), 'bench file\n')
try {
  const raw = { agentStream: [], addonStream: [], agentMany: [], addonMany: [] }
  for (let i = 0; i < runs; i++) {
    // Alternated, so that the host's drift hits both alike.
    const order = i % 2 ? ['addon', 'agent'] : ['agent', 'addon']
    for (const who of order) {
      if (who === 'agent') raw.agentStream.push(await agentStream(streamBackend.url, `stream-${i}`))
      else raw.addonStream.push(addonAlone('relay-stream', streamBackend.url, STREAM))
    }
    for (const who of order) {
      if (who === 'agent') raw.agentMany.push(await agentMany(manyBackend.url, `many-${i}`))
      else raw.addonMany.push(addonAlone('many', manyBackend.url, MANY))
    }
  }
  const m = (xs, key) => median(xs.map((x) => x[key]))
  for (const [name, agentRuns, addonRuns] of [['stream', raw.agentStream, raw.addonStream], ['many', raw.agentMany, raw.addonMany]]) {
    const agentWallMs = m(agentRuns, 'wallMs')
    const addonWallMs = m(addonRuns, 'wallMs')
    Object.assign(out[name], {
      agentWallMs,
      addonWallMs,
      wallRatio: median(agentRuns.map((r, i) => r.wallMs / addonRuns[i].wallMs)),
      agentCpuMs: m(agentRuns, 'cpuMs'),
      agentUpdates: m(agentRuns, 'updates'),
      agentCpuPer1000Updates: median(agentRuns.map((r) => (r.cpuMs / r.updates) * 1000)),
      addonCpuMs: name === 'stream' ? m(addonRuns, 'cpuMs') : undefined,
      addonUpdates: name === 'stream' ? m(addonRuns, 'updates') : undefined,
      intact: agentRuns.every((r) => r.intact),
      samples: { agent: agentRuns, addon: addonRuns },
    })
  }
} finally {
  streamBackend.stop()
  manyBackend.stop()
  fs.rmSync(tmp, { recursive: true, force: true })
}
process.stdout.write(`${JSON.stringify(out)}\n`)
