// @ts-check
// The "Always allow" answers a user gave, kept per workspace in the agent's config folder
// (`always-allowed.json`, private), so they outlive the session and the process: a new session
// in the same folder starts with them. `cursor-acp-native status` lists them and
// `cursor-acp-native permissions clear [folder]` forgets them. A file that is not what this
// writes is treated as empty (and replaced on the next answer), never a failed session.

import { replacePrivateJson } from './private-files.mjs'
import { builtin } from './builtin.mjs'

const fs = builtin('node:fs')
const path = builtin('node:path')

export const ALWAYS_ALLOWED_FILE = 'always-allowed.json'

export class AlwaysAllowed {
  /** @param {string} dir  the agent's config folder */
  constructor(dir) {
    this.dir = dir
    this.file = path.join(dir, ALWAYS_ALLOWED_FILE)
  }

  /** @returns {Record<string, string[]>} every workspace's rules */
  all() {
    try {
      const workspaces = JSON.parse(fs.readFileSync(this.file, 'utf8'))?.workspaces
      if (!workspaces || typeof workspaces !== 'object' || Array.isArray(workspaces)) return {}
      /** @type {Record<string, string[]>} */
      const out = {}
      for (const [folder, rules] of Object.entries(workspaces)) {
        if (Array.isArray(rules)) out[folder] = rules.filter((r) => typeof r === 'string')
      }
      return out
    } catch {
      return {}
    }
  }

  /**
   * The rules remembered for a workspace.
   * @param {string} workspace
   */
  of(workspace) {
    return this.all()[workspace] ?? []
  }

  /**
   * Remembers more rules for a workspace.
   * @param {string} workspace
   * @param {string[]} rules
   */
  add(workspace, rules) {
    const workspaces = this.all()
    workspaces[workspace] = [...new Set([...(workspaces[workspace] ?? []), ...rules])].sort()
    replacePrivateJson(this.dir, ALWAYS_ALLOWED_FILE, { workspaces })
  }

  /**
   * Forgets the rules of one workspace, or of all; the number of rules forgotten.
   * @param {string} [workspace]
   */
  clear(workspace) {
    const workspaces = this.all()
    const gone = workspace === undefined ? Object.values(workspaces).flat().length : (workspaces[workspace] ?? []).length
    if (workspace === undefined) replacePrivateJson(this.dir, ALWAYS_ALLOWED_FILE, { workspaces: {} })
    else if (workspace in workspaces) {
      delete workspaces[workspace]
      replacePrivateJson(this.dir, ALWAYS_ALLOWED_FILE, { workspaces })
    }
    return gone
  }
}
