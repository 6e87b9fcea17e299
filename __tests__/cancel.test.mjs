// Cancel in every situation resolves `cancelled` within a bounded time, never end_turn or an error.
import { test } from 'node:test'
import assert from 'node:assert/strict'
import { setup, drain, within, recordsWhen, TRANSPORTS, assertAcpUpdate } from './helpers.mjs'

const BOUND_MS = 1500

for (const transport of TRANSPORTS) {
  test(`${transport}: cancel during a running exec aborts ctx.signal and resolves cancelled`, async () => {
    let sawAbort = false
    const exec = (req, ctx) => new Promise((resolve) => {
      ctx.signal.addEventListener('abort', () => { sawAbort = true; resolve({ failure: { aborted: true } }) })
    })
    const scenario = { steps: [{ type: 'text', text: 'running' }, { type: 'exec', id: 1, args: { shellStreamArgs: { command: 'sleep 60' } } }] }
    const { backend, client, close } = await setup(scenario, { exec }, transport)
    try {
      const session = client.newSession()
      const turn = session.prompt('go')
      const iterator = turn[Symbol.asyncIterator]()
      assert.equal((await iterator.next()).value.content.text, 'running')
      await new Promise((r) => setTimeout(r, 100))
      const started = Date.now()
      session.cancel()
      const result = await within(BOUND_MS, turn.result, 'cancelled result')
      assert.equal(result.stopReason, 'cancelled')
      assert.ok(Date.now() - started < BOUND_MS)
      // The abort reaches the JS thread through its own queue; it may land just after `result`.
      await within(1000, (async () => { while (!sawAbort) await new Promise((r) => setTimeout(r, 5)) })(), 'ctx.signal abort')
      const records = await recordsWhen(backend, (rs) => rs[0].messages.some((m) => m.message.conversationAction?.cancelAction))
      assert.ok(records[0].messages.some((m) => m.message.conversationAction?.cancelAction), 'cancel_action sent')
    } finally {
      close()
    }
  })

  test(`${transport}: cancel while the server is silent resolves within the bound`, async () => {
    const { client, close } = await setup({ steps: [{ type: 'stall', ms: 60_000 }] }, { stallTimeoutMs: 60_000 }, transport)
    try {
      const turn = client.newSession().prompt('go')
      await new Promise((r) => setTimeout(r, 100))
      const started = Date.now()
      turn.cancel()
      await drain(turn, BOUND_MS)
      assert.equal((await turn.result).stopReason, 'cancelled')
      assert.ok(Date.now() - started < BOUND_MS, `took ${Date.now() - started} ms`)
    } finally {
      close()
    }
  })
}

test('cancel during a pending interaction settles it and closes open tool calls', async () => {
  let queried
  const interaction = () => new Promise((resolve) => { queried = resolve }) // never answered by the user
  const scenario = { steps: [
    { type: 'toolCallStarted', callId: 't1', toolCall: { switchModeToolCall: { args: { targetModeId: 'plan' } } } },
    { type: 'interaction', id: 1, query: { switchModeRequestQuery: { args: { targetModeId: 'plan' } } } },
    { type: 'turnEnded' },
  ] }
  const { backend, client, close } = await setup(scenario, { interaction })
  try {
    const session = client.newSession()
    const turn = session.prompt('go')
    const updates = []
    const consume = (async () => { for await (const u of turn) { assertAcpUpdate(u); updates.push(u) } })()
    await within(2000, (async () => { while (!queried) await new Promise((r) => setTimeout(r, 10)) })(), 'interaction callback')
    session.cancel()
    await within(BOUND_MS, consume, 'updates after cancel')
    assert.equal((await turn.result).stopReason, 'cancelled')
    assert.equal(updates[0].sessionUpdate, 'tool_call')
    assert.deepEqual([updates.at(-1).toolCallId, updates.at(-1).status], ['t1', 'failed'])
    const records = await recordsWhen(backend, (rs) => rs[0].messages.some((m) => m.kind === 'interactionResponse'))
    const response = records[0].messages.find((m) => m.kind === 'interactionResponse').message.interactionResponse
    assert.match(response.switchModeRequestResponse.rejected.reason, /[Cc]ancel/)
    queried({ approved: {} }) // a late answer is harmless
  } finally {
    close()
  }
})

test('break out of for-await cancels the turn', async () => {
  const { backend, client, close } = await setup({ steps: [
    { type: 'text', text: 'a' }, { type: 'sleep', ms: 50 }, { type: 'text', text: 'b' }, { type: 'stall', ms: 60_000 },
  ] }, { stallTimeoutMs: 60_000 })
  try {
    const session = client.newSession()
    const turn = session.prompt('go')
    for await (const u of turn) {
      assert.equal(u.content.text, 'a')
      break
    }
    assert.equal((await within(BOUND_MS, turn.result, 'result after break')).stopReason, 'cancelled')
    const records = await recordsWhen(backend, (rs) => rs[0].messages.some((m) => m.message.conversationAction?.cancelAction))
    assert.ok(records[0].messages.some((m) => m.message.conversationAction?.cancelAction))
    // The session is free again.
    const next = session.prompt('again')
    next.cancel()
    await next.result
  } finally {
    close()
  }
})

test('an AbortSignal cancels mid-stream, and an aborted one before start never contacts the server', async () => {
  const { backend, client, close } = await setup({ steps: [{ type: 'text', text: 'x' }, { type: 'stall', ms: 60_000 }] }, { stallTimeoutMs: 60_000 })
  try {
    const session = client.newSession()
    const pre = new AbortController()
    pre.abort()
    const early = session.prompt('never sent', { signal: pre.signal })
    assert.deepEqual(await drain(early, BOUND_MS), [])
    assert.equal((await early.result).stopReason, 'cancelled')
    assert.equal(backend.records().length, 0, 'nothing reached the server')

    const controller = new AbortController()
    const turn = session.prompt('go', { signal: controller.signal })
    const iterator = turn[Symbol.asyncIterator]()
    await iterator.next()
    controller.abort()
    assert.equal((await within(BOUND_MS, turn.result, 'aborted result')).stopReason, 'cancelled')
  } finally {
    close()
  }
})

test('cancel wins over turn_ended and over errors that arrive after it', async () => {
  for (const last of [{ type: 'turnEnded' }, { type: 'error', code: 'internal', message: 'late failure' }]) {
    const { client, close } = await setup({ steps: [{ type: 'text', text: 'x' }, { type: 'awaitClient', kind: 'conversationAction' }, last] })
    try {
      const turn = client.newSession().prompt('go')
      const iterator = turn[Symbol.asyncIterator]()
      await iterator.next()
      turn.cancel()
      assert.equal((await within(BOUND_MS, turn.result, 'result')).stopReason, 'cancelled')
    } finally {
      close()
    }
  }
})
