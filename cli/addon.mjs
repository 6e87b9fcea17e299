// @ts-check
// The native addon, loaded on first use (the first session, or `--embedded`): loading it takes
// a good share of Node's own start-up, and answering `initialize` needs none of it.
import { createRequire } from 'node:module'

const require = createRequire(import.meta.url)

/** @typedef {typeof import('../index.js')} Addon */

/** @type {Addon | undefined} */
let addon

/** @returns {Addon} */
export function loadAddon() {
  addon ??= /** @type {Addon} */ (require('../index.js'))
  return addon
}
