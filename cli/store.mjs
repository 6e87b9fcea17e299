// @ts-check
// Sessions saved under the user's cache directory: one JSON file per session (id, cwd, title,
// updatedAt, mode, model and the addon's saved conversation), written atomically, readable by
// its owner only (files 0600 in 0700 folders, whatever the umask).
//
// The store owns every file of a session: it names the layout (`sessions/<id>.json`,
// `blobs/<id>/`, `terminals/<id>/`), hands an open session its folders and its saves through
// `open()`, lists, tidies and deletes. The addon writes only into the folders it is handed and
// never makes one again once the store removed it; a session deleted while it is open saves
// nothing again (see `SessionFiles`).
import { PRIVATE_DIR_MODE, PRIVATE_FILE_MODE, privateDir, tightenInBackground, writeNewPrivateFileInBackground, writePrivateFile } from './private-files.mjs'
import { builtin } from './builtin.mjs'
import { loadAddon } from './addon.mjs'

const fs = builtin('node:fs')
const path = builtin('node:path')

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
 * @property {string} [approval]  `ask`, `edits` or `full`
 * @property {import('../index.js').SavedSession} [saved]  the addon's conversation, without its blobs (they are files of their own)
 */

/**
 * The files of one open session, from `SessionStore.open()`: the folders the addon is handed
 * (it writes nowhere else) and the saves of its record. Once the session is deleted, `deleted`
 * is true and `save` writes nothing: a turn that was running then ends without bringing the
 * session back.
 * @typedef {object} SessionFiles
 * @property {string} sessionId
 * @property {string} blobDir  the addon's `blobDir`
 * @property {string} terminalsDir  the built-in tools' `terminalsDir`
 * @property {boolean} deleted  whether the session was deleted since it was opened
 * @property {(record: SessionRecord) => boolean} save  saves the record, unless the session
 *   was deleted since it was opened (false, nothing written); throws for another session's record
 * @property {(record: SessionRecord, write?: WriteRecord) => Promise<boolean>} saveInBackground
 *   `save`, the file written and renamed into place off the JS thread (a turn's end: the agent
 *   serves other sessions meanwhile), by `write` when given (the addon's `saveToFile`, which
 *   adds the conversation to the record itself); false when nothing was saved: the session was
 *   deleted, or a later save of it landed first
 */

/**
 * Writes `record` to `file`, a new private file, off the JS thread, then lands it: renames it
 * over the session's record as save number `save` of `into` (`RecordFile.replace`). Resolves
 * whether it landed; rejects on failure.
 * @typedef {(file: string, record: SessionRecord, into: import('../index.js').RecordFile, save: number) => Promise<boolean>} WriteRecord
 */

/** @type {WriteRecord} */
const writeRecordAsJson = async (file, record, into, save) => {
  await writeNewPrivateFileInBackground(file, JSON.stringify(record)).catch(async (/** @type {any} */ e) => {
    if (e?.code !== 'EEXIST') throw e
    // Left by a failed write of this process: it is ours to replace.
    await fs.promises.rm(file, { force: true })
    await writeNewPrivateFileInBackground(file, JSON.stringify(record))
  })
  return into.replace(file, save)
}

/**
 * What `session/list` and conversation search read of a saved session.
 * @typedef {Pick<SessionRecord, 'sessionId' | 'cwd' | 'additionalDirectories' | 'title' | 'updatedAt'> & { conversationId?: string }} SessionSummary
 */

/** A session id that can name a file and a folder: `.` and `..` name folders that are not its own. */
const SAFE_ID = /^(?!\.{1,2}$)[A-Za-z0-9._-]{1,128}$/
/** `<id>.json.<pid>.tmp`, `<id>.json.<pid>.<opening>.<save>.tmp` (or an older `<id>.json.<pid>.<n>.tmp`): a session being written by process `pid`. */
const TEMPORARY = /^[A-Za-z0-9._-]{1,128}\.json\.(\d+)(?:\.\d+){0,2}\.tmp$/

export class SessionStore {
  /**
   * The summary of each session file read by `list()`, by file name, with the file's identity
   * when it was read: a file written since (a new inode every save) is read again.
   * @type {Map<string, { stamp: string, summary: SessionSummary | null }>}
   */
  #summaries = new Map()

  /**
   * How many times each session was deleted by this process: a `SessionFiles` opened before the
   * latest deletion of its session writes nothing. Only deleted ids are kept (a few bytes each).
   * @type {Map<string, number>}
   */
  #deletions = new Map()

  /**
   * The records with saves being written, by session id, and how many each: only while they
   * are written (a few entries at any time).
   * @type {Map<string, Map<import('../index.js').RecordFile, number>>}
   */
  #savesUnderWay = new Map()

  /** Numbers each `open()`, for its temporaries' names. */
  #openings = 0

  /**
   * Opens (or makes) the store: its folders, made 0700 or tightened to it. The cache folder
   * itself is made 0700 when missing, and left as it is otherwise (it may be one the user chose
   * for more than this). No saved session is touched: the agent opens the store before it
   * answers `initialize`, and a user's history grows without bound; `tidy()` sees to the
   * sessions once the agent is serving.
   * @param {string} dir
   */
  constructor(dir) {
    this.dir = dir
    this.sessionsDir = path.join(dir, 'sessions')
    this.blobDir = path.join(dir, 'blobs')
    fs.mkdirSync(dir, { recursive: true, mode: PRIVATE_DIR_MODE })
    privateDir(this.sessionsDir)
    privateDir(this.blobDir)
  }

  /**
   * Tightens saved sessions to 0600 (older versions left them under the umask) and removes the
   * temporaries of writers that are gone. Every file operation is asynchronous, so that a
   * history of thousands of sessions holds up no request; never rejects.
   * @returns {Promise<void>}
   */
  async tidy() {
    let names
    try {
      names = await fs.promises.readdir(this.sessionsDir)
    } catch {
      return // removed meanwhile: nothing to tidy
    }
    for (const name of names) {
      const file = path.join(this.sessionsDir, name)
      const writer = TEMPORARY.exec(name)
      try {
        if (writer && !isRunning(Number(writer[1]))) await fs.promises.rm(file, { force: true })
        else if (name.endsWith('.json')) await tightenInBackground(file, PRIVATE_FILE_MODE)
      } catch {
        // Gone meanwhile (another agent tidied or saved it): nothing to do.
      }
    }
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
    writeTemporary(tmp, record)
    fs.renameSync(tmp, file)
  }

  /**
   * Opens the files of session `sessionId` for the session that runs it: its folders for the
   * addon, and its saves, which stop for good once the session is deleted (`delete()`).
   * Nothing is made on disk here: the addon makes the folders as it opens them.
   * @param {string} sessionId  an id `file()` accepts
   * @returns {SessionFiles}
   */
  open(sessionId) {
    const id = checkedId(sessionId)
    const opened = this.#deletions.get(id) ?? 0
    const deleted = () => (this.#deletions.get(id) ?? 0) !== opened
    const file = /** @type {string} */ (this.file(id))
    // The core lands the saves (`RecordFile`): the one started last is kept whatever order
    // they are written in, and none lands once `delete()` closed it.
    const into = new (loadAddon().RecordFile)(file)
    /** @param {SessionRecord} record */
    const check = (record) => {
      if (record.sessionId !== id) throw new Error(`not the record of session ${id}: ${JSON.stringify(record.sessionId)}`)
    }
    // Its temporaries are named under this process's id (for `tidy()`) and this opening's
    // number: a session opened twice does not write over its other opening's.
    const opening = ++this.#openings
    /** A new save's number and its temporary; null when the session was deleted. */
    const begin = () => {
      const save = deleted() ? null : into.begin()
      return save === null ? null : { save, tmp: `${file}.${process.pid}.${opening}.${save}.tmp` }
    }
    return {
      sessionId: id,
      blobDir: this.blobsOf(id),
      terminalsDir: this.terminalsOf(id),
      get deleted() {
        return deleted()
      },
      save: (record) => {
        check(record)
        const started = begin()
        if (!started) return false
        writeTemporary(started.tmp, record)
        return into.replace(started.tmp, started.save)
      },
      saveInBackground: async (record, write = writeRecordAsJson) => {
        check(record)
        const started = begin()
        if (!started) return false
        const finished = this.#writing(id, into)
        try {
          return await write(started.tmp, record, into, started.save)
        } catch (e) {
          await fs.promises.rm(started.tmp, { force: true }).catch(() => {})
          throw e
        } finally {
          finished()
        }
      },
    }
  }

  /**
   * Counts a save of session `id` being written into `into`, until the function it returns is
   * called: `delete()` closes the records of the saves under way, so that none lands after it.
   * @param {string} id
   * @param {import('../index.js').RecordFile} into
   */
  #writing(id, into) {
    const records = this.#savesUnderWay.get(id) ?? new Map()
    this.#savesUnderWay.set(id, records)
    records.set(into, (records.get(into) ?? 0) + 1)
    return () => {
      const left = (records.get(into) ?? 1) - 1
      if (left) return void records.set(into, left)
      records.delete(into)
      if (!records.size && this.#savesUnderWay.get(id) === records) this.#savesUnderWay.delete(id)
    }
  }

  /**
   * Saves `record`, a new session, as a fork of saved session `sourceId`: the source's blobs
   * (the conversation its checkpoint refers to) copied into a folder of the fork's own, then
   * the record written. The source is only read. Its background shells' output is not copied:
   * those shells are the source's. What is copied is what is on disk now, the source's last
   * save: a turn still running in it adds nothing to the fork. On any failure nothing of the
   * fork is left behind.
   * @param {string} sourceId  a saved session
   * @param {SessionRecord} record  the fork's, under an id no session has
   */
  fork(sourceId, record) {
    const id = checkedId(record.sessionId)
    const file = /** @type {string} */ (this.file(id))
    if (!this.get(sourceId)) throw new Error(`no saved session ${JSON.stringify(sourceId)}`)
    if (fs.existsSync(file) || fs.existsSync(this.blobsOf(id))) throw new Error(`session ${id} exists already`)
    try {
      copyBlobs(this.blobsOf(sourceId), this.blobsOf(id))
      this.put(record)
    } catch (e) {
      fs.rmSync(file, { force: true })
      removeFolder(this.blobsOf(id))
      throw e
    }
  }

  /**
   * Removes the session, its blobs (the conversation's prompts and results, kept by the addon
   * under `blobs/<id>/`) and its background shells' output (`terminals/<id>/`, left there by an
   * agent that was killed): a deleted conversation leaves nothing of itself behind. Every
   * `SessionFiles` of it opened before saves nothing from now on. The session's tools must be
   * closed first (they never make their folder again once closed; the blob store never does).
   * @param {string} sessionId
   */
  delete(sessionId) {
    const file = this.file(sessionId)
    if (!file) return
    // First: whatever happens below, a save of the session that was open is refused, and none
    // being written lands (closing a record waits for a rename under way).
    this.#deletions.set(sessionId, (this.#deletions.get(sessionId) ?? 0) + 1)
    for (const into of this.#savesUnderWay.get(sessionId)?.keys() ?? []) into.close()
    this.#savesUnderWay.delete(sessionId)
    fs.rmSync(file, { force: true })
    removeFolder(this.blobsOf(sessionId))
    removeFolder(this.terminalsOf(sessionId))
  }

  /**
   * The folder of a session's blobs.
   * @param {string} sessionId  an id `file()` accepts
   */
  blobsOf(sessionId) {
    return path.join(this.blobDir, checkedId(sessionId))
  }

  /**
   * The folder a session's background shells write their output to.
   * @param {string} sessionId  an id `file()` accepts
   */
  terminalsOf(sessionId) {
    return path.join(this.dir, 'terminals', checkedId(sessionId))
  }

  /**
   * Newest first, optionally only for one cwd. A session's file is read the first time it is
   * listed and again only once rewritten: a history of thousands, each with its conversation,
   * is a directory listing and a stat per file after the first call, not megabytes to parse on
   * every page of `session/list`.
   * @param {string} [cwd]
   * @returns {SessionSummary[]}
   */
  list(cwd) {
    /** @type {Map<string, { stamp: string, summary: SessionSummary | null }>} */
    const current = new Map()
    /** @type {SessionSummary[]} */
    const out = []
    for (const name of fs.readdirSync(this.sessionsDir)) {
      if (!name.endsWith('.json')) continue
      const entry = this.#summaryOf(name)
      if (!entry) continue
      current.set(name, entry)
      if (entry.summary && (!cwd || entry.summary.cwd === cwd)) out.push(entry.summary)
    }
    // Sessions deleted since are forgotten.
    this.#summaries = current
    return out.sort((a, b) => (b.updatedAt ?? '').localeCompare(a.updatedAt ?? ''))
  }

  /**
   * The summary of session file `name`, from the last read while the file is the same one;
   * null when it names no session file (an unsafe name, or gone).
   * @param {string} name
   */
  #summaryOf(name) {
    const sessionId = name.slice(0, -'.json'.length)
    const file = this.file(sessionId)
    if (!file) return null
    let stat
    try {
      stat = fs.statSync(file)
    } catch {
      return null
    }
    const stamp = `${stat.ino}:${stat.size}:${stat.mtimeMs}`
    const known = this.#summaries.get(name)
    if (known?.stamp === stamp) return known
    // A save between the stat and this read leaves a newer summary under the older stamp: the
    // next call reads it again.
    const record = this.get(sessionId)
    /** @type {SessionSummary | null} */
    const summary = record && {
      sessionId: record.sessionId,
      cwd: record.cwd,
      ...(record.additionalDirectories ? { additionalDirectories: record.additionalDirectories } : {}),
      title: record.title,
      updatedAt: record.updatedAt,
      ...(record.saved?.conversationId ? { conversationId: record.saved.conversationId } : {}),
    }
    return { stamp, summary }
  }
}

/**
 * Writes `record` as JSON to `tmp`, a new private file of this process (one left there by a
 * failed write, or by an earlier process that had this one's id, is ours to replace); on
 * failure nothing is left at `tmp`.
 * @param {string} tmp
 * @param {SessionRecord} record
 */
function writeTemporary(tmp, record) {
  fs.rmSync(tmp, { force: true })
  try {
    writePrivateFile(tmp, JSON.stringify(record), { exclusive: true })
  } catch (e) {
    fs.rmSync(tmp, { force: true })
    throw e
  }
}

/** Numbers the folders `removeFolder` moves aside. */
let removals = 0

/**
 * Removes `folder` and everything in it, even while a writer of another thread (the addon's
 * blob store finishing a write) still makes files in it: a removal in place would meet a file
 * it had not listed and fail (ENOTEMPTY), leaving the folder. Renamed first (a name no session
 * id can have), the folder is gone at once under its own name, where the addon never makes it
 * again; what is still being made in it goes with the retries.
 * @param {string} folder
 */
function removeFolder(folder) {
  const aside = `${folder}~deleted-${process.pid}-${++removals}`
  try {
    fs.renameSync(folder, aside)
  } catch (e) {
    if (/** @type {NodeJS.ErrnoException} */ (e).code === 'ENOENT') return
    throw e
  }
  fs.rmSync(aside, { recursive: true, force: true, maxRetries: 5, retryDelay: 10 })
}

/** A blob as the addon names it: the hex of its id (its temporaries start with a dot). */
const BLOB_FILE = /^[0-9a-f]{2,128}$/

/**
 * Copies the blobs of folder `from` (absent: a session without blobs) into `to`, made 0700,
 * each copy 0600. Only finished blobs are copied: the addon writes a blob to a temporary and
 * renames it, so a blob being written by a running turn is either whole or not there.
 * @param {string} from
 * @param {string} to
 */
function copyBlobs(from, to) {
  let names
  try {
    names = fs.readdirSync(from)
  } catch (e) {
    if (/** @type {NodeJS.ErrnoException} */ (e).code === 'ENOENT') return
    throw e
  }
  privateDir(to)
  for (const name of names) {
    if (!BLOB_FILE.test(name)) continue
    const copy = path.join(to, name)
    fs.copyFileSync(path.join(from, name), copy, fs.constants.COPYFILE_EXCL)
    if (process.platform !== 'win32') fs.chmodSync(copy, PRIVATE_FILE_MODE)
  }
}

/**
 * `sessionId`, when it can name a folder of its own.
 * @param {string} sessionId
 */
function checkedId(sessionId) {
  if (!SAFE_ID.test(sessionId)) throw new Error(`not a session id: ${JSON.stringify(sessionId)}`)
  return sessionId
}

/**
 * Whether process `pid` exists (as anyone's: a process of another user still writes its own).
 * @param {number} pid
 */
function isRunning(pid) {
  // Ours: a save may be under way (tidy() runs beside them). One left by an earlier process
  // with our pid goes at the next start.
  if (pid === process.pid) return true
  try {
    process.kill(pid, 0)
    return true
  } catch (e) {
    return /** @type {NodeJS.ErrnoException} */ (e).code === 'EPERM'
  }
}
