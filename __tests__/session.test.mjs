// The JavaScript session API end to end against the embedded backend, on both transports.
import { test } from 'node:test'
import assert from 'node:assert/strict'
import { setup, drain, merged, within, recordsWhen, TRANSPORTS, FAST, AgentClient, startEmbeddedBackend, assertAcpUpdate } from './helpers.mjs'

const FULL_TURN = { steps: [
  { type: 'thinking', text: 'Let me ' },
  { type: 'thinking', text: 'look.' },
  { type: 'thinkingCompleted', durationMs: 4 },
  { type: 'text', text: 'Reading the file' },
  { type: 'toolCallStarted', callId: 'c1', toolCall: { readToolCall: { args: { path: '/w/a.txt' } } } },
  { type: 'exec', id: 1, args: { readArgs: { path: '/w/a.txt', toolCallId: 'c1' } } },
  { type: 'toolCallCompleted', callId: 'c1', toolCall: { readToolCall: { args: { path: '/w/a.txt' }, result: { success: { content: 'hi' } } } } },
  { type: 'exec', id: 2, args: { shellStreamArgs: { command: 'make test', workingDirectory: '/w' } } },
  { type: 'kvSet', id: 3, data: 'a blob' },
  { type: 'kvGet', id: 4, blobId: 'ffee' },
  { type: 'interaction', id: 5, query: { webSearchRequestQuery: { args: { searchTerm: 'napi' } } } },
  { type: 'checkpoint', state: { tokenDetails: { usedTokens: 900, maxTokens: 100000 } } },
  { type: 'text', text: ' - done' },
  { type: 'turnEnded', inputTokens: 7, outputTokens: 9 },
] }

function host(log) {
  return {
    async exec(request, ctx) {
      log.push(request)
      if (request.kind === 'read') return { success: { path: request.args.path, content: 'hi\n', totalLines: 1 } }
      if (request.kind === 'shellStream') {
        ctx.stdout('PASS 3 tests\n')
        ctx.stderr('warning: slow\n')
        return { success: { command: request.args.command, exitCode: 0, stdout: 'PASS 3 tests\n' } }
      }
      return undefined
    },
    interaction: async (query) => { log.push(query); return { approved: {} } },
  }
}

for (const transport of TRANSPORTS) {
  test(`${transport}: a full turn: updates in order, every request answered, result last`, async () => {
    const log = []
    const { backend, client, close } = await setup(FULL_TURN, host(log), transport)
    try {
      const session = client.newSession({ cwd: '/w', model: 'default', mode: 'agent' })
      const turn = session.prompt([{ type: 'text', text: 'Run the tests' }])
      const updates = merged(await drain(turn))
      const result = await turn.result
      assert.deepEqual(result, { stopReason: 'end_turn', usage: { inputTokens: 7, outputTokens: 9, cachedReadTokens: 0, cachedWriteTokens: 0, thoughtTokens: 0, totalTokens: 16 } })
      assert.deepEqual(updates.map((u) => u.sessionUpdate),
        ['agent_thought_chunk', 'agent_message_chunk', 'tool_call', 'tool_call_update', 'usage_update', 'agent_message_chunk'])
      assert.equal(updates[0].content.text, 'Let me look.')
      assert.equal(updates[2].toolCallId, 'c1')
      assert.equal(updates[3].status, 'completed')
      assert.deepEqual(updates[4], { sessionUpdate: 'usage_update', used: 900, size: 100000 })
      assert.notEqual(updates[1].messageId, updates[5].messageId, 'text after a tool call is a new message')

      assert.deepEqual(log.map((e) => e.kind), ['read', 'shellStream', 'webSearch'])
      assert.equal(log[0].args.path, '/w/a.txt')
      assert.equal(log[2].query.args.searchTerm, 'napi')

      const [record] = backend.records()
      const messages = record.messages.map((m) => m.message)
      const run = messages[0].runRequest
      assert.equal(run.conversationId, session.conversationId)
      assert.equal(run.action.userMessageAction.userMessage.text, 'Run the tests')
      assert.equal(run.action.userMessageAction.userMessage.mode, 'AGENT_MODE_AGENT')
      assert.equal(run.requestedModel.modelId, 'default')
      const shell = messages.filter((m) => m.execClientMessage?.id === 2 || m.execClientControlMessage?.streamClose?.id === 2)
      assert.deepEqual(shell.map((m) => m.execClientMessage ? Object.keys(m.execClientMessage).find((k) => !['id', 'execId'].includes(k)) : 'streamClose'),
        ['shellStream', 'shellStream', 'shellStream', 'shellStream', 'shellResult', 'streamClose'])
      assert.equal(shell[1].execClientMessage.shellStream.stdout.data, 'PASS 3 tests\n')
      assert.equal(shell[2].execClientMessage.shellStream.stderr.data, 'warning: slow\n')
      assert.equal(shell[3].execClientMessage.shellStream.exit.code ?? 0, 0)
      assert.equal(shell[4].execClientMessage.shellResult.success.stdout, 'PASS 3 tests\n')
      const kv = messages.filter((m) => m.kvClientMessage).map((m) => m.kvClientMessage)
      // The scenario's set and get, then the sets that store the conversation before the
      // checkpoint (the user's message, the thinking, text and tool call steps, the turn, and
      // the root prompt's user, assistant and tool messages), with ids above the scenario's. The
      // backend sends those sets together, and their replies may come in any order.
      assert.deepEqual(kv.slice(0, 2).map((k) => k.id), [3, 4])
      assert.deepEqual(kv.slice(2).map((k) => k.id).sort((a, b) => a - b), [5, 6, 7, 8, 9, 10, 11, 12])
      assert.ok(kv[0].setBlobResult)
      assert.ok(kv.slice(2).every((k) => k.setBlobResult && !k.setBlobResult.error), JSON.stringify(kv))
      assert.deepEqual(messages.find((m) => m.interactionResponse).interactionResponse, { id: 5, webSearchRequestResponse: { approved: {} } })
    } finally {
      close()
    }
  })

  test(`${transport}: multi-turn re-sends the checkpoint; save → load continues on a new client`, async () => {
    const scenario = { turns: [
      [{ type: 'kvSet', id: 1, data: 'history blob' }, { type: 'checkpoint', state: { readPaths: ['/first'] } }, { type: 'text', text: 'one' }, { type: 'turnEnded' }],
      [{ type: 'text', text: 'two' }, { type: 'turnEnded' }],
      [{ type: 'kvGet', id: 2, blobId: '0000' }, { type: 'text', text: 'three' }, { type: 'turnEnded' }],
    ] }
    const { backend, client, close } = await setup(scenario, {}, transport)
    try {
      const session = client.newSession({ model: 'embedded-fast' })
      for (const text of ['first', 'second']) {
        const turn = session.prompt(text)
        await drain(turn)
        assert.equal((await turn.result).stopReason, 'end_turn')
      }
      const saved = session.save()
      assert.equal(saved.conversationId, session.conversationId)
      // The scenario's blob, and the conversation's: the first turn (checkpointed before its
      // text), its user message and the root prompt's user message.
      const blobs = new Map(saved.blobs.map((b) => [b.id, Buffer.from(b.data, 'base64')]))
      assert.equal(blobs.size, 4)
      assert.ok([...blobs.values()].some((b) => b.toString() === 'history blob'))
      assert.ok([...blobs.values()].some((b) => b.toString() === JSON.stringify({ content: [{ text: 'first', type: 'text' }], role: 'user' })))
      const again = new AgentClient({ baseUrl: backend.url, transport })
      const loaded = again.loadSession(JSON.parse(JSON.stringify(saved)))
      const turn = loaded.prompt('third')
      await drain(turn)
      await turn.result
      const records = backend.records()
      const runs = records.map((r) => r.messages[0].message.runRequest)
      assert.equal(new Set(runs.map((r) => r.conversationId)).size, 1, 'one conversation id')
      assert.equal(runs[1].conversationState.readPaths[0], '/first')
      assert.equal(runs[2].conversationState.readPaths[0], '/first', 'the loaded session sends the saved checkpoint')
      assert.equal(runs[2].requestedModel.modelId, 'embedded-fast')
      // Checkpoint bytes: exactly what the server sent, the conversation's entries (fields 1 and
      // 8, each a 32-byte id of a saved blob) then the scenario's read path.
      const checkpoint = Buffer.from(saved.checkpoint, 'base64')
      const entry = (tag, at) => {
        assert.deepEqual([...checkpoint.subarray(at, at + 2)], [tag, 0x20])
        assert.ok(blobs.has(checkpoint.subarray(at + 2, at + 34).toString('hex')), `entry at ${at} names a saved blob`)
      }
      entry(0x0a, 0) // root_prompt_messages_json
      entry(0x42, 34) // turns
      assert.deepEqual([...checkpoint.subarray(68)], [0x92, 0x01, 0x06, 0x2f, 0x66, 0x69, 0x72, 0x73, 0x74])
    } finally {
      close()
    }
  })

  test(`${transport}: heartbeats, exec heartbeats, stream_close and throw for unhandled kinds are recorded`, async () => {
    const scenario = { steps: [
      { type: 'exec', id: 1, args: { readArgs: { path: '/slow' } } },
      { type: 'exec', id: 2, args: { fetchArgs: { url: 'https://example.com' } } },
      { type: 'turnEnded' },
    ] }
    const exec = async (req) => {
      if (req.kind !== 'read') return undefined
      await new Promise((r) => setTimeout(r, 450))
      return { success: { path: '/slow', content: '' } }
    }
    const { backend, client, close } = await setup(scenario, { exec }, transport)
    try {
      const turn = client.newSession().prompt('go')
      await drain(turn)
      await turn.result
      const messages = backend.records()[0].messages
      assert.ok(messages.filter((m) => m.kind === 'clientHeartbeat').length >= 3)
      assert.ok(messages.filter((m) => m.message.execClientControlMessage?.heartbeat?.id === 1).length >= 3)
      const forFetch = messages.filter((m) => m.message.execClientControlMessage && JSON.stringify(m.message).includes('"id":2'))
      assert.ok(forFetch[0].message.execClientControlMessage.throw.error.includes('fetch'))
      assert.ok(forFetch[1].message.execClientControlMessage.streamClose)
      if (transport === 'sse') {
        const seqnos = backend.records()[0].appends.map((a) => a.seqno).sort((a, b) => a - b)
        assert.deepEqual(seqnos, seqnos.map((_, i) => i), 'seqnos 0..n without gaps')
      }
    } finally {
      close()
    }
  })
}

test("transport 'auto', the default: Run over h2 where the backend speaks it, RunSSE where it speaks only HTTP/1.1", async () => {
  for (const [http1Only, used] of [[false, 'h2'], [true, 'sse']]) {
    const backend = await startEmbeddedBackend({ scenario: { ...FULL_TURN, http1Only } })
    try {
      const log = []
      const client = new AgentClient({ baseUrl: backend.url, ...FAST, ...host(log) })
      assert.equal(client.transport, 'h2', 'h2 until a turn shows otherwise')
      const session = client.newSession({ cwd: '/w' })
      for (const text of ['Run the tests', 'Again']) {
        const turn = session.prompt([{ type: 'text', text }])
        const updates = merged(await drain(turn))
        assert.equal((await turn.result).stopReason, 'end_turn', used)
        // The turn is seen once: nothing of the refused h2 attempt, no resume notice. (The second
        // turn's usage is unchanged, so it brings no usage_update.)
        assert.deepEqual(updates.map((u) => u.sessionUpdate).filter((kind) => kind !== 'usage_update'),
          ['agent_thought_chunk', 'agent_message_chunk', 'tool_call', 'tool_call_update', 'agent_message_chunk'], used)
      }
      assert.equal(client.transport, used)
      // One stream per turn reached the backend, on the transport it speaks; each request was
      // answered once.
      const records = backend.records()
      assert.deepEqual(records.map((r) => r.transport), [used, used])
      assert.deepEqual(records.map((r) => r.messages[0].message.runRequest.action.userMessageAction.userMessage.text), ['Run the tests', 'Again'])
      assert.deepEqual(log.map((e) => e.kind), ['read', 'shellStream', 'webSearch', 'read', 'shellStream', 'webSearch'])
    } finally {
      backend.close()
    }
  }
  assert.throws(() => new AgentClient({ baseUrl: 'http://127.0.0.1:1', transport: 'h3' }), { code: 'E_INVALID', message: /'auto', 'sse' or 'h2'/ })
})

test('throwing, rejecting and hanging callbacks become error results; the turn goes on', async () => {
  const scenario = { steps: [
    { type: 'exec', id: 1, args: { readArgs: { path: '/a' } } },
    { type: 'exec', id: 2, args: { writeArgs: { path: '/b', fileText: 'x' } } },
    { type: 'exec', id: 3, args: { deleteArgs: { path: '/c' } } },
    { type: 'exec', id: 4, args: { lsArgs: { path: '/d' } } },
    { type: 'text', text: 'still going' },
    { type: 'turnEnded' },
  ] }
  const exec = (req) => {
    if (req.kind === 'read') throw new Error('sync boom')
    if (req.kind === 'write') return Promise.reject(new Error('async boom'))
    if (req.kind === 'delete') return new Promise(() => {}) // never settles
    if (req.kind === 'ls') return { notAField: true } // invalid result
  }
  const { backend, client, close } = await setup(scenario, { exec, callbackTimeoutMs: 300 })
  try {
    const turn = client.newSession().prompt('go')
    const updates = await drain(turn)
    assert.equal((await turn.result).stopReason, 'end_turn')
    assert.equal(updates.at(-1).content.text, 'still going')
    const results = backend.records()[0].messages.map((m) => m.message.execClientMessage).filter(Boolean)
    const byId = Object.fromEntries(results.map((r) => [r.id, r]))
    assert.match(byId[1].readResult.error.error, /sync boom/)
    assert.match(byId[2].writeResult.error.error, /async boom/)
    assert.match(byId[3].deleteResult.error.error, /did not settle within 300 ms/)
    assert.match(byId[4].lsResult.error.error, /invalid ls.*notAField/)
  } finally {
    close()
  }
})

test('kv callbacks replace the built-in store', async () => {
  const store = new Map()
  const kv = {
    get: async (id) => store.get(id),
    set: async (id, data) => { store.set(id, Buffer.from(data)) },
  }
  const scenario = { steps: [
    { type: 'kvSet', id: 1, blobId: 'abcd', data: 'hello kv' },
    { type: 'kvGet', id: 2, blobId: 'abcd' },
    { type: 'kvGet', id: 3, blobId: 'ffff' },
    { type: 'turnEnded' },
  ] }
  const { backend, client, close } = await setup(scenario, { kv })
  try {
    const turn = client.newSession().prompt('go')
    await drain(turn)
    await turn.result
    assert.equal(store.get('abcd').toString(), 'hello kv')
    const replies = backend.records()[0].messages.map((m) => m.message.kvClientMessage).filter(Boolean)
    assert.equal(Buffer.from(replies[1].getBlobResult.blobData, 'base64').toString(), 'hello kv')
    assert.equal(replies[2].getBlobResult.blobData, undefined, 'a missing blob is answered without data')
  } finally {
    close()
  }
})

test('without an interaction callback every query is rejected, never left unanswered', async () => {
  const scenario = { steps: [
    { type: 'interaction', id: 1, query: { askQuestionInteractionQuery: { args: { title: 'Which?' } } } },
    { type: 'interaction', id: 2, query: { switchModeRequestQuery: { args: { targetModeId: 'plan' } } } },
    { type: 'turnEnded' },
  ] }
  const { backend, client, close } = await setup(scenario)
  try {
    const turn = client.newSession().prompt('go')
    await drain(turn)
    await turn.result
    const responses = backend.records()[0].messages.map((m) => m.message.interactionResponse).filter(Boolean)
    assert.ok(responses[0].askQuestionInteractionResponse.result.rejected)
    assert.ok(responses[1].switchModeRequestResponse.rejected)
  } finally {
    close()
  }
})

test('conversation actions and prewarm reach the server', async () => {
  const scenario = { turns: [
    [{ type: 'awaitClient', kind: 'conversationAction' }, { type: 'awaitClient', kind: 'conversationAction' }, { type: 'turnEnded' }],
    [{ type: 'turnEnded' }],
    [{ type: 'turnEnded' }],
    [{ type: 'turnEnded' }],
    [{ type: 'turnEnded' }],
  ] }
  const { backend, client, close } = await setup(scenario)
  try {
    const session = client.newSession({ model: 'embedded-thinking' })
    const turn = session.prompt('work')
    await new Promise((r) => setTimeout(r, 100))
    await session.cancelSubagent('sub-7')
    await session.backgroundShell('tool-3')
    await drain(turn)
    await turn.result
    for (const start of [() => session.summarize(), () => session.startPlan('plan it'), () => session.shellCommand('ls -la')]) {
      const t = start()
      await drain(t)
      await t.result
    }
    await session.prewarm()
    assert.throws(() => session.action({ bogusAction: {} }), (e) => e.code === 'E_INVALID')
    await assert.rejects(session.sendAction({ summarizeAction: {} }), (e) => e.code === 'E_CLOSED')
    const prewarms = await recordsWhen(backend, (rs) => rs.some((r) => r.messages.some((m) => m.kind === 'prewarmRequest')), 2000, 'prewarms')
    const records = backend.records()
    assert.equal(records.length, 4, 'the prewarm is not among the turns')
    const actions = records[0].messages.filter((m) => m.kind === 'conversationAction').map((m) => m.message.conversationAction)
    assert.deepEqual(actions, [{ cancelSubagentAction: { subagentId: 'sub-7' } }, { backgroundShellAction: { toolCallId: 'tool-3' } }])
    assert.ok(records[1].messages[0].message.runRequest.action.summarizeAction)
    assert.equal(records[2].messages[0].message.runRequest.action.startPlanAction.userMessage.text, 'plan it')
    assert.equal(records[3].messages[0].message.runRequest.action.shellCommandAction.shellCommand.command, 'ls -la')
    const prewarm = prewarms.flatMap((r) => r.messages).find((m) => m.kind === 'prewarmRequest')
    assert.equal(prewarm.message.prewarmRequest.requestedModel.modelId, 'embedded-thinking')
  } finally {
    close()
  }
})

test('prompt content: resources become selected files, images selected images, unknown types are named', async () => {
  const { backend, client, close } = await setup({ steps: [{ type: 'turnEnded' }] })
  try {
    const session = client.newSession()
    assert.throws(() => session.prompt([{ type: 'audio', data: '', mimeType: 'audio/wav' }]), (e) => e.code === 'E_INVALID' && /"audio"/.test(e.message))
    const turn = session.prompt([
      { type: 'text', text: 'Explain' },
      { type: 'resource', resource: { uri: 'file:///w/main.py', text: 'print(1)', mimeType: 'text/x-python' } },
      { type: 'image', data: Buffer.from('png').toString('base64'), mimeType: 'image/png' },
    ])
    await drain(turn)
    await turn.result
    const msg = backend.records()[0].messages[0].message.runRequest.action.userMessageAction.userMessage
    assert.equal(msg.text, 'Explain')
    assert.deepEqual(msg.selectedContext.files, [{ content: 'print(1)', path: '/w/main.py' }])
    assert.equal(msg.selectedContext.selectedImages[0].mimeType, 'image/png')
    assert.equal(Buffer.from(msg.selectedContext.selectedImages[0].data, 'base64').toString(), 'png')
  } finally {
    close()
  }
})

test('nextBatch drains bursts; coalescing keeps every character', async () => {
  const { client, close } = await setup({ steps: [{ type: 'textBurst', text: 'xy', count: 5000 }, { type: 'turnEnded' }] })
  try {
    const turn = client.newSession().prompt('burst')
    let text = ''
    let calls = 0
    for (;;) {
      const batch = await within(10_000, turn.nextBatch(256), 'nextBatch')
      if (batch.length === 0) break
      calls += 1
      for (const u of batch) { assertAcpUpdate(u); text += u.content.text }
    }
    assert.equal(text.length, 10_000)
    assert.ok(calls < 5000, `${calls} batches for 5000 deltas`)
    assert.equal((await turn.result).stopReason, 'end_turn')
  } finally {
    close()
  }
})

test('nextLines: the batches as ACP session/update lines of the session id, the same updates as nextBatch, then empty', async () => {
  const steps = [
    { type: 'thinking', text: 'Let me look.' },
    { type: 'text', text: 'Line one\nline "two" \u2028 é ' },
    { type: 'toolCallStarted', callId: 'c1', toolCall: { readToolCall: { args: { path: '/w/a.txt' } } } },
    { type: 'toolCallCompleted', callId: 'c1', toolCall: { readToolCall: { args: { path: '/w/a.txt' }, result: { success: { content: 'hi' } } } } },
    { type: 'textBurst', text: 'xy', count: 2000 },
    { type: 'turnEnded' },
  ]
  const { client, close } = await setup({ steps })
  try {
    // Message ids are new in each turn: compared by order of appearance.
    const normalized = (updates) => {
      const ids = []
      return updates.map((u) => {
        if (!u.messageId) return u
        if (!ids.includes(u.messageId)) ids.push(u.messageId)
        return { ...u, messageId: `m${ids.indexOf(u.messageId)}` }
      })
    }
    const byObjects = client.newSession().prompt('same')
    const objects = []
    for (let b = await within(10_000, byObjects.nextBatch(1000), 'nextBatch'); b.length; b = await within(10_000, byObjects.nextBatch(1000), 'nextBatch')) objects.push(...b)
    assert.equal((await byObjects.result).stopReason, 'end_turn')

    // A session id JSON must escape stays inside its string, on its line.
    const sessionId = 'thread "7"\n'
    const byLines = client.newSession().prompt('same')
    const lines = []
    let reads = 0
    for (;;) {
      const bytes = await within(10_000, byLines.nextLines(3, sessionId), 'nextLines')
      assert.ok(Buffer.isBuffer(bytes))
      if (bytes.length === 0) break
      reads += 1
      const text = bytes.toString('utf8')
      assert.ok(text.endsWith('\n'), 'every line ends in LF')
      const batch = text.slice(0, -1).split('\n').map((line) => JSON.parse(line))
      assert.ok(batch.length <= 3, `at most max updates a read: ${batch.length}`)
      lines.push(...batch)
    }
    assert.equal((await byLines.result).stopReason, 'end_turn')
    assert.ok(reads >= 2, `${reads} reads`)
    for (const line of lines) {
      assert.deepEqual(Object.keys(line), ['jsonrpc', 'method', 'params'])
      assert.equal(line.jsonrpc, '2.0')
      assert.equal(line.method, 'session/update')
      assert.equal(line.params.sessionId, sessionId)
      assertAcpUpdate(line.params.update)
    }
    const updates = lines.map((l) => l.params.update)
    // Text merges as it is read, so the chunks may split differently; what they say may not.
    const text = (us) => us.filter((u) => u.sessionUpdate === 'agent_message_chunk').map((u) => u.content.text).join('')
    assert.equal(text(updates), text(objects))
    assert.ok(text(updates).startsWith('Line one\nline "two" \u2028 é '))
    const notText = (us) => normalized(us.filter((u) => u.sessionUpdate !== 'agent_message_chunk'))
    assert.deepEqual(notText(updates), notText(objects))
    assert.equal((await within(5_000, byLines.nextLines(3, sessionId), 'a read after the end')).length, 0)
  } finally {
    close()
  }
})

test('nextBatch reads made before earlier ones settle are answered in call order; reads past the end get []', async () => {
  // Alternating thinking and text, so that no two updates merge: one update per read.
  const steps = Array.from({ length: 20 }, (_, i) => ({ type: i % 2 ? 'text' : 'thinking', text: `${i},` }))
  const { client, close } = await setup({ steps: [...steps, { type: 'turnEnded' }] })
  try {
    const turn = client.newSession().prompt('order')
    const batches = await within(10_000, Promise.all(Array.from({ length: 40 }, () => turn.nextBatch(1))), 'reads')
    const sizes = batches.map((b) => b.length)
    assert.ok(sizes.every((n) => n <= 1), `one update at most per read: ${sizes}`)
    assert.equal(sizes.indexOf(0), sizes.lastIndexOf(1) + 1, `the ends come after every update: ${sizes}`)
    const chunks = batches.flat().filter((u) => u.sessionUpdate.endsWith('_chunk'))
    assert.equal(chunks.map((u) => u.content.text).join(''), steps.map((s) => s.text).join(''))
    assert.deepEqual(await within(5_000, turn.nextBatch(8), 'a read after the end'), [])
    assert.equal((await turn.result).stopReason, 'end_turn')
  } finally {
    close()
  }
})

test('requestContext() feeds the run request and the request_context exec; a failing one is E_CALLBACK', async () => {
  const requestContext = async () => ({
    rules: [{ fullPath: '/rules/style.mdc', content: 'Use tabs.' }],
    env: { timeZone: 'Europe/Paris' },
  })
  const scenario = { steps: [{ type: 'exec', id: 1, args: { requestContextArgs: {} } }, { type: 'turnEnded', reasoningTokens: 12 }] }
  const { backend, client, close } = await setup(scenario, { requestContext })
  try {
    const turn = client.newSession({ cwd: '/repo' }).prompt('go')
    await drain(turn)
    assert.equal((await turn.result).usage.thoughtTokens, 12)
    const messages = backend.records()[0].messages.map((m) => m.message)
    const fromRun = messages[0].runRequest.action.userMessageAction.requestContext
    assert.equal(fromRun.rules[0].content, 'Use tabs.')
    assert.equal(fromRun.env.timeZone, 'Europe/Paris')
    assert.deepEqual(fromRun.env.workspacePaths, ['/repo'], 'the session folder fills what the host left empty')
    const fromExec = messages.find((m) => m.execClientMessage?.requestContextResult).execClientMessage.requestContextResult
    assert.equal(fromExec.success.requestContext.rules[0].fullPath, '/rules/style.mdc')
  } finally {
    close()
  }
  const failing = await setup({ steps: [{ type: 'turnEnded' }] }, { requestContext: () => { throw new Error('no rules today') } })
  try {
    const turn = failing.client.newSession().prompt('go')
    await drain(turn)
    await assert.rejects(turn.result, (e) => e.code === 'E_CALLBACK' && /no rules today/.test(e.message))
  } finally {
    failing.close()
  }
})

test('injectContext and continueGoal reach the server', async () => {
  const scenario = { turns: [[{ type: 'awaitClient', kind: 'conversationAction' }, { type: 'turnEnded' }], [{ type: 'turnEnded' }]] }
  const { backend, client, close } = await setup(scenario)
  try {
    const session = client.newSession()
    await assert.rejects(session.injectContext('nothing runs'), (e) => e.code === 'E_CLOSED')
    const turn = session.prompt('work')
    await new Promise((r) => setTimeout(r, 100))
    const injectionId = await session.injectContext('The build is green now.', 'ci-watcher')
    await drain(turn)
    await turn.result
    const goal = session.continueGoal()
    await drain(goal)
    await goal.result
    const [first, second] = backend.records()
    const inject = first.messages.find((m) => m.kind === 'conversationAction').message.conversationAction.injectContextAction
    // The run is named by the turn's run id, which is not the stream's request id.
    const runId = first.messages[0].message.runRequest.runId
    assert.notEqual(runId, first.requestId)
    assert.deepEqual(inject, { injectionId, expectedRunId: runId, systemContext: { producer: 'ci-watcher', content: 'The build is green now.' } })
    assert.deepEqual(second.messages[0].message.runRequest.action, { goalContinuationAction: {} })
  } finally {
    close()
  }
})

test('blobDir keeps KV blobs on disk across clients', async () => {
  const { mkdtempSync, readdirSync, readFileSync, rmSync } = await import('node:fs')
  const { tmpdir } = await import('node:os')
  const dir = mkdtempSync(`${tmpdir()}/acp-blobs-`)
  const scenario = { turns: [[{ type: 'kvSet', id: 1, blobId: 'beef', data: 'kept' }, { type: 'turnEnded' }], [{ type: 'kvGet', id: 2, blobId: 'beef' }, { type: 'turnEnded' }]] }
  const { backend, client, close } = await setup(scenario, { blobDir: dir })
  try {
    const t1 = client.newSession().prompt('one')
    await drain(t1)
    await t1.result
    assert.deepEqual(readdirSync(dir), ['beef'])
    assert.equal(readFileSync(`${dir}/beef`, 'utf8'), 'kept')
    const other = new AgentClient({ baseUrl: backend.url, blobDir: dir })
    const t2 = other.newSession().prompt('two')
    await drain(t2)
    await t2.result
    const reply = backend.records()[1].messages.find((m) => m.kind === 'kvClientMessage').message.kvClientMessage
    assert.equal(Buffer.from(reply.getBlobResult.blobData, 'base64').toString(), 'kept')
  } finally {
    close()
    rmSync(dir, { recursive: true, force: true })
  }
})

test('save({ blobs: false }) and saveToFile(): the record without the blob folder, written private and loadable', async () => {
  const fs = await import('node:fs')
  const { tmpdir } = await import('node:os')
  const dir = fs.mkdtempSync(`${tmpdir()}/acp-save-`)
  const blobDir = `${dir}/blobs`
  const scenario = { turns: [[{ type: 'kvSet', id: 1, blobId: 'beef', data: 'kept' }, { type: 'checkpoint', state: { tokenDetails: { usedTokens: 5, maxTokens: 100 } } }, { type: 'turnEnded' }], [{ type: 'kvGet', id: 2, blobId: 'beef' }, { type: 'turnEnded' }]] }
  const { backend, client, close } = await setup(scenario, { blobDir })
  try {
    const session = client.newSession()
    const t1 = session.prompt('one')
    await drain(t1)
    await t1.result
    const full = session.save()
    assert.ok(full.blobs.some((b) => b.id === 'beef'), 'save() still holds the blobs (the KV set, and the conversation\'s own)')
    const without = session.save({ blobs: false })
    assert.deepEqual(without, { ...full, blobs: [] })
    assert.ok(without.checkpoint, 'the checkpoint is kept')

    // A leftover at the name is replaced, and the new file is private whatever the old one was.
    const file = `${dir}/s.json.tmp`
    fs.writeFileSync(file, 'a leftover, readable by all and longer than nothing')
    if (process.platform !== 'win32') fs.chmodSync(file, 0o644)
    await session.saveToFile(file, { sessionId: 's', title: 'ünïcode “title”', nested: { a: [1, null, true] } })
    const record = JSON.parse(fs.readFileSync(file, 'utf8'))
    assert.deepEqual(record, { sessionId: 's', title: 'ünïcode “title”', nested: { a: [1, null, true] }, saved: without })
    if (process.platform !== 'win32') assert.equal(fs.statSync(file).mode & 0o777, 0o600)

    // What it wrote loads: the next turn finds the blob in the folder.
    const other = new AgentClient({ baseUrl: backend.url, blobDir })
    const t2 = other.loadSession(record.saved).prompt('two')
    await drain(t2)
    await t2.result
    const reply = backend.records()[1].messages.find((m) => m.kind === 'kvClientMessage').message.kvClientMessage
    assert.equal(Buffer.from(reply.getBlobResult.blobData, 'base64').toString(), 'kept')

    // Bad input: a clear rejection, and nothing written.
    await assert.rejects(session.saveToFile(`${dir}/a.json`, /** @type {any} */ (['not', 'an', 'object'])), { code: 'E_INVALID', message: /fields must be an object/ })
    await assert.rejects(session.saveToFile(`${dir}/b.json`, { saved: {} }), { code: 'E_INVALID', message: /`saved` is the session's/ })
    await assert.rejects(session.saveToFile(`${dir}/missing/c.json`, {}), { code: 'E_INVALID', message: /missing\/c\.json/ })
    fs.mkdirSync(`${dir}/folder`)
    await assert.rejects(session.saveToFile(`${dir}/folder`, {}), { code: 'E_INVALID' })
    assert.deepEqual(fs.readdirSync(dir).sort(), ['blobs', 'folder', 's.json.tmp'])
  } finally {
    close()
    fs.rmSync(dir, { recursive: true, force: true })
  }
})

test('saveToFile(…, into, save) lands the save over a RecordFile: the latest started wins, none once closed', async () => {
  const fs = await import('node:fs')
  const { tmpdir } = await import('node:os')
  const { RecordFile } = await import('../index.js')
  const dir = fs.mkdtempSync(`${tmpdir()}/acp-land-`)
  const { client, close } = await setup({ turns: [[{ type: 'turnEnded' }]] })
  try {
    const session = client.newSession()
    const into = new RecordFile(`${dir}/s.json`)
    assert.equal(into.path, `${dir}/s.json`)
    const read = () => JSON.parse(fs.readFileSync(`${dir}/s.json`, 'utf8')).title

    // In order, each replaces the one before; written and renamed on the file thread.
    const one = /** @type {number} */ (into.begin())
    assert.equal(await session.saveToFile(`${dir}/s.json.1.tmp`, { title: 'one' }, into, one), true)
    assert.equal(read(), 'one')

    // Started earlier, landing later (a save in place came between): dropped with its temporary.
    const two = /** @type {number} */ (into.begin())
    const three = /** @type {number} */ (into.begin())
    fs.writeFileSync(`${dir}/s.json.3.tmp`, JSON.stringify({ title: 'three, in place' }))
    assert.equal(into.replace(`${dir}/s.json.3.tmp`, three), true)
    assert.equal(await session.saveToFile(`${dir}/s.json.2.tmp`, { title: 'two' }, into, two), false)
    assert.equal(read(), 'three, in place')

    // A number it never gave, or none: refused before anything is written.
    await assert.rejects(session.saveToFile(`${dir}/s.json.9.tmp`, { title: 'nine' }, into, 9), { code: 'E_INVALID', message: /save 9 was not begun/ })
    await assert.rejects(session.saveToFile(`${dir}/s.json.9.tmp`, { title: 'nine' }, into), { code: 'E_INVALID', message: /needs its save number/ })
    assert.throws(() => into.replace(`${dir}/s.json.9.tmp`, 9), { code: 'E_INVALID', message: /save 9 was not begun/ })

    // Closed while saves are queued (behind a large one that holds the file thread): none lands,
    // no temporary stays, and no new save begins.
    const large = session.saveToFile(`${dir}/large.json`, { text: 'x'.repeat(32 * 1024 * 1024) })
    const queued = []
    for (let i = 0; i < 20; i++) {
      const save = /** @type {number} */ (into.begin())
      queued.push(session.saveToFile(`${dir}/s.json.q${save}.tmp`, { title: `queued ${save}` }, into, save))
    }
    into.close()
    const landed = await Promise.all(queued)
    assert.equal(await large, true)
    fs.rmSync(`${dir}/large.json`)
    assert.equal(into.closed, true)
    assert.equal(into.begin(), null)
    // Those the file thread reached before the close landed in order; none after it.
    const after = landed.indexOf(false)
    assert.ok(after >= 0, 'the close came before the last of 20 queued saves')
    assert.ok(landed.slice(after).every((l) => l === false), JSON.stringify(landed))
    assert.equal(read(), after === 0 ? 'three, in place' : `queued ${three + after}`)
    assert.deepEqual(fs.readdirSync(dir), ['s.json'], 'no temporary stays')
  } finally {
    close()
    fs.rmSync(dir, { recursive: true, force: true })
  }
})

test('prepareTls(): the TLS setup made ahead, once; clients made after it play their turns', async () => {
  const { prepareTls } = await import('../index.js')
  assert.equal(prepareTls(), undefined)
  assert.equal(prepareTls(), undefined, 'a second call does nothing and does not throw')
  const { client, close } = await setup({ turns: [[{ type: 'text', text: 'after the setup' }, { type: 'turnEnded' }]] })
  try {
    const turn = client.newSession().prompt('hi')
    const text = (await drain(turn)).filter((u) => u.sessionUpdate === 'agent_message_chunk').map((u) => u.content.text).join('')
    assert.equal(text, 'after the setup')
    assert.equal((await turn.result).stopReason, 'end_turn')
  } finally {
    close()
  }
})

test('replay() rebuilds the conversation from the checkpoint for session/load (inline and blob-referenced turns)', async () => {
  const { createHash } = await import('node:crypto')
  // Hand-encoded protobuf: length-delimited field `n` holding `bytes`.
  const ld = (n, bytes) => Buffer.concat([Buffer.from([(n << 3) | 2, bytes.length]), Buffer.from(bytes)])
  const userMessage = (text) => ld(1, Buffer.from(text)) // UserMessage.text = 1
  const assistantStep = (text) => ld(1, ld(1, Buffer.from(text))) // ConversationStep.assistant_message = 1
  const turn = (user, steps) => ld(1, Buffer.concat([ld(1, user), ...steps.map((s) => ld(2, s))])) // agent_conversation_turn
  const inline = turn(userMessage('first question'), [assistantStep('first answer')])
  const stored = turn(userMessage('second question'), [assistantStep('second answer')])
  const storedId = createHash('sha256').update(stored).digest()
  const scenario = { steps: [
    { type: 'kvSet', id: 1, dataBase64: stored.toString('base64') },
    { type: 'checkpoint', state: { turns: [inline.toString('base64'), storedId.toString('base64')] } },
    { type: 'turnEnded' },
  ] }
  const { backend, client, close } = await setup(scenario)
  try {
    const session = client.newSession()
    const t = session.prompt('go')
    await drain(t)
    await t.result
    const loaded = new AgentClient({ baseUrl: backend.url }).loadSession(session.save())
    const updates = await loaded.replay()
    updates.forEach(assertAcpUpdate)
    assert.deepEqual(updates.map((u) => [u.sessionUpdate, u.content.text]), [
      ['user_message_chunk', 'first question'], ['agent_message_chunk', 'first answer'],
      ['user_message_chunk', 'second question'], ['agent_message_chunk', 'second answer'],
    ])
    assert.deepEqual(await client.newSession().replay(), [], 'a new session has nothing to replay')
  } finally {
    close()
  }
})

test('every tool type of the schema translates to schema-valid ACP updates', async () => {
  const { readFileSync } = await import('node:fs')
  const dts = readFileSync(new URL('../types/agent.d.ts', import.meta.url), 'utf8')
  const block = dts.slice(dts.indexOf('export type ToolCall = '), dts.indexOf('export type', dts.indexOf('export type ToolCall = ') + 10))
  const branches = [...block.matchAll(/\| \{ (\w+ToolCall): /g)].map((m) => m[1])
  assert.ok(branches.length > 40, `${branches.length} tool branches`)
  const steps = branches.flatMap((b, i) => [
    { type: 'toolCallStarted', callId: `c${i}`, toolCall: { [b]: { args: {} } } },
    { type: 'toolCallCompleted', callId: `c${i}`, toolCall: { [b]: { args: {} } } },
  ])
  const { client, close } = await setup({ steps: [...steps, { type: 'turnEnded' }] })
  try {
    const turn = client.newSession({ cwd: '/w' }).prompt('all tools')
    const updates = await drain(turn) // validates every update against the ACP schema
    const cards = updates.filter((u) => u.sessionUpdate === 'tool_call')
    assert.equal(cards.length, branches.length - 1, 'one card per tool (todos become the plan)')
    const closed = new Set(updates.filter((u) => u.sessionUpdate === 'tool_call_update' && ['completed', 'failed'].includes(u.status)).map((u) => u.toolCallId))
    for (const card of cards) assert.ok(closed.has(card.toolCallId), `${card.name} was closed`)
  } finally {
    close()
  }
})

test('compactionUpdates turns summarization into ACP compaction updates', async () => {
  const steps = [{ type: 'update', update: { summaryStarted: {} } }, { type: 'update', update: { summary: { summary: 'So far: fixed the bug.' } } },
    { type: 'update', update: { summaryCompleted: {} } }, { type: 'turnEnded' }]
  for (const compactionUpdates of [true, false]) {
    const { client, close } = await setup({ steps }, { compactionUpdates })
    try {
      const updates = await drain(client.newSession().prompt('go'))
      const kinds = updates.map((u) => u.sessionUpdate)
      assert.deepEqual(kinds, compactionUpdates
        ? ['compaction_update', 'compaction_summary_chunk', 'compaction_update']
        : ['tool_call', 'tool_call_update', 'tool_call_update'])
    } finally {
      close()
    }
  }
})

test('terminalOutput shows shells as display-only terminals (schema-valid)', async () => {
  const steps = [
    { type: 'toolCallStarted', callId: 'sh', toolCall: { shellToolCall: { args: { command: 'ls', workingDirectory: '/w' } } } },
    { type: 'update', update: { toolCallDelta: { callId: 'sh', toolCallDelta: { shellToolCallDelta: { stdout: { content: 'a.txt\n' } } } } } },
    { type: 'toolCallCompleted', callId: 'sh', toolCall: { shellToolCall: { args: { command: 'ls' }, result: { success: { exitCode: 0 } } } } },
    { type: 'turnEnded' },
  ]
  const { client, close } = await setup({ steps }, { terminalOutput: true })
  try {
    const updates = await drain(client.newSession().prompt('go'))
    assert.deepEqual(updates[0].content, [{ type: 'terminal', terminalId: 'sh' }])
    assert.deepEqual(updates[1]._meta, { terminal_output: { terminal_id: 'sh', data: 'a.txt\n' } })
    assert.deepEqual([updates[2].status, updates[2]._meta.terminal_exit.exit_code], ['completed', 0])
  } finally {
    close()
  }
})

test('newConversationId: a fresh v4 UUID each call (the stdio agent names its sessions with it)', async () => {
  const { newConversationId } = await import('../index.js')
  const ids = Array.from({ length: 1000 }, () => newConversationId())
  for (const id of ids) assert.match(id, /^[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/)
  assert.equal(new Set(ids).size, ids.length)
})
