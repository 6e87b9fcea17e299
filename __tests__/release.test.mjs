// The release packages agree: the root package.json, napi.targets, npm/*/package.json and the
// loader napi generated (scripts/release-check.mjs, which `npm run release:dry-run` runs too).
// Checked on the checkout, on a copy after `napi prepublish` wrote the root's
// optionalDependencies, and on copies broken on purpose, each of which must be caught.
import { test } from 'node:test'
import assert from 'node:assert/strict'
import fs from 'node:fs'
import path from 'node:path'
import { root, run } from '../scripts/pack.mjs'
import { npmPlatformCheck, releaseProblems } from '../scripts/release-check.mjs'
import { sealedNpmEnv } from '../scripts/sealed-npm-env.mjs'
import { tempDir } from './tmp.mjs'

const manifest = JSON.parse(fs.readFileSync(path.join(root, 'package.json'), 'utf8'))
const { packageName, binaryName } = manifest.napi
const napiCli = path.join(root, 'node_modules', '@napi-rs', 'cli', 'dist', 'cli.js')

/** A copy of what the check reads: package.json, the files it ships, npm/. */
function copyOfCheckout() {
  const dir = tempDir('acp-release-')
  for (const entry of ['package.json', 'npm', ...manifest.files]) {
    const from = path.join(root, entry)
    if (fs.existsSync(from)) fs.cpSync(from, path.join(dir, entry), { recursive: true })
  }
  return dir
}

const readJson = (file) => JSON.parse(fs.readFileSync(file, 'utf8'))
const writeJson = (file, value) => fs.writeFileSync(file, `${JSON.stringify(value, null, 2)}\n`)
/** Edits `<dir>/<file>` (JSON) in place. */
function edit(dir, file, change) {
  const full = path.join(dir, file)
  const value = readJson(full)
  change(value)
  writeJson(full, value)
}

test("npm's own platform check is found, so the checks below use it", () => {
  assert.equal(typeof npmPlatformCheck(), 'function')
})

test("the checkout's release packages agree", async () => {
  const { problems, notes } = await releaseProblems(root)
  assert.deepEqual(problems, [])
  assert.deepEqual(notes, [])
})

test('they still agree once napi prepublish has written the optionalDependencies', { timeout: 120_000 }, async () => {
  const dir = copyOfCheckout()
  // napi checks each platform package holds its binary; a stand-in is enough to write the
  // manifest (--skip-optional-publish: it publishes nothing, and the environment could not).
  for (const target of fs.readdirSync(path.join(dir, 'npm'))) {
    fs.writeFileSync(path.join(dir, 'npm', target, `${binaryName}.${target}.node`), 'stand-in\n')
  }
  run(process.execPath, [napiCli, 'prepublish', '-t', 'npm', '--no-gh-release', '--skip-optional-publish'],
    { cwd: dir, env: sealedNpmEnv(dir, { dryRun: true }) })
  const written = readJson(path.join(dir, 'package.json')).optionalDependencies
  assert.equal(Object.keys(written).length, manifest.napi.targets.length)
  assert.deepEqual(await releaseProblems(dir, { optionalDependencies: 'required' }), { problems: [], notes: [] })

  // And one wrong entry there is caught.
  edit(dir, 'package.json', (p) => {
    delete p.optionalDependencies[`${packageName}-darwin-arm64`]
    p.optionalDependencies[`${packageName}-linux-x64-gnu`] = '0.0.1'
    p.optionalDependencies[`${packageName}-freebsd-x64`] = p.version
  })
  const { problems } = await releaseProblems(dir, { optionalDependencies: 'required' })
  assert.deepEqual(problems, [
    `package.json: optionalDependencies has ${packageName}-linux-x64-gnu@0.0.1, not ${manifest.version}`,
    `package.json: optionalDependencies lacks ${packageName}-darwin-arm64`,
    `package.json: optionalDependencies has ${packageName}-freebsd-x64, which no target of napi.targets builds`,
  ])
})

test('a stage without optionalDependencies fails when they are required', async () => {
  const { problems } = await releaseProblems(copyOfCheckout(), { optionalDependencies: 'required' })
  assert.deepEqual(problems, ['package.json: no optionalDependencies (napi prepublish writes them)'])
})

/** Each breakage and the problems it must produce (all of them, nothing else). */
const BROKEN = {
  'a platform package left at the previous version': {
    change: (dir) => edit(dir, 'npm/linux-arm64-musl/package.json', (p) => { p.version = '0.0.9' }),
    problems: [`npm/linux-arm64-musl/package.json: version is "0.0.9", not "${manifest.version}"`],
  },
  'the root bumped alone': {
    change: (dir) => edit(dir, 'package.json', (p) => { p.version = '9.9.9' }),
    problems: [
      ...manifest.napi.targets.map(() => /: version is "0\.1\.0", not "9\.9\.9"$/),
      /expects its platform packages at 0\.1\.0, not 9\.9\.9/,
    ],
  },
  'a musl package without libc: npm would install it beside the gnu one': {
    change: (dir) => edit(dir, 'npm/linux-x64-musl/package.json', (p) => { delete p.libc }),
    problems: [
      'npm/linux-x64-musl/package.json: libc is nothing, not ["musl"]',
      /^on linux-x64-gnu .* npm would install linux-x64-gnu and linux-x64-musl, not linux-x64-gnu alone$/,
    ],
  },
  'a gnu package marked musl': {
    change: (dir) => edit(dir, 'npm/linux-arm64-gnu/package.json', (p) => { p.libc = ['musl'] }),
    problems: [
      'npm/linux-arm64-gnu/package.json: libc is ["musl"], not ["glibc"]',
      /^on linux-arm64-gnu .* npm would install no platform package, not linux-arm64-gnu alone$/,
      /^on linux-arm64-musl .* npm would install linux-arm64-gnu and linux-arm64-musl, not linux-arm64-musl alone$/,
    ],
  },
  'the wrong cpu': {
    change: (dir) => edit(dir, 'npm/darwin-arm64/package.json', (p) => { p.cpu = ['x64'] }),
    problems: [
      'npm/darwin-arm64/package.json: cpu is ["x64"], not ["arm64"]',
      /^on darwin-x64 .* npm would install darwin-x64 and darwin-arm64, not darwin-x64 alone$/,
      /^on darwin-arm64 .* npm would install no platform package, not darwin-arm64 alone$/,
    ],
  },
  'no os': {
    change: (dir) => edit(dir, 'npm/win32-x64-msvc/package.json', (p) => { delete p.os }),
    problems: [
      'npm/win32-x64-msvc/package.json: os is nothing, not ["win32"]',
      /^on linux-x64-gnu .* would install linux-x64-gnu and win32-x64-msvc/,
      /^on linux-x64-musl .* would install linux-x64-musl and win32-x64-msvc/,
      /^on darwin-x64 .* would install darwin-x64 and win32-x64-msvc/,
    ],
  },
  'a platform package shipping more than its binary': {
    change: (dir) => edit(dir, 'npm/linux-x64-gnu/package.json', (p) => { p.files.push('*.pdb') }),
    problems: [/^npm\/linux-x64-gnu\/package.json: files is \[.*"\*\.pdb"\], not \[.*\]$/],
  },
  'the root files list leaving out the bin': {
    change: (dir) => edit(dir, 'package.json', (p) => { p.files = p.files.filter((f) => f !== 'bin/') }),
    problems: [/^package.json points at bin\/cursor-acp-native\.mjs, which its files list leaves out$/],
  },
  'the root files list shipping binaries': {
    change: (dir) => edit(dir, 'package.json', (p) => { p.files.push('*.node') }),
    problems: [/^package.json: files has \*\.node/],
  },
  'a target without its package': {
    change: (dir) => edit(dir, 'package.json', (p) => { p.napi.targets.push('x86_64-unknown-freebsd') }),
    problems: [
      /^npm\/freebsd-x64\/package.json is missing \(napi.targets has x86_64-unknown-freebsd\)/,
      /^on freebsd-x64 .* npm would install no platform package, not freebsd-x64 alone$/,
      // The loader napi writes already looks for every platform napi knows, FreeBSD included.
    ],
  },
  'a package of no target': {
    change: (dir) => fs.cpSync(path.join(dir, 'npm', 'linux-x64-gnu'), path.join(dir, 'npm', 'linux-riscv64-gnu'), { recursive: true }),
    problems: ['npm/linux-riscv64-gnu is not a package of any target in napi.targets'],
  },
  'a platform package under another name': {
    change: (dir) => edit(dir, 'npm/darwin-x64/package.json', (p) => { p.name = 'cursor-acp-native-darwin-x64' }),
    problems: [`npm/darwin-x64/package.json: name is "cursor-acp-native-darwin-x64", not "${packageName}-darwin-x64"`],
  },
  'a platform package naming another repository (npm provenance refuses it)': {
    change: (dir) => edit(dir, 'npm/linux-arm64-gnu/package.json', (p) => { p.repository.url = 'git+https://github.com/someone/else.git' }),
    problems: [/^npm\/linux-arm64-gnu\/package.json: repository is .*someone\/else.*, not /],
  },
}

for (const [what, { change, problems: expected }] of Object.entries(BROKEN)) {
  test(`caught: ${what}`, async () => {
    const dir = copyOfCheckout()
    change(dir)
    const { problems } = await releaseProblems(dir)
    assert.equal(problems.length, expected.length, `expected ${expected.length} problems, got:\n${problems.join('\n')}`)
    expected.forEach((wanted, i) => {
      if (typeof wanted === 'string') assert.equal(problems[i], wanted)
      else assert.match(problems[i], wanted)
    })
  })
}
