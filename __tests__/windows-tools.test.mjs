// Windows only (skipped elsewhere): the built-in tools where Windows differs from Unix. cmd.exe
// as the shell (its quoting, its exit codes, the process tree it started ended on cancel and
// when the agent ends),
// paths (drive letters in any case, `\` and `/`, `..` and other drives refused), CRLF files as
// they are on disk, stdio MCP servers ended with the agent, and the agent's folders under
// %APPDATA% / %LOCALAPPDATA%. Run under wine by
// scripts/build-windows.sh and on the workflow's Windows runners.
import { test } from 'node:test'
import assert from 'node:assert/strict'
import { spawn, spawnSync } from 'node:child_process'
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

// A stdio MCP server started through cmd.exe (as `npx` servers are), which starts a node.exe
// of its own: the agent puts the server in a job object as it starts, so neither the server
// nor what it started outlives the agent, killed outright or quitting.
const MCP_PID = fileURLToPath(new URL('./fixtures/mcp-pid.mjs', import.meta.url))
for (const how of ['killed outright', 'quitting']) {
  test(`an agent ${how} leaves none of its MCP servers running, nor what they started`, windowsOnly, async () => {
    const cwd = workspace()
    const pidDir = tempDir('acp-win-mcp-')
    const agent = startAgent({ scenario: { steps: [{ type: 'text', text: 'hi' }, { type: 'turnEnded' }] } })
    let pids = []
    try {
      await agent.agent.request('initialize', { protocolVersion: 1, clientCapabilities: {} })
      const server = { name: 'tree', command: 'cmd.exe', args: ['/d', '/c', process.execPath, MCP_PID, 'answer', pidDir, 'tree'], env: [] }
      await agent.agent.request('session/new', { cwd, mcpServers: [server] })
      const text = await waitForFile(path.join(pidDir, 'tree.pids'))
      pids = text.split(' ').map(Number)
      assert.equal(pids.length, 2, text)
      assert.ok(pids.every(alive), 'the server and its child run')
    } finally {
      if (how === 'killed outright') {
        agent.child.kill()
        await within(10_000, new Promise((resolve) => agent.child.once('exit', resolve)), 'the agent\'s end')
      } else {
        await agent.stop()
      }
    }
    const deadline = Date.now() + 5000
    while (pids.some(alive) && Date.now() < deadline) await new Promise((r) => setTimeout(r, 100))
    assert.deepEqual(pids.filter(alive), [], 'the MCP server or its child still runs')
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

// A junction (what `mklink /J` makes, and any user may) or a symbolic link inside the workspace
// that leads out of it: reading, writing or listing through it is refused, as `..` is.
test('junctions and symbolic links leading out of the workspace are refused', windowsOnly, async (t) => {
  const dir = workspace()
  const outside = tempDir('acp-win-outside-')
  fs.writeFileSync(path.join(outside, 'secret.txt'), 'secret')
  const made = []
  for (const [name, type] of [['junction', 'junction'], ['link', 'dir']]) {
    try {
      fs.symlinkSync(outside, path.join(dir, name), type)
      // Wine 8 makes a symbolic link that leads nowhere (and no junction at all).
      if (fs.readFileSync(path.join(dir, name, 'secret.txt'), 'utf8') === 'secret') made.push(name)
      else t.diagnostic(`the ${type} made here does not lead out`)
    } catch (e) {
      t.diagnostic(`no working ${type} here: ${e.code ?? e.message}`)
    }
  }
  if (made.length === 0) return t.skip('this system makes neither working junctions nor symbolic links')
  const tools = new LocalTools({ roots: [dir] })
  try {
    for (const name of made) {
      const read = await tools.run({ kind: 'read', id: 1, execId: 'e', args: { path: `${name}\\secret.txt` } })
      assert.match(read.rejected?.reason ?? '', /outside the workspace/, `${name}: ${JSON.stringify(read)}`)
      const write = await tools.run({ kind: 'write', id: 2, execId: 'e', args: { path: `${name}\\planted.txt`, fileText: 'x' } })
      assert.ok(!write.success, `${name}: ${JSON.stringify(write)}`)
      assert.equal(fs.existsSync(path.join(outside, 'planted.txt')), false, `${name}: written through`)
    }
  } finally {
    tools.close()
  }
})

// Files private to the user: Windows has no modes, so the folder the agent keeps its sessions
// in gets an access list of one entry, this user's, that its files inherit.
test('private folders and files have an access list of this user only', windowsOnly, (t) => {
  // Wine 8 keeps no access lists on files: SetNamedSecurityInfoW succeeds and changes nothing,
  // and every file reads back the same made-up list. So this runs on Windows itself only.
  if (process.env.CURSOR_ACP_TEST_UNDER_WINE) return t.skip('wine keeps no access lists on files')
  const { makePrivate, accessList } = addon
  const dir = tempDir('acp-win-private-')
  const folder = path.join(dir, 'kept')
  fs.mkdirSync(folder)
  assert.ok(accessList(folder).entries.some((e) => !e.currentUser), 'a new folder lets others in (from its parent)')
  makePrivate(folder)
  const list = accessList(folder)
  assert.equal(list.protected, true, 'nothing inherited from above')
  assert.deepEqual(list.entries.map((e) => [e.allows, e.currentUser, e.inherited, e.passedOn]), [[true, true, false, true]])
  // A file made in it by anyone's code is private from its first byte.
  fs.writeFileSync(path.join(folder, 'new.txt'), 'x')
  const file = accessList(path.join(folder, 'new.txt'))
  assert.deepEqual(file.entries.map((e) => [e.allows, e.currentUser, e.inherited]), [[true, true, true]])
  // A file elsewhere, made private on its own.
  const loose = path.join(dir, 'loose.txt')
  fs.writeFileSync(loose, 'x')
  makePrivate(loose)
  assert.deepEqual(accessList(loose).entries.map((e) => [e.currentUser, e.inherited]), [[true, false]])
  assert.throws(() => makePrivate(path.join(dir, 'missing')), (e) => e.code === 'E_INVALID' && /missing/.test(e.message))
})

/** A real PowerShell, if this system has one (wine has only a stub that prints nothing). */
function powershell() {
  for (const program of ['pwsh.exe', 'powershell.exe']) {
    const r = spawnSync(program, ['-NoProfile', '-NonInteractive', '-Command', '$PSVersionTable.PSVersion.Major'], { encoding: 'utf8', timeout: 30_000 })
    if (r.status === 0 && /^\d+\s*$/.test(r.stdout)) return program
  }
  return undefined
}

test('PowerShell as the shell: quoting, exit codes, no profile', windowsOnly, async (t) => {
  const program = powershell()
  if (!program) return t.skip('no PowerShell on this system')
  const dir = workspace()
  const tools = new LocalTools({ roots: [dir], shell: program })
  try {
    const quoted = await shell(tools, `Write-Output 'a b' "c ""d"""; Write-Output $env:OS`)
    assert.equal(quoted.success?.stdout.replaceAll('\r\n', '\n'), 'a b\nc "d"\nWindows_NT\n', JSON.stringify(quoted))
    const failed = await shell(tools, 'exit 7')
    assert.equal(failed.failure?.exitCode, 7, JSON.stringify(failed))
    // Started without the user's profile scripts, and never waiting on a prompt.
    const line = await shell(tools, '[Environment]::CommandLine')
    assert.match(line.success?.stdout ?? '', /-NoProfile -NonInteractive/, JSON.stringify(line))
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
  const { defaultCacheDir, defaultConfigDir } = await import('../cli/user-folders.mjs')
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
