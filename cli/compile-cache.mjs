// @ts-check
// Node's on-disk compile cache (Node ≥ 22.1) for the agent's own modules: a new agent process
// reads the code V8 made for them last time instead of compiling them again. An editor starts an
// agent per thread and waits for `initialize`; on Node 24 here that answer came after 59.4 ms
// without the cache and 54.6 ms with it (medians of 15, alternated; `node -e 0`: 34.9 ms).
// Older nodes have no such cache, and this does nothing there.
//
// The cache is kept in the agent's cache folder (`--cache-dir`, else `CURSOR_ACP_CACHE_DIR` or
// the platform's), in `compile-cache/`, a folder of this user's alone: Node's default is a
// folder under the system's temporary directory, which other users can make first and fill. A
// `NODE_COMPILE_CACHE` the user set wins (Node turned it on already); `NODE_DISABLE_COMPILE_CACHE`
// turns it off. Nothing here ever fails the agent: without a cache it only compiles as before.

import { defaultCacheDir } from './user-folders.mjs'
import { builtin } from './builtin.mjs'

const fs = builtin('node:fs')
const module = builtin('node:module')
const path = builtin('node:path')
const { parseArgs } = builtin('node:util')

/** `node:module` as Node 22.1 and later have it (the types are Node 20's). */
const nodeModule = /** @type {typeof module & {
  enableCompileCache?: (directory: string) => { status: number, message?: string, directory?: string },
  flushCompileCache?: () => void,
}} */ (module)

/**
 * Turns the compile cache on for every module loaded from now on; where it went, or null.
 * @param {string[]} [argv]  the agent's arguments (for `--cache-dir`)
 * @param {NodeJS.ProcessEnv} [env]
 * @returns {string | null}
 */
export function useCompileCache(argv = process.argv.slice(2), env = process.env) {
  if (typeof nodeModule.enableCompileCache !== 'function' || env.NODE_DISABLE_COMPILE_CACHE) return null
  try {
    // Only `--cache-dir` is read here; cli/main.mjs checks the whole command line.
    const { values } = parseArgs({ args: argv, options: { 'cache-dir': { type: 'string' } }, strict: false, allowPositionals: true })
    const given = values['cache-dir']
    const dir = path.join(path.resolve(typeof given === 'string' ? given : defaultCacheDir(env)), 'compile-cache')
    // Made private as the session store makes its folders (0700; on Windows the user's own
    // profile folder already is).
    fs.mkdirSync(dir, { recursive: true, mode: 0o700 })
    const { directory } = nodeModule.enableCompileCache(dir)
    return directory ?? null
  } catch {
    return null
  }
}

/** Writes what was compiled since the cache was turned on (Node would write it only at exit). */
export function flushCompileCache() {
  try {
    nodeModule.flushCompileCache?.()
  } catch {}
}
