// Every failure rejects with a stable `code`; resume heals drops and stalls; no token leaks.
import { test } from 'node:test'
import assert from 'node:assert/strict'
import { setup, drain, within, AgentClient, startEmbeddedBackend, TRANSPORTS } from './helpers.mjs'

async function failure(steps, options = {}, transport = 'sse', scenario = {}) {
  const { client, close } = await setup({ ...scenario, steps }, options, transport)
  try {
    const turn = client.newSession().prompt('go')
    await drain(turn)
    return await within(10_000, turn.result.then(() => null, (e) => e), 'result')
  } finally {
    close()
  }
}

for (const transport of TRANSPORTS) {
  test(`${transport}: server errors carry code, Connect code, Cursor error and HTTP status`, async () => {
    let e = await failure([{ type: 'error', code: 'resource_exhausted', message: 'quota', cursorError: 'ERROR_RATE_LIMITED' }], {}, transport)
    assert.ok(e instanceof Error)
    assert.equal(e.code, 'E_SERVER')
    assert.equal(e.connectCode, 'resource_exhausted')
    assert.equal(e.cursorError, 'ERROR_RATE_LIMITED')
    e = await failure([{ type: 'error', code: 'unauthenticated', message: 'expired' }], {}, transport)
    assert.equal(e.code, 'E_AUTH')
    e = await failure([{ type: 'httpError', status: 403 }], {}, transport)
    assert.deepEqual([e.code, e.connectCode, e.httpStatus], ['E_SERVER', 'permission_denied', 403])
    e = await failure([{ type: 'garbage' }], {}, transport)
    assert.equal(e.code, 'E_PROTOCOL')
    e = await failure([{ type: 'reservedFlag' }], {}, transport)
    assert.equal(e.code, 'E_PROTOCOL')
    e = await failure([{ type: 'gzipBomb', decompressedBytes: 4_000_000 }], { maxFrameBytes: 1_000_000 }, transport, { gzipResponses: true })
    assert.match(e.message, /decompressed payload exceeds/)
    e = await failure([{ type: 'gzipBomb', decompressedBytes: 4_000 }], {}, transport)
    assert.equal(e.code, 'E_PROTOCOL')
    assert.match(e.message, /agreed on no compression/)
    e = await failure([{ type: 'drop' }], { resumeAttempts: 0 }, transport)
    assert.equal(e.code, 'E_NETWORK')
    e = await failure([{ type: 'stall', ms: 5000 }], { resumeAttempts: 0, stallTimeoutMs: 300 }, transport)
    assert.equal(e.code, 'E_TIMEOUT')
  })

  test(`${transport}: resume after a mid-turn drop and after a stall`, async () => {
    for (const fault of [{ type: 'drop' }, { type: 'stall', ms: 5000 }]) {
      const scenario = { turns: [
        [{ type: 'text', text: 'hel' }, { type: 'sleep', ms: 50 }, fault],
        [{ type: 'text', text: 'lo' }, { type: 'turnEnded' }],
      ] }
      const { backend, client, close } = await setup(scenario, { stallTimeoutMs: 400 }, transport)
      try {
        const turn = client.newSession().prompt('go')
        const text = (await drain(turn)).map((u) => u.content?.text ?? '').join('')
        assert.equal((await turn.result).stopReason, 'end_turn')
        assert.equal(text, 'hello')
        const records = backend.records()
        assert.equal(records.length, 2)
        assert.ok(records[1].messages[0].message.runRequest.action.resumeAction)
        assert.notEqual(records[0].requestId, records[1].requestId)
      } finally {
        close()
      }
    }
  })
}

for (const transport of TRANSPORTS) {
  test(`${transport}: a failed turn makes for await throw its coded error, after every update before it`, async () => {
    const steps = [
      { type: 'text', text: 'par' },
      { type: 'text', text: 'tial' },
      { type: 'error', code: 'resource_exhausted', message: 'quota', cursorError: 'ERROR_RATE_LIMITED' },
    ]
    const { client, close } = await setup({ steps }, {}, transport)
    try {
      const turn = client.newSession().prompt('go')
      const text = []
      let thrown = null
      try {
        for await (const u of turn) text.push(u.content?.text ?? '')
      } catch (e) {
        thrown = e
      }
      assert.equal(text.join(''), 'partial', 'the updates before the error come first')
      assert.ok(thrown instanceof Error, 'the iteration throws')
      assert.deepEqual([thrown.code, thrown.connectCode, thrown.cursorError], ['E_SERVER', 'resource_exhausted', 'ERROR_RATE_LIMITED'])
      await assert.rejects(turn.result, (e) => e.code === thrown.code && e.message === thrown.message)
      // Like a generator that threw: a later read is the end, not the error again.
      assert.deepEqual(await turn[Symbol.asyncIterator]().next(), { value: undefined, done: true })
    } finally {
      close()
    }
  })
}

test('a cancelled turn never throws from for await, even when the stream then fails', async () => {
  const { client, close } = await setup({ steps: [{ type: 'text', text: 'hi' }, { type: 'sleep', ms: 100 }, { type: 'drop' }] }, { resumeAttempts: 0 })
  try {
    const turn = client.newSession().prompt('go')
    for await (const u of turn) {
      if (u.sessionUpdate === 'agent_message_chunk') turn.cancel()
    }
    assert.equal((await turn.result).stopReason, 'cancelled')
  } finally {
    close()
  }
})

test('max tokens is a stop reason, not an error', async () => {
  const { client, close } = await setup({ steps: [{ type: 'error', code: 'resource_exhausted', cursorError: 'ERROR_MAX_TOKENS' }] })
  try {
    const turn = client.newSession().prompt('go')
    await drain(turn)
    assert.equal((await turn.result).stopReason, 'max_tokens')
  } finally {
    close()
  }
})

test('unreachable server: E_NETWORK', async () => {
  const backend = await startEmbeddedBackend({ scenario: { steps: [] } })
  const url = backend.url
  backend.close()
  await new Promise((r) => setTimeout(r, 50))
  const client = new AgentClient({ baseUrl: url, resumeAttempts: 0 })
  const turn = client.newSession().prompt('go')
  await drain(turn)
  await assert.rejects(turn.result, (e) => e.code === 'E_NETWORK')
})

test('a second prompt while one runs throws E_BUSY; a closed session throws E_CLOSED', async () => {
  const { client, close } = await setup({ steps: [{ type: 'sleep', ms: 200 }, { type: 'turnEnded' }] })
  try {
    const session = client.newSession()
    const turn = session.prompt('one')
    assert.throws(() => session.prompt('two'), (e) => e.code === 'E_BUSY')
    await drain(turn)
    await turn.result
    session.close()
    assert.throws(() => session.prompt('three'), (e) => e.code === 'E_CLOSED')
  } finally {
    close()
  }
})

test('bad options and inputs throw E_INVALID naming the problem', async () => {
  assert.throws(() => new AgentClient({ baseUrl: 'not a url' }), (e) => e.code === 'E_INVALID' && /baseUrl/.test(e.message))
  assert.throws(() => new AgentClient({ transport: 'carrier-pigeon' }), (e) => e.code === 'E_INVALID' && /transport/.test(e.message))
  assert.throws(() => new AgentClient({ headers: { host: 'x' } }), (e) => e.code === 'E_INVALID' && /host/.test(e.message))
  const client = new AgentClient({ baseUrl: 'http://127.0.0.1:9' })
  assert.throws(() => client.newSession({ mode: 'yolo' }), (e) => e.code === 'E_INVALID' && /yolo/.test(e.message))
  assert.throws(() => client.loadSession({ conversationId: 'x', checkpoint: '%%%' }), (e) => e.code === 'E_INVALID')
  assert.throws(() => client.newSession().prompt(42), (e) => e.code === 'E_INVALID')
  await assert.rejects(startEmbeddedBackend({ scenario: { steps: [{ type: 'exec', id: 1, args: { nope: {} } }] } }),
    (e) => e.code === 'E_INVALID' && /nope/.test(e.message))
})

test('no credential appears in any error message', async () => {
  const token = 'tok_SECRET_1234567890'
  for (const steps of [[{ type: 'httpError', status: 401 }], [{ type: 'error', code: 'internal', message: 'boom' }], [{ type: 'drop' }]]) {
    const { client, close } = await setup({ steps }, { accessToken: token, headers: { 'x-api-key': 'key_SECRET' }, resumeAttempts: 0 })
    try {
      const turn = client.newSession().prompt('go')
      await drain(turn)
      const e = await turn.result.then(() => null, (err) => err)
      const text = `${e.message} ${e.stack} ${JSON.stringify(e)} ${String(e)}`
      assert.ok(!text.includes(token) && !text.includes('key_SECRET'), text)
    } finally {
      close()
    }
  }
})
