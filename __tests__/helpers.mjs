// Shared helpers for the addon's tests: load the built addon, start an embedded backend, drain
// a turn. Every test talks to the real addon over real loopback sockets.
import { createRequire } from 'node:module'

const require = createRequire(import.meta.url)
export const addon = require('../index.js')
export const testing = require('../testing.js')
export const { AgentClient } = addon
export const { startEmbeddedBackend } = testing

export const TRANSPORTS = ['sse', 'h2']

/** Fast timers so fault tests finish quickly. */
export const FAST = {
  heartbeatIntervalMs: 100,
  execHeartbeatIntervalMs: 100,
  stallTimeoutMs: 1500,
  cancelTimeoutMs: 300,
  resumeAttempts: 2,
  resumeBackoffMs: 20,
}

/** Starts a backend and a client on it; call `close()` at the end of the test. */
export async function setup(scenario, clientOptions = {}, transport = 'sse') {
  const backend = await startEmbeddedBackend({ scenario })
  const client = new AgentClient({ baseUrl: backend.url, transport, ...FAST, ...clientOptions })
  return { backend, client, close: () => backend.close() }
}

/**
 * Collects every update of a turn, failing the test if it does not settle within `ms`. A failed
 * turn must make the iteration throw the same coded error `result` rejects with.
 */
export async function drain(turn, ms = 10_000) {
  const updates = []
  let thrown = null
  await within(ms, (async () => {
    try {
      for await (const u of turn) {
        assertAcpUpdate(u)
        updates.push(u)
      }
    } catch (e) {
      thrown = e
    }
  })(), 'turn')
  const result = await turn.result.catch((rejected) => {
    assertSameFailure(thrown, rejected)
    return null
  })
  if (result) {
    if (thrown) throw new Error(`the iteration threw although the turn ended ${result.stopReason}: ${thrown.message}`)
    assertAcpStopReason(result.stopReason)
  }
  return updates
}

/** The iteration's error is the turn's: the same message and codes as `result`'s rejection. */
export function assertSameFailure(thrown, rejected) {
  if (!(thrown instanceof Error)) throw new Error(`the turn failed (${rejected?.code}: ${rejected?.message}) but the iteration ended without throwing`)
  for (const key of ['message', 'code', 'connectCode', 'cursorError', 'httpStatus']) {
    if (thrown[key] !== rejected[key]) throw new Error(`the iteration threw ${key} ${thrown[key]}, result rejected with ${rejected[key]}`)
  }
}

/** Resolves `promise` or rejects after `ms`, so a hang fails instead of stalling the suite. */
export function within(ms, promise, what = 'operation') {
  let timer
  return Promise.race([
    promise.finally(() => clearTimeout(timer)),
    new Promise((_, reject) => { timer = setTimeout(() => reject(new Error(`${what} did not settle within ${ms} ms`)), ms) }),
  ])
}

/** Merges adjacent chunks of one message (coalescing depends on consumer timing). */
export function merged(updates) {
  const out = []
  for (const u of updates) {
    const last = out.at(-1)
    if (last && last.sessionUpdate === u.sessionUpdate && last.messageId && last.messageId === u.messageId &&
        typeof last.content?.text === 'string' && typeof u.content?.text === 'string') {
      out[out.length - 1] = { ...last, content: { ...last.content, text: last.content.text + u.content.text } }
    } else {
      out.push(u)
    }
  }
  return out
}

/**
 * Polls the backend's records until `predicate` holds (the server records asynchronously);
 * `which: 'prewarms'` polls the prewarm streams' records instead.
 */
export async function recordsWhen(backend, predicate, ms = 2000, which = 'records') {
  const deadline = Date.now() + ms
  let records = backend[which]()
  while (!predicate(records) && Date.now() < deadline) {
    await new Promise((r) => setTimeout(r, 20))
    records = backend[which]()
  }
  return records
}

// Every update the addon emits in these suites is validated against ACP's own JSON schema
// (`schema/v1/schema.json` of @agentclientprotocol/sdk); a violation fails the test.
import Ajv2020 from 'ajv/dist/2020.js'
const schema = require('@agentclientprotocol/sdk/schema/v1/schema.json')
const ajv = new Ajv2020({ strict: false, allErrors: true })
ajv.addSchema(schema, 'acp')
const validateUpdate = ajv.getSchema('acp#/$defs/SessionUpdate')
const validateStopReason = ajv.getSchema('acp#/$defs/StopReason')

export function assertAcpUpdate(update) {
  if (!validateUpdate(update)) {
    throw new Error(`not a valid ACP SessionUpdate: ${JSON.stringify(update)}\n${ajv.errorsText(validateUpdate.errors)}`)
  }
}

export function assertAcpStopReason(reason) {
  if (!validateStopReason(reason)) throw new Error(`not a valid ACP StopReason: ${reason}`)
}
