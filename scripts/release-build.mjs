#!/usr/bin/env node
// `npm run build`: the release build (`napi build --platform --release`, options passed on) with
// the build machine's paths remapped out of the binary (scripts/build-paths.mjs).
//
//   node scripts/release-build.mjs [napi build options…]     e.g. --target aarch64-unknown-linux-musl -x
//
// The flags go in RUSTFLAGS (napi adds its own to it, e.g. `-crt-static` for musl). RUSTFLAGS
// replaces the `target.<triple>.rustflags` of .cargo/config.toml, so this adds those too: keep
// the two in step.
import { spawnSync } from 'node:child_process'
import { ROOT, remapFlags } from './build-paths.mjs'

const args = process.argv.slice(2)
const at = args.findIndex((a) => a === '--target' || a === '-t')
const target = at >= 0 ? args[at + 1] : hostTriple()
const flags = [process.env.RUSTFLAGS ?? '', ...remapFlags()]
if (/-pc-windows-msvc$/.test(target)) {
  // As .cargo/config.toml: the C runtime linked statically on Windows.
  flags.push('-C', 'target-feature=+crt-static')
  // The DLL names its PDB by file name only, not by the build machine's path to it.
  flags.push('-C', 'link-arg=/PDBALTPATH:%_PDB%')
}
const env = { ...process.env, RUSTFLAGS: flags.filter(Boolean).join(' ') }
// The committed loader and typings (native.js, native.d.ts) are generated from the debug build's
// features (docs/building.md); a release's features differ, so its own copies go elsewhere.
const generated = args.some((a) => /^--(js|no-js|js-binding|dts)\b/.test(a)) ? [] : ['--no-js', '--dts', 'target/release-typings/native.d.ts']
const napi = spawnSync('npx', ['napi', 'build', '--platform', '--release', ...generated, ...args], { cwd: ROOT, env, stdio: 'inherit', shell: process.platform === 'win32' })
process.exit(napi.status ?? 1)

function hostTriple() {
  const rustc = spawnSync('rustc', ['-vV'], { encoding: 'utf8' })
  const host = /^host: (\S+)$/m.exec(rustc.stdout ?? '')
  if (!host) throw new Error(`rustc -vV did not name the host: ${rustc.stderr || rustc.error}`)
  return host[1]
}
