#!/usr/bin/env node
// @ts-check
// Start-up of the stdio agent as an editor sees it: spawn `cursor-acp-native`, send `initialize`
// at once, time its answer; then send `session/new` and time that answer. Beside it, in the same
// run, the floor of any Node program: spawn `node -e 0` and wait for it to exit. Prints medians
// and the ratios the start-up targets are read against. Not part of `npm test`: speed is
// measured, never asserted.
//
//   node bench/startup.mjs [--runs 15] [--embedded] [--json] [--agent path/to/cursor-acp-native.mjs]
//
// By default the agent runs against a local gateway URL nobody listens on (no credentials, no
// network: neither initialize nor session/new contacts the backend); `--embedded` starts the
// built-in backend first, as `npx cursor-acp-native --embedded` does.
import { spawn } from 'node:child_process'
import fs from 'node:fs'
import os from 'node:os'
import path from 'node:path'
import { fileURLToPath } from 'node:url'
import { parseArgs } from 'node:util'

const { values: options } = parseArgs({
  options: {
    runs: { type: 'string', default: '15' },
    embedded: { type: 'boolean', default: false },
    json: { type: 'boolean', default: false },
    agent: { type: 'string' },
  },
})
const runs = Number(options.runs)
const agentPath = options.agent ? path.resolve(options.agent) : fileURLToPath(new URL('../bin/cursor-acp-native.mjs', import.meta.url))
const workspace = fileURLToPath(new URL('..', import.meta.url))
const cacheDir = fs.mkdtempSync(path.join(os.tmpdir(), 'startup-bench-'))
const env = { ...process.env, CURSOR_ACCESS_TOKEN: '', CURSOR_API_KEY: '' }

const nowMs = () => Number(process.hrtime.bigint()) / 1e6

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
 * Spawn → `initialize` answered, then `session/new` sent → answered.
 * @returns {Promise<{ initialize: number, sessionNew: number }>}
 */
function agent() {
  return new Promise((resolve, reject) => {
    const args = [agentPath, '--cache-dir', cacheDir, ...(options.embedded ? ['--embedded'] : ['--base-url', 'http://127.0.0.1:9'])]
    const start = nowMs()
    const child = spawn(process.execPath, args, { stdio: ['pipe', 'pipe', 'inherit'], env })
    /** @param {object} message */
    const send = (message) => child.stdin.write(`${JSON.stringify({ jsonrpc: '2.0', ...message })}\n`)
    let initialized = 0
    let sessionSent = 0
    let buffered = ''
    child.on('error', reject)
    child.stdout.on('data', (chunk) => {
      buffered += chunk
      let newline
      while ((newline = buffered.indexOf('\n')) >= 0) {
        const message = JSON.parse(buffered.slice(0, newline))
        buffered = buffered.slice(newline + 1)
        if (message.error) {
          child.kill()
          reject(new Error(`the agent answered ${JSON.stringify(message.error)}`))
          return
        }
        if (message.id === 1) {
          initialized = nowMs()
          sessionSent = initialized
          send({ id: 2, method: 'session/new', params: { cwd: workspace, mcpServers: [] } })
        } else if (message.id === 2) {
          const done = nowMs()
          child.stdin.end()
          child.on('exit', () => resolve({ initialize: initialized - start, sessionNew: done - sessionSent }))
        }
      }
    })
    send({ id: 1, method: 'initialize', params: { protocolVersion: 1, clientCapabilities: {}, clientInfo: { name: 'startup-bench', version: '1' } } })
  })
}

/** @param {number[]} xs */
const median = (xs) => {
  const s = [...xs].sort((a, b) => a - b)
  const mid = s.length >> 1
  return s.length % 2 ? s[mid] : (s[mid - 1] + s[mid]) / 2
}

// One warm-up of each (file cache, the addon's first load), then interleaved runs so that the
// machine's drift during the run hits both sides alike.
await bareNode()
await agent()
const node = []
const initialize = []
const sessionNew = []
for (let i = 0; i < runs; i++) {
  node.push(await bareNode())
  const a = await agent()
  initialize.push(a.initialize)
  sessionNew.push(a.sessionNew)
}
fs.rmSync(cacheDir, { recursive: true, force: true })

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
      `  session/new after initialize   ${ms(figures.sessionNewMs)}  ${figures.sessionNewRatio.toFixed(2)}× node -e 0  (target ≤ 0.5×)\n`,
  )
}
