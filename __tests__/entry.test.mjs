// The package's two entry points, written by hand over napi's generated loader: the client API in
// `cursor-acp-native` (index.js), the testing helpers in `cursor-acp-native/testing`; and what a
// host sees when the native addon cannot load.
import { test } from 'node:test'
import assert from 'node:assert/strict'
import fs from 'node:fs'
import path from 'node:path'
import { spawnSync } from 'node:child_process'
import { createRequire } from 'node:module'
import { fileURLToPath } from 'node:url'
import { tempDir } from './tmp.mjs'

const require = createRequire(import.meta.url)
const root = fileURLToPath(new URL('..', import.meta.url))
const TESTING = ['EmbeddedBackend', 'startEmbeddedBackend', 'bench']

test('index.js exports every native export but the testing helpers; testing.js exactly those', () => {
  const native = require('../native.js')
  const client = require('../index.js')
  const testing = require('../testing.js')
  const nativeNames = Object.keys(native).filter((n) => n !== '__napiBindingTarget')
  // A new #[napi] export is public unless it is a testing helper: it cannot go missing here.
  assert.deepEqual(Object.keys(client).sort(), nativeNames.filter((n) => !TESTING.includes(n)).sort())
  for (const name of Object.keys(client)) assert.equal(client[name], native[name], name)
  assert.deepEqual(Object.keys(testing).sort(), [...TESTING].sort())
  assert.equal(typeof testing.startEmbeddedBackend, 'function')
  assert.equal(typeof testing.bench?.decodeTextFrames, 'function', 'the test build carries the bench feature')
})

test('the hand-written typings name every export of their entry point', () => {
  const typed = (file) => fs.readFileSync(path.join(root, file), 'utf8')
  for (const name of Object.keys(require('../index.js'))) {
    assert.match(typed('index.d.ts'), new RegExp(`^\\s+${name},$`, 'm'), `index.d.ts does not export ${name}`)
  }
  for (const name of TESTING) assert.match(typed('testing.d.ts'), new RegExp(`\\b${name}\\b`), `testing.d.ts lacks ${name}`)
})

test('ES modules get the same named exports from both entry points', () => {
  const script = `
    import * as client from 'cursor-acp-native'
    import * as testing from 'cursor-acp-native/testing'
    console.log(JSON.stringify({ client: Object.keys(client).sort(), testing: Object.keys(testing).sort() }))`
  // Resolved by the package's own name: Node resolves a package's self-reference through its exports.
  const r = spawnSync(process.execPath, ['--input-type=module', '-e', script], { cwd: root, encoding: 'utf8' })
  assert.equal(r.status, 0, r.stderr)
  const { client, testing } = JSON.parse(r.stdout)
  // Node's own names for a CommonJS module: `default`, and since Node 23 `module.exports`.
  const named = (names) => names.filter((n) => n !== 'default' && n !== 'module.exports')
  assert.deepEqual(named(client), Object.keys(require('../index.js')).sort())
  assert.deepEqual(named(testing), [...TESTING].sort())
})

/** A copy of the package's JavaScript, without the binary unless `binary` is given. */
function packageCopy(binary) {
  const dir = tempDir('acp-entry-')
  for (const file of ['index.js', 'testing.js', 'load-native.js', 'native.js', 'package.json']) {
    fs.copyFileSync(path.join(root, file), path.join(dir, file))
  }
  if (binary) {
    const built = fs.readdirSync(root).find((f) => /^cursor-acp-native\..+\.node$/.test(f))
    fs.writeFileSync(path.join(dir, built), binary)
  }
  return dir
}

/** Loads `entry` of `dir` in a new process; returns the thrown error's message, code and cause. */
function loadError(dir, entry = './index.js') {
  const script = `try { require(${JSON.stringify(entry)}); console.log('null') } catch (e) {
    console.log(JSON.stringify({ message: e.message, code: e.code, cause: e.cause?.message })) }`
  const r = spawnSync(process.execPath, ['-e', script], { cwd: dir, encoding: 'utf8', env: { ...process.env, NODE_PATH: '' } })
  assert.equal(r.status, 0, r.stderr)
  return JSON.parse(r.stdout)
}

test('a binary that does not load: the error leads with why, napi\'s own message kept as its cause', () => {
  const error = loadError(packageCopy(Buffer.from('not a shared object')))
  assert.equal(error.code, 'E_ADDON_LOAD')
  assert.match(error.message, /^cursor-acp-native: the native addon for \w+-\w+(-\w+)? did not load: /)
  assert.match(error.message, /cursor-acp-native\..+\.node/, 'it names the file that failed')
  assert.doesNotMatch(error.message, /npm has a bug/)
  assert.match(error.cause, /Cannot find native binding/)
})

test('no binary at all: the error names the platform package and why it may be missing', () => {
  const error = loadError(packageCopy())
  assert.equal(error.code, 'E_ADDON_LOAD')
  assert.match(error.message, /^cursor-acp-native: no native addon for (\w+-\w+(-\w+)?) is installed\. npm installs it as the optional dependency @cursor-acp-native\/binding-\1;/)
  assert.match(error.message, /--omit=optional/)
})

// A musl Node.js on a glibc system: napi's loader asks /usr/bin/ldd, which says glibc, and looks
// for the glibc binary only. The process's own report says musl; the musl binary is loaded.
test('a musl Node.js on a glibc system loads the musl binary', { skip: process.platform !== 'linux' && 'Linux only' }, (t) => {
  if (fs.readFileSync('/usr/bin/ldd', 'utf8').includes('musl')) return t.skip('a musl system: napi\'s loader finds the musl binary itself')
  const dir = packageCopy()
  const built = fs.readdirSync(root).find((f) => /^cursor-acp-native\.linux-\w+-gnu\.node$/.test(f))
  fs.symlinkSync(path.join(root, built), path.join(dir, built.replace('-gnu.node', '-musl.node')))
  // As a musl Node.js reports itself: no glibc version in the header.
  const preload = path.join(dir, 'as-musl.cjs')
  fs.writeFileSync(preload, `const getReport = process.report.getReport.bind(process.report)
process.report.getReport = (...a) => { const r = getReport(...a); delete r.header.glibcVersionRuntime; return r }`)
  const r = spawnSync(process.execPath, ['-r', preload, '-e', "console.log(typeof require('./index.js').AgentClient)"], { cwd: dir, encoding: 'utf8' })
  assert.equal(r.status, 0, r.stderr)
  assert.equal(r.stdout.trim(), 'function')
  // Without the musl binary, the error names the musl package.
  fs.rmSync(path.join(dir, built.replace('-gnu.node', '-musl.node')))
  const missing = spawnSync(process.execPath, ['-r', preload, '-e', "try { require('./index.js') } catch (e) { console.log(e.message) }"], { cwd: dir, encoding: 'utf8' })
  assert.match(missing.stdout, /no native addon for linux-\w+-musl is installed.*binding-linux-\w+-musl/)
})

test('testing.js in a build without the embedded backend says so', () => {
  const dir = packageCopy()
  // A loader whose addon has no embedded backend, as a build without the `embedded` feature is.
  fs.writeFileSync(path.join(dir, 'native.js'), `module.exports = { AgentClient: class {} }`)
  const error = loadError(dir, './testing.js')
  assert.equal(error.code, 'E_NO_EMBEDDED_BACKEND')
  assert.match(error.message, /no embedded backend .*cargo feature `embedded`/)
  assert.equal(loadError(dir), null, 'the client entry point still loads')
})
