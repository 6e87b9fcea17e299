// The agent runs and ships as dist/, bundled from cli/ by scripts/bundle-cli.mjs: the bundle
// committed must be what the script makes of the sources as they are, or the tests that start
// the agent (and the package) would run code the sources no longer say.
import assert from 'node:assert/strict'
import test from 'node:test'

import { bundleCli, staleFiles } from '../scripts/bundle-cli.mjs'

test('dist/ is what scripts/bundle-cli.mjs makes of cli/ (npm run build:cli)', async () => {
  const files = await bundleCli()
  assert.deepEqual([...files.keys()].sort(), ['compile-cache.mjs', 'main.mjs'])
  assert.deepEqual(staleFiles(files), [], 'dist/ is stale: run npm run build:cli and commit it')
})

test('the bundle loads the packages on demand and names no module of cli/', async () => {
  const main = /** @type {string} */ ((await bundleCli()).get('main.mjs'))
  // What loads with the agent: node's own modules only. The packages come from node_modules
  // when a session needs them (agent-lazy-modules.test.mjs watches which).
  const imported = [...main.matchAll(/^import .* from "([^"]+)";$/gm)].map((m) => m[1])
  assert.ok(imported.length > 0, 'the bundle has its imports at the top')
  assert.deepEqual(imported.filter((s) => !s.startsWith('node:')), [])
  for (const pkg of ['@agentclientprotocol/sdk', '@modelcontextprotocol/client', '@modelcontextprotocol/client/stdio']) {
    assert.ok(main.includes(`import("${pkg}")`), `${pkg} is imported on demand`)
  }
  // The package ships dist/ without cli/.
  assert.doesNotMatch(main, /["']\.\.?\/cli\//)
})
