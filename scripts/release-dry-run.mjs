#!/usr/bin/env node
// `npm run release:dry-run`: everything the release workflow (.github/workflows/release.yml)
// does, short of uploading, with the binaries this machine has. docs/release.md says what each
// step checks and what a run found.
//
//   node scripts/release-dry-run.mjs [options]
//
//   (no option)         builds this machine's package as the release does (on Linux:
//                       scripts/build-linux.sh <host>, zig and glibc 2.17, release profile)
//   --debug             builds it as a quick debug build instead (`npm run build:debug`); its
//                       static checks then only warn (a debug build is not what a release ships)
//   --skip-build        builds nothing: takes the binaries already there
//   --build-all         also builds every package this machine can cross-build
//                       (scripts/build-linux.sh, scripts/build-macos.sh): slow
//   --artifacts <dir>   also takes cursor-acp-native.<platform>.node files found under <dir>
//                       (e.g. the workflow's downloaded artifacts); repeatable
//   --require-all       a target without a binary fails the run, as it would fail the release
//   --out <dir>         where it works (default target/release-dry-run, emptied first)
//
// Binaries are taken, first found first, from: --artifacts, this run's build, the output of
// scripts/build-linux.sh (target/linux-release/out, or $SHIP_DIR/out) and scripts/build-macos.sh
// (target/macos/out, or $MAC_DIR/out), the repository root. A target with none is reported as
// "not built here": napi's steps get a stand-in file for it (they refuse a missing target), and
// its package is neither packed nor published, even as a dry run.
//
// Nothing can be published: npm and napi run in scripts/sealed-npm-env.mjs's environment (a dry
// run, no credentials, every request to a closed local port), `napi prepublish` with
// --skip-optional-publish and --no-gh-release, `npm publish` always with --dry-run. No git
// command writes anything.
import { spawnSync } from 'node:child_process'
import crypto from 'node:crypto'
import fs from 'node:fs'
import path from 'node:path'
import { parseArgs } from 'node:util'
import { hostPlatform, npm, root, run } from './pack.mjs'
import { npmPlatformCheck, parseTargets, releaseProblems } from './release-check.mjs'
import { sealedNpmEnv } from './sealed-npm-env.mjs'

const { values: options } = parseArgs({
  options: {
    debug: { type: 'boolean', default: false },
    'skip-build': { type: 'boolean', default: false },
    'build-all': { type: 'boolean', default: false },
    artifacts: { type: 'string', multiple: true, default: [] },
    'require-all': { type: 'boolean', default: false },
    out: { type: 'string' },
  },
})
if (options.debug && options['skip-build']) usage('--debug and --skip-build exclude each other')

const OUT = path.resolve(options.out ?? path.join(root, 'target', 'release-dry-run'))
const STAGE = path.join(OUT, 'release')
const NAPI = path.join(root, 'node_modules', '@napi-rs', 'cli', 'dist', 'cli.js')
const SHIP_DIR = path.resolve(root, process.env.SHIP_DIR ?? 'target/linux-release')
const MAC_DIR = path.resolve(root, process.env.MAC_DIR ?? 'target/macos')
const manifest = JSON.parse(fs.readFileSync(path.join(root, 'package.json'), 'utf8'))
const { binaryName } = manifest.napi
const host = hostPlatform()

const failures = []
const warnings = []
/** Per target: what happened to it, for the summary. */
const rows = new Map()

function usage(message) {
  console.error(`release-dry-run: ${message}\nusage: node scripts/release-dry-run.mjs [--debug | --skip-build] [--build-all] [--artifacts <dir>]… [--require-all] [--out <dir>]`)
  process.exit(2)
}
const step = (title) => console.log(`\n== ${title}`)
const fail = (message) => { failures.push(message); console.error(`  FAILED: ${message}`) }
const warn = (message) => { warnings.push(message); console.log(`  warning: ${message}`) }
const note = (abi, column, text) => rows.get(abi)[column] = text

/** Runs a long step with its output shown; its exit status. */
function shown(command, args, { cwd = root, env = process.env } = {}) {
  console.log(`  $ ${[command, ...args].join(' ')}`)
  return spawnSync(command, args, { cwd, env, stdio: 'inherit' }).status
}
/** Runs a long step with its output shown; false when it failed. */
const visible = (command, args, options) => shown(command, args, options) === 0

const napi = (args, env) => run(process.execPath, [NAPI, ...args], { cwd: STAGE, env, timeout: 600_000 })
const sha256 = (file) => crypto.createHash('sha256').update(fs.readFileSync(file)).digest('hex')

// --- 1. the checkout ---------------------------------------------------------------------------
const targets = await parseTargets(manifest.napi.targets)
for (const t of targets) rows.set(t.platformArchABI, { binary: 'not built here', checks: '-', publish: '-', install: '-' })
fs.rmSync(OUT, { recursive: true, force: true })
fs.mkdirSync(OUT, { recursive: true })

step("the checkout's package.json, napi.targets and npm/*/package.json agree")
{
  const { problems, notes } = await releaseProblems(root)
  for (const n of notes) warn(n)
  for (const p of problems) fail(p)
  if (!problems.length) console.log(`  ${targets.length} targets, version ${manifest.version}: agree`)
}

// --- 2. builds ---------------------------------------------------------------------------------
const builtHere = path.join(OUT, 'build', host)
if (options.debug) {
  step(`build ${host} (debug)`)
  fs.mkdirSync(builtHere, { recursive: true })
  // `npm run build:debug`: the build that writes the committed loader and typings, so they are
  // compared below too.
  if (!visible('npm', ['run', 'build:debug', '--', '--output-dir', builtHere])) fail(`the debug build of ${host} failed`)
} else if (!options['skip-build']) {
  if (options['build-all']) {
    step('build every Linux package (scripts/build-linux.sh)')
    if (!visible('bash', [path.join(root, 'scripts', 'build-linux.sh')])) fail('scripts/build-linux.sh failed')
    step('build the macOS packages (scripts/build-macos.sh)')
    const macos = shown('bash', [path.join(root, 'scripts', 'build-macos.sh')])
    // 3: the link needs Apple's SDK (docs/platforms.md): not built here, as on any Linux machine.
    if (macos === 3) warn('macOS: not linked here, the link needs the macOS SDK (scripts/build-macos.sh exit 3)')
    else if (macos !== 0) fail('scripts/build-macos.sh failed')
  }
  if (!options['build-all'] || !host.startsWith('linux-')) {
    step(`build ${host} as the release does`)
    const built = host.startsWith('linux-')
      ? visible('bash', [path.join(root, 'scripts', 'build-linux.sh'), host])
      : visible(process.execPath, [path.join(root, 'scripts', 'release-build.mjs'), '--output-dir', builtHere])
    if (!built) fail(`the release build of ${host} failed`)
  }
}

// --- 3. the binaries ---------------------------------------------------------------------------
step('binaries')
/** Files named `name` under `dir`, depth first. */
function findUnder(dir, name) {
  if (!fs.existsSync(dir)) return []
  return fs.readdirSync(dir, { withFileTypes: true, recursive: true })
    .filter((e) => e.isFile() && e.name === name)
    .map((e) => path.join(e.parentPath ?? e.path, e.name))
}
const binaries = new Map()
for (const t of targets) {
  const abi = t.platformArchABI
  const name = `${binaryName}.${abi}.node`
  const found = [
    ...options.artifacts.flatMap((dir) => findUnder(path.resolve(dir), name)),
    path.join(builtHere, name),
    path.join(SHIP_DIR, 'out', abi, name),
    path.join(MAC_DIR, 'out', abi, name),
    path.join(root, name),
  ].find((f) => fs.existsSync(f))
  if (found) {
    binaries.set(abi, found)
    const { size, mtime } = fs.statSync(found)
    note(abi, 'binary', `${path.relative(root, found)} (${(size / 2 ** 20).toFixed(1)} MiB, ${mtime.toISOString().slice(0, 16)}Z)`)
  } else if (options['require-all']) {
    fail(`${abi}: no binary (--require-all)`)
  }
  console.log(`  ${abi.padEnd(18)} ${rows.get(abi).binary}`)
}
if (!binaries.size) {
  fail('no binary at all: build one (run without --skip-build)')
  finish()
}

// --- 4. the checks the workflow runs on each binary --------------------------------------------
step('static checks of each binary (as the workflow runs them)')
const debugHost = (abi) => options.debug && binaries.get(abi) === path.join(builtHere, `${binaryName}.${abi}.node`)
for (const [abi, file] of binaries) {
  const t = targets.find((x) => x.platformArchABI === abi)
  const checks = [['build paths', process.execPath, [path.join(root, 'scripts', 'check-build-paths.mjs'), file]]]
  if (t.platform === 'linux') checks.push(['ELF, libraries, glibc', 'bash', [path.join(root, 'scripts', 'check-linux-binary.sh'), file, abi]])
  if (t.platform === 'darwin') checks.push(['Mach-O, libraries', process.execPath, [path.join(root, 'scripts', 'check-macos-binary.mjs'), file, abi]])
  const results = []
  for (const [what, command, args] of checks) {
    const r = spawnSync(command, args, { encoding: 'utf8' })
    const ok = r.status === 0
    console.log(`  ${abi} ${what}: ${ok ? 'ok' : 'FAILED'}\n${`${r.stdout}${r.stderr}`.trim().replace(/^/gm, '    ')}`)
    if (!ok) (debugHost(abi) ? warn : fail)(`${abi}: ${what} check failed${debugHost(abi) ? ' (a debug build)' : ''}`)
    results.push(`${what} ${ok ? 'ok' : 'failed'}`)
  }
  // The workflow's "generated loader and typings are the committed ones", for a build that
  // wrote them beside the binary.
  for (const generated of fs.readdirSync(path.dirname(file)).filter((f) => /\.(c?js|d\.ts)$/.test(f))) {
    const committed = path.join(root, generated)
    if (!fs.existsSync(committed)) continue
    if (sha256(committed) !== sha256(path.join(path.dirname(file), generated))) {
      fail(`${abi}: its build generated a ${generated} that differs from the committed one`)
      results.push(`${generated} differs`)
    } else {
      results.push(`${generated} as committed`)
    }
  }
  note(abi, 'checks', results.join(', '))
}

// --- 5. the packages, as the workflow's publish job makes them ----------------------------------
step('stage: npm pack of the checkout, napi create-npm-dirs, napi artifacts, LICENSE')
const local = sealedNpmEnv(OUT, { dryRun: false })
const dry = sealedNpmEnv(OUT, { dryRun: true })
const [rootPack] = JSON.parse(npm(['pack', '--json', '--ignore-scripts', '--pack-destination', OUT], { cwd: root, env: local }))
fs.mkdirSync(STAGE)
run('tar', ['-xzf', path.join(OUT, rootPack.filename), '-C', STAGE, '--strip-components=1'])
napi(['create-npm-dirs'], local)
fs.mkdirSync(path.join(STAGE, 'artifacts'))
for (const t of targets) {
  const name = `${binaryName}.${t.platformArchABI}.node`
  const into = path.join(STAGE, 'artifacts', name)
  if (binaries.has(t.platformArchABI)) fs.copyFileSync(binaries.get(t.platformArchABI), into)
  else fs.writeFileSync(into, `not built here: a stand-in by scripts/release-dry-run.mjs so that napi's steps see every target; never packed\n`)
}
napi(['artifacts'], local)
for (const t of targets) fs.copyFileSync(path.join(root, 'LICENSE'), path.join(STAGE, 'npm', t.platformArchABI, 'LICENSE'))
console.log(`  ${STAGE}: ${binaries.size} binaries, ${targets.length - binaries.size} stand-ins`)

step('napi prepublish -t npm --no-gh-release --dry-run (the workflow\'s dry run)')
try {
  napi(['prepublish', '-t', 'npm', '--no-gh-release', '--dry-run'], dry)
  console.log('  ok')
} catch (e) {
  fail(`napi prepublish --dry-run: ${e.message}`)
}
step('napi prepublish -t npm --no-gh-release --skip-optional-publish (the real one, its npm publish skipped)')
try {
  napi(['prepublish', '-t', 'npm', '--no-gh-release', '--skip-optional-publish'], dry)
  const written = JSON.parse(fs.readFileSync(path.join(STAGE, 'package.json'), 'utf8')).optionalDependencies ?? {}
  console.log(`  optionalDependencies written: ${Object.entries(written).map(([n, v]) => `${n}@${v}`).join(', ')}`)
} catch (e) {
  fail(`napi prepublish: ${e.message}`)
}

step('the packages about to be published agree (optionalDependencies included)')
{
  const { problems, notes } = await releaseProblems(STAGE, { optionalDependencies: 'required' })
  for (const n of notes) warn(n)
  for (const p of problems) fail(`stage: ${p}`)
  if (!problems.length) console.log('  agree')
}

// --- 6. npm publish --dry-run -------------------------------------------------------------------
step('npm publish --provenance --access public --ignore-scripts --dry-run: the root and each built package')
const publishArgs = ['publish', '--provenance', '--access', 'public', '--ignore-scripts', '--dry-run', '--json']
function publishDryRun(dir) {
  const out = npm(publishArgs, { cwd: dir, env: dry, timeout: 600_000 })
  // npm prints the JSON after any notices a lifecycle or warning wrote to stdout.
  return Object.values(JSON.parse(out.slice(out.indexOf('{'))))[0]
}
const size = (p) => `${p.files.length} files, ${(p.size / 2 ** 20).toFixed(1)} MiB packed`
try {
  const published = publishDryRun(STAGE)
  const files = published.files.map((f) => f.path)
  const binariesShipped = files.filter((f) => f.endsWith('.node'))
  if (binariesShipped.length) fail(`the root package would ship ${binariesShipped.join(', ')}`)
  for (const wanted of ['package.json', 'LICENSE', 'README.md', manifest.main, manifest.types]) {
    if (!files.includes(wanted)) fail(`the root package would not ship ${wanted}`)
  }
  console.log(`  ${published.id}: ${size(published)}`)
} catch (e) {
  fail(`npm publish --dry-run of the root package: ${e.message}`)
}
for (const t of targets) {
  const abi = t.platformArchABI
  if (!binaries.has(abi)) continue
  try {
    const published = publishDryRun(path.join(STAGE, 'npm', abi))
    const files = published.files.map((f) => f.path).sort()
    const wanted = ['LICENSE', 'README.md', `${binaryName}.${abi}.node`, 'package.json']
    if (JSON.stringify(files) !== JSON.stringify(wanted)) fail(`${published.id} would ship ${files.join(', ')}, not ${wanted.join(', ')}`)
    note(abi, 'publish', `dry run: ${size(published)}`)
    console.log(`  ${published.id}: ${size(published)}`)
  } catch (e) {
    fail(`npm publish --dry-run of ${abi}: ${e.message}`)
  }
}

// --- 7. installed as npm picks it, and run -----------------------------------------------------
step(`install: the root package with the platform package npm picks on this machine (${host})`)
installAndRun()
finish()

function installAndRun() {
  const check = npmPlatformCheck()
  if (!check) {
    fail("npm's own platform check (npm-install-checks) was not found: which package npm picks is unknown")
    return
  }
  const picked = targets.map((t) => t.platformArchABI).filter((abi) => {
    try {
      check(JSON.parse(fs.readFileSync(path.join(STAGE, 'npm', abi, 'package.json'), 'utf8')), false, {})
      return true
    } catch {
      return false
    }
  })
  if (picked.length !== 1 || picked[0] !== host) {
    fail(`npm would install ${picked.join(' and ') || 'no platform package'} here, not ${host} alone`)
    return
  }
  console.log(`  npm picks ${picked[0]} of the ${targets.length} platform packages`)
  if (!binaries.has(host)) {
    note(host, 'install', 'not built here')
    console.log(`  ${host}: not built here, nothing to install`)
    return
  }
  try {
    const packs = path.join(OUT, 'packs')
    fs.mkdirSync(packs)
    const tarball = (dir) => path.join(packs, JSON.parse(npm(['pack', '--json', '--ignore-scripts', '--pack-destination', packs], { cwd: dir, env: local, timeout: 600_000 }))[0].filename)
    const rootTarball = tarball(STAGE)
    const platformTarball = tarball(path.join(STAGE, 'npm', host))
    const app = path.join(OUT, 'try')
    fs.mkdirSync(app)
    fs.writeFileSync(path.join(app, 'package.json'), '{ "name": "release-dry-run-consumer", "private": true }\n')
    // Offline: the dependencies from npm's cache (`npm ci` filled it), the two packages from
    // their tarballs; the other platform packages, not on any registry yet, are optional and
    // skipped as npm skips them on a machine they do not fit.
    npm(['install', '--offline', '--no-audit', '--no-fund', '--loglevel=error', rootTarball, platformTarball], { cwd: app, env: local, timeout: 600_000 })
    const scope = path.join(app, 'node_modules', manifest.napi.packageName.split('/')[0])
    const installed = fs.readdirSync(scope)
    const wanted = [`${manifest.napi.packageName.split('/')[1]}-${host}`]
    if (JSON.stringify(installed) !== JSON.stringify(wanted)) fail(`installed ${installed.join(', ')}, not ${wanted.join(', ')}`)
    const loaded = JSON.parse(run(process.execPath, ['-e', `
      const entry = require.resolve('${manifest.name}')
      const addon = require('${manifest.name}')
      const binding = require.resolve('${manifest.napi.packageName}-${host}')
      console.log(JSON.stringify({ entry, binding, exports: Object.keys(addon).length, tools: typeof addon.LocalTools }))
    `], { cwd: app, env: local }))
    if (!loaded.binding.startsWith(path.join(app, 'node_modules')) || loaded.tools !== 'function') fail(`the installed package loaded oddly: ${JSON.stringify(loaded)}`)
    console.log(`  require('${manifest.name}'): ${loaded.exports} exports, the binary from ${path.relative(app, loaded.binding)}`)
    const bin = path.join(app, 'node_modules', manifest.name, manifest.bin[manifest.name])
    const turn = JSON.parse(run(process.execPath, [path.join(root, 'scripts', 'acp-turn.mjs'), '--cwd', app, '--', process.execPath, bin], { cwd: app, env: local, timeout: 180_000 }))
    if (turn.stopReason !== 'end_turn' || turn.problems.length) fail(`the installed agent's demo turn: ${JSON.stringify(turn)}`)
    console.log(`  the installed agent's embedded demo turn: ${turn.stopReason}, ${turn.updates} updates, ${turn.ms} ms, shell said ${JSON.stringify(turn.shellOutput)}`)
    note(host, 'install', `installed offline, loads, demo turn ${turn.stopReason} in ${turn.ms} ms`)
  } catch (e) {
    fail(`installing and running ${host}: ${e.message}`)
  }
}

function finish() {
  step('summary')
  const line = (cells) => `| ${cells.join(' | ')} |`
  const table = [line(['Package', 'Binary', 'Static checks', 'npm publish', 'Installed and run'])]
  table.push(line(['---', '---', '---', '---', '---']))
  for (const [abi, r] of rows) table.push(line([abi, r.binary, r.checks, r.publish, r.install]))
  const summary = [`release dry run of ${manifest.name}@${manifest.version}, ${new Date().toISOString().slice(0, 10)}, on ${host}`, '', ...table, '']
  for (const w of warnings) summary.push(`warning: ${w}`)
  for (const f of failures) summary.push(`FAILED: ${f}`)
  summary.push(failures.length ? `${failures.length} failures` : 'nothing published; everything a release does up to the upload passed')
  fs.writeFileSync(path.join(OUT, 'report.md'), `${summary.join('\n')}\n`)
  console.log(summary.join('\n'))
  console.log(`\n(report: ${path.relative(root, path.join(OUT, 'report.md'))})`)
  process.exit(failures.length ? 1 : 0)
}
