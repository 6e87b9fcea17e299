// @ts-check
// Sessions saved under the user's cache directory: one JSON file per session (id, cwd, title,
// updatedAt, mode, model and the addon's saved conversation), written atomically.
import fs from 'node:fs'
import os from 'node:os'
import path from 'node:path'

/**
 * One saved session.
 * @typedef {object} SessionRecord
 * @property {string} sessionId
 * @property {string} cwd
 * @property {string[]} [additionalDirectories]
 * @property {string | null} [title]
 * @property {string} [updatedAt]  ISO 8601
 * @property {string} [mode]
 * @property {string} [model]
 * @property {import('../index.js').SavedSession} [saved]  the addon's conversation, without its blobs (they are files of their own)
 */

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

const SAFE_ID = /^[A-Za-z0-9._-]{1,128}$/

export class SessionStore {
  /** @param {string} dir */
  constructor(dir) {
    this.dir = dir
    this.sessionsDir = path.join(dir, 'sessions')
    this.blobDir = path.join(dir, 'blobs')
    fs.mkdirSync(this.sessionsDir, { recursive: true })
    fs.mkdirSync(this.blobDir, { recursive: true })
  }

  /**
   * @param {string} sessionId
   * @returns {string | null}
   */
  file(sessionId) {
    // Ids come from clients: never let one name a path outside the store.
    if (!SAFE_ID.test(sessionId)) return null
    return path.join(this.sessionsDir, `${sessionId}.json`)
  }

  /**
   * @param {string} sessionId
   * @returns {SessionRecord | null}
   */
  get(sessionId) {
    const file = this.file(sessionId)
    if (!file) return null
    try {
      return JSON.parse(fs.readFileSync(file, 'utf8'))
    } catch {
      return null
    }
  }

  /** @param {SessionRecord} record */
  put(record) {
    const file = this.file(record.sessionId)
    if (!file) throw new Error(`not a session id: ${JSON.stringify(record.sessionId)}`)
    const tmp = `${file}.${process.pid}.tmp`
    fs.writeFileSync(tmp, JSON.stringify(record))
    fs.renameSync(tmp, file)
  }

  /** @param {string} sessionId */
  delete(sessionId) {
    const file = this.file(sessionId)
    if (file) fs.rmSync(file, { force: true })
  }

  /**
   * Newest first, optionally only for one cwd.
   * @param {string} [cwd]
   * @returns {SessionRecord[]}
   */
  list(cwd) {
    /** @type {SessionRecord[]} */
    const out = []
    for (const name of fs.readdirSync(this.sessionsDir)) {
      if (!name.endsWith('.json')) continue
      const record = this.get(name.slice(0, -5))
      if (!record || (cwd && record.cwd !== cwd)) continue
      out.push(record)
    }
    return out.sort((a, b) => (b.updatedAt ?? '').localeCompare(a.updatedAt ?? ''))
  }
}
