// The stdio agent as an editor runs it, for the bench's agent scenarios (latency.mjs, relay.mjs,
// memory.mjs): a child process spoken to in JSON lines over a pipe, its notifications read as
// they arrive.
import { spawn } from 'node:child_process'
import fs from 'node:fs'
import path from 'node:path'
import { fileURLToPath } from 'node:url'

import { readJsonLines } from './json-lines.mjs'

const agentPath = fileURLToPath(new URL('../bin/cursor-acp-native.mjs', import.meta.url))

/**
 * The embedded backend in a process of its own (bench/server.mjs) playing `scenario`, written
 * to `dir`: its URL, and `stop()`.
 * @param {string} dir
 * @param {string} name
 * @param {object} scenario
 * @returns {Promise<{ url: string, stop: () => void }>}
 */
export function startBackend(dir, name, scenario) {
  const file = path.join(dir, `${name}.json`)
  fs.writeFileSync(file, JSON.stringify(scenario))
  const server = fileURLToPath(new URL('./server.mjs', import.meta.url))
  const child = spawn(process.execPath, [server, file], { stdio: ['pipe', 'pipe', 'inherit'] })
  return new Promise((resolve, reject) => {
    let out = ''
    child.stdout.on('data', (c) => {
      out += c
      if (out.includes('\n')) resolve({ url: JSON.parse(out).url, stop: () => child.stdin.end() })
    })
    child.on('exit', (code) => reject(new Error(`backend ${name} exited with ${code}`)))
  })
}

/** CPU time (user + system) of process `pid` so far, ms, from /proc; undefined elsewhere. */
export function cpuMs(pid) {
  try {
    const fields = fs.readFileSync(`/proc/${pid}/stat`, 'utf8').split(') ')[1].split(' ')
    // utime and stime are fields 14 and 15 of the line, 12 and 13 after the command.
    return ((Number(fields[11]) + Number(fields[12])) * 1000) / 100
  } catch {
    return undefined
  }
}

/**
 * Starts the agent (with `BENCH_AGENT_PROF=<dir>` in the environment, under `--cpu-prof` into
 * that folder). `onUpdate(update, sessionId, at)` sees every `session/update` as its line
 * arrives (`at`: performance.now()); requests the agent makes of the client are answered (a
 * permission with its first allowing option).
 * @param {{ baseUrl: string, env?: NodeJS.ProcessEnv, cacheDir: string, onUpdate?: (update: any, sessionId: string, at: number) => void }} o
 */
export function startAgent({ baseUrl, env = {}, cacheDir, onUpdate = () => {} }) {
  const child = spawn(process.execPath, [...(process.env.BENCH_AGENT_PROF ? ['--cpu-prof', '--cpu-prof-interval', '50', '--cpu-prof-dir', process.env.BENCH_AGENT_PROF] : []), agentPath, '--base-url', baseUrl, '--cache-dir', cacheDir], {
    stdio: ['pipe', 'pipe', 'inherit'],
    env: { ...process.env, CURSOR_ACCESS_TOKEN: '', CURSOR_API_KEY: '', CURSOR_ACP_LOG: 'error', ...env },
  })
  const pending = new Map()
  let nextId = 1
  const write = (message) => child.stdin.write(`${JSON.stringify({ jsonrpc: '2.0', ...message })}\n`)
  const onMessage = (/** @type {any} */ message, /** @type {number} */ at) => {
    if (message.method === 'session/update') {
      onUpdate(message.params.update, message.params.sessionId, at)
    } else if (message.method && message.id !== undefined) {
      const allow = message.params?.options?.find((o) => o.kind?.startsWith('allow'))
      write({ id: message.id, ...(allow ? { result: { outcome: { outcome: 'selected', optionId: allow.optionId } } } : { error: { code: -32601, message: 'not supported by the bench' } }) })
    } else if (message.id !== undefined && pending.has(message.id)) {
      const { resolve, reject } = pending.get(message.id)
      pending.delete(message.id)
      if (message.error) reject(new Error(`${JSON.stringify(message.error)}`))
      else resolve({ result: message.result, at })
    }
  }
  readJsonLines(child.stdout, onMessage, (line) => {
    throw new Error(`the agent wrote a line that is not JSON: ${line.slice(0, 200)}`)
  })
  const exited = new Promise((resolve) => child.once('exit', resolve))
  exited.then(() => {
    for (const { reject } of pending.values()) reject(new Error('the agent exited'))
    pending.clear()
  })
  return {
    child,
    /** Sends a request; resolves with `{ result, at }` when its answer arrives. */
    request(method, params) {
      const id = nextId++
      return { sentAt: performance.now(), answer: new Promise((resolve, reject) => { pending.set(id, { resolve, reject }); write({ id, method, params }) }) }
    },
    async initialize() {
      await this.request('initialize', { protocolVersion: 1, clientCapabilities: {}, clientInfo: { name: 'bench', version: '1' } }).answer
    },
    async newSession(cwd) {
      const { result, at } = await this.request('session/new', { cwd, mcpServers: [] }).answer
      return { sessionId: result.sessionId, at }
    },
    prompt(sessionId, text) {
      return this.request('session/prompt', { sessionId, prompt: [{ type: 'text', text }] })
    },
    async stop() {
      child.stdin.end()
      const timer = setTimeout(() => child.kill('SIGKILL'), 5000)
      await exited
      clearTimeout(timer)
    },
  }
}

/**
 * relay.mjs's stream turn: `blocks` runs of `per` deltas of `text`, each run followed by a
 * numbered marker delta (so that a lost or moved delta shows), as scenario steps and as the
 * text a client must end up with.
 */
export function relayTurn({ blocks, per, text }) {
  const steps = []
  for (let i = 0; i < blocks; i++) steps.push({ type: 'textBurst', text, count: per }, { type: 'text', text: `#${i} ` })
  steps.push({ type: 'turnEnded' })
  return steps
}

/** The text of `relayTurn`'s turn. */
export function relayText({ blocks, per, text }) {
  let out = ''
  for (let i = 0; i < blocks; i++) out += text.repeat(per) + `#${i} `
  return out
}

/** A folder for an agent's cache and its sessions' workspace. */
export function agentDirs(root, name) {
  const dir = path.join(root, name)
  fs.mkdirSync(path.join(dir, 'work'), { recursive: true })
  return { cacheDir: path.join(dir, 'cache'), cwd: path.join(dir, 'work') }
}
