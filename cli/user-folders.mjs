// @ts-check
// Where the agent keeps its files unless told otherwise, one folder of the platform's per kind:
// the cache (saved sessions, their blobs and terminals, the compile cache) and the config (the
// stored login, the answers remembered per workspace). Small on purpose: the entry point reads it
// before the compile cache is on.
import { builtin } from './builtin.mjs'

const os = builtin('node:os')
const path = builtin('node:path')

/**
 * `cursor-acp-native` in the platform's folder of a kind, or `override` when set.
 * @param {string | undefined} override  the variable that names the folder itself
 * @param {{ macos: string, windows: string | undefined, windowsDefault: string, xdg: string | undefined, xdgDefault: string }} kind
 */
function userFolder(override, { macos, windows, windowsDefault, xdg, xdgDefault }) {
  if (override) return override
  const home = os.homedir()
  let base
  if (process.platform === 'darwin') base = path.join(home, 'Library', macos)
  else if (process.platform === 'win32') base = windows || path.join(home, 'AppData', windowsDefault)
  else base = xdg || path.join(home, xdgDefault)
  return path.join(base, 'cursor-acp-native')
}

/**
 * `$XDG_CACHE_HOME` / `~/.cache` on Linux, `~/Library/Caches` on macOS, `%LOCALAPPDATA%` on
 * Windows; `CURSOR_ACP_CACHE_DIR` overrides it.
 * @param {NodeJS.ProcessEnv} [env]
 */
export function defaultCacheDir(env = process.env) {
  return userFolder(env.CURSOR_ACP_CACHE_DIR, { macos: 'Caches', windows: env.LOCALAPPDATA, windowsDefault: 'Local', xdg: env.XDG_CACHE_HOME, xdgDefault: '.cache' })
}

/**
 * `$XDG_CONFIG_HOME` / `~/.config` on Linux and other Unixes, `~/Library/Application Support`
 * on macOS, `%APPDATA%` on Windows; `CURSOR_ACP_CONFIG_DIR` overrides it.
 * @param {NodeJS.ProcessEnv} [env]
 */
export function defaultConfigDir(env = process.env) {
  return userFolder(env.CURSOR_ACP_CONFIG_DIR, { macos: 'Application Support', windows: env.APPDATA, windowsDefault: 'Roaming', xdg: env.XDG_CONFIG_HOME, xdgDefault: '.config' })
}
