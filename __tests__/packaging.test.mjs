// The package as a user installs it: the root tarball and this host's platform tarball (`npm
// pack`), installed from the registry's point of view into an empty directory outside the
// checkout, and used from there: the bin through an ACP client, require, import, worker threads,
// and strict TypeScript consumers compiled by the oldest and the newest TypeScript we support.
import { test } from 'node:test'
import assert from 'node:assert/strict'
import fs from 'node:fs'
import path from 'node:path'
import { fileURLToPath } from 'node:url'
import { hostPlatform, installPacked, lockedVersion, packPackages, root, run } from './packed.mjs'

// The TypeScript range the README states: 5.0 is the oldest that reads the SDK's typings.
const TYPESCRIPT = { oldest: '5.0.4', newest: '7.0.2' }

const abi = hostPlatform()
const packs = packPackages()
const app = installPacked(packs, [
  `@types/node@${lockedVersion('@types/node')}`,
  `typescript-oldest@npm:typescript@${TYPESCRIPT.oldest}`,
  `typescript-newest@npm:typescript@${TYPESCRIPT.newest}`,
])
fs.cpSync(fileURLToPath(new URL('./fixtures/consumer/', import.meta.url)), app, { recursive: true })
fs.copyFileSync(path.join(root, 'scripts', 'acp-turn.mjs'), path.join(app, 'acp-turn.mjs'))
const installed = path.join(app, 'node_modules', 'cursor-acp-native')
const node = (script, args = []) => run(process.execPath, [script, ...args], { cwd: app })

test('the root tarball holds the entry points, loader, typings, bin and CLI, and no binary or sources', () => {
  for (const file of ['package.json', 'index.js', 'index.d.ts', 'testing.js', 'testing.d.ts', 'load-native.js', 'native.js', 'native.d.ts', 'types/agent.d.ts', 'types/acp.d.mts', 'bin/cursor-acp-native.mjs', 'dist/compile-cache.mjs', 'dist/main.mjs', 'README.md', 'LICENSE']) {
    assert.ok(packs.rootFiles.includes(file), `${file} is not in the tarball`)
  }
  const unwanted = packs.rootFiles.filter((f) => f.endsWith('.node') || /^(src|crates|cli|__tests__|bench|npm|proto|target)\//.test(f))
  assert.deepEqual(unwanted, [])
  const manifest = JSON.parse(fs.readFileSync(path.join(installed, 'package.json'), 'utf8'))
  assert.equal(manifest.publishConfig.provenance, true)
  assert.match(manifest.repository.url, /github\.com/)
})

test("the platform tarball is the scoped package napi's loader looks for, with the binary only", () => {
  assert.equal(packs.platformManifest.name, `@cursor-acp-native/binding-${abi}`)
  assert.deepEqual(packs.platformManifest.os, [process.platform])
  assert.deepEqual(packs.platformManifest.cpu, [process.arch])
  assert.deepEqual(packs.platformFiles.sort(), ['LICENSE', 'README.md', `cursor-acp-native.${abi}.node`, 'package.json'])
  const loader = fs.readFileSync(path.join(installed, 'native.js'), 'utf8')
  assert.ok(loader.includes(`require('@cursor-acp-native/binding-${abi}')`), 'native.js does not look for the scoped package')
})

test('the committed npm/ packages are what `napi create-npm-dirs` makes of package.json', () => {
  const made = packs.npmDir
  for (const dir of fs.readdirSync(made)) {
    for (const file of ['package.json', 'README.md']) {
      const committed = path.join(root, 'npm', dir, file)
      assert.ok(fs.existsSync(committed), `npm/${dir}/${file} is missing`)
      assert.equal(fs.readFileSync(committed, 'utf8'), fs.readFileSync(path.join(made, dir, file), 'utf8'),
        `npm/${dir}/${file} is stale: run \`npx napi create-npm-dirs\` and commit it`)
    }
  }
})

test('the installed bin plays the embedded turn for an ACP client', { timeout: 120_000 }, () => {
  // The .bin link npm made (a shim on Windows, which only a shell runs: there, its target).
  const bin = process.platform === 'win32'
    ? [process.execPath, path.join(installed, 'bin', 'cursor-acp-native.mjs')]
    : [path.join(app, 'node_modules', '.bin', 'cursor-acp-native')]
  const turn = JSON.parse(node('acp-turn.mjs', ['--cwd', app, '--', ...bin]))
  assert.deepEqual(turn.problems, [])
  assert.equal(turn.stopReason, 'end_turn')
  assert.match(turn.shellOutput, /hello from cursor-acp-native/)
})

test('require() loads the package and its platform package from the install', { timeout: 60_000 }, () => {
  const turn = JSON.parse(node('consumer.cjs', [abi]))
  assert.deepEqual({ said: turn.said, stopReason: turn.stopReason, totalTokens: turn.totalTokens },
    { said: 'hello from require', stopReason: 'end_turn', totalTokens: 7 })
  assert.equal(path.relative(app, turn.listed), '', `the built-in ls listed ${turn.listed}, not the app's directory`)
  assert.equal(turn.entry, path.join(installed, 'index.js'))
  assert.equal(path.dirname(turn.binding), path.join(app, 'node_modules', '@cursor-acp-native', `binding-${abi}`))
})

test('import gives the same exports, named and default, and the testing helpers only from cursor-acp-native/testing', { timeout: 60_000 }, () => {
  const turn = JSON.parse(node('consumer.mjs'))
  assert.equal(turn.said, 'hello from import')
  assert.equal(turn.stopReason, 'end_turn')
  assert.equal(fileURLToPath(turn.entry), path.join(installed, 'index.js'))
})

test('worker threads and the main thread use the addon at once, and after the workers exit', { timeout: 60_000 }, () => {
  const turns = JSON.parse(node('consumer-worker.mjs'))
  assert.equal(turns.length, 4)
  for (const turn of turns) assert.equal(turn.stopReason, 'end_turn')
  assert.deepEqual(turns.map((t) => t.said.replace(/\d+$/, 'N')),
    ['hello from worker N', 'hello from worker N', 'hello from the main thread', 'hello from the main thread after the workers'])
})

for (const [which, version] of Object.entries(TYPESCRIPT)) {
  test(`strict consumers type-check with TypeScript ${version} (${which} supported)`, { timeout: 120_000 }, () => {
    const tsc = path.join(app, 'node_modules', `typescript-${which}`, 'bin', 'tsc')
    assert.equal(run(process.execPath, [tsc, '--version'], { cwd: app }).trim(), `Version ${version}`)
    for (const config of ['node16', 'nodenext', 'bundler']) {
      run(process.execPath, [tsc, '-p', `tsconfig.${config}.json`], { cwd: app })
    }
  })
}
