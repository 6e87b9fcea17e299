// @ts-check
// Small text files read for the model's benefit (the old text of a diff, workspace rules), and
// the folders of the user's set-up (commands, skills): anything missing, not a regular file,
// too large or binary is simply absent.
import { builtin } from './builtin.mjs'

const fs = builtin('node:fs')

/**
 * The file's text, or null when it is missing, not a file, larger than `limit` or binary.
 * @param {string} file
 * @param {number} [limit]
 * @returns {string | null}
 */
export function readTextOrNull(file, limit = 4 * 1024 * 1024) {
  try {
    // A missing file is the usual case (rules and set-up read at every turn): no exception for it.
    const stat = fs.statSync(file, { throwIfNoEntry: false })
    if (!stat?.isFile() || stat.size > limit) return null
    const data = fs.readFileSync(file)
    if (data.includes(0)) return null
    return data.toString('utf8')
  } catch {
    return null
  }
}

/**
 * The entries of a folder of the user's set-up, sorted by name; none when it is missing. Any
 * other failure is a warning naming `what` could not be read: a set-up folder never fails a
 * session.
 * @param {string} folder
 * @param {string} what  e.g. "the commands"
 * @param {import('./log.mjs').Logger} log
 * @returns {import('node:fs').Dirent[]}
 */
export function folderEntries(folder, what, log) {
  // Most of these folders do not exist, and each is looked at every turn: a stat that does not
  // throw is about a tenth of the cost of the exception `readdirSync` would build.
  if (!fs.statSync(folder, { throwIfNoEntry: false })) return []
  try {
    return fs.readdirSync(folder, { withFileTypes: true }).sort((a, b) => a.name.localeCompare(b.name))
  } catch (e) {
    const code = /** @type {NodeJS.ErrnoException} */ (e).code
    if (code !== 'ENOENT' && code !== 'ENOTDIR') log.warn(`cannot read ${what} in ${folder}:`, e)
    return []
  }
}
