// The ACP stdio agent end to end: the real CLI process, driven by the ACP SDK's client side over
// ndjson, against the embedded backend (which records what the agent sent to "Cursor").
import { test } from 'node:test'
import assert from 'node:assert/strict'
import { spawn } from 'node:child_process'
import fs from 'node:fs'
import path from 'node:path'
import { CLI, INIT, assertOnlyJsonRpc, startAgent, tempDir } from './acp-harness.mjs'
import { within } from './helpers.mjs'

const messagesOf = (records) => records.flatMap((r) => r.messages.map((m) => m.message))
const execReplies = (records, id) => messagesOf(records).map((m) => m.execClientMessage).filter((m) => m && m.id === id)
const textOf = (updates, kind = 'agent_message_chunk') =>
  updates.filter((u) => u.sessionUpdate === kind).map((u) => u.content.text).join('')

async function waitFor(predicate, ms = 5000, what = 'condition') {
  const deadline = Date.now() + ms
  while (!predicate()) {
    if (Date.now() > deadline) throw new Error(`${what} not reached within ${ms} ms`)
    await new Promise((r) => setTimeout(r, 20))
  }
}

function mainScenario(cwd) {
  return { steps: [
    { type: 'text', text: 'Reading.' },
    { type: 'toolCallStarted', callId: 'c1', toolCall: { readToolCall: { args: { path: path.join(cwd, 'a.txt') } } } },
    { type: 'exec', id: 1, args: { readArgs: { path: 'a.txt', toolCallId: 'c1' } } },
    { type: 'toolCallCompleted', callId: 'c1', toolCall: { readToolCall: { args: { path: path.join(cwd, 'a.txt') }, result: { success: {} } } } },
    { type: 'toolCallStarted', callId: 'c2', toolCall: { editToolCall: { args: { path: path.join(cwd, 'out/b.txt') } } } },
    { type: 'exec', id: 2, args: { writeArgs: { path: 'out/b.txt', fileText: 'new\n', toolCallId: 'c2' } } },
    { type: 'toolCallStarted', callId: 'c3', toolCall: { shellToolCall: { args: { command: 'echo one; echo two >&2' } } } },
    { type: 'exec', id: 3, args: { shellStreamArgs: { command: 'echo one; echo two >&2', workingDirectory: cwd, toolCallId: 'c3' } } },
    { type: 'toolCallCompleted', callId: 'c3', toolCall: { shellToolCall: { args: { command: 'echo one; echo two >&2' }, result: { success: { exitCode: 0 } } } } },
    { type: 'text', text: ' Done.' },
    { type: 'turnEnded', inputTokens: 5, outputTokens: 7 },
  ] }
}

test('initialize, new session and a prompt with a read, an approved write and a streamed shell', async () => {
  const cwd = tempDir()
  fs.writeFileSync(path.join(cwd, 'a.txt'), 'on disk\n')
  const writes = []
  const reads = []
  const agent = startAgent({
    scenario: mainScenario(cwd),
    handlers: {
      'fs/read_text_file': (p) => { reads.push(p); return { content: 'unsaved buffer\n' } },
      'fs/write_text_file': (p) => {
        writes.push(p)
        fs.mkdirSync(path.dirname(p.path), { recursive: true })
        fs.writeFileSync(p.path, p.content)
        return {}
      },
    },
  })
  try {
    const init = await agent.agent.request('initialize', { ...INIT, clientCapabilities: { ...INIT.clientCapabilities, _meta: { terminal_output: true } } })
    assert.equal(init.protocolVersion, 1)
    assert.equal(init.agentCapabilities.loadSession, true)
    assert.deepEqual(init.agentCapabilities.sessionCapabilities, { list: {}, resume: {}, close: {}, delete: {}, additionalDirectories: {}, fork: {} })
    assert.ok(init.authMethods.some((m) => m.id === 'cursor-api-key'))

    const created = await agent.agent.request('session/new', { cwd, mcpServers: [] })
    const sid = created.sessionId
    assert.equal(agent.updatesFor(sid).length, 0, 'no update before the session/new response')
    assert.deepEqual(created.modes.availableModes.map((m) => m.id), ['agent', 'plan', 'ask'])
    assert.deepEqual(created.configOptions.map((o) => [o.id, o.category, o.currentValue]), [['mode', 'mode', 'agent'], ['model', 'model', 'default'], ['approval', '_approval', 'ask']])
    await waitFor(() => agent.updatesFor(sid).some((u) => u.sessionUpdate === 'available_commands_update'), 3000, 'available commands')

    const response = await within(20_000, agent.agent.request('session/prompt', { sessionId: sid, prompt: [{ type: 'text', text: 'do the things' }] }), 'prompt')
    assert.equal(response.stopReason, 'end_turn')
    assert.equal(response._meta.cursor.usage.inputTokens, 5)
    const updates = agent.updatesFor(sid)
    assert.equal(textOf(updates), 'Reading. Done.')
    assert.equal(updates.find((u) => u.sessionUpdate === 'session_info_update').title, 'do the things')

    // Only the write and the shell asked; each after its tool call reached the client.
    const asked = agent.permissionRequests.map((r) => r.params.toolCall)
    assert.deepEqual(asked.map((t) => t.toolCallId), ['c2', 'c3'])
    assert.equal(asked[0].kind, 'edit')
    assert.equal(asked[0].title, 'Write out/b.txt')
    assert.deepEqual(asked[0].content, [{ type: 'diff', path: path.join(cwd, 'out/b.txt'), oldText: null, newText: 'new\n' }])
    assert.equal(asked[1].kind, 'execute')
    assert.equal(asked[1].title, 'echo one; echo two >&2')
    for (const request of agent.permissionRequests) {
      const announcedAt = agent.updates.findIndex((u) => u.update.sessionUpdate === 'tool_call' && u.update.toolCallId === request.params.toolCall.toolCallId)
      assert.ok(announcedAt >= 0 && announcedAt < request.at, `tool_call ${request.params.toolCall.toolCallId} precedes its permission request`)
    }
    const shellCard = updates.find((u) => u.sessionUpdate === 'tool_call' && u.toolCallId === 'c3')
    assert.equal(shellCard.content[0].type, 'terminal', 'a display terminal for a client that renders one')

    // The editor read and wrote the files.
    assert.deepEqual(reads, [{ sessionId: sid, path: path.join(cwd, 'a.txt') }])
    assert.deepEqual(writes, [{ sessionId: sid, path: path.join(cwd, 'out/b.txt'), content: 'new\n' }])

    const { records } = await agent.stop()
    assert.equal(execReplies(records, 1)[0].readResult.success.content, 'unsaved buffer\n', 'the unsaved buffer went to the server')
    assert.equal(execReplies(records, 2)[0].writeResult.success.linesCreated, 1)
    const shell = execReplies(records, 3)
    assert.ok(shell.some((m) => m.shellStream?.stdout?.data === 'one\n'), JSON.stringify(shell))
    assert.ok(shell.some((m) => m.shellStream?.stderr?.data === 'two\n'))
    assert.equal(shell.at(-1).shellResult.success.stdout, 'one\n')
    assertOnlyJsonRpc(agent.stdout(), assert)
  } finally {
    await agent.stop()
  }
})

test('a rejected write fails its tool call and the turn goes on; local writes without fs capability', async () => {
  const cwd = tempDir()
  fs.writeFileSync(path.join(cwd, 'a.txt'), 'on disk\n')
  const agent = startAgent({
    scenario: mainScenario(cwd),
    handlers: {
      'session/request_permission': (p) => ({ outcome: { outcome: 'selected', optionId: p.toolCall.kind === 'edit' ? 'reject-once' : 'allow-once' } }),
    },
  })
  try {
    await agent.agent.request('initialize', { protocolVersion: 1, clientCapabilities: {} })
    const { sessionId } = await agent.agent.request('session/new', { cwd, mcpServers: [] })
    const response = await within(20_000, agent.agent.request('session/prompt', { sessionId, prompt: [{ type: 'text', text: 'go' }] }))
    assert.equal(response.stopReason, 'end_turn', 'a rejection is not a refusal')
    const updates = agent.updatesFor(sessionId)
    const failed = updates.find((u) => u.sessionUpdate === 'tool_call_update' && u.toolCallId === 'c2' && u.status === 'failed')
    assert.ok(failed, 'the rejected write is marked failed')
    assert.ok(textOf(updates).endsWith(' Done.'), 'the turn went on after the rejection')
    assert.equal(fs.existsSync(path.join(cwd, 'out/b.txt')), false)
    const { records } = await agent.stop()
    assert.equal(execReplies(records, 2)[0].writeResult.rejected.reason, 'User rejected')
    // Without fs capabilities the read came from disk.
    assert.equal(execReplies(records, 1)[0].readResult.success.content, 'on disk\n')
  } finally {
    await agent.stop()
  }
})

test('always allow is remembered for the session; a local write lands on disk', async () => {
  const cwd = tempDir()
  const scenario = { steps: [
    { type: 'exec', id: 1, args: { shellStreamArgs: { command: 'echo first', toolCallId: 's1' } } },
    { type: 'exec', id: 2, args: { shellStreamArgs: { command: 'echo second', toolCallId: 's2' } } },
    { type: 'exec', id: 3, args: { writeArgs: { path: 'w.txt', fileText: 'local\n', toolCallId: 'w1' } } },
    { type: 'turnEnded' },
  ] }
  const agent = startAgent({
    scenario,
    handlers: { 'session/request_permission': (p) => ({ outcome: { outcome: 'selected', optionId: p.toolCall.kind === 'execute' ? 'allow-always' : 'allow-once' } }) },
  })
  try {
    await agent.agent.request('initialize', { protocolVersion: 1, clientCapabilities: {} })
    const { sessionId } = await agent.agent.request('session/new', { cwd, mcpServers: [] })
    const response = await within(20_000, agent.agent.request('session/prompt', { sessionId, prompt: [{ type: 'text', text: 'go' }] }))
    assert.equal(response.stopReason, 'end_turn')
    // The execs came without display blocks: the agent announced its own cards, then settled them.
    const asked = agent.permissionRequests.map((r) => r.params.toolCall)
    assert.deepEqual(asked.map((t) => t.kind), ['execute', 'edit'], 'echo was allowed always: asked once')
    const updates = agent.updatesFor(sessionId)
    for (const t of asked) {
      assert.ok(updates.some((u) => u.sessionUpdate === 'tool_call' && u.toolCallId === t.toolCallId))
      assert.ok(updates.some((u) => u.sessionUpdate === 'tool_call_update' && u.toolCallId === t.toolCallId && u.status === 'completed'), `${t.toolCallId} completed`)
    }
    assert.equal(fs.readFileSync(path.join(cwd, 'w.txt'), 'utf8'), 'local\n')
  } finally {
    await agent.stop()
  }
})

test('cancel during a shell: cancelled within bounded time and the process is gone', async () => {
  const cwd = tempDir()
  const pidfile = path.join(cwd, 'pid')
  const command = `echo $$ > ${pidfile}; sleep 30`
  const scenario = { steps: [
    { type: 'toolCallStarted', callId: 'sh', toolCall: { shellToolCall: { args: { command } } } },
    { type: 'exec', id: 1, args: { shellStreamArgs: { command, toolCallId: 'sh' } } },
    { type: 'turnEnded' },
  ] }
  const agent = startAgent({ scenario })
  try {
    await agent.agent.request('initialize', { protocolVersion: 1, clientCapabilities: {} })
    const { sessionId } = await agent.agent.request('session/new', { cwd, mcpServers: [] })
    const prompt = agent.agent.request('session/prompt', { sessionId, prompt: [{ type: 'text', text: 'run it' }] })
    await waitFor(() => fs.existsSync(pidfile) && fs.readFileSync(pidfile, 'utf8').trim(), 10_000, 'the shell to start')
    const pid = Number(fs.readFileSync(pidfile, 'utf8'))
    const started = Date.now()
    await agent.agent.notify('session/cancel', { sessionId })
    const response = await within(5000, prompt, 'cancelled prompt')
    assert.equal(response.stopReason, 'cancelled')
    assert.ok(Date.now() - started < 3000, `cancel took ${Date.now() - started} ms`)
    const gone = () => { try { process.kill(pid, 0); return false } catch { return true } }
    await waitFor(gone, 5000, 'the shell to be killed')
    const card = agent.updatesFor(sessionId).filter((u) => u.toolCallId === 'sh').at(-1)
    assert.equal(card.status, 'failed', 'the interrupted tool call does not spin forever')
  } finally {
    await agent.stop()
  }
})

test('cancel during a permission request: the request is withdrawn and the turn is cancelled', async () => {
  const cwd = tempDir()
  const scenario = { steps: [
    { type: 'toolCallStarted', callId: 'rm', toolCall: { deleteToolCall: { args: { path: path.join(cwd, 'keep.txt') } } } },
    { type: 'exec', id: 1, args: { deleteArgs: { path: 'keep.txt', toolCallId: 'rm' } } },
    { type: 'turnEnded' },
  ] }
  fs.writeFileSync(path.join(cwd, 'keep.txt'), 'precious\n')
  let withdrawn = false
  const agent = startAgent({
    scenario,
    handlers: {
      // An editor showing the prompt until it is withdrawn ($/cancel_request) or answered.
      'session/request_permission': (_p, ctx) => new Promise((resolve) => {
        ctx.signal.addEventListener('abort', () => { withdrawn = true; resolve({ outcome: { outcome: 'cancelled' } }) })
      }),
    },
  })
  try {
    await agent.agent.request('initialize', { protocolVersion: 1, clientCapabilities: {} })
    const { sessionId } = await agent.agent.request('session/new', { cwd, mcpServers: [] })
    const prompt = agent.agent.request('session/prompt', { sessionId, prompt: [{ type: 'text', text: 'clean up' }] })
    await waitFor(() => agent.permissionRequests.length === 1, 10_000, 'the permission request')
    assert.equal(agent.permissionRequests[0].params.toolCall.kind, 'delete')
    assert.deepEqual(agent.permissionRequests[0].params.toolCall.content, [{ type: 'diff', path: path.join(cwd, 'keep.txt'), oldText: 'precious\n', newText: '' }])
    const started = Date.now()
    await agent.agent.notify('session/cancel', { sessionId })
    const response = await within(5000, prompt, 'cancelled prompt')
    assert.equal(response.stopReason, 'cancelled')
    assert.ok(Date.now() - started < 3000)
    await waitFor(() => withdrawn, 2000, 'the permission request to be withdrawn')
    assert.equal(fs.readFileSync(path.join(cwd, 'keep.txt'), 'utf8'), 'precious\n')
  } finally {
    await agent.stop()
  }
})

test('sessions are listed, loaded with their history replayed first, and resumed without it', async () => {
  const cwd = tempDir()
  const cacheDir = tempDir('acp-cache-')
  const ld = (n, bytes) => Buffer.concat([Buffer.from([(n << 3) | 2, bytes.length]), Buffer.from(bytes)])
  const turn = ld(1, Buffer.concat([ld(1, ld(1, Buffer.from('first question'))), ld(2, ld(1, ld(1, Buffer.from('first answer'))))]))
  const scenario = { steps: [
    // A blob, as the server stores the conversation's prompts and results with the client.
    { type: 'kvSet', id: 1, data: 'first question, as a blob' },
    { type: 'text', text: 'first answer' },
    { type: 'checkpoint', state: { turns: [turn.toString('base64')] } },
    { type: 'turnEnded' },
  ] }
  const first = startAgent({ scenario, cacheDir })
  let sessionId
  try {
    await first.agent.request('initialize', { protocolVersion: 1, clientCapabilities: {} })
    sessionId = (await first.agent.request('session/new', { cwd, mcpServers: [] })).sessionId
    await first.agent.request('session/set_config_option', { sessionId, configId: 'mode', value: 'plan' })
    const r = await within(20_000, first.agent.request('session/prompt', { sessionId, prompt: [{ type: 'text', text: 'first question' }] }))
    assert.equal(r.stopReason, 'end_turn')
  } finally {
    await first.stop()
  }

  // A new agent process on the same cache: the editor reopens its history.
  const second = startAgent({ scenario, cacheDir })
  try {
    await second.agent.request('initialize', { protocolVersion: 1, clientCapabilities: {} })
    const listed = await second.agent.request('session/list', {})
    assert.deepEqual(listed.sessions.map((s) => [s.sessionId, s.cwd, s.title]), [[sessionId, cwd, 'first question']])
    assert.ok(!Number.isNaN(Date.parse(listed.sessions[0].updatedAt)))
    assert.deepEqual((await second.agent.request('session/list', { cwd: '/elsewhere' })).sessions, [])

    const loaded = await second.agent.request('session/load', { sessionId, cwd, mcpServers: [] })
    const replayed = second.updatesFor(sessionId)
    assert.equal(textOf(replayed, 'user_message_chunk'), 'first question', 'history is replayed before the response')
    assert.equal(textOf(replayed), 'first answer')
    assert.equal(loaded.modes.currentModeId, 'plan', 'the mode survived the restart')

    const before = second.updatesFor(sessionId).filter((u) => u.sessionUpdate !== 'available_commands_update').length
    const resumed = await second.agent.request('session/resume', { sessionId, cwd })
    assert.equal(resumed.modes.currentModeId, 'plan')
    // A later request's answer comes after anything the resume would have written.
    await second.agent.request('session/list', {})
    assert.equal(second.updatesFor(sessionId).filter((u) => u.sessionUpdate !== 'available_commands_update').length, before, 'resume does not replay')

    // The conversation continues where it was: the next run request carries the checkpoint.
    const r = await within(20_000, second.agent.request('session/prompt', { sessionId, prompt: [{ type: 'text', text: 'second' }] }))
    assert.equal(r.stopReason, 'end_turn')
    await second.agent.request('session/close', { sessionId })
    const blobs = path.join(cacheDir, 'blobs', sessionId)
    assert.ok(fs.readdirSync(blobs).length > 0, 'the conversation kept blobs')
    await second.agent.request('session/delete', { sessionId })
    assert.deepEqual((await second.agent.request('session/list', {})).sessions, [])
    assert.ok(!fs.existsSync(blobs), 'and they went with it')
    const { records } = await second.stop()
    const run = messagesOf(records).find((m) => m.runRequest)?.runRequest
    assert.ok(run?.conversationState, 'the loaded checkpoint was sent back')
  } finally {
    await second.stop()
  }
})

test('config options: set_config_option returns the full list, set_mode announces the change', async () => {
  const agent = startAgent({ args: ['--models', 'fast-model,big-model'] })
  try {
    await agent.agent.request('initialize', { protocolVersion: 1, clientCapabilities: {} })
    const { sessionId, configOptions } = await agent.agent.request('session/new', { cwd: tempDir(), mcpServers: [] })
    // Auto, the account's models (the embedded backend's two) with their names, then --models.
    assert.deepEqual(configOptions[1].options.map((o) => [o.value, o.name]), [
      ['default', 'Auto'], ['embedded-fast', 'Embedded Fast'], ['embedded-thinking', 'Embedded Thinking'], ['fast-model', 'fast-model'], ['big-model', 'big-model'],
    ])
    const set = await agent.agent.request('session/set_config_option', { sessionId, configId: 'model', value: 'big-model' })
    assert.deepEqual(set.configOptions.map((o) => [o.id, o.currentValue]), [['mode', 'agent'], ['model', 'big-model'], ['approval', 'ask']])
    await agent.agent.request('session/set_mode', { sessionId, modeId: 'ask' })
    await waitFor(() => agent.updatesFor(sessionId).some((u) => u.sessionUpdate === 'current_mode_update' && u.currentModeId === 'ask'))
    const update = agent.updatesFor(sessionId).find((u) => u.sessionUpdate === 'config_option_update')
    assert.equal(update.configOptions[0].currentValue, 'ask')
    await assert.rejects(agent.agent.request('session/set_mode', { sessionId, modeId: 'yolo' }), (e) => e.code === -32602)
  } finally {
    await agent.stop()
  }
})

test('a switch to a mode the agent does not offer is refused, and the session keeps its mode', async () => {
  const turns = { turns: [
    [{ type: 'interaction', id: 1, query: { switchModeRequestQuery: { args: { targetModeId: 'debug' } } } }, { type: 'turnEnded' }],
    [{ type: 'turnEnded' }],
  ] }
  const agent = startAgent({ scenario: turns })
  try {
    await agent.agent.request('initialize', { protocolVersion: 1, clientCapabilities: {} })
    const { sessionId } = await agent.agent.request('session/new', { cwd: tempDir(), mcpServers: [] })
    for (const text of ['one', 'two']) {
      const r = await within(20_000, agent.agent.request('session/prompt', { sessionId, prompt: [{ type: 'text', text }] }))
      assert.equal(r.stopReason, 'end_turn')
    }
    assert.ok(!agent.updatesFor(sessionId).some((u) => u.sessionUpdate === 'current_mode_update'), 'the picker did not move')
    const { records } = await agent.stop()
    const answer = messagesOf(records).find((m) => m.interactionResponse)?.interactionResponse
    assert.ok(answer?.switchModeRequestResponse?.rejected, JSON.stringify(answer))
    const runs = messagesOf(records).filter((m) => m.runRequest).map((m) => m.runRequest.action.userMessageAction.userMessage.mode)
    assert.deepEqual(runs, ['AGENT_MODE_AGENT', 'AGENT_MODE_AGENT'], 'the next turn runs in the mode the editor shows')
  } finally {
    await agent.stop()
  }
})

test('interaction queries: a mode switch asks with one option of each kind; questions without forms are asked in the thread', async () => {
  const scenario = { steps: [
    { type: 'interaction', id: 1, query: { switchModeRequestQuery: { args: { targetModeId: 'plan', explanation: 'Planning first', toolCallId: 'sw' } } } },
    { type: 'interaction', id: 2, query: { askQuestionInteractionQuery: { toolCallId: 'q', args: { title: 'Pick', questions: [{ id: 'db', prompt: 'Which database?', options: [{ id: 'pg', label: 'Postgres' }, { id: 'sqlite', label: 'SQLite' }] }] } } } },
    { type: 'turnEnded' },
  ] }
  const agent = startAgent({
    scenario,
    handlers: { 'session/request_permission': (p) => ({ outcome: { outcome: 'selected', optionId: p.options.find((o) => o.kind === 'allow_once').optionId } }) },
  })
  try {
    await agent.agent.request('initialize', { protocolVersion: 1, clientCapabilities: {} })
    const { sessionId } = await agent.agent.request('session/new', { cwd: tempDir(), mcpServers: [] })
    const r = await within(20_000, agent.agent.request('session/prompt', { sessionId, prompt: [{ type: 'text', text: 'go' }] }))
    assert.equal(r.stopReason, 'end_turn')
    assert.equal(agent.permissionRequests.length, 1, 'the question is not a permission prompt')
    const switchPrompt = agent.permissionRequests[0].params
    assert.equal(switchPrompt.toolCall.kind, 'switch_mode')
    assert.equal(switchPrompt.toolCall.title, 'Switch to plan mode')
    assert.deepEqual(switchPrompt.options.map((o) => [o.kind, o.name]), [['allow_once', 'Yes, switch to plan'], ['reject_once', 'No, stay in agent']])
    const updates = agent.updatesFor(sessionId)
    assert.ok(updates.some((u) => u.sessionUpdate === 'current_mode_update' && u.currentModeId === 'plan'))
    assert.match(textOf(updates), /\*\*Pick\*\* — please answer in your next message:\n1\. Which database\? \(one of: Postgres, SQLite\)/)
    const { records } = await agent.stop()
    const answers = messagesOf(records).filter((m) => m.interactionResponse).map((m) => m.interactionResponse)
    assert.ok(answers[0].switchModeRequestResponse.approved, JSON.stringify(answers[0]))
    assert.match(answers[1].askQuestionInteractionResponse.result.rejected.reason, /next message/)
  } finally {
    await agent.stop()
  }
})

test('bad params get JSON-RPC errors and the agent stays up', async () => {
  const agent = startAgent({})
  try {
    await agent.agent.request('initialize', { protocolVersion: 1, clientCapabilities: {} })
    await assert.rejects(agent.agent.request('session/new', { cwd: 'relative/path', mcpServers: [] }), (e) => e.code === -32602)
    await assert.rejects(agent.agent.request('session/prompt', { sessionId: 'nope', prompt: [{ type: 'text', text: 'x' }] }), (e) => e.code === -32002)
    await assert.rejects(agent.agent.request('session/load', { sessionId: '../../etc/passwd', cwd: '/tmp', mcpServers: [] }), (e) => e.code === -32002)
    await assert.rejects(agent.agent.request('session/prompt', { sessionId: 'x' }), (e) => e.code === -32602)
    // The embedded backend needs no credentials: any advertised method succeeds; an unknown one is bad params.
    await agent.agent.request('authenticate', { methodId: 'cursor-api-key' })
    await assert.rejects(agent.agent.request('authenticate', { methodId: 'no-such-method' }), (e) => e.code === -32602)
    // A cancel for an unknown session is a notification: ignored.
    await agent.agent.notify('session/cancel', { sessionId: 'nope' })
    const { sessionId } = await agent.agent.request('session/new', { cwd: tempDir(), mcpServers: [] })
    await assert.rejects(agent.agent.request('session/set_config_option', { sessionId, configId: 'colour', value: 'red' }), (e) => e.code === -32602)
    assert.equal(agent.child.exitCode, null, 'still running')
    assertOnlyJsonRpc(agent.stdout(), assert)
  } finally {
    await agent.stop()
  }
})

test('credentials: auth_required without them on Cursor, an API key exchanged for a token that never leaks', async () => {
  const noCreds = startAgent({ embedded: false, args: ['--base-url', 'https://api2.cursor.sh'] })
  try {
    await noCreds.agent.request('initialize', { protocolVersion: 1, clientCapabilities: {} })
    await assert.rejects(noCreds.agent.request('session/new', { cwd: tempDir(), mcpServers: [] }), (e) => e.code === -32000)
  } finally {
    await noCreds.stop()
  }

  const key = 'sk-test-very-secret-123'
  const agent = startAgent({ scenario: { steps: [{ type: 'turnEnded' }] }, env: { CURSOR_API_KEY: key }, args: ['--log-level', 'debug'] })
  try {
    await agent.agent.request('initialize', { protocolVersion: 1, clientCapabilities: {} })
    await agent.agent.request('authenticate', { methodId: 'cursor-api-key' })
    const { sessionId } = await agent.agent.request('session/new', { cwd: tempDir(), mcpServers: [] })
    await within(20_000, agent.agent.request('session/prompt', { sessionId, prompt: [{ type: 'text', text: 'hi' }] }))
    const { records, recordText } = await agent.stop()
    // The token the backend issued for the key was sent (the backend recognises it), not the key.
    assert.match(records[0].headers.authorization, /^Bearer <redacted: access token \d+ issued by this backend>$/)
    assert.ok(!recordText.includes(key), 'the key is not in the --record file')
    assert.doesNotMatch(recordText, /Bearer ey/, 'no token is in the --record file')
    assert.ok(!agent.stderr().includes(key) && !agent.stdout().includes(key), 'nor logged')
  } finally {
    await agent.stop()
  }
})

test('garbage on stdin gets a parse error and the agent keeps serving', async () => {
  const child = spawn(process.execPath, [CLI, '--embedded', '--cache-dir', tempDir('acp-cache-')], { stdio: ['pipe', 'pipe', 'pipe'] })
  let out = ''
  child.stdout.on('data', (c) => { out += c })
  child.stdin.write('this is not json\n')
  child.stdin.write(`${JSON.stringify({ jsonrpc: '2.0', id: 7, method: 'initialize', params: { protocolVersion: 1, clientCapabilities: {} } })}\n`)
  await waitFor(() => out.includes('"id":7'), 10_000, 'the initialize response')
  const lines = out.trim().split('\n').map((l) => JSON.parse(l))
  assert.ok(lines.some((m) => m.error?.code === -32700), out)
  assert.equal(lines.find((m) => m.id === 7).result.protocolVersion, 1)
  child.stdin.end()
  await new Promise((r) => child.on('exit', r))
})

test('MCP servers from session/new: tools advertised to Cursor and called behind a permission prompt', async () => {
  const fixture = new URL('./fixtures/mcp-calc.mjs', import.meta.url).pathname
  const scenario = { steps: [
    { type: 'toolCallStarted', callId: 'm1', toolCall: { mcpToolCall: { args: { name: 'calc-add', providerIdentifier: 'calc', toolName: 'add' } } } },
    // The model sends `b` as JSON text: coerced to the number the schema asks for.
    { type: 'exec', id: 1, args: { mcpArgs: { name: 'calc-add', providerIdentifier: 'calc', toolName: 'add', args: { a: 2, b: '3' }, toolCallId: 'm1' } } },
    { type: 'exec', id: 2, args: { mcpArgs: { name: 'calc-mul', providerIdentifier: 'calc', toolName: 'mul', args: {} } } },
    { type: 'exec', id: 3, args: { requestContextArgs: {} } },
    { type: 'turnEnded' },
  ] }
  const agent = startAgent({ scenario })
  try {
    const init = await agent.agent.request('initialize', { protocolVersion: 1, clientCapabilities: {} })
    assert.deepEqual(init.agentCapabilities.mcpCapabilities, { http: true, sse: true })
    const { sessionId } = await agent.agent.request('session/new', { cwd: tempDir(), mcpServers: [{ name: 'calc', command: process.execPath, args: [fixture], env: [] }] })
    const r = await within(20_000, agent.agent.request('session/prompt', { sessionId, prompt: [{ type: 'text', text: 'add' }] }))
    assert.equal(r.stopReason, 'end_turn')
    assert.deepEqual(agent.permissionRequests.map((p) => [p.params.toolCall.toolCallId, p.params.toolCall.title]), [['m1', 'calc: add']])
    const { records } = await agent.stop()
    assert.deepEqual(execReplies(records, 1)[0].mcpResult.success.content, [{ text: { text: '5' } }])
    assert.deepEqual(execReplies(records, 2)[0].mcpResult.toolNotFound, { name: 'mul', availableTools: ['add'] })
    const context = execReplies(records, 3)[0].requestContextResult.success.requestContext
    assert.deepEqual(context.tools.map((t) => [t.name, t.providerIdentifier, t.toolName]), [['calc-add', 'calc', 'add']])
    assert.equal(context.tools[0].inputSchema.properties.a.type, 'number')
    assert.equal(context.mcpInstructions[0].instructions, 'Use add for sums.')
  } finally {
    await agent.stop()
  }
})

test('questions go to elicitation forms when offered; an accepted plan switches to agent mode', async () => {
  const scenario = { steps: [
    { type: 'interaction', id: 1, query: { askQuestionInteractionQuery: { args: { title: 'Setup', questions: [
      { id: 'db', prompt: 'Which database?', options: [{ id: 'pg', label: 'Postgres' }, { id: 'sqlite', label: 'SQLite' }] },
      { id: 'extras', prompt: 'Extras?', allowMultiple: true, options: [{ id: 'auth', label: 'Auth' }, { id: 'ci', label: 'CI' }] },
    ] } } } },
    { type: 'interaction', id: 2, query: { createPlanRequestQuery: { toolCallId: 'p1', args: { name: 'Refactor', plan: '1. split\n2. test' } } } },
    { type: 'turnEnded' },
  ] }
  const forms = []
  const agent = startAgent({
    scenario,
    handlers: {
      'elicitation/create': (p) => { forms.push(p); return { action: 'accept', content: { db: 'pg', extras: ['auth', 'ci'] } } },
      'session/request_permission': (p) => ({ outcome: { outcome: 'selected', optionId: p.options[0].optionId } }),
    },
  })
  try {
    await agent.agent.request('initialize', { protocolVersion: 1, clientCapabilities: { elicitation: { form: {} } } })
    const { sessionId } = await agent.agent.request('session/new', { cwd: tempDir(), mcpServers: [] })
    await agent.agent.request('session/set_mode', { sessionId, modeId: 'plan' })
    const r = await within(20_000, agent.agent.request('session/prompt', { sessionId, prompt: [{ type: 'text', text: 'plan it' }] }))
    assert.equal(r.stopReason, 'end_turn')
    assert.equal(forms.length, 1)
    assert.equal(forms[0].mode, 'form')
    assert.equal(forms[0].message, 'Setup')
    assert.deepEqual(forms[0].requestedSchema.properties.db.oneOf, [{ const: 'pg', title: 'Postgres' }, { const: 'sqlite', title: 'SQLite' }])
    assert.equal(forms[0].requestedSchema.properties.extras.type, 'array')
    const plan = agent.permissionRequests[0].params
    assert.equal(plan.toolCall.title, 'Plan: Refactor')
    assert.equal(plan.options[0].name, 'Yes, implement this plan')
    const modes = agent.updatesFor(sessionId).filter((u) => u.sessionUpdate === 'current_mode_update').map((u) => u.currentModeId)
    assert.deepEqual(modes, ['plan', 'agent'])
    const { records } = await agent.stop()
    const answers = messagesOf(records).filter((m) => m.interactionResponse).map((m) => m.interactionResponse)
    assert.deepEqual(answers[0].askQuestionInteractionResponse.result.success.answers, [
      { questionId: 'db', selectedOptionIds: ['pg'] },
      { questionId: 'extras', selectedOptionIds: ['auth', 'ci'] },
    ])
    assert.ok(answers[1].createPlanRequestResponse.result.success)
  } finally {
    await agent.stop()
  }
})

test('--transport: auto by default (h2 on a backend that speaks it, RunSSE on one that does not), sse or h2 when asked', async () => {
  const turn = { steps: [{ type: 'text', text: 'hi' }, { type: 'turnEnded' }] }
  const cases = [
    [[], turn, 'h2'],
    [[], { ...turn, http1Only: true }, 'sse'],
    [['--transport', 'sse'], turn, 'sse'],
    [['--transport', 'h2'], turn, 'h2'],
  ]
  for (const [args, scenario, used] of cases) {
    const agent = startAgent({ args, scenario })
    let records
    try {
      await agent.agent.request('initialize', INIT)
      const { sessionId } = await agent.agent.request('session/new', { cwd: tempDir(), mcpServers: [] })
      const response = await within(10_000, agent.agent.request('session/prompt', { sessionId, prompt: [{ type: 'text', text: 'hello' }] }), 'prompt')
      assert.equal(response.stopReason, 'end_turn', `${args} ${used}`)
      assert.equal(textOf(agent.updatesFor(sessionId)), 'hi')
    } finally {
      ({ records } = await agent.stop())
    }
    assert.deepEqual(records.map((r) => r.transport), [used], `${JSON.stringify(args)}, http1Only ${!!scenario.http1Only}`)
  }
  const bad = spawn(process.execPath, [CLI, '--transport', 'h3'], { stdio: ['ignore', 'ignore', 'pipe'] })
  let stderr = ''
  bad.stderr.on('data', (c) => { stderr += c })
  const code = await new Promise((resolve) => bad.on('exit', resolve))
  assert.equal(code, 2)
  assert.match(stderr, /transport must be 'auto', 'sse' or 'h2', got "h3"/)
})
