// @ts-check
// The stored login: `credentials.json` in the user's config directory, for this user only
// (folder 0700, file 0600 whatever the umask, written to a temporary file in the same folder
// and renamed, so a reader never sees half a file). No OS keychain: every way to reach one from
// Node needs a native module or a helper program per platform, and neither could be tested
// here; a private file is what the official CLI falls back to as well. The tokens in it never
// reach a log or an error message.

import { PRIVATE_FILE_MODE, privateDir, tighten, writePrivateFile } from './private-files.mjs'
import { builtin } from './builtin.mjs'

const fs = builtin('node:fs')
const { createRequire } = builtin('node:module')
const path = builtin('node:path')

/**
 * A login as stored: what `/auth/poll` gave, and where.
 * @typedef {object} StoredLogin
 * @property {string} accessToken
 * @property {string} refreshToken
 * @property {string} baseUrl  the backend the tokens are for
 * @property {string} savedAt  ISO 8601
 */

const FILE = 'credentials.json'

export class CredentialStore {
  /** @param {string} dir */
  constructor(dir) {
    this.dir = dir
    this.file = path.join(dir, FILE)
    /** What `read` last found, and which version of the file it was. @type {{ version: string, login: StoredLogin | null } | null} */
    this.lastRead = null
  }

  /**
   * The stored login, or null (none, or unreadable: then it is as if logged out).
   * @returns {StoredLogin | null}
   */
  read() {
    // Asked before every stream: the file is read again only when it is another file (a login
    // is written to a new file and renamed over the old) or was changed in place (its content,
    // or its mode: a file made readable to others is tightened again).
    let stat
    try {
      stat = fs.statSync(this.file, { throwIfNoEntry: false })
    } catch {
      stat = undefined
    }
    if (!stat) {
      this.lastRead = null
      return null
    }
    const version = `${stat.dev}:${stat.ino}:${stat.size}:${stat.mtimeMs}:${stat.ctimeMs}`
    if (this.lastRead?.version === version) return this.lastRead.login
    const login = this.parse()
    this.lastRead = { version, login }
    return login
  }

  /** @returns {StoredLogin | null} */
  parse() {
    let text
    try {
      text = fs.readFileSync(this.file, 'utf8')
    } catch {
      return null
    }
    this.tighten()
    try {
      const value = JSON.parse(text)
      if (typeof value?.accessToken !== 'string' || typeof value?.refreshToken !== 'string') return null
      return { accessToken: value.accessToken, refreshToken: value.refreshToken, baseUrl: String(value.baseUrl ?? ''), savedAt: String(value.savedAt ?? '') }
    } catch {
      return null
    }
  }

  /**
   * Stores `login` for this user only.
   * @param {Omit<StoredLogin, 'savedAt'>} login
   */
  write(login) {
    privateDir(this.dir)
    // Loaded here, not with the module: the agent imports this at start-up, where node:crypto
    // alone took 1.8 ms of the time to answer `initialize`.
    const { randomBytes } = createRequire(import.meta.url)('node:crypto')
    const temporary = path.join(this.dir, `.${FILE}.${randomBytes(6).toString('hex')}.tmp`)
    const record = { ...login, savedAt: new Date().toISOString() }
    // Exclusive: never follow or reuse a file someone put there; 0600 from the first byte.
    writePrivateFile(temporary, `${JSON.stringify(record, null, 2)}\n`, { exclusive: true })
    try {
      fs.renameSync(temporary, this.file)
    } catch (e) {
      fs.rmSync(temporary, { force: true })
      throw e
    }
  }

  /** Removes the stored login; whether there was one. */
  remove() {
    const existed = fs.existsSync(this.file)
    fs.rmSync(this.file, { force: true })
    return existed
  }

  /** A file others can read (copied in, or made before this product set modes) is made private. */
  tighten() {
    try {
      tighten(this.file, PRIVATE_FILE_MODE)
    } catch {}
  }
}
