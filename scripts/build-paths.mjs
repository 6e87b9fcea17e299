// The build machine's paths that end up in a release binary (panic messages name their source
// file: cargo's registry for every dependency, the target directory for generated code, the
// checkout), and the rustc flags that remap them to neutral names. `.cargo/config.toml` cannot
// expand variables and Cargo's `trim-paths` is not stable in this toolchain, so the flags are
// computed here, for scripts/release-build.mjs and scripts/check-build-paths.mjs.
import os from 'node:os'
import path from 'node:path'
import { fileURLToPath } from 'node:url'

export const ROOT = path.resolve(fileURLToPath(new URL('..', import.meta.url)))

/**
 * The prefixes to remap, each to a short relative name, in the order rustc is to get them (when
 * several match, rustc applies the last one given: the target directory may lie in the checkout).
 * @param {NodeJS.ProcessEnv} [env]
 * @returns {{ from: string, to: string }[]}
 */
export function buildPaths(env = process.env) {
  const cargoHome = path.resolve(env.CARGO_HOME || path.join(os.homedir(), '.cargo'))
  const targetDir = path.resolve(ROOT, env.CARGO_TARGET_DIR || 'target')
  return [
    { from: ROOT, to: '.' },
    { from: cargoHome, to: 'cargo' },
    { from: targetDir, to: 'target' },
  ]
}

/**
 * `--remap-path-prefix` flags for RUSTFLAGS. RUSTFLAGS is split at spaces, so a path holding
 * one cannot be remapped that way: it is left out with a warning (scripts/check-build-paths.mjs
 * then reports it in the binary). CI machines have none.
 * @param {NodeJS.ProcessEnv} [env]
 * @param {(message: string) => void} [warn]
 */
export function remapFlags(env = process.env, warn = console.warn) {
  const flags = []
  for (const { from, to } of buildPaths(env)) {
    if (/\s/.test(from)) warn(`not remapped (RUSTFLAGS cannot carry a path with spaces): ${from}`)
    else flags.push(`--remap-path-prefix=${from}=${to}`)
  }
  return flags
}
