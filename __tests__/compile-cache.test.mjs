// The agent turns Node's compile cache on for its own code (cli/compile-cache.mjs), in a folder
// of its cache that only its user can enter: a second start reads what the first wrote (the
// agent's bundle, dist/main.mjs, which holds every module of cli/ but the cache's own).
// Nodes without the cache (before 22.1) start as before and make no folder; npm run
// test:node-lts runs this on Node 24.
import assert from 'node:assert/strict'
import { spawnSync } from 'node:child_process'
import fs from 'node:fs'
import module from 'node:module'
import path from 'node:path'
import test from 'node:test'

import { CLI, INIT, tempDir } from './acp-harness.mjs'

const hasCache = typeof (/** @type {any} */ (module)).enableCompileCache === 'function'
const initialize = `${JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'initialize', params: INIT })}\n`

/** One start of the agent that answers `initialize` and ends with its input; its stderr. */
function start(cacheDir, env = {}) {
  const r = spawnSync(process.execPath, [CLI, '--cache-dir', cacheDir], {
    input: initialize,
    encoding: 'utf8',
    timeout: 30_000,
    env: { ...process.env, CURSOR_ACCESS_TOKEN: 'test-token', NODE_DEBUG_NATIVE: 'COMPILE_CACHE', ...env },
  })
  assert.equal(r.status, 0, r.stderr)
  assert.match(r.stdout, /"id":1,"result"/, 'initialize answered')
  return r.stderr
}

test('a second start reads the compiled code the first wrote, in a folder of this user alone', { skip: !hasCache && `node ${process.version} has no compile cache` }, () => {
  const cacheDir = tempDir('acp-compile-cache-')
  const first = start(cacheDir)
  assert.doesNotMatch(first, /was accepted/, 'nothing to read the first time')
  const folder = path.join(cacheDir, 'compile-cache')
  const entries = fs.readdirSync(folder, { recursive: true })
  assert.ok(entries.length > 0, 'no cache entry written')
  if (process.platform !== 'win32') assert.equal(fs.statSync(folder).mode & 0o777, 0o700)
  const second = start(cacheDir)
  assert.match(second, /V8 code cache for ESM \S+\/dist\/main\.mjs was accepted/)
})

test('NODE_DISABLE_COMPILE_CACHE turns it off, and a node without one makes no folder', () => {
  const cacheDir = tempDir('acp-compile-cache-')
  start(cacheDir, { NODE_DISABLE_COMPILE_CACHE: '1' })
  assert.equal(fs.existsSync(path.join(cacheDir, 'compile-cache')), false)
  if (!hasCache) {
    start(cacheDir)
    assert.equal(fs.existsSync(path.join(cacheDir, 'compile-cache')), false)
  }
})

test('a cache folder that cannot be made leaves the agent as it was', { skip: !hasCache && `node ${process.version} has no compile cache` }, () => {
  const parent = tempDir('acp-compile-cache-')
  // A file where the cache folder would go: no folder can be made there.
  const cacheDir = path.join(parent, 'cache')
  fs.mkdirSync(cacheDir)
  fs.writeFileSync(path.join(cacheDir, 'compile-cache'), 'not a folder')
  start(cacheDir)
  assert.equal(fs.readFileSync(path.join(cacheDir, 'compile-cache'), 'utf8'), 'not a folder')
})
