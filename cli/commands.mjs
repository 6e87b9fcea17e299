// @ts-check
// Custom slash commands from the Cursor set-up users already have: `.cursor/commands/*.md` in
// the workspace and in each folder above it up to its git root (the nearest folder wins a
// name), then the user's `~/.cursor/commands/*.md`. `/name args` sends the file's text with the
// arguments: in place of `$ARGUMENTS` where the file has it, else after the text. A file that
// cannot be a command (a name that is not a plain word, empty, too large, unreadable) is
// skipped with a warning in the log; it never fails a session.

import { folderEntries } from './text-files.mjs'
import { builtin } from './builtin.mjs'

const fs = builtin('node:fs')
const os = builtin('node:os')
const path = builtin('node:path')

/** @typedef {import('@agentclientprotocol/sdk').AvailableCommand} AvailableCommand */

/** A command's name: what follows the `/`. */
const NAME = /^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$/
/** The largest command file read (a prompt, not a document). */
export const MAX_COMMAND_BYTES = 256 * 1024
const DESCRIPTION_LENGTH = 100

/**
 * A custom command: its name, what the editor shows, and the file it sends.
 * @typedef {object} CustomCommand
 * @property {string} name
 * @property {string} description
 * @property {string} file
 */

/**
 * The folders of a project whose Cursor set-up applies to a workspace, nearest first: the
 * workspace itself and each folder above it up to its git root (only the workspace when it is
 * not in git: a folder above it belongs to no project of its).
 * @param {string} cwd
 * @returns {string[]}
 */
export function projectFolders(cwd) {
  const ups = []
  let dir = path.resolve(cwd)
  for (;;) {
    ups.push(dir)
    if (fs.existsSync(path.join(dir, '.git'))) return ups
    const parent = path.dirname(dir)
    if (parent === dir) return ups.slice(0, 1)
    dir = parent
  }
}

/**
 * The folders commands are read from, nearest first: the workspace's `.cursor/commands`, each
 * folder's above it up to the git root (none above a workspace outside git), then the user's.
 * @param {string} cwd
 * @param {string} [home]
 */
export function commandFolders(cwd, home = os.homedir()) {
  return [...projectFolders(cwd).map((dir) => path.join(dir, '.cursor', 'commands')), path.join(home, '.cursor', 'commands')]
}

/**
 * Watches the command folders that exist and calls `changed` (at most once per 200 ms) when
 * something in them changes. Returns the watchers' closer; a folder that cannot be watched is
 * read again at the next prompt instead.
 * @param {string} cwd
 * @param {() => void} changed
 * @param {string} [home]
 */
export function watchCommands(cwd, changed, home) {
  /** @type {import('node:fs').FSWatcher[]} */
  const watchers = []
  /** @type {ReturnType<typeof setTimeout> | undefined} */
  let timer
  for (const folder of commandFolders(cwd, home)) {
    try {
      const watcher = fs.watch(folder, () => {
        clearTimeout(timer)
        timer = setTimeout(changed, 200)
        timer.unref?.()
      })
      watcher.on('error', () => watcher.close())
      watcher.unref()
      watchers.push(watcher)
    } catch {
      // Absent, or not watchable here.
    }
  }
  return () => {
    clearTimeout(timer)
    for (const w of watchers) w.close()
  }
}

/**
 * The custom commands a session offers, by name (built-in names are never taken).
 * @param {string[]} folders  `commandFolders()`: a session finds them once, and reads what is
 *   in them at every prompt
 * @param {{ reserved: Iterable<string>, log: import('./log.mjs').Logger }} o
 * @returns {Map<string, CustomCommand>}
 */
export function loadCommands(folders, { reserved, log }) {
  const taken = new Set(reserved)
  /** @type {Map<string, CustomCommand>} */
  const commands = new Map()
  for (const folder of folders) {
    for (const entry of folderEntries(folder, 'the commands', log)) {
      if (!entry.name.endsWith('.md')) continue
      const name = entry.name.slice(0, -'.md'.length)
      const file = path.join(folder, entry.name)
      if (!NAME.test(name)) {
        log.warn(`skipping the command ${file}: its name must be letters, digits, '.', '_' or '-'`)
        continue
      }
      if (taken.has(name) || commands.has(name)) continue
      const text = readCommand(file, log)
      if (text === null) continue
      commands.set(name, { name, description: describe(text), file })
    }
  }
  return commands
}

/**
 * A command file's text, or null (with a warning) when it cannot be one.
 * @param {string} file
 * @param {import('./log.mjs').Logger} log
 */
function readCommand(file, log) {
  try {
    const stat = fs.statSync(file)
    if (!stat.isFile()) return null
    if (stat.size > MAX_COMMAND_BYTES) {
      log.warn(`skipping the command ${file}: ${stat.size} bytes, more than ${MAX_COMMAND_BYTES}`)
      return null
    }
    const text = fs.readFileSync(file, 'utf8')
    if (!text.trim()) {
      log.warn(`skipping the command ${file}: it is empty`)
      return null
    }
    return text
  } catch (e) {
    log.warn(`skipping the command ${file}:`, e)
    return null
  }
}

/**
 * What the editor shows of a command: its first line with words (a heading's text), cut.
 * @param {string} text
 */
function describe(text) {
  const line = text.split('\n').map((l) => l.replace(/^#+\s*/, '').trim()).find(Boolean) ?? ''
  const chars = [...line]
  return chars.length > DESCRIPTION_LENGTH ? `${chars.slice(0, DESCRIPTION_LENGTH - 1).join('')}…` : line
}

/**
 * The commands as `available_commands_update` lists them.
 * @param {Map<string, CustomCommand>} commands
 * @returns {AvailableCommand[]}
 */
export function available(commands) {
  return [...commands.values()].map(({ name, description }) => ({ name, description, input: { hint: 'arguments (optional)' } }))
}

/**
 * A prompt's first text as a command call, or null: `/name` alone or followed by its arguments.
 * @param {string} text
 */
export function parseCall(text) {
  const m = /^\/([^\s/]+)(?:\s+([\s\S]*))?$/.exec(text.trim())
  return m ? { name: m[1], args: (m[2] ?? '').trim() } : null
}

/**
 * What a command call sends: the file's text (read now, so an edit applies at once) with the
 * arguments.
 * @param {CustomCommand} command
 * @param {string} args
 */
export function expand(command, args) {
  const text = fs.readFileSync(command.file, 'utf8')
  if (text.includes('$ARGUMENTS')) return text.replaceAll('$ARGUMENTS', args)
  return args ? `${text.trimEnd()}\n\n${args}` : text
}
