// A real account, offline: the embedded backend requires tokens as Cursor's service does
// (short-lived, refused with 401 when missing, unknown or expired), serves the model list, and
// refuses what the service refuses at turn start. The addon's `accessToken` function, model
// fields, Retry-After and error messages against it, on both transports.
import { test } from 'node:test'
import assert from 'node:assert/strict'
import { AgentClient, FAST, TRANSPORTS, drain, recordsWhen, startEmbeddedBackend, within } from './helpers.mjs'

const TURN = { steps: [{ type: 'text', text: 'hello' }, { type: 'turnEnded' }] }

/** The payload of a JWT-shaped token. */
const claims = (token) => JSON.parse(Buffer.from(token.split('.')[1], 'base64url').toString())

async function post(url, body, headers = {}) {
  const r = await fetch(url, { method: 'POST', headers: { 'content-type': 'application/json', ...headers }, body: JSON.stringify(body) })
  return { status: r.status, body: await r.json() }
}

/**
 * An `accessToken` function as an embedding app writes one: exchanges an API key once, then
 * refreshes with the refresh token when told the token was refused, or (with `ahead`) when it
 * is about to expire.
 */
/**
 * A host's token function over the backend's sign-in service. `ahead`: it renews a token about to
 * expire, by the time `now()` gives (the backend's clock, when a test moves it).
 */
function tokenFunction(url, { ahead = false, now = Date.now } = {}) {
  const asked = []
  let tokens = null
  const fn = async ({ reason }) => {
    asked.push(reason)
    if (!tokens) {
      tokens = (await post(`${url}/auth/exchange_user_api_key`, {}, { authorization: 'Bearer key_test' })).body
    } else if (reason === 'unauthenticated' || (ahead && claims(tokens.accessToken).exp * 1000 - now() < 400)) {
      const renewed = await post(`${url}/oauth/token`, { grant_type: 'refresh_token', client_id: 'test', refresh_token: tokens.refreshToken })
      tokens = { ...tokens, accessToken: renewed.body.access_token }
    }
    return tokens.accessToken
  }
  return { fn, asked }
}

async function textOf(turn) {
  const updates = await drain(turn)
  return updates.filter((u) => u.sessionUpdate === 'agent_message_chunk').map((u) => u.content.text).join('')
}

for (const transport of TRANSPORTS) {
  test(`${transport}: tokens that expire during a session are renewed before each stream`, async () => {
    const backend = await startEmbeddedBackend({ scenario: TURN, auth: { accessTokenTtlMs: 1200 } })
    try {
      let ahead = 0 // how far the test moved the backend's clock
      const source = tokenFunction(backend.url, { ahead: true, now: () => Date.now() + ahead })
      const client = new AgentClient({ baseUrl: backend.url, transport, ...FAST, accessToken: source.fn })
      const session = client.newSession({})
      assert.equal(await textOf(session.prompt('one')), 'hello')
      backend.advanceClock(1300) // the first token has expired
      ahead += 1300
      assert.equal(await textOf(session.prompt('two')), 'hello')
      const records = backend.records()
      assert.equal(records.length, 2, 'no stream was refused')
      assert.notEqual(records[0].headers.authorization, records[1].headers.authorization)
      assert.deepEqual(source.asked, ['request', 'request'])
    } finally {
      backend.close()
    }
  })

  test(`${transport}: a refused token is asked for again and the turn goes on unseen`, async () => {
    const backend = await startEmbeddedBackend({ scenario: TURN, auth: { accessTokenTtlMs: 1000 } })
    try {
      const source = tokenFunction(backend.url)
      const client = new AgentClient({ baseUrl: backend.url, transport, ...FAST, accessToken: source.fn })
      const session = client.newSession({})
      assert.equal(await textOf(session.prompt('one')), 'hello')
      backend.advanceClock(1100) // the first token has expired
      const turn = session.prompt('two')
      const updates = await drain(turn)
      assert.equal((await turn.result).stopReason, 'end_turn')
      assert.deepEqual(updates.map((u) => u.sessionUpdate), ['agent_message_chunk'], 'the user sees a normal turn')
      assert.deepEqual(source.asked, ['request', 'request', 'unauthenticated'])
      const records = backend.records()
      assert.match(records[1].outcome, /^refused: .*token expired/)
      assert.equal(records[2].outcome, 'end')
      assert.equal(records[2].messages[0].message.runRequest.action.userMessageAction.userMessage.text, 'two')
    } finally {
      backend.close()
    }
  })

  test(`${transport}: a token refused twice is E_AUTH saying how to sign in, without the token`, async () => {
    const backend = await startEmbeddedBackend({ scenario: TURN, auth: {} })
    try {
      const asked = []
      const accessToken = ({ reason }) => { asked.push(reason); return 'not.a.token-of-this-server' }
      const client = new AgentClient({ baseUrl: backend.url, transport, ...FAST, accessToken })
      const turn = client.newSession({}).prompt('hi')
      await drain(turn)
      const err = await turn.result.then(() => null, (e) => e)
      assert.equal(err?.code, 'E_AUTH', String(err))
      assert.match(err.message, /cursor-acp-native login/)
      assert.ok(!err.message.includes('not.a.token'), err.message)
      assert.deepEqual(asked, ['request', 'unauthenticated'])
      assert.equal(backend.records().length, 2, 'and no resumes after that')

      // A function that fails is E_AUTH with its message; a fixed string token works as before.
      const failing = new AgentClient({ baseUrl: backend.url, transport, ...FAST, accessToken: async () => { throw new Error('the keychain is locked') } })
      const t2 = failing.newSession({}).prompt('hi')
      await drain(t2)
      await assert.rejects(t2.result, (e) => e.code === 'E_AUTH' && /accessToken function failed: the keychain is locked/.test(e.message))
      const { body } = await post(`${backend.url}/auth/exchange_user_api_key`, {}, { authorization: 'Bearer key_x' })
      const fixed = new AgentClient({ baseUrl: backend.url, transport, ...FAST, accessToken: body.accessToken })
      assert.equal(await textOf(fixed.newSession({}).prompt('hi')), 'hello')
    } finally {
      backend.close()
    }
  })

  test(`${transport}: the account's models, and a model in every run request (Auto by default)`, async () => {
    const models = [
      { modelId: 'm-fast', displayName: 'Fast One', displayNameShort: 'Fast' },
      { modelId: 'm-max', displayName: 'Max One', maxMode: true, thinkingDetails: {} },
    ]
    const scenario = { turns: [[{ type: 'drop' }], [{ type: 'turnEnded' }]] }
    const backend = await startEmbeddedBackend({ scenario, models, auth: {} })
    try {
      const client = new AgentClient({ baseUrl: backend.url, transport, ...FAST, accessToken: tokenFunction(backend.url).fn })
      const list = await client.listModels()
      assert.deepEqual(list.map((m) => [m.modelId, m.displayName, m.maxMode, m.thinking]), [['m-fast', 'Fast One', false, false], ['m-max', 'Max One', true, true]])
      assert.equal(list[1].details.displayName, 'Max One')

      const session = client.newSession({ cwd: '/w' })
      await drain(session.prompt('go')) // dropped, then resumed
      await session.prewarm()
      session.setModel('m-max', list[1].details)
      await drain(session.prompt('again'))
      const prewarms = await recordsWhen(backend, (rs) => rs.some((r) => r.messages.some((m) => m.kind === 'prewarmRequest')), 2000, 'prewarms')
      const prewarm = prewarms.flatMap((r) => r.messages).find((m) => m.kind === 'prewarmRequest').message.prewarmRequest
      const messages = backend.records().flatMap((r) => r.messages)
      const runs = messages.filter((m) => m.kind === 'runRequest').map((m) => m.message.runRequest)
      assert.equal(runs.length, 3, 'the dropped attempt, its resume, the turn after setModel')
      for (const run of [...runs.slice(0, -1), prewarm]) {
        assert.deepEqual([run.modelDetails.modelId, run.modelDetails.displayName, run.requestedModel.modelId], ['default', 'Auto', 'default'])
      }
      const last = runs.at(-1)
      assert.deepEqual([last.modelDetails.displayName, last.modelDetails.maxMode, last.requestedModel.modelId, last.requestedModel.maxMode], ['Max One', true, 'm-max', true])
      assert.equal(session.save().modelDetails.modelId, 'm-max')

      // An id the catalogue lacks: not_found, at once, not resumed.
      session.setModel('m-unknown')
      const before = backend.records().length
      const turn = session.prompt('x')
      await drain(turn)
      await assert.rejects(turn.result, (e) => e.code === 'E_SERVER' && e.connectCode === 'not_found')
      assert.equal(backend.records().length, before + 1)
      assert.throws(() => session.setModel('a', { modelId: 'b' }), (e) => e.code === 'E_INVALID')
    } finally {
      backend.close()
    }
  })

  test(`${transport}: Retry-After is honoured within the bound, and past it the turn fails at once saying so`, async () => {
    const scenario = { turns: [
      [{ type: 'httpError', status: 429, retryAfter: '1' }],
      [{ type: 'turnEnded' }],
      [{ type: 'httpError', status: 429, retryAfter: '3600' }],
      [{ type: 'error', code: 'unavailable', message: 'busy', retryDelayMs: 7_200_000 }],
    ] }
    const backend = await startEmbeddedBackend({ scenario })
    try {
      const client = new AgentClient({ baseUrl: backend.url, transport, ...FAST })
      const session = client.newSession({})
      const started = Date.now()
      const turn = session.prompt('go')
      await drain(turn)
      assert.equal((await turn.result).stopReason, 'end_turn')
      assert.ok(Date.now() - started >= 900, `waited as asked (${Date.now() - started} ms), not the 20 ms back-off`)
      for (const wait of ['3600', '7200']) {
        const t = session.prompt('again')
        await drain(t, 5_000) // a hang guard: no waiting an hour
        const err = await within(5_000, t.result.then(() => null, (e) => e))
        assert.equal(err?.code, 'E_SERVER', String(err))
        assert.match(err.message, new RegExp(`retry in ${wait} s, longer than the 60 s`))
      }
    } finally {
      backend.close()
    }
  })
}

test('a schema with oneOf/anyOf/allOf is advertised normalized, and the backend accepts it', async () => {
  const backend = await startEmbeddedBackend({ scenario: TURN })
  try {
    const inputSchema = {
      type: 'object',
      properties: { query: { anyOf: [{ type: 'string' }, { type: 'null' }] }, opts: { allOf: [{ properties: { a: { type: 'integer' } } }, { properties: { b: { type: 'boolean' } } }] } },
    }
    const requestContext = () => ({ tools: [{ name: 'srv-find', toolName: 'find', providerIdentifier: 'srv', inputSchema }] })
    const client = new AgentClient({ baseUrl: backend.url, transport: 'sse', ...FAST, requestContext })
    assert.equal(await textOf(client.newSession({}).prompt('hi')), 'hello')
    const sent = backend.records()[0].messages[0].message.runRequest.action.userMessageAction.requestContext.tools[0].inputSchema
    assert.ok(!/"(oneOf|anyOf|allOf)"/.test(JSON.stringify(sent)), JSON.stringify(sent))
    assert.deepEqual(sent.properties.query, { type: 'string' })
    assert.deepEqual(Object.keys(sent.properties.opts.properties), ['a', 'b'])
  } finally {
    backend.close()
  }
})

test('a refused connection and h2 against an HTTP/1.1 server are reported at once with the fix', async () => {
  const dead = await startEmbeddedBackend({ scenario: TURN })
  const url = dead.url
  dead.close()
  await new Promise((r) => setTimeout(r, 50))
  for (const transport of ['auto', 'sse', 'h2']) {
    const client = new AgentClient({ baseUrl: url, transport })
    const started = Date.now()
    const turn = client.newSession({}).prompt('hi')
    const err = await within(5_000, turn.result.then(() => null, (e) => e))
    assert.equal(err?.code, 'E_NETWORK', transport)
    assert.match(err.message, /connection refused .*Check baseUrl/)
    assert.ok(Date.now() - started < 3_000, `${transport}: not resumed (${Date.now() - started} ms)`)
  }
  const http1 = await startEmbeddedBackend({ scenario: { ...TURN, http1Only: true } })
  try {
    const turn = new AgentClient({ baseUrl: http1.url, transport: 'h2' }).newSession({}).prompt('hi')
    const err = await within(5_000, turn.result.then(() => null, (e) => e))
    assert.equal(err?.code, 'E_NETWORK')
    assert.match(err.message, /does not speak HTTP\/2 .*Use transport 'auto' \(the default\) or 'sse'/)
  } finally {
    http1.close()
  }
})
