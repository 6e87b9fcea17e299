// Drives the stdio agent (bin/cursor-acp-native.mjs) as an editor would: spawns it and talks
// ACP over ndjson with the SDK's client side. Every byte the agent writes to stdout is kept so
// tests can check that nothing but JSON-RPC lines ever appears there.
import { spawn } from 'node:child_process'
import fs from 'node:fs'
import path from 'node:path'
import { Writable } from 'node:stream'
import { fileURLToPath } from 'node:url'
import { client, ndJsonStream } from '@agentclientprotocol/sdk'
import { tempDir } from './tmp.mjs'

export const CLI = fileURLToPath(new URL('../bin/cursor-acp-native.mjs', import.meta.url))

export { tempDir }

/**
 * @param {object} o
 * @param {object} [o.scenario]     embedded-backend scenario (else the demo turn)
 * @param {string[]} [o.args]       extra CLI arguments
 * @param {object} [o.env]
 * @param {object} [o.handlers]     client-side request handlers by method (`session/request_permission`, `fs/*`, …)
 * @param {string | null} [o.cacheDir]   null: no --cache-dir, the agent's default folder
 * @param {boolean} [o.embedded=true]
 */
export function startAgent({ scenario, args = [], env = {}, handlers = {}, cacheDir = tempDir('acp-cache-'), embedded = true } = {}) {
  const dir = tempDir('acp-run-')
  const cliArgs = [CLI, ...(cacheDir === null ? [] : ['--cache-dir', cacheDir]), ...args]
  const recordFile = path.join(dir, 'records.json')
  if (embedded) {
    cliArgs.push('--embedded', '--record', recordFile)
    if (scenario) {
      const file = path.join(dir, 'scenario.json')
      fs.writeFileSync(file, JSON.stringify(scenario))
      cliArgs.push('--scenario', file)
    }
  }
  const childEnv = { ...process.env, CURSOR_ACCESS_TOKEN: '', CURSOR_API_KEY: '', ...env }
  const child = spawn(process.execPath, cliArgs, { stdio: ['pipe', 'pipe', 'pipe'], env: childEnv })
  let stdout = ''
  let stderr = ''
  child.stderr.on('data', (c) => { stderr += c })
  const exited = new Promise((resolve) => child.on('exit', (code, signal) => resolve({ code, signal })))
  /** False once the client side stopped reading (the connection closed). */
  let reading = true
  const input = new ReadableStream({
    start(controller) {
      child.stdout.on('data', (chunk) => {
        stdout += chunk
        // What the agent writes after the connection closed is kept in `stdout` only (enqueued,
        // it would throw in this listener and fail whichever test runs then).
        if (reading) controller.enqueue(new Uint8Array(chunk))
      })
      child.stdout.on('end', () => { try { controller.close() } catch {} })
    },
    cancel() {
      reading = false
    },
  })
  const updates = []
  const permissionRequests = []
  let app = client({ name: 'test-editor' })
    .onNotification('session/update', ({ params }) => { updates.push(params) })
    .onRequest('session/request_permission', async (ctx) => {
      permissionRequests.push({ params: ctx.params, at: updates.length })
      const handler = handlers['session/request_permission']
      return handler ? handler(ctx.params, ctx) : { outcome: { outcome: 'selected', optionId: 'allow-once' } }
    })
  for (const [method, handler] of Object.entries(handlers)) {
    if (method === 'session/request_permission') continue
    app = app.onRequest(method, async (ctx) => handler(ctx.params, ctx))
  }
  const connection = app.connect(ndJsonStream(Writable.toWeb(child.stdin), input))
  return {
    child,
    agent: connection.agent,
    /** Where the embedded backend's records are written when the agent exits. */
    recordFile,
    updates,
    permissionRequests,
    cacheDir,
    stdout: () => stdout,
    stderr: () => stderr,
    /** Updates of one session, in arrival order. */
    updatesFor: (sessionId) => updates.filter((u) => u.sessionId === sessionId).map((u) => u.update),
    /** Ends the agent (stdin closed, like an editor quitting) and returns what the backend received. */
    async stop() {
      connection.close()
      child.stdin.end()
      const timer = setTimeout(() => child.kill('SIGKILL'), 5000)
      const status = await exited
      clearTimeout(timer)
      let records = []
      let recordText = ''
      try {
        recordText = fs.readFileSync(recordFile, 'utf8')
        records = JSON.parse(recordText)
      } catch {}
      return { status, records, recordText }
    },
  }
}

/** Every stdout line must be one JSON-RPC 2.0 message. */
export function assertOnlyJsonRpc(stdout, assert) {
  const lines = stdout.split('\n')
  assert.equal(lines.at(-1), '', 'stdout ends with a newline')
  for (const line of lines.slice(0, -1)) {
    let message
    assert.doesNotThrow(() => { message = JSON.parse(line) }, `not JSON on stdout: ${line.slice(0, 200)}`)
    assert.equal(message.jsonrpc, '2.0', line.slice(0, 200))
  }
}

export const INIT = {
  protocolVersion: 1,
  clientCapabilities: { fs: { readTextFile: true, writeTextFile: true }, terminal: false },
  clientInfo: { name: 'test-editor', version: '1.0.0' },
}
