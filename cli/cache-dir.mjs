// @ts-check
// Where the agent keeps what it can make again or that belongs to its sessions (saved sessions,
// their blobs and terminals, the compile cache), unless `--cache-dir` says otherwise. Small on
// purpose: the entry point reads it before the compile cache is on.
import os from 'node:os'
import path from 'node:path'

/**
 * `$XDG_CACHE_HOME` / `~/.cache` on Linux, `~/Library/Caches` on macOS, `%LOCALAPPDATA%` on Windows.
 * @param {NodeJS.ProcessEnv} [env]
 */
export function defaultCacheDir(env = process.env) {
  if (env.CURSOR_ACP_CACHE_DIR) return env.CURSOR_ACP_CACHE_DIR
  const home = os.homedir()
  let base
  if (process.platform === 'darwin') base = path.join(home, 'Library', 'Caches')
  else if (process.platform === 'win32') base = env.LOCALAPPDATA || path.join(home, 'AppData', 'Local')
  else base = env.XDG_CACHE_HOME || path.join(home, '.cache')
  return path.join(base, 'cursor-acp-native')
}
