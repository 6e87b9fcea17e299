// session/delete wins over everything else of its session: the real agent process on the
// embedded backend, a turn kept running (a permission prompt left open, or a slow step), the
// session deleted meanwhile. Once the prompt has its answer, nothing of the session is on disk
// (record, blobs, shells' output), session/list never shows it and session/load, session/prompt
// and a second session/delete answer as for an id that never existed. (The client SDK takes a
// delete's "not found" for success, as ACP recommends; the agent's answer is read off the wire.)
import { test } from 'node:test'
import assert from 'node:assert/strict'
import fs from 'node:fs'
import path from 'node:path'
import { startAgent, tempDir } from './acp-harness.mjs'
import { within } from './helpers.mjs'

/** Polls `predicate` until it holds, failing after `ms`. */
async function waitFor(predicate, ms = 10_000, what = 'condition') {
  const deadline = Date.now() + ms
  while (!predicate()) {
    if (Date.now() > deadline) throw new Error(`${what} not reached within ${ms} ms`)
    await new Promise((r) => setTimeout(r, 20))
  }
}

/** Every file and folder the store keeps for `sessionId`, that exists. */
function filesOf(cacheDir, sessionId) {
  return [
    path.join(cacheDir, 'sessions', `${sessionId}.json`),
    path.join(cacheDir, 'blobs', sessionId),
    path.join(cacheDir, 'terminals', sessionId),
  ].filter((p) => fs.existsSync(p))
}

/** The error a request rejects with, as `{ code, message }` (it must reject). */
async function failureOf(request) {
  try {
    await request
  } catch (e) {
    return { code: e.code, message: e.message }
  }
  assert.fail('the request succeeded')
}

/** What the agent answers for a session id it never had, with this method. */
async function unknownAnswer(agent, method, params) {
  const ghost = '00000000-0000-4000-8000-000000000000'
  const failure = await failureOf(agent.request(method, { ...params, sessionId: ghost }))
  return { code: failure.code, message: failure.message.replaceAll(ghost, '<id>') }
}

/** `failureOf`, with the id put out of the message for comparison with `unknownAnswer`. */
async function answerFor(agent, method, params) {
  const failure = await failureOf(agent.request(method, params))
  return { code: failure.code, message: params.sessionId ? failure.message.replaceAll(params.sessionId, '<id>') : failure.message }
}

/**
 * The error codes the agent answered on the wire with `data.sessionId` = `sessionId`, in order.
 * @param {ReturnType<typeof startAgent>} harness
 */
function wireErrorsFor(harness, sessionId) {
  return harness.stdout().split('\n').filter(Boolean).map((line) => JSON.parse(line))
    .filter((m) => m.error && m.error.data?.sessionId === sessionId).map((m) => m.error.code)
}

/**
 * session/delete of `sessionId`, answered on the wire as for an unknown session: -32002.
 * @param {ReturnType<typeof startAgent>} harness
 */
async function assertDeleteFindsNothing(harness, sessionId) {
  const before = wireErrorsFor(harness, sessionId).length
  assert.deepEqual(await harness.agent.request('session/delete', { sessionId }), {}, 'the client SDK takes -32002 for success')
  assert.deepEqual(wireErrorsFor(harness, sessionId).slice(before), [-32002], `the agent's answer to deleting ${JSON.stringify(sessionId)}`)
}

/**
 * After the delete: gone on disk, from the list, and unknown to load, prompt and delete.
 * @param {ReturnType<typeof startAgent>} harness
 */
async function assertGone(harness, cacheDir, sessionId, cwd) {
  const agent = harness.agent
  assert.deepEqual(filesOf(cacheDir, sessionId), [], 'something of the deleted session is on disk')
  const listed = (await agent.request('session/list', {})).sessions.map((s) => s.sessionId)
  assert.ok(!listed.includes(sessionId), 'session/list shows the deleted session')
  for (const [method, params] of [
    ['session/load', { cwd, mcpServers: [] }],
    ['session/resume', { cwd }],
    ['session/prompt', { prompt: [{ type: 'text', text: 'still there?' }] }],
    ['session/set_mode', { modeId: 'ask' }],
  ]) {
    const unknown = await unknownAnswer(agent, method, params)
    assert.equal(unknown.code, -32002, `${method} of an unknown id: ${unknown.message}`)
    assert.deepEqual(await answerFor(agent, method, { ...params, sessionId }), unknown, method)
  }
  await assertDeleteFindsNothing(harness, '00000000-0000-4000-8000-000000000000')
  await assertDeleteFindsNothing(harness, sessionId)
  assert.deepEqual(filesOf(cacheDir, sessionId), [], 'the refused requests wrote something')
}

test('session/delete while a permission prompt of the turn is open: the turn ends and nothing of the session is written again', async () => {
  const cwd = tempDir()
  fs.writeFileSync(path.join(cwd, 'keep.txt'), 'precious\n')
  const scenario = { steps: [
    // A blob and a background shell's output, so that the session has all three kinds of files.
    { type: 'kvSet', id: 1, data: 'the question, as a blob' },
    { type: 'text', text: 'Starting a shell.' },
    { type: 'exec', id: 2, args: { backgroundShellSpawnArgs: { command: 'echo shell-output; sleep 30', workingDirectory: cwd, toolCallId: 'bg' } } },
    { type: 'toolCallStarted', callId: 'rm', toolCall: { deleteToolCall: { args: { path: path.join(cwd, 'keep.txt') } } } },
    { type: 'exec', id: 3, args: { deleteArgs: { path: 'keep.txt', toolCallId: 'rm' } } },
    { type: 'kvSet', id: 4, data: 'a blob after the delete' },
    { type: 'text', text: 'Done.' },
    { type: 'turnEnded' },
  ] }
  let withdrawn = false
  const agent = startAgent({
    scenario,
    handlers: {
      // The shell is allowed; the delete's prompt stays open until it is withdrawn.
      'session/request_permission': (p, ctx) => {
        if (p.toolCall.kind !== 'delete') return { outcome: { outcome: 'selected', optionId: p.options.find((o) => o.kind === 'allow_once').optionId } }
        return new Promise((resolve) => {
          ctx.signal.addEventListener('abort', () => { withdrawn = true; resolve({ outcome: { outcome: 'cancelled' } }) })
        })
      },
    },
  })
  const { cacheDir } = agent
  let sessionId = ''
  try {
    await agent.agent.request('initialize', { protocolVersion: 1, clientCapabilities: {} })
    ;({ sessionId } = await agent.agent.request('session/new', { cwd, mcpServers: [] }))
    const prompt = agent.agent.request('session/prompt', { sessionId, prompt: [{ type: 'text', text: 'clean up' }] })
    await waitFor(() => agent.permissionRequests.some((r) => r.params.toolCall.kind === 'delete'), 15_000, 'the delete\'s permission prompt')
    const output = path.join(cacheDir, 'terminals', sessionId, '1.txt')
    await waitFor(() => fs.existsSync(output) && fs.readFileSync(output, 'utf8').includes('shell-output'), 10_000, 'the shell\'s output')
    assert.equal(filesOf(cacheDir, sessionId).length, 3, 'the session has its record, blobs and shell output')
    assert.ok(fs.readdirSync(path.join(cacheDir, 'blobs', sessionId)).length > 0)

    assert.deepEqual(await agent.agent.request('session/delete', { sessionId }), {})
    const response = await within(10_000, prompt, 'the prompt\'s answer after session/delete')
    assert.equal(response.stopReason, 'cancelled')
    await waitFor(() => withdrawn, 5000, 'the permission prompt to be withdrawn')
    assert.equal(fs.readFileSync(path.join(cwd, 'keep.txt'), 'utf8'), 'precious\n', 'the file the turn wanted to delete is untouched')
    await assertGone(agent, cacheDir, sessionId, cwd)
  } finally {
    await agent.stop()
  }
  // Nothing came back while the agent shut down either.
  assert.deepEqual(filesOf(cacheDir, sessionId), [])
  assert.deepEqual(fs.readdirSync(path.join(cacheDir, 'sessions')), [])
})

test('session/delete while the turn streams: the answer comes, and the session stays deleted', async () => {
  const cwd = tempDir()
  const scenario = { steps: [
    { type: 'kvSet', id: 1, data: 'the question, as a blob' },
    { type: 'text', text: 'Thinking for a while.' },
    { type: 'sleep', ms: 30_000 },
    { type: 'text', text: 'Too late.' },
    { type: 'turnEnded' },
  ] }
  const agent = startAgent({ scenario })
  const { cacheDir } = agent
  try {
    await agent.agent.request('initialize', { protocolVersion: 1, clientCapabilities: {} })
    const { sessionId } = await agent.agent.request('session/new', { cwd, mcpServers: [] })
    const prompt = agent.agent.request('session/prompt', { sessionId, prompt: [{ type: 'text', text: 'take your time' }] })
    await waitFor(() => agent.updatesFor(sessionId).some((u) => u.sessionUpdate === 'agent_message_chunk'), 15_000, 'the first text')
    // Two deletes at once, and a prompt beside them: one delete deletes, the other finds
    // nothing, and the prompt is refused (busy before the delete, not found after it).
    const [one, two, another] = await Promise.allSettled([
      agent.agent.request('session/delete', { sessionId }),
      agent.agent.request('session/prompt', { sessionId, prompt: [{ type: 'text', text: 'and another thing' }] }),
      agent.agent.request('session/delete', { sessionId }),
    ])
    assert.deepEqual([one, another], [{ status: 'fulfilled', value: {} }, { status: 'fulfilled', value: {} }])
    assert.equal(two.status, 'rejected')
    assert.ok([-32602, -32002].includes(two.reason.code), `the prompt beside the delete: ${two.reason.code} ${two.reason.message}`)
    assert.deepEqual(wireErrorsFor(agent, sessionId).filter((code) => code === -32002).length, two.reason.code === -32002 ? 2 : 1, 'the second delete found nothing')
    const response = await within(10_000, prompt, 'the prompt\'s answer after session/delete')
    assert.equal(response.stopReason, 'cancelled')
    await assertGone(agent, cacheDir, sessionId, cwd)
  } finally {
    await agent.stop()
  }
})

test('session/delete during session/load: the load fails as for an unknown session, and nothing comes back', async () => {
  const cwd = tempDir()
  const cacheDir = tempDir('acp-cache-')
  const scenario = { steps: [
    { type: 'kvSet', id: 1, data: 'the question, as a blob' },
    { type: 'text', text: 'answer' },
    { type: 'turnEnded' },
  ] }
  let sessionId
  const first = startAgent({ scenario, cacheDir })
  try {
    await first.agent.request('initialize', { protocolVersion: 1, clientCapabilities: {} })
    sessionId = (await first.agent.request('session/new', { cwd, mcpServers: [] })).sessionId
    const r = await within(20_000, first.agent.request('session/prompt', { sessionId, prompt: [{ type: 'text', text: 'question' }] }))
    assert.equal(r.stopReason, 'end_turn')
  } finally {
    await first.stop()
  }
  assert.equal(filesOf(cacheDir, sessionId).length, 2, 'the session was saved with its blobs')

  // A new process: the load waits for the account's models, and the delete comes meanwhile.
  const second = startAgent({ scenario, cacheDir })
  try {
    await second.agent.request('initialize', { protocolVersion: 1, clientCapabilities: {} })
    const load = failureOf(second.agent.request('session/load', { sessionId, cwd, mcpServers: [] }))
    assert.deepEqual(await second.agent.request('session/delete', { sessionId }), {})
    const failure = await within(10_000, load, 'the load\'s answer')
    assert.deepEqual({ code: failure.code, message: failure.message.replaceAll(sessionId, '<id>') }, await unknownAnswer(second.agent, 'session/load', { cwd, mcpServers: [] }))
    await assertGone(second, cacheDir, sessionId, cwd)
  } finally {
    await second.stop()
  }
  assert.deepEqual(filesOf(cacheDir, sessionId), [])
})

test('session/delete of an id it never had, or one that names no file, is answered as unknown', async () => {
  const agent = startAgent()
  try {
    await agent.agent.request('initialize', { protocolVersion: 1, clientCapabilities: {} })
    for (const sessionId of ['never-seen', '..', '.', 'a/b', '', 'x'.repeat(200)]) await assertDeleteFindsNothing(agent, sessionId)
    // (Beside them, on Node 22.1 and later, the agent's compile cache: cli/compile-cache.mjs.)
    const written = fs.readdirSync(agent.cacheDir).filter((name) => name !== 'compile-cache').sort()
    assert.deepEqual(written, ['blobs', 'sessions'], 'nothing was written for them')
  } finally {
    await agent.stop()
  }
})
