// The saved sessions' listing (`session/list`, conversation search): newest first, filtered by
// cwd, and always what is on disk now, whoever wrote it, although each file is read again only
// once it has been rewritten.
import { test } from 'node:test'
import assert from 'node:assert/strict'
import fs from 'node:fs'
import path from 'node:path'
import { SessionStore } from '../cli/store.mjs'
import { tempDir } from './acp-harness.mjs'

/** @param {SessionStore} store */
const listed = (store, cwd) => store.list(cwd).map((s) => [s.sessionId, s.title])

test('list: newest first, by cwd, with the summary fields and nothing of the conversation', () => {
  const store = new SessionStore(tempDir('acp-cache-'))
  store.put({ sessionId: 'a', cwd: '/w', title: 'older', updatedAt: '2026-01-01T00:00:00.000Z', saved: { conversationId: 'conv-a', checkpoint: 'Y2hlY2s=', blobs: [] } })
  store.put({ sessionId: 'b', cwd: '/v', additionalDirectories: ['/x'], title: 'newer', updatedAt: '2026-02-01T00:00:00.000Z' })
  assert.deepEqual(listed(store), [['b', 'newer'], ['a', 'older']])
  assert.deepEqual(listed(store, '/w'), [['a', 'older']])
  const [b, a] = store.list()
  assert.deepEqual(a, { sessionId: 'a', cwd: '/w', title: 'older', updatedAt: '2026-01-01T00:00:00.000Z', conversationId: 'conv-a' })
  assert.deepEqual(b.additionalDirectories, ['/x'])
})

test('list sees every rewrite, deletion and new file, from this process or another', () => {
  const store = new SessionStore(tempDir('acp-cache-'))
  store.put({ sessionId: 'a', cwd: '/w', title: 'one', updatedAt: '2026-01-01T00:00:00.000Z' })
  assert.deepEqual(listed(store), [['a', 'one']])
  // The same size, within the same millisecond or not: a save is a new file.
  store.put({ sessionId: 'a', cwd: '/w', title: 'two', updatedAt: '2026-01-01T00:00:00.000Z' })
  assert.deepEqual(listed(store), [['a', 'two']])
  // Another agent's save: written beside and renamed over, as put() does.
  const other = path.join(store.sessionsDir, 'a.json.1.tmp')
  fs.writeFileSync(other, JSON.stringify({ sessionId: 'a', cwd: '/w', title: 'six', updatedAt: '2026-01-01T00:00:00.000Z' }))
  fs.renameSync(other, store.file('a'))
  // And a file rewritten in place (an editor, a sync tool): its size or time changes.
  fs.writeFileSync(path.join(store.sessionsDir, 'c.json'), JSON.stringify({ sessionId: 'c', cwd: '/w', title: 'c', updatedAt: '2026-03-01T00:00:00.000Z' }))
  assert.deepEqual(listed(store), [['c', 'c'], ['a', 'six']])
  fs.writeFileSync(path.join(store.sessionsDir, 'c.json'), JSON.stringify({ sessionId: 'c', cwd: '/w', title: 'c, renamed', updatedAt: '2026-03-01T00:00:00.000Z' }))
  assert.deepEqual(listed(store), [['c', 'c, renamed'], ['a', 'six']])
  store.delete('a')
  assert.deepEqual(listed(store), [['c', 'c, renamed']])
  // Put back after a deletion: listed again.
  store.put({ sessionId: 'a', cwd: '/w', title: 'back', updatedAt: '2026-04-01T00:00:00.000Z' })
  assert.deepEqual(listed(store), [['a', 'back'], ['c', 'c, renamed']])
})

test('list skips what is not a saved session: broken JSON, unsafe names, temporaries, other files', () => {
  const store = new SessionStore(tempDir('acp-cache-'))
  store.put({ sessionId: 'good', cwd: '/w', title: 'good' })
  fs.writeFileSync(path.join(store.sessionsDir, 'broken.json'), '{"sessionId": "broken", "cwd"')
  fs.writeFileSync(path.join(store.sessionsDir, 'un safe.json'), JSON.stringify({ sessionId: 'un safe', cwd: '/w' }))
  fs.writeFileSync(path.join(store.sessionsDir, 'good.json.42.tmp'), JSON.stringify({ sessionId: 'tmp', cwd: '/w' }))
  fs.writeFileSync(path.join(store.sessionsDir, 'notes.txt'), 'x')
  fs.mkdirSync(path.join(store.sessionsDir, 'folder.json'))
  assert.deepEqual(listed(store), [['good', 'good']])
  assert.deepEqual(listed(store), [['good', 'good']], 'and again, from what it read the first time')
  // A broken file repaired is listed.
  fs.writeFileSync(path.join(store.sessionsDir, 'broken.json'), JSON.stringify({ sessionId: 'broken', cwd: '/w', title: 'fixed', updatedAt: '2026-05-01T00:00:00.000Z' }))
  assert.deepEqual(listed(store), [['broken', 'fixed'], ['good', 'good']])
})

test('delete removes the session, its blobs and its shells\' output, and nothing of any other', () => {
  const dir = tempDir('acp-cache-')
  const store = new SessionStore(dir)
  for (const id of ['a', 'b']) {
    store.put({ sessionId: id, cwd: '/w', title: id })
    fs.mkdirSync(store.blobsOf(id), { recursive: true })
    fs.writeFileSync(path.join(store.blobsOf(id), 'blob-1'), `the prompt of ${id}`)
    // As a killed agent's background shell left it.
    fs.mkdirSync(store.terminalsOf(id), { recursive: true })
    fs.writeFileSync(path.join(store.terminalsOf(id), '1.txt'), `the output of ${id}`)
  }
  assert.equal(store.terminalsOf('a'), path.join(dir, 'terminals', 'a'))
  store.delete('a')
  assert.equal(store.get('a'), null)
  assert.ok(!fs.existsSync(store.blobsOf('a')), 'the deleted conversation\'s blobs are gone')
  assert.ok(!fs.existsSync(store.terminalsOf('a')), 'and its shells\' output')
  assert.equal(fs.readFileSync(path.join(store.blobsOf('b'), 'blob-1'), 'utf8'), 'the prompt of b')
  assert.equal(fs.readFileSync(path.join(store.terminalsOf('b'), '1.txt'), 'utf8'), 'the output of b')
  assert.deepEqual(listed(store), [['b', 'b']])
  // A session that kept no blobs is deleted as well.
  store.put({ sessionId: 'c', cwd: '/w' })
  store.delete('c')
  assert.equal(store.get('c'), null)
})

test('an open session saves through its files until it is deleted; after that nothing of it is written again', () => {
  const dir = tempDir('acp-cache-')
  const store = new SessionStore(dir)
  const a = store.open('a')
  const b = store.open('b')
  assert.deepEqual([a.sessionId, a.blobDir, a.terminalsDir], ['a', path.join(dir, 'blobs', 'a'), path.join(dir, 'terminals', 'a')])
  assert.ok(!fs.existsSync(a.blobDir) && !fs.existsSync(a.terminalsDir), 'open() makes nothing: the addon makes the folders it is handed')
  assert.equal(a.save({ sessionId: 'a', cwd: '/w', title: 'one' }), true)
  assert.equal(b.save({ sessionId: 'b', cwd: '/w', title: 'b' }), true)
  assert.equal(store.get('a').title, 'one')
  assert.equal(a.deleted, false)

  store.delete('a')
  assert.equal(a.deleted, true)
  // A turn that was running saves once it ends: refused, and nothing is on disk.
  assert.equal(a.save({ sessionId: 'a', cwd: '/w', title: 'after the delete' }), false)
  assert.equal(store.get('a'), null)
  assert.deepEqual(fs.readdirSync(store.sessionsDir), ['b.json'], 'no file, no temporary')
  assert.deepEqual(listed(store), [['b', 'b']])
  // Deleted twice: still nothing, and the other session saves as before.
  store.delete('a')
  assert.equal(a.save({ sessionId: 'a', cwd: '/w' }), false)
  assert.equal(b.deleted, false)
  assert.equal(b.save({ sessionId: 'b', cwd: '/w', title: 'b again' }), true)
  assert.equal(store.get('b').title, 'b again')

  // Files opened after the delete belong to a session made since: they save.
  const again = store.open('a')
  assert.equal(again.save({ sessionId: 'a', cwd: '/w', title: 'new' }), true)
  assert.equal(store.get('a').title, 'new')
  assert.equal(a.save({ sessionId: 'a', cwd: '/w', title: 'stale' }), false, 'the deleted one still writes nothing')
  assert.equal(store.get('a').title, 'new')
})

test('saves written in the background: the latest state wins, and a delete meanwhile leaves nothing', async () => {
  const store = new SessionStore(tempDir('acp-cache-'))
  const a = store.open('a')
  assert.equal(await a.saveInBackground({ sessionId: 'a', cwd: '/w', title: 'one' }), true)
  assert.equal(store.get('a').title, 'one')
  if (process.platform !== 'win32') assert.equal(fs.statSync(/** @type {string} */ (store.file('a'))).mode & 0o777, 0o600)

  // Two at once (either may be written first), then a save in place while one is written: the
  // one started last is on disk, whatever order they end in.
  const both = await Promise.all([a.saveInBackground({ sessionId: 'a', cwd: '/w', title: 'two' }), a.saveInBackground({ sessionId: 'a', cwd: '/w', title: 'three' })])
  assert.equal(both[1], true)
  assert.equal(store.get('a').title, 'three')
  const late = a.saveInBackground({ sessionId: 'a', cwd: '/w', title: 'four' })
  assert.equal(a.save({ sessionId: 'a', cwd: '/w', title: 'five' }), true)
  assert.equal(await late, false)
  assert.equal(store.get('a').title, 'five')

  // Deleted while a save is being written: it is dropped, with its temporary.
  const running = a.saveInBackground({ sessionId: 'a', cwd: '/w', title: 'after the delete' })
  store.delete('a')
  assert.equal(await running, false)
  assert.equal(store.get('a'), null)
  assert.deepEqual(fs.readdirSync(store.sessionsDir), [], 'no file, no temporary')
  assert.equal(await a.saveInBackground({ sessionId: 'a', cwd: '/w' }), false)
  await assert.rejects(a.saveInBackground({ sessionId: 'b', cwd: '/w' }), /not the record of session a/)
})

test('a save in the background through a writer of its own (the addon\'s saveToFile): landed through the record, or nothing left', async () => {
  const store = new SessionStore(tempDir('acp-cache-'))
  const a = store.open('a')
  /** @type {string[]} */
  const named = []
  const ok = await a.saveInBackground({ sessionId: 'a', cwd: '/w', title: 'by the writer' }, async (file, record, into, save) => {
    named.push(path.basename(file))
    fs.writeFileSync(file, JSON.stringify({ ...record, saved: { conversationId: 'c' } }), { mode: 0o600 })
    return into.replace(file, save)
  })
  assert.equal(ok, true)
  assert.match(named[0], new RegExp(`^a\\.json\\.${process.pid}\\.\\d+\\.1\\.tmp$`), 'a temporary of this process, for tidy() to know')
  assert.deepEqual(store.get('a'), { sessionId: 'a', cwd: '/w', title: 'by the writer', saved: { conversationId: 'c' } })

  // A writer that fails (after writing part of the file): the error, the last save kept, no temporary.
  await assert.rejects(a.saveInBackground({ sessionId: 'a', cwd: '/w' }, async (file) => {
    fs.writeFileSync(file, '{"half')
    throw new Error('disk full')
  }), /disk full/)
  assert.equal(store.get('a')?.title, 'by the writer')
  assert.deepEqual(fs.readdirSync(store.sessionsDir), ['a.json'])

  // The session deleted while the writer writes: the record it lands through is closed, so the
  // save is dropped even though its writer renames after the delete.
  const writing = a.saveInBackground({ sessionId: 'a', cwd: '/w', title: 'late' }, async (file, record, into, save) => {
    await new Promise((resolve) => setImmediate(resolve))
    fs.writeFileSync(file, JSON.stringify(record))
    return into.replace(file, save)
  })
  store.delete('a')
  assert.equal(await writing, false)
  assert.deepEqual(fs.readdirSync(store.sessionsDir), [], 'no record, no temporary')
})

test('a session opened twice: each opening writes temporaries of its own, and the delete stops both', async () => {
  const store = new SessionStore(tempDir('acp-cache-'))
  const first = store.open('a')
  const second = store.open('a')
  /** @type {string[]} */
  const temporaries = []
  /** @type {(() => void)[]} */
  const release = []
  /** @type {import('../cli/store.mjs').WriteRecord} */
  const held = async (file, record, into, save) => {
    fs.writeFileSync(file, JSON.stringify(record))
    temporaries.push(path.basename(file))
    await new Promise((resolve) => release.push(() => resolve(undefined)))
    return into.replace(file, save)
  }
  const saves = [first.saveInBackground({ sessionId: 'a', cwd: '/w', title: 'first' }, held), second.saveInBackground({ sessionId: 'a', cwd: '/w', title: 'second' }, held)]
  // Each writer wrote its temporary before its first wait.
  assert.notEqual(temporaries[0], temporaries[1])
  assert.equal(fs.readdirSync(store.sessionsDir).length, 2, 'both written beside each other')
  store.delete('a')
  for (const r of release) r()
  assert.deepEqual(await Promise.all(saves), [false, false])
  assert.deepEqual(fs.readdirSync(store.sessionsDir), [])
})

test('session files refuse another session\'s record and ids that name no folder of their own', () => {
  const store = new SessionStore(tempDir('acp-cache-'))
  const a = store.open('a')
  assert.throws(() => a.save({ sessionId: 'b', cwd: '/w' }), /not the record of session a/)
  assert.equal(store.get('b'), null)
  for (const id of ['.', '..', '', 'a/b', 'x'.repeat(129)]) assert.throws(() => store.open(id), /not a session id/, JSON.stringify(id))
  // Deleting such an id touches no open session.
  store.delete('..')
  assert.equal(a.deleted, false)
})

test('delete removes a session\'s folders while another thread still writes files in them', async () => {
  // As the addon's blob store finishing a write of a turn that was cancelled: a new file each
  // time, in the folder by its path, until the folder is not there.
  const { Worker } = await import('node:worker_threads')
  for (let round = 0; round < 10; round++) {
    const store = new SessionStore(tempDir('acp-cache-'))
    store.put({ sessionId: 's', cwd: '/w' })
    const blobs = store.blobsOf('s')
    fs.mkdirSync(blobs)
    for (let i = 0; i < 200; i++) fs.writeFileSync(path.join(blobs, `blob-${i}`), 'x')
    const writer = new Worker(`
      const fs = require('node:fs')
      const { workerData: dir, parentPort } = require('node:worker_threads')
      parentPort.postMessage('writing')
      for (let n = 0; n < 5_000; n++) {
        try { fs.writeFileSync(dir + '/.late-' + n + '.tmp', 'x', { flag: 'wx' }) } catch (e) { if (e.code === 'ENOENT') break }
      }
    `, { eval: true, workerData: blobs })
    await new Promise((resolve) => writer.once('message', resolve))
    store.delete('s')
    await new Promise((resolve) => writer.once('exit', resolve))
    assert.deepEqual(fs.readdirSync(store.blobDir), [], `round ${round}: something of the session is left`)
  }
})

test('"." and ".." are no session ids: they name no file, and delete() removes nothing', () => {
  const dir = tempDir('acp-cache-')
  const store = new SessionStore(dir)
  store.put({ sessionId: 'kept', cwd: '/w' })
  fs.mkdirSync(store.blobsOf('kept'))
  for (const id of ['.', '..', '', 'a/b', 'x'.repeat(129)]) {
    assert.equal(store.file(id), null, JSON.stringify(id))
    assert.equal(store.get(id), null)
    store.delete(id)
    assert.throws(() => store.blobsOf(id), /not a session id/)
    assert.throws(() => store.terminalsOf(id), /not a session id/)
    assert.throws(() => store.put({ sessionId: id, cwd: '/w' }), /not a session id/)
  }
  assert.ok(fs.existsSync(store.blobsOf('kept')) && store.get('kept'), 'the cache is whole')
  // Dots inside an id are fine.
  store.put({ sessionId: '.a..b.', cwd: '/w' })
  assert.equal(store.get('.a..b.').cwd, '/w')
})
