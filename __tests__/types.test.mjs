// index.d.ts type-checks for ESM and CommonJS consumers (with ACP's own types), and rejects
// wrongly shaped exec results.
import { test } from 'node:test'
import assert from 'node:assert/strict'
import { spawnSync } from 'node:child_process'
import { fileURLToPath } from 'node:url'

const dir = fileURLToPath(new URL('./types/', import.meta.url))
const tsc = fileURLToPath(new URL('../node_modules/typescript/bin/tsc', import.meta.url))

function compile(project) {
  return spawnSync(process.execPath, [tsc, '-p', `${dir}${project}`], { encoding: 'utf8', timeout: 120_000 })
}

test('the public API type-checks from ESM and CommonJS', () => {
  const r = compile('tsconfig.json')
  assert.equal(r.status, 0, r.stdout + r.stderr)
})

test('wrongly shaped exec results do not type-check', () => {
  const r = compile('tsconfig.broken.json')
  assert.notEqual(r.status, 0)
  assert.match(r.stdout, /broken\.mts\(4,/, 'a string where the result message belongs')
  assert.match(r.stdout, /broken\.mts\(10,/, 'two members of one oneof')
  assert.match(r.stdout, /broken\.mts\(7,/, 'misspelt result branch')
  assert.match(r.stdout, /broken\.mts\(11,/, 'a byte array where the plain message type wants a string')
})
