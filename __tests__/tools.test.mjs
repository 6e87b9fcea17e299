// The built-in local tools from JavaScript: the LocalTools class (direct calls, delegation from
// the exec callback with streaming and abort) and the client's `tools` option answering what the
// exec callback leaves unhandled. Real files, real processes, real sockets.
import { test } from 'node:test'
import assert from 'node:assert/strict'
import fs from 'node:fs'
import os from 'node:os'
import path from 'node:path'
import { addon, setup, drain, recordsWhen, within } from './helpers.mjs'
import { tempDir } from './tmp.mjs'
import { startAgent } from './acp-harness.mjs'

const { LocalTools } = addon

function workspace() {
  const dir = tempDir('acp-tools-')
  fs.writeFileSync(path.join(dir, 'a.txt'), 'one\ntwo\nthree\n')
  return dir
}

function alive(pid) {
  try {
    const stat = fs.readFileSync(`/proc/${pid}/stat`, 'utf8')
    return !/\)\s+Z/.test(stat)
  } catch {
    return false
  }
}

async function waitForFile(file, ms = 5000) {
  const deadline = Date.now() + ms
  while (Date.now() < deadline) {
    if (fs.existsSync(file) && fs.readFileSync(file, 'utf8').trim()) return fs.readFileSync(file, 'utf8').trim()
    await new Promise((r) => setTimeout(r, 20))
  }
  throw new Error(`${file} never appeared`)
}

const execMessages = (records, id) =>
  records[0].messages.map((m) => m.message.execClientMessage).filter((m) => m && m.id === id)

test('LocalTools answers exec requests directly, confined to its roots', async () => {
  const dir = workspace()
  const tools = new LocalTools({ roots: [dir] })
  assert.deepEqual(tools.roots.slice(0, 1), [dir])
  assert.equal(LocalTools.handles('read'), true)
  assert.equal(LocalTools.handles('mcp'), false)
  const read = await tools.run({ kind: 'read', id: 1, execId: 'e', args: { path: 'a.txt', offset: 2, limit: 1 } })
  assert.deepEqual(read.success, { path: path.join(dir, 'a.txt'), content: 'two\n', totalLines: 3, fileSize: '14', rangeApplied: true })
  const write = await tools.run({ kind: 'write', id: 2, execId: 'e', args: { path: 'sub/b.txt', fileText: 'x\n' } })
  assert.equal(write.success.linesCreated, 1)
  assert.equal(fs.readFileSync(path.join(dir, 'sub/b.txt'), 'utf8'), 'x\n')
  const escape = await tools.run({ kind: 'read', id: 3, execId: 'e', args: { path: '../../etc/passwd' } })
  assert.match(escape.rejected.reason, /outside the workspace/)
  assert.equal(await tools.run({ kind: 'mcp', id: 4, execId: 'e', args: {} }), null)
  const grep = await tools.run({ kind: 'grep', id: 5, execId: 'e', args: { pattern: 'tw', outputMode: 'content' } })
  assert.equal(grep.success.workspaceResults[dir].content.matches[0].matches[0].content, 'two')
  const glob = await tools.glob({ globPattern: '*.txt' })
  assert.deepEqual([...glob.success.files].sort(), ['a.txt', 'sub/b.txt'])
  const shell = await tools.run({ kind: 'shell', id: 6, execId: 'e', args: { command: 'echo hi; exit 2' } })
  assert.equal(shell.failure.exitCode, 2)
  assert.equal(shell.failure.stdout, 'hi\n')
  tools.close()
})

test('background output lives in a folder of the tools\' own, made on first use and removed by close()', async () => {
  const tools = new LocalTools({ roots: [workspace()] })
  const folder = tools.terminalsDir
  assert.ok(folder.startsWith(os.tmpdir()), folder)
  assert.equal(tools.roots.at(-1), fs.realpathSync(path.dirname(folder)) + path.sep + path.basename(folder))
  assert.equal(fs.existsSync(folder), false, 'made before any background shell')
  assert.notEqual(new LocalTools({ roots: [workspace()] }).terminalsDir, folder)
  const spawned = await tools.run({ kind: 'backgroundShellSpawn', id: 1, execId: 'e', args: { command: 'echo bg' } })
  const log = path.join(folder, `${spawned.success.shellId}.txt`)
  assert.equal(await waitForFile(log), 'bg')
  const read = await tools.run({ kind: 'read', id: 2, execId: 'e', args: { path: log } })
  assert.equal(read.success.content, 'bg\n')
  tools.close()
  assert.equal(fs.existsSync(folder), false, 'close() left the folder')
})

test('bad options and bad args are clear errors', async () => {
  assert.throws(() => new LocalTools({ roots: ['/definitely/not/here'] }), (e) => e.code === 'E_INVALID' && /workspace root/.test(e.message))
  assert.throws(() => new LocalTools({ roots: [] }), (e) => e.code === 'E_INVALID')
  const tools = new LocalTools({ roots: [workspace()] })
  await assert.rejects(tools.run({ kind: 'read', id: 1, execId: 'e', args: { path: 42 } }), (e) => e.code === 'E_INVALID')
})

test('the exec callback delegates to LocalTools: shell output streams, abort kills the process', async () => {
  const dir = workspace()
  const tools = new LocalTools({ roots: [dir] })
  const pidfile = path.join(dir, 'sleep.pid')
  const scenario = { steps: [
    { type: 'exec', id: 1, args: { shellStreamArgs: { command: 'echo streamed; echo warn >&2' } } },
    { type: 'exec', id: 2, wait: false, args: { shellStreamArgs: { command: `echo $$ > ${pidfile}; sleep 30` } } },
    { type: 'sleep', ms: 300 },
    { type: 'abortExec', id: 2 },
    { type: 'awaitExec', id: 2 },
    { type: 'turnEnded' },
  ] }
  const seen = []
  const { backend, client, close } = await setup(scenario, {
    exec: (req, ctx) => { seen.push(req.kind); return tools.run(req, ctx) },
  })
  try {
    const session = client.newSession({ cwd: dir })
    const turn = session.prompt('go')
    await drain(turn)
    assert.equal((await turn.result).stopReason, 'end_turn')
    const records = await recordsWhen(backend, (r) => execMessages(r, 2).some((m) => m.shellResult))
    const first = execMessages(records, 1)
    assert.ok(first.some((m) => m.shellStream?.stdout?.data === 'streamed\n'), JSON.stringify(first))
    assert.ok(first.some((m) => m.shellStream?.stderr?.data === 'warn\n'))
    assert.equal(first.at(-1).shellResult.success.stdout, 'streamed\n')
    const aborted = execMessages(records, 2)
    assert.ok(aborted.some((m) => m.shellStream?.exit?.aborted), JSON.stringify(aborted))
    const pid = Number(await waitForFile(pidfile))
    const deadline = Date.now() + 5000
    while (alive(pid) && Date.now() < deadline) await new Promise((r) => setTimeout(r, 20))
    assert.equal(alive(pid), false, 'the aborted shell is still running')
    assert.deepEqual(seen, ['shellStream', 'shellStream'])
  } finally {
    close()
    tools.close()
  }
})

test('the tools option answers execs the callback leaves unhandled', async () => {
  const dir = workspace()
  const scenario = { steps: [
    { type: 'exec', id: 1, args: { readArgs: { path: 'a.txt' } } },
    { type: 'exec', id: 2, args: { lsArgs: { path: '' } } },
    { type: 'exec', id: 3, args: { deleteArgs: { path: 'a.txt' } } },
    { type: 'exec', id: 4, args: { diagnosticsArgs: { path: 'a.txt' } } },
    { type: 'turnEnded' },
  ] }
  const { backend, client, close } = await setup(scenario, {
    tools: { roots: [dir] },
    // Handles delete itself (refusing it); everything else falls through to the tools.
    exec: (req) => (req.kind === 'delete' ? { rejected: { path: req.args.path, reason: 'not today' } } : undefined),
  })
  try {
    const turn = client.newSession({ cwd: dir }).prompt('go')
    await drain(turn)
    const records = await recordsWhen(backend, (r) => r[0]?.messages.some((m) => m.message.execClientControlMessage?.streamClose?.id === 4))
    assert.equal(execMessages(records, 1)[0].readResult.success.content, 'one\ntwo\nthree\n')
    assert.equal(execMessages(records, 2)[0].lsResult.success.directoryTreeRoot.childrenFiles[0].name, 'a.txt')
    assert.equal(execMessages(records, 3)[0].deleteResult.rejected.reason, 'not today')
    assert.ok(fs.existsSync(path.join(dir, 'a.txt')))
    // Not the tools' either: the client's typed "not available" answer, as without them.
    assert.match(execMessages(records, 4)[0].diagnosticsResult.error.error, /not available/)
  } finally {
    close()
  }
})

// Variables of this process that a model-run `env` must never see by default.
const HOST_SECRETS = {
  CURSOR_API_KEY: 'key_host_secret',
  CURSOR_ACCESS_TOKEN: 'token_host_secret',
  GITHUB_TOKEN: 'ghp_host_secret',
  MY_SECRET: 'hunter2',
}

/** Runs `env` through `tools` with HOST_SECRETS in this process's environment; name → value. */
async function shellEnv(tools) {
  const saved = Object.fromEntries(Object.keys(HOST_SECRETS).map((k) => [k, process.env[k]]))
  Object.assign(process.env, HOST_SECRETS)
  try {
    const r = await tools.run({ kind: 'shell', id: 1, execId: 'e', args: { command: 'env' } })
    assert.ok(r.success, JSON.stringify(r))
    return Object.fromEntries(r.success.stdout.split('\n').filter((l) => l.includes('=')).map((l) => [l.slice(0, l.indexOf('=')), l.slice(l.indexOf('=') + 1)]))
  } finally {
    for (const [k, v] of Object.entries(saved)) {
      if (v === undefined) delete process.env[k]
      else process.env[k] = v
    }
  }
}

test('LocalTools shells inherit no credential or secret-looking variable unless the host asks', async () => {
  const env = await shellEnv(new LocalTools({ roots: [workspace()] }))
  for (const name of Object.keys(HOST_SECRETS)) assert.equal(env[name], undefined, `${name} reached the shell`)
  assert.equal(env.PATH, process.env.PATH)
  assert.equal(env.HOME, process.env.HOME)

  const asked = await shellEnv(new LocalTools({
    roots: [workspace()],
    envPolicy: { inherit: 'core', include: ['GITHUB_TOKEN', 'CURSOR_*'] },
    env: { PROJECT_MODE: 'ci' },
  }))
  assert.equal(asked.GITHUB_TOKEN, 'ghp_host_secret', 'an included name comes through')
  assert.equal(asked.CURSOR_API_KEY, undefined, 'this product\'s credentials never do')
  assert.equal(asked.PROJECT_MODE, 'ci')
  assert.equal(asked.PATH, process.env.PATH)
  assert.equal(asked.MY_SECRET, undefined)

  assert.throws(() => new LocalTools({ roots: [workspace()], envPolicy: { inherit: 'some' } }), (e) => e.code === 'E_INVALID' && /inherit/.test(e.message))
  assert.throws(() => new LocalTools({ roots: [workspace()], envPolicy: { exclude: ['[oops'] } }), (e) => e.code === 'E_INVALID' && /\[oops/.test(e.message))
})

test('the stdio agent\'s shells never see its CURSOR_API_KEY', async () => {
  const cwd = workspace()
  const scenario = { steps: [
    { type: 'toolCallStarted', callId: 'sh', toolCall: { shellToolCall: { args: { command: 'env' } } } },
    { type: 'exec', id: 1, args: { shellStreamArgs: { command: 'env', workingDirectory: cwd, toolCallId: 'sh' } } },
    { type: 'turnEnded' },
  ] }
  const agent = startAgent({ scenario, env: { CURSOR_API_KEY: 'key_agent_secret', MY_SECRET: 'hunter2' } })
  let records
  try {
    await agent.agent.request('initialize', { protocolVersion: 1, clientCapabilities: {} })
    const { sessionId } = await agent.agent.request('session/new', { cwd, mcpServers: [] })
    const response = await within(20_000, agent.agent.request('session/prompt', { sessionId, prompt: [{ type: 'text', text: 'env' }] }), 'prompt')
    assert.equal(response.stopReason, 'end_turn')
  } finally {
    ({ records } = await agent.stop())
  }
  const replies = records.flatMap((r) => r.messages.map((m) => m.message.execClientMessage)).filter((m) => m?.id === 1)
  const printed = replies.map((m) => m.shellStream?.stdout?.data ?? '').join('')
  assert.match(printed, /^PATH=/m, 'the shell ran env')
  assert.doesNotMatch(JSON.stringify(records), /key_agent_secret|hunter2/, 'a secret of the agent reached the server')
})
