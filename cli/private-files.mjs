// @ts-check
// Files only their owner may read: saved sessions hold conversations, and `--record` what was
// sent to the server. Folders 0700 and files 0600 whatever the umask, existing ones tightened.
// On Windows, where modes mean nothing, the core gives them an access list of this user only
// (the addon's `makePrivate`), which a folder's files inherit.

import { loadAddon } from './addon.mjs'
import { builtin } from './builtin.mjs'

const fs = builtin('node:fs')
const path = builtin('node:path')
const { promisify } = builtin('node:util')

const windows = process.platform === 'win32'

export const PRIVATE_DIR_MODE = 0o700
export const PRIVATE_FILE_MODE = 0o600

/**
 * Makes `dir` (and missing parents, 0700) and tightens it to 0700 if it already existed.
 * @param {string} dir
 */
export function privateDir(dir) {
  fs.mkdirSync(dir, { recursive: true, mode: PRIVATE_DIR_MODE })
  tighten(dir, PRIVATE_DIR_MODE)
}

/**
 * Writes `text` to `file`, 0600 from its first byte: a new file is created with that mode (the
 * umask can only take bits away), an existing one is tightened before anything is written.
 * @param {string} file
 * @param {string} text
 * @param {{ exclusive?: boolean }} [options]  exclusive: fail if `file` exists
 */
export function writePrivateFile(file, text, { exclusive = false } = {}) {
  const fd = fs.openSync(file, exclusive ? 'wx' : 'w', PRIVATE_FILE_MODE)
  try {
    if (windows) loadAddon().makePrivate(file)
    else fs.fchmodSync(fd, PRIVATE_FILE_MODE)
    fs.writeFileSync(fd, text)
  } finally {
    fs.closeSync(fd)
  }
}

/**
 * `writePrivateFile` of a new file (`file` must not exist), off the JS thread: the open, write
 * and close run on libuv's threads. A file made new with mode 0600 needs no `fchmod` (the
 * umask can only take bits away).
 * @param {string} file
 * @param {string} text
 * @returns {Promise<void>}
 */
export function writeNewPrivateFileInBackground(file, text) {
  return writeFileInBackground(file, text, { flag: 'wx', mode: PRIVATE_FILE_MODE })
}

/**
 * fs's callback `writeFile`, as a promise: every turn saves its session through it, and
 * `fs.promises.writeFile` (a FileHandle per file) takes about 30% more of the JS thread.
 */
const writeFileInBackground = /** @type {(file: string, text: string, options: import('node:fs').WriteFileOptions) => Promise<void>} */ (promisify(fs.writeFile))

/**
 * Replaces `dir/name` with `value` as JSON, private, all at once: written to a temporary file
 * and renamed over it, so a reader never sees half of it and a crash leaves the old one.
 * @param {string} dir
 * @param {string} name
 * @param {unknown} value
 */
export function replacePrivateJson(dir, name, value) {
  privateDir(dir)
  const temporary = path.join(dir, `.${name}.${process.pid}.${Date.now()}.tmp`)
  writePrivateFile(temporary, `${JSON.stringify(value, null, 2)}\n`, { exclusive: true })
  try {
    fs.renameSync(temporary, path.join(dir, name))
  } catch (e) {
    fs.rmSync(temporary, { force: true })
    throw e
  }
}

/**
 * Takes group and other permissions off `target` (a file or folder) when it has any (on
 * Windows, gives it an access list of this user only).
 * @param {string} target
 * @param {number} mode
 */
export function tighten(target, mode) {
  if (windows) return loadAddon().makePrivate(target)
  const current = fs.statSync(target).mode & 0o777
  if (current & 0o077) fs.chmodSync(target, mode)
}

/**
 * `tighten`, off the JS thread: for a folder's worth of files, while the agent serves.
 * @param {string} target
 * @param {number} mode
 */
export async function tightenInBackground(target, mode) {
  // Windows: the folder's access list, set by `privateDir`, reached its files already.
  if (windows) return
  const current = (await fs.promises.stat(target)).mode & 0o777
  if (current & 0o077) await fs.promises.chmod(target, mode)
}
