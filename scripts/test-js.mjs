#!/usr/bin/env node
// Runs the JavaScript tests of one tier:
//
//   node scripts/test-js.mjs offline    every suite that needs no network after `npm ci` (`npm test`)
//   node scripts/test-js.mjs registry   the suites that install packages from the registry
//                                       (the package as a user installs it, the VS Code example,
//                                       the workflows' linters) and the release packages' own
//                                       agreement, run with them: `npm run test:registry`
//
// `--except=<suite>` leaves a suite of the tier out (scripts/test-on-node.mjs does for the bench).
//
// Suites run in parallel, as many at once as the machine has cores (at least two): each
// spawns its own agents, backends and temporary folders, and the ones that read the process
// table look only for processes they marked themselves. Extra arguments go to `node --test`.
import { spawnSync } from 'node:child_process'
import fs from 'node:fs'
import os from 'node:os'
import path from 'node:path'
import { fileURLToPath } from 'node:url'

const root = fileURLToPath(new URL('..', import.meta.url))

/** The suites that install from the registry (`npm install` of packed tarballs and tools). */
export const REGISTRY_SUITES = new Set(['packaging.test.mjs', 'release.test.mjs', 'vscode-extension.test.mjs', 'workflows.test.mjs'])

const [tier, ...args] = process.argv.slice(2)
if (tier !== 'offline' && tier !== 'registry') {
  console.error('usage: node scripts/test-js.mjs offline|registry [--except=<suite>…] [node --test options…]')
  process.exit(2)
}
const except = new Set(args.filter((a) => a.startsWith('--except=')).map((a) => a.slice('--except='.length)))
const rest = args.filter((a) => !a.startsWith('--except='))
const tierSuites = fs.readdirSync(path.join(root, '__tests__'))
  .filter((f) => f.endsWith('.test.mjs') && REGISTRY_SUITES.has(f) === (tier === 'registry'))
// A name that is no suite of the tier is a mistake, not a suite left out: it would run everything.
const unknown = [...except].filter((f) => !tierSuites.includes(f))
if (unknown.length) {
  console.error(`test-js: --except names no ${tier} suite: ${unknown.join(', ')}`)
  process.exit(2)
}
const suites = tierSuites.filter((f) => !except.has(f)).sort().map((f) => path.join('__tests__', f))
const concurrency = Math.max(2, os.availableParallelism())
const began = Date.now()
const r = spawnSync(process.execPath, ['--test', `--test-concurrency=${concurrency}`, ...rest, ...suites], { cwd: root, stdio: 'inherit' })
console.log(`test-js ${tier}: ${suites.length} suites, ${concurrency} at a time, ${((Date.now() - began) / 1000).toFixed(1)} s`)
process.exit(r.status ?? 1)
