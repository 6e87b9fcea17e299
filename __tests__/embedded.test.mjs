// The embedded backend from JavaScript: start, record, close, reject bad scenarios.
import { test } from 'node:test'
import assert from 'node:assert/strict'
import { startEmbeddedBackend } from './helpers.mjs'

test('startEmbeddedBackend listens on loopback and closes', async () => {
  const backend = await startEmbeddedBackend({ scenario: { steps: [{ type: 'text', text: 'hi' }] } })
  assert.match(backend.url, /^http:\/\/127\.0\.0\.1:\d+$/)
  assert.deepEqual(backend.records(), [])
  const res = await fetch(`${backend.url}/nope`, { method: 'POST' })
  assert.equal(res.status, 501)
  assert.equal((await res.json()).code, 'unimplemented')
  backend.close()
  // Closed means refused, soon: asked until it is, for at most 5 s.
  const deadline = Date.now() + 5000
  let refused = false
  while (!refused && Date.now() < deadline) refused = await fetch(`${backend.url}/x`, { method: 'POST' }).then(() => false, () => true)
  assert.ok(refused, 'the closed backend still answers')
})

test('Run over HTTP/1.1 is refused the way Cursor refuses it (HTTP 464)', async () => {
  const backend = await startEmbeddedBackend({ scenario: { steps: [] } })
  try {
    const res = await fetch(`${backend.url}/agent.v1.AgentService/Run`, { method: 'POST', body: '' })
    assert.equal(res.status, 464)
  } finally {
    backend.close()
  }
})

test('a BidiAppend with a bad body is a Connect invalid_argument error', async () => {
  const backend = await startEmbeddedBackend({ scenario: { steps: [] } })
  try {
    const res = await fetch(`${backend.url}/aiserver.v1.BidiService/BidiAppend`, {
      method: 'POST', headers: { 'content-type': 'application/proto' }, body: new Uint8Array([0xff, 0xff]),
    })
    assert.equal(res.status, 400)
    assert.equal((await res.json()).code, 'invalid_argument')
  } finally {
    backend.close()
  }
})

test('the ACP schema check used by every suite rejects malformed updates', async () => {
  const { assertAcpUpdate, assertAcpStopReason } = await import('./helpers.mjs')
  assert.throws(() => assertAcpUpdate({ sessionUpdate: 'tool_call' }), /toolCallId|title/)
  assert.throws(() => assertAcpUpdate({ sessionUpdate: 'agent_message_chunk', content: { type: 'text' } }), /text/)
  assert.throws(() => assertAcpUpdate({ sessionUpdate: 'usage_update', used: 1 }), /size/)
  assert.throws(() => assertAcpStopReason('done'))
  assertAcpUpdate({ sessionUpdate: 'tool_call', toolCallId: 'a', title: 'ok' })
})

test('auth and models options that are not what they must be reject with E_INVALID', async () => {
  const scenario = { steps: [{ type: 'turnEnded' }] }
  for (const [options, message] of [
    [{ models: 'gpt' }, /models must be an array of ModelDetails/],
    [{ models: [{ modelId: 7 }] }, /model/i],
    [{ auth: { accessTokenTtlMs: 'soon' } }, /invalid auth options/],
    [{ auth: { colour: 'red' } }, /invalid auth options/],
  ]) {
    await assert.rejects(startEmbeddedBackend({ scenario, ...options }), (e) => e.code === 'E_INVALID' && message.test(e.message), JSON.stringify(options))
  }
})

test('advanceClock takes a number of milliseconds from 0 and refuses anything else', async () => {
  const backend = await startEmbeddedBackend({ scenario: { steps: [{ type: 'turnEnded' }] } })
  try {
    backend.advanceClock(0)
    backend.advanceClock(1500.5)
    for (const bad of [-1, Number.NaN, Number.POSITIVE_INFINITY, 1e30]) {
      assert.throws(() => backend.advanceClock(bad), (e) => e.code === 'InvalidArg' && /^advanceClock: ms must be/.test(e.message), String(bad))
    }
  } finally {
    backend.close()
  }
})
