// scripts/test-js.mjs, the runner `npm test` and the Node 24 tier go through: a suite to leave
// out (`--except=`) that is no suite of the tier is refused before anything runs, since running
// every suite instead would hide the mistake.
import { test } from 'node:test'
import assert from 'node:assert/strict'
import { spawnSync } from 'node:child_process'
import { fileURLToPath } from 'node:url'

const runner = fileURLToPath(new URL('../scripts/test-js.mjs', import.meta.url))
const run = (...args) => spawnSync(process.execPath, [runner, ...args], { encoding: 'utf8', timeout: 30_000 })

test('test-js refuses an --except that names no suite of its tier, and a tier it does not have', () => {
  const misspelt = run('offline', '--except=bench.tests.mjs', '--except=cli.test.mjs')
  assert.equal(misspelt.status, 2, misspelt.stderr)
  assert.match(misspelt.stderr, /--except names no offline suite: bench\.tests\.mjs\n/)
  assert.doesNotMatch(misspelt.stdout, /suites/, 'nothing ran')

  // A suite of the other tier is not one of this tier's.
  const otherTier = run('offline', '--except=packaging.test.mjs')
  assert.equal(otherTier.status, 2)
  assert.match(otherTier.stderr, /no offline suite: packaging\.test\.mjs/)
  const registry = run('registry', '--except=cli.test.mjs')
  assert.equal(registry.status, 2)
  assert.match(registry.stderr, /no registry suite: cli\.test\.mjs/)

  const noTier = run('online')
  assert.equal(noTier.status, 2)
  assert.match(noTier.stderr, /^usage: node scripts\/test-js\.mjs offline\|registry/)
})
