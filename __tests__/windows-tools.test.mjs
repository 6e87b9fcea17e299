// Windows only (skipped elsewhere): the built-in tools where Windows differs from Unix. cmd.exe
// as the shell (its quoting, its exit codes, the process tree it started ended on cancel and
// when the agent ends),
// paths (drive letters in any case, `\` and `/`, `..` and other drives refused), CRLF files as
// they are on disk, and the agent's folders under %APPDATA% / %LOCALAPPDATA%. Run under wine by
// scripts/build-windows.sh and on the workflow's Windows runners.
import { test } from 'node:test'
import assert from 'node:assert/strict'
import { spawn } from 'node:child_process'
import fs from 'node:fs'
import path from 'node:path'
import { fileURLToPath } from 'node:url'
import { addon, setup, drain, recordsWhen, within } from './helpers.mjs'
import { tempDir } from './tmp.mjs'
import { startAgent } from './acp-harness.mjs'

const { LocalTools } = addon
const windowsOnly = { skip: process.platform !== 'win32' && 'Windows only' }

function workspace() {
  const dir = tempDir('acp-win-tools-')
  fs.writeFileSync(path.join(dir, 'crlf.txt'), 'one\r\ntwo\r\nthree\r\n')
  return dir
}

const shell = (tools, command) => tools.run({ kind: 'shell', id: 1, execId: 'e', args: { command } })

/** Whether process `pid` still runs (signal 0 only asks). */
function alive(pid) {
  try {
    process.kill(pid, 0)
    return true
  } catch {
    return false
  }
}

async function waitForFile(file, ms = 10_000) {
  const deadline = Date.now() + ms
  while (Date.now() < deadline) {
    if (fs.existsSync(file) && fs.readFileSync(file, 'utf8').trim()) return fs.readFileSync(file, 'utf8').trim()
    await new Promise((r) => setTimeout(r, 50))
  }
  throw new Error(`${file} never appeared`)
}

test('cmd.exe runs commands as written: quotes, operators, exit codes', windowsOnly, async () => {
  const tools = new LocalTools({ roots: [workspace()] })
  try {
    assert.match(tools.shell, /cmd(\.exe)?$/i)
    // Quotes reach cmd as written (no C-runtime `\"` escapes), `&` inside them is text.
    const quoted = await shell(tools, 'echo "a & b"')
    assert.equal(quoted.success?.stdout, '"a & b"\r\n', JSON.stringify(quoted))
    const chained = await shell(tools, 'echo one&& echo two')
    assert.equal(chained.success?.stdout, 'one\r\ntwo\r\n', JSON.stringify(chained))
    const failed = await shell(tools, 'echo out& echo err 1>&2& exit /b 7')
    assert.equal(failed.failure?.exitCode, 7, JSON.stringify(failed))
    assert.equal(failed.failure.stdout, 'out\r\n')
    assert.equal(failed.failure.stderr, 'err \r\n')
    // A program that does not exist: cmd's own "not recognized", exit code 9009.
    const missing = await shell(tools, 'no-such-program-here')
    assert.equal(missing.failure?.exitCode, 9009, JSON.stringify(missing))
    // The variable cmd expands is the policy's environment, not a copy of ours.
    const variables = await shell(tools, 'echo %OS%')
    assert.equal(variables.success?.stdout, 'Windows_NT\r\n', JSON.stringify(variables))
  } finally {
    tools.close()
  }
})

// Each shell runs in a job object of its own (crates/core/src/tools/job.rs): cancelling ends the
// job, the grandchild with it. Under wine as on Windows: nothing here depends on taskkill.
test('a cancelled shell ends with the processes it started', windowsOnly, async () => {
  const dir = workspace()
  // A grandchild: cmd.exe starts node.exe, which records its pid and waits.
  fs.writeFileSync(path.join(dir, 'child.js'), "require('fs').writeFileSync('child.pid', String(process.pid)); setInterval(() => {}, 1000)\n")
  const tools = new LocalTools({ roots: [dir] })
  const scenario = { steps: [
    { type: 'exec', id: 1, wait: false, args: { shellStreamArgs: { command: `"${process.execPath}" child.js`, workingDirectory: dir } } },
    { type: 'sleep', ms: 3000 },
    { type: 'abortExec', id: 1 },
    { type: 'awaitExec', id: 1 },
    { type: 'turnEnded' },
  ] }
  // The backend is silent for the 3 s the grandchild needs to start (under wine too): the stall
  // timeout of the fast test options (1.5 s) would resume the turn mid-sleep.
  const { backend, client, close } = await setup(scenario, { exec: (req, ctx) => tools.run(req, ctx), stallTimeoutMs: 30_000 })
  try {
    const turn = client.newSession({ cwd: dir }).prompt('go')
    await drain(turn, 30_000)
    const records = await recordsWhen(backend, (r) => r[0]?.messages.some((m) => m.message.execClientMessage?.shellResult), 10_000)
    const replies = records[0].messages.map((m) => m.message.execClientMessage).filter((m) => m?.id === 1)
    assert.ok(replies.some((m) => m.shellStream?.exit?.aborted), JSON.stringify(replies))
    const pid = Number(await waitForFile(path.join(dir, 'child.pid')))
    const deadline = Date.now() + 5000
    while (alive(pid) && Date.now() < deadline) await new Promise((r) => setTimeout(r, 100))
    assert.equal(alive(pid), false, `node.exe ${pid}, started by the cancelled cmd.exe, still runs`)
  } finally {
    close()
    tools.close()
  }
})

// What the reaper does on Unix: a process killed outright (TerminateProcess: no destructor runs)
// or exiting without closing its tools leaves none of its shells running. Windows closes the
// shells' job handles as the process ends, and the jobs end their processes.
for (const [mode, how] of [['kill', 'killed outright'], ['exit', 'exiting without closing its tools']]) {
  test(`an agent ${how} leaves none of its shells running`, windowsOnly, async () => {
    const dir = workspace()
    fs.writeFileSync(path.join(dir, 'child.js'), "require('fs').writeFileSync(process.argv[2], String(process.pid)); setInterval(() => {}, 1000)\n")
    const grandchild = (name) => `"${process.execPath}" child.js ${name}`
    // A background shell and a foreground one mid-command, each with a node.exe under cmd.exe.
    const script = `
      const fs = require('fs')
      const { LocalTools } = require(${JSON.stringify(fileURLToPath(new URL('../index.js', import.meta.url)))})
      const tools = new LocalTools({ roots: [${JSON.stringify(dir)}] })
      tools.run({ kind: 'backgroundShellSpawn', id: 1, execId: 'e', args: { command: ${JSON.stringify(grandchild('bg.pid'))} } })
      tools.run({ kind: 'shell', id: 2, execId: 'e', args: { command: ${JSON.stringify(grandchild('fg.pid'))} } })
      const ready = setInterval(() => {
        if (!fs.existsSync('bg.pid') || !fs.existsSync('fg.pid')) return
        clearInterval(ready)
        console.log('ready')
        if (${JSON.stringify(mode)} === 'exit') process.exit(0)
      }, 50)
      setInterval(() => {}, 1000)
    `
    const agent = spawn(process.execPath, ['-e', script], { cwd: dir, stdio: ['ignore', 'pipe', 'inherit'] })
    const ended = new Promise((resolve) => agent.on('exit', (code, signal) => resolve({ code, signal })))
    await within(30_000, new Promise((resolve, reject) => {
      agent.stdout.on('data', (chunk) => { if (String(chunk).includes('ready')) resolve() })
      agent.on('exit', () => reject(new Error('the agent ended before its shells started')))
    }), 'the shells\' start')
    if (mode === 'kill') agent.kill()
    await within(10_000, ended, 'the agent\'s end')
    const pids = ['bg.pid', 'fg.pid'].map((f) => Number(fs.readFileSync(path.join(dir, f), 'utf8')))
    const deadline = Date.now() + 5000
    while (pids.some(alive) && Date.now() < deadline) await new Promise((r) => setTimeout(r, 100))
    assert.deepEqual(pids.filter(alive), [], 'node.exe processes of its shells still run')
  })
}

test('paths: drive letters in any case, either slash, `..` and other places refused', windowsOnly, async () => {
  const dir = workspace()
  const tools = new LocalTools({ roots: [dir] })
  try {
    assert.match(dir, /^[A-Za-z]:\\/)
    // The roots are shown as Windows users and programs write them, not as \\?\C:\….
    assert.equal(tools.roots[0].toLowerCase(), dir.toLowerCase())
    assert.doesNotMatch(tools.roots.join(' '), /\\\\\?\\/)
    const read = (p) => tools.run({ kind: 'read', id: 1, execId: 'e', args: { path: p } })
    const write = await tools.run({ kind: 'write', id: 2, execId: 'e', args: { path: 'sub\\deeper\\b.txt', fileText: 'b\r\n' } })
    assert.ok(write.success, JSON.stringify(write))
    assert.equal(fs.readFileSync(path.join(dir, 'sub', 'deeper', 'b.txt'), 'utf8'), 'b\r\n')
    for (const p of [
      'sub\\deeper\\b.txt',
      'sub/deeper/b.txt',
      path.join(dir, 'sub', 'deeper', 'b.txt'),
      path.join(dir, 'sub', 'deeper', 'b.txt').toLowerCase(),
      path.join(dir, 'sub', 'deeper', 'b.txt').toUpperCase(),
      path.join(dir, 'sub', 'deeper', 'b.txt').replaceAll('\\', '/'),
      `${dir[0] === dir[0].toUpperCase() ? dir[0].toLowerCase() : dir[0].toUpperCase()}${dir.slice(1)}\\sub\\..\\sub\\deeper\\b.txt`,
    ]) {
      const r = await read(p)
      assert.equal(r.success?.content, 'b\r\n', `${p}: ${JSON.stringify(r)}`)
    }
    for (const p of ['..\\outside.txt', 'sub\\..\\..\\outside.txt', '../outside.txt', 'C:\\Windows\\win.ini', 'Q:\\elsewhere.txt', '\\\\server\\share\\x.txt', '\\Windows\\win.ini']) {
      const r = await read(p)
      assert.match(r.rejected?.reason ?? '', /outside the workspace/, `${p}: ${JSON.stringify(r)}`)
    }
    // The shell's working directory, written as the model writes it.
    const here = await tools.run({ kind: 'shell', id: 3, execId: 'e', args: { command: 'cd', workingDirectory: dir.toLowerCase() } })
    assert.equal(here.success?.stdout.trim().toLowerCase(), dir.toLowerCase(), JSON.stringify(here))
    const away = await tools.run({ kind: 'shell', id: 4, execId: 'e', args: { command: 'cd', workingDirectory: path.dirname(dir) } })
    assert.ok(away.rejected, JSON.stringify(away))
  } finally {
    tools.close()
  }
})

test('CRLF files are read, searched and listed as they are on disk', windowsOnly, async () => {
  const dir = workspace()
  const tools = new LocalTools({ roots: [dir] })
  try {
    const read = await tools.run({ kind: 'read', id: 1, execId: 'e', args: { path: 'crlf.txt', offset: 2, limit: 1 } })
    assert.equal(read.success?.content, 'two\r\n', JSON.stringify(read))
    assert.equal(read.success.totalLines, 3)
    const grep = await tools.run({ kind: 'grep', id: 2, execId: 'e', args: { pattern: 'two$', outputMode: 'content' } })
    const matches = grep.success?.workspaceResults?.[dir]?.content?.matches ?? []
    assert.equal(matches.length, 1, JSON.stringify(grep))
    assert.equal(matches[0].matches[0].content.replace(/\r$/, ''), 'two')
  } finally {
    tools.close()
  }
})

test('the agent keeps its cache under %LOCALAPPDATA% and its config under %APPDATA%', windowsOnly, async () => {
  const { defaultCacheDir } = await import('../cli/store.mjs')
  const { defaultConfigDir } = await import('../cli/credentials.mjs')
  const profile = tempDir('acp-win-profile-')
  const env = { APPDATA: path.join(profile, 'Roaming'), LOCALAPPDATA: path.join(profile, 'Local') }
  assert.equal(defaultCacheDir(env), path.join(profile, 'Local', 'cursor-acp-native'))
  assert.equal(defaultConfigDir(env), path.join(profile, 'Roaming', 'cursor-acp-native'))
  assert.equal(defaultCacheDir({}), path.join(process.env.LOCALAPPDATA, 'cursor-acp-native'))
  assert.equal(defaultConfigDir({}), path.join(process.env.APPDATA, 'cursor-acp-native'))

  // The agent itself, with no --cache-dir: its session lands in that profile's Local folder.
  const cwd = workspace()
  const agent = startAgent({ cacheDir: null, env, scenario: { steps: [{ type: 'text', text: 'hi' }, { type: 'turnEnded' }] } })
  try {
    await agent.agent.request('initialize', { protocolVersion: 1, clientCapabilities: {} })
    const { sessionId } = await agent.agent.request('session/new', { cwd, mcpServers: [] })
    const response = await agent.agent.request('session/prompt', { sessionId, prompt: [{ type: 'text', text: 'hi' }] })
    assert.equal(response.stopReason, 'end_turn')
    const saved = path.join(profile, 'Local', 'cursor-acp-native', 'sessions', `${sessionId}.json`)
    await waitForFile(saved)
    assert.equal(fs.existsSync(path.join(profile, 'Roaming', 'cursor-acp-native', 'credentials.json')), false, 'no login, no credentials')
  } finally {
    await agent.stop()
  }
})
