#!/usr/bin/env node
// Packs what npm users install: the root package and this machine's platform package
// (@cursor-acp-native/binding-<platform>, holding the addon built in the repository root), as the
// release workflow makes them (`napi create-npm-dirs`, `npm pack`). For trying the package before
// it is on npm, and for the packaging tests.
//
//   npm run build && node scripts/pack.mjs [dir]      (default dir: target/pack)
//   npm install -g <the two tarballs it prints>
//
//   node scripts/pack.mjs <dir> <cursor-acp-native.<platform>.node>…   (other platforms' builds)
import { spawnSync } from 'node:child_process'
import fs from 'node:fs'
import path from 'node:path'
import { fileURLToPath } from 'node:url'

export const root = fileURLToPath(new URL('..', import.meta.url))
const napiCli = path.join(root, 'node_modules', '@napi-rs', 'cli', 'dist', 'cli.js')

/** This host's napi platform name, e.g. `linux-x64-gnu`, `darwin-arm64`, `win32-x64-msvc`. */
export function hostPlatform() {
  const { platform, arch } = process
  if (platform === 'linux') {
    const glibc = process.report.getReport().header.glibcVersionRuntime
    return `linux-${arch}-${glibc ? 'gnu' : 'musl'}`
  }
  if (platform === 'win32') return `win32-${arch}-msvc`
  return `${platform}-${arch}`
}

/** Runs a command and returns its stdout; throws with both outputs when it fails. */
export function run(command, args, { cwd, env = process.env, timeout = 120_000 } = {}) {
  const r = spawnSync(command, args, { cwd, encoding: 'utf8', timeout, env })
  if (r.error) throw r.error
  if (r.status !== 0) {
    throw new Error(`${command} ${args.join(' ')} (in ${cwd}) exited ${r.status ?? r.signal}\n${r.stdout}\n${r.stderr}`)
  }
  return r.stdout
}

/** npm through the npm running this script when there is one (no shell needed, Windows included). */
export function npm(args, options) {
  const cli = process.env.npm_execpath
  if (cli && cli.endsWith('.js')) return run(process.execPath, [cli, ...args], options)
  return process.platform === 'win32'
    ? run(process.env.ComSpec ?? 'cmd.exe', ['/d', '/s', '/c', 'npm', ...args], options)
    : run('npm', args, options)
}

/**
 * Packs the root package and one platform package per binary (`cursor-acp-native.<platform>.node`,
 * by default this host's, from the repository root) into `dir`, emptied first.
 * @returns {{ root: string, rootFiles: string[], npmDir: string,
 *   platforms: Record<string, { tarball: string, files: string[], manifest: object }> }}
 */
export function packPackages(dir, binaries = [path.join(root, `cursor-acp-native.${hostPlatform()}.node`)]) {
  for (const binary of binaries) {
    if (!fs.existsSync(binary)) throw new Error(`${binary} is missing: build it first (npm run build, or npm run build:test)`)
  }
  fs.rmSync(dir, { recursive: true, force: true })
  fs.mkdirSync(dir, { recursive: true })
  // napi keeps npm dirs inside the project it reads: a copy of package.json stands for it.
  fs.copyFileSync(path.join(root, 'package.json'), path.join(dir, 'package.json'))
  run(process.execPath, [napiCli, 'create-npm-dirs', '--cwd', dir], { cwd: root })
  const [rootPack] = JSON.parse(npm(['pack', '--json', '--pack-destination', dir], { cwd: root }))
  const platforms = {}
  for (const binary of binaries) {
    const abi = /^cursor-acp-native\.(.+)\.node$/.exec(path.basename(binary))?.[1]
    const platformDir = path.join(dir, 'npm', abi ?? '')
    if (!abi || !fs.existsSync(platformDir)) throw new Error(`${binary} is not a build for one of napi.targets`)
    fs.copyFileSync(binary, path.join(platformDir, path.basename(binary)))
    fs.copyFileSync(path.join(root, 'LICENSE'), path.join(platformDir, 'LICENSE'))
    const [pack] = JSON.parse(npm(['pack', '--json', '--pack-destination', dir], { cwd: platformDir }))
    platforms[abi] = {
      tarball: path.join(dir, pack.filename),
      files: pack.files.map((f) => f.path),
      manifest: JSON.parse(fs.readFileSync(path.join(platformDir, 'package.json'), 'utf8')),
    }
  }
  return { root: path.join(dir, rootPack.filename), rootFiles: rootPack.files.map((f) => f.path), npmDir: path.join(dir, 'npm'), platforms }
}

if (process.argv[1] === fileURLToPath(import.meta.url)) {
  const [dirArg, ...binaries] = process.argv.slice(2)
  const packs = packPackages(path.resolve(dirArg ?? path.join(root, 'target', 'pack')), ...(binaries.length ? [binaries.map((b) => path.resolve(b))] : []))
  const tarballs = [packs.root, ...Object.values(packs.platforms).map((p) => p.tarball)]
  process.stdout.write(`${tarballs.join('\n')}\n`)
  if (!binaries.length) process.stderr.write(`\ninstall both, e.g.: npm install -g ${tarballs.map((t) => JSON.stringify(t)).join(' ')}\n`)
}
