// @ts-check
// Agent Skills (a folder with a `SKILL.md` whose front matter names the skill and says when to
// use it) from the Cursor set-up users already have: `.cursor/skills/` and `.agents/skills/` in
// each of the session's roots, then the user's `~/.cursor/skills/` and `~/.agents/skills/` (the
// first found wins a name). They go to the server in the request context (`agent_skills`), so
// the model can use them on its own; `/skill-name …` selects one for that prompt
// (`selected_skills`). A skill that cannot be read (no front matter, no name or description,
// too large) is skipped with a warning; it never fails a session.

import { folderEntries } from './text-files.mjs'
import { builtin } from './builtin.mjs'

const fs = builtin('node:fs')
const os = builtin('node:os')
const path = builtin('node:path')

/** @typedef {import('../index.js').agent.AgentSkill} AgentSkill */

/** The largest SKILL.md read. */
export const MAX_SKILL_BYTES = 256 * 1024
/** A skill's name, as the Agent Skills layout allows it. */
const NAME = /^[a-z0-9][a-z0-9-]{0,63}$/

/**
 * A skill: its name (what `/name` selects) and what the server gets.
 * @typedef {object} Skill
 * @property {string} name
 * @property {string} description
 * @property {AgentSkill} agentSkill
 */

/**
 * @param {string[]} roots  the session's folders (cwd first)
 * @param {string} [home]
 */
export function skillFolders(roots, home = os.homedir()) {
  const inRoots = roots.flatMap((root) => [path.join(root, '.cursor', 'skills'), path.join(root, '.agents', 'skills')])
  return [...inRoots, path.join(home, '.cursor', 'skills'), path.join(home, '.agents', 'skills')]
}

/**
 * The skills a session offers, by name.
 * @param {string[]} folders  `skillFolders()`: a session finds them once, and reads what is in
 *   them at every prompt
 * @param {{ log: import('./log.mjs').Logger }} o
 * @returns {Map<string, Skill>}
 */
export function loadSkills(folders, { log }) {
  /** @type {Map<string, Skill>} */
  const skills = new Map()
  for (const folder of folders) {
    for (const entry of folderEntries(folder, 'the skills', log)) {
      if (!entry.isDirectory()) continue
      const file = path.join(folder, entry.name, 'SKILL.md')
      const skill = readSkill(file, log)
      if (skill && !skills.has(skill.name)) skills.set(skill.name, skill)
    }
  }
  return skills
}

/**
 * One SKILL.md as a skill, or null (with a warning, unless there is no such file).
 * @param {string} file
 * @param {import('./log.mjs').Logger} log
 * @returns {Skill | null}
 */
function readSkill(file, log) {
  let text
  try {
    const stat = fs.statSync(file)
    if (!stat.isFile()) return null
    if (stat.size > MAX_SKILL_BYTES) {
      log.warn(`skipping the skill ${file}: ${stat.size} bytes, more than ${MAX_SKILL_BYTES}`)
      return null
    }
    text = fs.readFileSync(file, 'utf8')
  } catch (e) {
    if (/** @type {NodeJS.ErrnoException} */ (e).code !== 'ENOENT') log.warn(`skipping the skill ${file}:`, e)
    return null
  }
  const front = frontMatter(text)
  if (!front) {
    log.warn(`skipping the skill ${file}: it has no front matter (--- name: … description: … ---)`)
    return null
  }
  const name = front.get('name') ?? ''
  const description = front.get('description') ?? ''
  if (!NAME.test(name)) {
    log.warn(`skipping the skill ${file}: its name must be lower-case letters, digits and '-', got ${JSON.stringify(name)}`)
    return null
  }
  if (!description) {
    log.warn(`skipping the skill ${file}: it has no description`)
    return null
  }
  /** @type {AgentSkill} */
  const agentSkill = { fullPath: file, content: text, description }
  if (front.get('disable-model-invocation') === 'true') agentSkill.disableModelInvocation = true
  return { name, description, agentSkill }
}

/**
 * The `key: value` lines of a file's front matter (between `---` lines at its start), or null.
 * Values may be quoted; nested YAML is not read (skills need only plain keys).
 * @param {string} text
 * @returns {Map<string, string> | null}
 */
export function frontMatter(text) {
  const lines = text.replace(/^\uFEFF/, '').split(/\r?\n/)
  if (lines[0]?.trim() !== '---') return null
  const end = lines.findIndex((l, i) => i > 0 && l.trim() === '---')
  if (end < 0) return null
  /** @type {Map<string, string>} */
  const fields = new Map()
  for (const line of lines.slice(1, end)) {
    const m = /^([A-Za-z][\w-]*)\s*:\s*(.*)$/.exec(line)
    if (!m) continue
    let value = m[2].trim()
    if (value.length >= 2 && (value[0] === '"' || value[0] === "'") && value.at(-1) === value[0]) value = value.slice(1, -1)
    fields.set(m[1], value)
  }
  return fields
}
