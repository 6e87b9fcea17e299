// The stdio agent and the 2026 exec and interaction branches, end to end (the real CLI process,
// an ACP client, the embedded backend recording what reached "Cursor"): the pi tools and
// mini-swe-agent's bash behind the permission flow, allowlist prechecks from the session's mode
// and "Always allow" rules, conversation search over saved sessions, MCP resources and state,
// and image generation as a permission prompt.
import { test } from 'node:test'
import assert from 'node:assert/strict'
import fs from 'node:fs'
import path from 'node:path'
import { startAgent, tempDir } from './acp-harness.mjs'
import { within } from './helpers.mjs'

const messagesOf = (records) => records.flatMap((r) => r.messages.map((m) => m.message))
const answer = (records, id) => messagesOf(records).map((m) => m.execClientMessage).find((m) => m && m.id === id && !m.shellStream)
const exec = (id, args) => ({ type: 'exec', id, args })

async function prompt(agent, sessionId, text = 'go') {
  const r = await within(20_000, agent.agent.request('session/prompt', { sessionId, prompt: [{ type: 'text', text }] }))
  assert.equal(r.stopReason, 'end_turn')
}

test('pi tools: reads at once, bash, edit and write behind the permission prompt', async () => {
  const cwd = tempDir()
  fs.writeFileSync(path.join(cwd, 'a.txt'), 'alpha\nbeta\n')
  const scenario = { steps: [
    exec(1, { piReadArgs: { path: 'a.txt' } }),
    exec(2, { piGrepArgs: { pattern: 'beta' } }),
    exec(3, { piBashArgs: { command: 'echo hi' } }),
    exec(4, { piEditArgs: { path: 'a.txt', edits: [{ oldText: 'beta', newText: 'gamma' }] } }),
    exec(5, { piWriteArgs: { path: 'b.txt', content: 'new\n' } }),
    exec(6, { miniSweAgentBashArgs: { command: 'echo swe' } }),
    exec(7, { gitDiffRequest: {} }),
    { type: 'turnEnded' },
  ] }
  const agent = startAgent({
    scenario,
    handlers: { 'session/request_permission': (p) => ({ outcome: { outcome: 'selected', optionId: p.toolCall.title === 'echo swe' ? 'reject-once' : 'allow-once' } }) },
  })
  try {
    await agent.agent.request('initialize', { protocolVersion: 1, clientCapabilities: {} })
    const { sessionId } = await agent.agent.request('session/new', { cwd, mcpServers: [] })
    await prompt(agent, sessionId)
    const asked = agent.permissionRequests.map((r) => [r.params.toolCall.kind, r.params.toolCall.title])
    assert.deepEqual(asked, [['execute', 'echo hi'], ['edit', 'Edit a.txt'], ['edit', 'Write b.txt'], ['execute', 'echo swe']])
    const edit = agent.permissionRequests[1].params.toolCall.content[0]
    assert.deepEqual([edit.oldText, edit.newText], ['alpha\nbeta\n', 'alpha\ngamma\n'], 'the prompt shows the whole edit')
    const { records } = await agent.stop()
    assert.equal(answer(records, 1).piReadResult.success.output, 'alpha\nbeta\n')
    assert.equal(answer(records, 2).piGrepResult.success.output, 'a.txt:2: beta')
    assert.equal(answer(records, 3).piBashResult.success.output, 'hi\n')
    assert.equal(fs.readFileSync(path.join(cwd, 'a.txt'), 'utf8'), 'alpha\ngamma\n')
    assert.equal(fs.readFileSync(path.join(cwd, 'b.txt'), 'utf8'), 'new\n')
    assert.equal(answer(records, 6).miniSweAgentBashResult.rejected.reason, 'User rejected')
    assert.match(messagesOf(records).find((m) => m.execClientControlMessage?.throw?.id === 7)?.execClientControlMessage.throw.error ?? '', /not in a git repository/)
  } finally {
    await agent.stop()
  }
})

test('allowlist prechecks follow the mode and the "Always allow" rules', async () => {
  const cwd = tempDir()
  const precheck = (id, command, names) => exec(id, { shellAllowlistPrecheckArgs: { command, parsingResult: names ? { executableCommands: names.map((name) => ({ name })) } : undefined } })
  const scenario = { turns: [
    [
      precheck(1, 'ls -la'),
      exec(2, { shellStreamArgs: { command: 'ls', workingDirectory: cwd } }),
      precheck(3, 'ls -la /tmp', ['ls']),
      precheck(4, 'ls | rm -rf x', ['ls', 'rm']),
      exec(5, { mcpAllowlistPrecheckArgs: { providerIdentifier: 'calc', toolName: 'add' } }),
      exec(6, { webFetchAllowlistPrecheckArgs: { url: 'https://example.com' } }),
      { type: 'turnEnded' },
    ],
    [precheck(7, 'ls'), { type: 'turnEnded' }],
  ] }
  const agent = startAgent({ scenario, handlers: { 'session/request_permission': () => ({ outcome: { outcome: 'selected', optionId: 'allow-always' } }) } })
  try {
    await agent.agent.request('initialize', { protocolVersion: 1, clientCapabilities: {} })
    const { sessionId } = await agent.agent.request('session/new', { cwd, mcpServers: [] })
    await prompt(agent, sessionId)
    await agent.agent.request('session/set_mode', { sessionId, modeId: 'ask' })
    await prompt(agent, sessionId)
    const { records } = await agent.stop()
    assert.deepEqual(answer(records, 1).shellAllowlistPrecheckResult, {}, 'not yet allowed')
    assert.equal(answer(records, 3).shellAllowlistPrecheckResult.allowlisted, true, '"Always allow" for ls covers it')
    assert.deepEqual(answer(records, 4).shellAllowlistPrecheckResult, {}, 'rm is not covered')
    assert.deepEqual(answer(records, 5).mcpAllowlistPrecheckResult, {})
    assert.deepEqual(answer(records, 6).webFetchAllowlistPrecheckResult, {})
    assert.deepEqual(answer(records, 7).shellAllowlistPrecheckResult, {}, 'nothing runs unasked in ask mode')
  } finally {
    await agent.stop()
  }
})

test('conversation search finds saved sessions by title; MCP resources and state; image generation asks', async () => {
  const cacheDir = tempDir('acp-cache-')
  const fixture = new URL('./fixtures/mcp-calc.mjs', import.meta.url).pathname
  const scenario = { turns: [
    [{ type: 'text', text: 'ok' }, { type: 'turnEnded' }],
    [
      exec(1, { conversationSearchArgs: { query: 'LOGIN bug' } }),
      exec(2, { listMcpResourcesExecArgs: {} }),
      exec(3, { readMcpResourceExecArgs: { server: 'calc', uri: 'calc://help' } }),
      exec(4, { readMcpResourceExecArgs: { server: 'calc', uri: 'calc://nope' } }),
      exec(5, { mcpStateExecArgs: {} }),
      { type: 'interaction', id: 6, query: { generateImageRequestQuery: { args: { description: 'a red cat' }, toolCallId: 'g1' } } },
      { type: 'interaction', id: 7, query: { connectScmRequestQuery: { args: { github: { repository: { owner: 'o', repo: 'r' } } } } } },
      { type: 'turnEnded' },
    ],
  ] }
  const agent = startAgent({ scenario, cacheDir })
  try {
    await agent.agent.request('initialize', { protocolVersion: 1, clientCapabilities: {} })
    const first = await agent.agent.request('session/new', { cwd: tempDir(), mcpServers: [] })
    await prompt(agent, first.sessionId, 'Fix the login bug in auth.ts')
    const second = await agent.agent.request('session/new', { cwd: tempDir(), mcpServers: [{ name: 'calc', command: process.execPath, args: [fixture], env: [] }] })
    await prompt(agent, second.sessionId, 'find it')
    assert.deepEqual(agent.permissionRequests.map((r) => r.params.toolCall.title), ['Generate image: a red cat'])
    const { records } = await agent.stop()
    const search = answer(records, 1).conversationSearchResult.success
    assert.deepEqual(search.hits.map((h) => [h.conversationId, h.title, h.source]), [[first.sessionId, 'Fix the login bug in auth.ts', 'CONVERSATION_SEARCH_SOURCE_LOCAL']])
    assert.deepEqual(answer(records, 2).listMcpResourcesExecResult.success.resources, [{ uri: 'calc://help', name: 'help', mimeType: 'text/plain', server: 'calc' }])
    assert.equal(answer(records, 3).readMcpResourceExecResult.success.text, 'add(a, b) adds.')
    assert.deepEqual(answer(records, 4).readMcpResourceExecResult.notFound, { uri: 'calc://nope' })
    const server = answer(records, 5).mcpStateExecResult.success.servers[0]
    assert.deepEqual([server.serverName, server.status, server.tools.map((t) => t.toolName)], ['calc', 'connected', ['add']])
    const responses = messagesOf(records).map((m) => m.interactionResponse).filter(Boolean)
    assert.deepEqual(responses.find((r) => r.id === 6).generateImageRequestResponse, { approved: { description: 'a red cat' } })
    assert.match(responses.find((r) => r.id === 7).connectScmRequestResponse.rejected.reason, /does not handle/)
  } finally {
    await agent.stop()
  }
})
