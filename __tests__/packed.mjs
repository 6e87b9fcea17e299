// The package as npm users get it: `npm pack` of the root package and of this host's platform
// package (holding the addon `npm test` just built, see scripts/pack.mjs), installed into a
// directory outside the checkout. Shared by the packaging and VS Code extension tests.
import fs from 'node:fs'
import path from 'node:path'
import * as pack from '../scripts/pack.mjs'
import { tempDir } from './tmp.mjs'

export const { root, hostPlatform } = pack

/**
 * The environment of a user's shell: what `npm test` set that points back into the checkout is
 * left out (the registry and cache settings stay).
 */
function userEnv(extra) {
  const env = { ...process.env }
  for (const name of Object.keys(env)) {
    if (/^(npm_(package_|lifecycle_|config_local_prefix$|command$|execpath$|node_execpath$)|INIT_CWD$|NODE_PATH$|NODE_OPTIONS$|NAPI_RS_)/i.test(name)) {
      delete env[name]
    }
  }
  return { ...env, ...extra }
}

/** Runs a command as a user would; returns its stdout, throws with both outputs when it fails. */
export function run(command, args, { env = {}, ...options } = {}) {
  return pack.run(command, args, { ...options, env: userEnv(env) })
}

/** npm, as a user would run it. */
export function npm(args, { env = {}, ...options } = {}) {
  return pack.npm(args, { ...options, env: userEnv(env) })
}

/** The root tarball and the host's platform tarball, packed into a fresh temporary directory. */
export function packPackages() {
  const dir = tempDir('acp-pack-')
  const { root: rootTarball, rootFiles, npmDir, platforms } = pack.packPackages(dir)
  const host = platforms[hostPlatform()]
  return { root: rootTarball, rootFiles, npmDir, platform: host.tarball, platformFiles: host.files, platformManifest: host.manifest }
}

/** An empty project outside the checkout with both tarballs (and `extra` packages) installed. */
export function installPacked(packs, extra = [], prefix = 'acp-app-') {
  const app = tempDir(prefix)
  fs.writeFileSync(path.join(app, 'package.json'), '{ "name": "consumer", "private": true }\n')
  npm(['install', '--no-audit', '--no-fund', '--prefer-offline', '--loglevel=error', packs.root, packs.platform, ...extra], { cwd: app, timeout: 300_000 })
  return app
}

/** The exact version the checkout's lockfile installed, so a consumer gets the same one. */
export function lockedVersion(name) {
  return JSON.parse(fs.readFileSync(path.join(root, 'node_modules', name, 'package.json'), 'utf8')).version
}
