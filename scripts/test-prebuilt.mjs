#!/usr/bin/env node
// Runs the JavaScript tests against an addon that was built elsewhere: the release workflow puts
// the artifact (`cursor-acp-native.<platform>.node`) in the repository root and runs this
// (`npm run test:prebuilt`) on the platform it was built for, in place of `npm test` (which
// builds a debug addon from source).
// Left out: generated.test.mjs (compares index.js/index.d.ts with a fresh `napi build`) and
// bench.test.mjs (the benchmark's own harness, not the addon).
import { spawnSync } from 'node:child_process'
import fs from 'node:fs'
import path from 'node:path'
import { fileURLToPath } from 'node:url'

const root = fileURLToPath(new URL('..', import.meta.url))
const NEEDS_A_SOURCE_BUILD = new Set(['generated.test.mjs', 'bench.test.mjs'])

const binaries = fs.readdirSync(root).filter((f) => /^cursor-acp-native\..+\.node$/.test(f))
if (binaries.length === 0) {
  console.error('test-prebuilt: no cursor-acp-native.<platform>.node in the repository root')
  process.exit(1)
}
console.log(`testing ${binaries.join(', ')} with Node.js ${process.version} on ${process.platform}-${process.arch}`)

const tests = fs.readdirSync(path.join(root, '__tests__'))
  .filter((f) => f.endsWith('.test.mjs') && !NEEDS_A_SOURCE_BUILD.has(f))
  .sort()
  .map((f) => path.join('__tests__', f))
const r = spawnSync(process.execPath, ['--test', '--test-concurrency=1', ...tests], { cwd: root, stdio: 'inherit' })
process.exit(r.status ?? 1)
