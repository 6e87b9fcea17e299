// What the stdio agent stores is its user's alone: saved sessions and `--record` output are 0600
// in 0700 folders whatever the umask (folders of older versions tightened when the store opens,
// their sessions by the tidy the agent runs once serving), records hold no credential, and the
// temporaries of a killed writer are removed by that tidy.
import { test } from 'node:test'
import assert from 'node:assert/strict'
import { spawnSync } from 'node:child_process'
import fs from 'node:fs'
import path from 'node:path'
import { SessionStore } from '../cli/store.mjs'
import { startAgent, tempDir } from './acp-harness.mjs'
import { within } from './helpers.mjs'

const posix = process.platform !== 'win32'
const mode = (p) => fs.statSync(p).mode & 0o777

// The default of most systems, under which files are created 0644 and folders 0755.
process.umask(0o022)

test('saved sessions are 0600 in 0700 folders; older folders are tightened on open, their sessions by tidy()', { skip: !posix && 'POSIX modes' }, async () => {
  const dir = path.join(tempDir('acp-cache-'), 'cache')
  const store = new SessionStore(dir)
  assert.equal(mode(dir), 0o700)
  assert.equal(mode(store.sessionsDir), 0o700)
  assert.equal(mode(store.blobDir), 0o700)
  store.put({ sessionId: 's-1', cwd: '/w' })
  assert.equal(mode(store.file('s-1')), 0o600)
  assert.deepEqual(fs.readdirSync(store.sessionsDir), ['s-1.json'], 'no temporary left')

  // As an older version left them under this umask.
  fs.chmodSync(store.sessionsDir, 0o755)
  fs.chmodSync(store.blobDir, 0o755)
  fs.writeFileSync(path.join(store.sessionsDir, 's-2.json'), JSON.stringify({ sessionId: 's-2', cwd: '/w' }), { mode: 0o644 })
  fs.chmodSync(store.file('s-1'), 0o644)
  const reopened = new SessionStore(dir)
  assert.equal(mode(reopened.sessionsDir), 0o700)
  assert.equal(mode(reopened.blobDir), 0o700)
  // Opening the store (before `initialize` is answered) visits no saved session.
  assert.equal(mode(reopened.file('s-1')), 0o644)
  await reopened.tidy()
  assert.equal(mode(reopened.file('s-1')), 0o600)
  assert.equal(mode(reopened.file('s-2')), 0o600)
  // A save over an existing file keeps it private too.
  fs.chmodSync(reopened.file('s-2'), 0o644)
  reopened.put({ sessionId: 's-2', cwd: '/w', title: 'again' })
  assert.equal(mode(reopened.file('s-2')), 0o600)
  assert.equal(reopened.get('s-2').title, 'again')
})

test('tidy() removes the temporaries of writers that are gone, and keeps those of live ones and its own', async () => {
  const dir = tempDir('acp-cache-')
  const store = new SessionStore(dir)
  // A process that has exited: its pid names no process now (pids are not reused this fast).
  const dead = spawnSync(process.execPath, ['-e', '0']).pid
  const stale = path.join(store.sessionsDir, `s-1.json.${dead}.tmp`)
  const live = path.join(store.sessionsDir, `s-2.json.${process.ppid}.tmp`)
  // This process's own: a save may be writing it while tidy() runs.
  const own = path.join(store.sessionsDir, `s-3.json.${process.pid}.tmp`)
  const notOurs = path.join(store.sessionsDir, 'notes.tmp')
  for (const file of [stale, live, own, notOurs]) fs.writeFileSync(file, 'x'.repeat(1024))
  new SessionStore(dir)
  assert.ok(fs.existsSync(stale), 'opening the store leaves the files to tidy()')
  await store.tidy()
  assert.ok(!fs.existsSync(stale), 'the killed writer\'s temporary is removed')
  assert.ok(fs.existsSync(live), 'a running writer\'s temporary is left alone')
  assert.ok(fs.existsSync(own), 'a temporary of this process is left alone')
  assert.ok(fs.existsSync(notOurs), 'files the store did not write are left alone')
  // A store whose folder went away meanwhile has nothing to tidy, and says so by resolving.
  fs.rmSync(store.sessionsDir, { recursive: true })
  await store.tidy()
})

test('the agent tidies its saved sessions once it is serving', { skip: !posix && 'POSIX modes' }, async () => {
  const cacheDir = tempDir('acp-cache-')
  const sessions = path.join(cacheDir, 'sessions')
  fs.mkdirSync(sessions, { recursive: true })
  const dead = spawnSync(process.execPath, ['-e', '0']).pid
  const stale = path.join(sessions, `old.json.${dead}.tmp`)
  const older = path.join(sessions, 'old.json')
  fs.writeFileSync(stale, 'x')
  fs.writeFileSync(older, JSON.stringify({ sessionId: 'old', cwd: '/w' }), { mode: 0o644 })
  const agent = startAgent({ cacheDir, scenario: { steps: [{ type: 'turnEnded' }] } })
  try {
    await agent.agent.request('initialize', { protocolVersion: 1, clientCapabilities: {} })
    await agent.agent.request('session/new', { cwd: tempDir(), mcpServers: [] })
    const deadline = Date.now() + 10_000
    while ((fs.existsSync(stale) || mode(older) !== 0o600) && Date.now() < deadline) await new Promise((resolve) => setTimeout(resolve, 20))
    assert.ok(!fs.existsSync(stale), 'the killed writer\'s temporary is removed')
    assert.equal(mode(older), 0o600, 'the older session is tightened')
    const { sessions: listed } = await agent.agent.request('session/list', {})
    assert.ok(listed.some((s) => s.sessionId === 'old'), 'and it is still listed')
  } finally {
    await agent.stop()
  }
})

test('--record: the file is 0600 and holds no credential', async () => {
  const token = 'tok-very-secret-4242'
  const agent = startAgent({
    scenario: { steps: [{ type: 'text', text: 'hi' }, { type: 'turnEnded' }] },
    env: { CURSOR_ACCESS_TOKEN: token },
  })
  const { recordFile } = agent
  // An older run's record, world-readable: overwritten, and private from its first byte.
  fs.writeFileSync(recordFile, '[]', { mode: 0o644 })
  try {
    await agent.agent.request('initialize', { protocolVersion: 1, clientCapabilities: {} })
    const { sessionId } = await agent.agent.request('session/new', { cwd: tempDir(), mcpServers: [] })
    await within(20_000, agent.agent.request('session/prompt', { sessionId, prompt: [{ type: 'text', text: 'hi' }] }))
    await agent.stop()
    const text = fs.readFileSync(recordFile, 'utf8')
    const records = JSON.parse(text)
    assert.equal(records[0].headers.authorization, 'Bearer <redacted>', 'sent, and redacted at the source')
    assert.ok(!text.includes(token), 'no token anywhere in the record')
    if (posix) assert.equal(mode(recordFile), 0o600)
  } finally {
    await agent.stop()
  }
})

test('makePrivate: 0700 folders and 0600 files whatever they were, links and missing paths refused', { skip: !posix && 'POSIX modes' }, async () => {
  const { makePrivate, accessList } = await import('../index.js').then((m) => m.default ?? m)
  const dir = tempDir('acp-private-')
  const folder = path.join(dir, 'kept')
  fs.mkdirSync(folder, { mode: 0o755 })
  const file = path.join(folder, 'a.txt')
  fs.writeFileSync(file, 'x', { mode: 0o644 })
  makePrivate(folder)
  makePrivate(file)
  assert.deepEqual([mode(folder), mode(file)], [0o700, 0o600])
  // Not Windows: there is no access list to read back.
  assert.equal(accessList(file), null)
  const link = path.join(dir, 'link')
  fs.symlinkSync(file, link)
  fs.chmodSync(file, 0o644)
  assert.throws(() => makePrivate(link), (e) => e.code === 'E_INVALID' && e.message.includes(link))
  assert.equal(mode(file), 0o644, 'the link\'s target is left alone')
  assert.throws(() => makePrivate(path.join(dir, 'missing')), (e) => e.code === 'E_INVALID')
  assert.throws(() => accessList(path.join(dir, 'missing')), (e) => e.code === 'E_INVALID')
})
