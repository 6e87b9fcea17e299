// @ts-check
// The request context Cursor asks for at the start of a turn: the workspace's rules (AGENTS.md,
// .cursorrules, .cursor/rules/*.md and *.mdc of every root), its skills, the MCP servers' tools
// and instructions, and the environment (OS, time zone, workspace and terminals folders). The shell
// is the core's to fill in: the client's `shell`, the one the built-in tools run.
import fs from 'node:fs'
import os from 'node:os'
import path from 'node:path'

import { readTextOrNull } from './text-files.mjs'

/** @typedef {import('../index.js').RequestContext} RequestContext */
/** @typedef {import('../index.js').agent.CursorRule} CursorRule */

/** Larger rule files are left out. */
const RULE_LIMIT_BYTES = 64 * 1024

/** @type {{ value: string | undefined } | undefined} */
let zone

/**
 * This machine's time zone, read once per process. The first use of `Intl` loads its data
 * (about 20 ms of the JS thread): a session's prewarm calls this while the user types, so that
 * the first prompt does not wait for it.
 */
export function timeZone() {
  if (!zone) {
    zone = { value: undefined }
    try {
      zone.value = Intl.DateTimeFormat().resolvedOptions().timeZone
    } catch {}
  }
  return zone.value
}

/**
 * @param {object} o
 * @param {string} o.cwd
 * @param {string[]} o.additionalDirectories
 * @param {import('./mcp.mjs').McpServers} o.mcp
 * @param {string} o.terminalsDir  where background shells write their output
 * @param {import('../index.js').agent.AgentSkill[]} [o.skills]  the session's skills (skills.mjs)
 * @returns {Promise<RequestContext>}
 */
export async function requestContext({ cwd, additionalDirectories, mcp, terminalsDir, skills = [] }) {
  await mcp.ready
  const roots = [cwd, ...additionalDirectories]
  return {
    rules: workspaceRules(roots),
    agentSkills: skills,
    tools: mcp.definitions(),
    mcpInstructions: mcp.instructions(),
    env: {
      osVersion: `${os.type()} ${os.release()}`,
      workspacePaths: roots,
      timeZone: timeZone(),
      projectFolder: cwd,
      terminalsFolder: terminalsDir,
    },
  }
}

/**
 * @param {string[]} roots
 * @returns {CursorRule[]}
 */
function workspaceRules(roots) {
  /** @type {CursorRule[]} */
  const rules = []
  /** @param {string} file */
  const addRule = (file) => {
    const content = readTextOrNull(file, RULE_LIMIT_BYTES)
    if (content?.trim()) rules.push({ fullPath: file, content })
  }
  for (const root of roots) {
    addRule(path.join(root, 'AGENTS.md'))
    addRule(path.join(root, '.cursorrules'))
    const dir = path.join(root, '.cursor', 'rules')
    try {
      for (const name of fs.readdirSync(dir).sort()) if (name.endsWith('.mdc') || name.endsWith('.md')) addRule(path.join(dir, name))
    } catch {}
  }
  return rules
}
