// @ts-check
// Small text files read for the model's benefit (the old text of a diff, workspace rules):
// anything missing, not a regular file, too large or binary is simply absent.
import fs from 'node:fs'

/**
 * The file's text, or null when it is missing, not a file, larger than `limit` or binary.
 * @param {string} file
 * @param {number} [limit]
 * @returns {string | null}
 */
export function readTextOrNull(file, limit = 4 * 1024 * 1024) {
  try {
    const stat = fs.statSync(file)
    if (!stat.isFile() || stat.size > limit) return null
    const data = fs.readFileSync(file)
    if (data.includes(0)) return null
    return data.toString('utf8')
  } catch {
    return null
  }
}
