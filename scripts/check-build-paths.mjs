#!/usr/bin/env node
// Fails when a built addon names a path of the machine that built it: the checkout, cargo's home
// (the registry of every dependency), the target directory or the home directory. Run on every
// release binary (the release workflow does, and `npm run check:paths` for this machine's).
//
//   node scripts/check-build-paths.mjs [file.node…]     (default: the cursor-acp-native.*.node beside package.json)
import fs from 'node:fs'
import os from 'node:os'
import path from 'node:path'
import { ROOT, buildPaths } from './build-paths.mjs'

let files = process.argv.slice(2)
if (files.length === 0) files = fs.readdirSync(ROOT).filter((f) => /^cursor-acp-native\..*\.node$/.test(f)).map((f) => path.join(ROOT, f))
if (files.length === 0) fail('no cursor-acp-native.*.node to check: build one first (npm run build)')
const needles = [...new Set([...buildPaths().map((p) => p.from), os.homedir()])]
  .filter((p) => p.length > 1)
  .flatMap((p) => (process.platform === 'win32' ? [p, p.replaceAll('\\', '/')] : [p]))
let bad = false
for (const file of files) {
  const bytes = fs.readFileSync(file)
  for (const needle of needles) {
    const found = count(bytes, Buffer.from(needle))
    if (found) {
      bad = true
      console.error(`${path.basename(file)}: ${found} × ${needle}`)
    }
  }
  if (!bad) console.log(`${path.basename(file)}: no build-machine path (${needles.join(', ')})`)
}
if (bad) fail('build-machine paths found: build with `npm run build` (scripts/release-build.mjs remaps them)')

function count(haystack, needle) {
  let n = 0
  for (let at = haystack.indexOf(needle); at >= 0; at = haystack.indexOf(needle, at + needle.length)) n++
  return n
}

function fail(message) {
  console.error(message)
  process.exit(1)
}
