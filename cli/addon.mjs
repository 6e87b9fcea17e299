// @ts-check
// The native addon, loaded on first use (the first session, or `--embedded`): loading it takes
// a good share of Node's own start-up, and answering `initialize` needs none of it.
import { builtin } from './builtin.mjs'

const { createRequire } = builtin('node:module')

const require = createRequire(import.meta.url)

/** @typedef {typeof import('../index.js')} Addon */
/** @typedef {import('./log.mjs').Level} Level */

/** @type {Addon | undefined} */
let addon
/** @type {Level | undefined} */
let coreLogLevel

/**
 * The level the addon's own (core) events are written to stderr at, applied when it loads.
 * @param {Level} level
 */
export function setCoreLogLevel(level) {
  coreLogLevel = level
  addon?.setLogLevel(level)
}

/** @returns {Addon} */
export function loadAddon() {
  if (!addon) {
    addon = /** @type {Addon} */ (require('../index.js'))
    if (coreLogLevel) addon.setLogLevel(coreLogLevel)
  }
  return addon
}

/**
 * The testing entry point (`--embedded`): the embedded backend, loaded with the addon.
 * @returns {typeof import('../testing.js')}
 */
export function loadTesting() {
  loadAddon()
  return require('../testing.js')
}
