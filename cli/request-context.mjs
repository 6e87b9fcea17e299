// @ts-check
// The request context Cursor asks for at the start of a turn: the workspace's rules (AGENTS.md,
// .cursorrules, .cursor/rules/*.md and *.mdc of every root), its skills, the MCP servers' tools
// and instructions, and the environment (OS, time zone, workspace and terminals folders). The shell
// is the core's to fill in: the client's `shell`, the one the built-in tools run.

import { readTextOrNull } from './text-files.mjs'
import { builtin } from './builtin.mjs'

const fs = builtin('node:fs')
const os = builtin('node:os')
const path = builtin('node:path')

/** @typedef {import('../index.js').RequestContext} RequestContext */
/** @typedef {import('../index.js').agent.CursorRule} CursorRule */

/** Larger rule files are left out. */
const RULE_LIMIT_BYTES = 64 * 1024

/** @type {{ value: string | undefined } | undefined} */
let zone

/**
 * This machine's time zone, read once per process: a session's prewarm calls this while the
 * user types, so that the first prompt does not wait for it. Where the system names the zone
 * plainly (`systemTimeZone`) it is read from there; elsewhere from `Intl`, whose first use loads
 * ICU's data: about 8 MiB of the agent's RSS and 10-20 ms of the JS thread, for this one name.
 */
export function timeZone() {
  if (!zone) {
    zone = { value: systemTimeZone() }
    if (zone.value === undefined) {
      try {
        zone.value = Intl.DateTimeFormat().resolvedOptions().timeZone
      } catch {}
    }
  }
  return zone.value
}

/** Where Linux and macOS keep the zone files `TZ` names (macOS links there too). */
const ZONEINFO = '/usr/share/zoneinfo'

/**
 * A zone's name as `TZ` or a zoneinfo path spells it: letters first (so no POSIX rule such as
 * `EST5EDT` or `CET-1CEST`), then segments like `America/Argentina/Buenos_Aires` or `Etc/GMT+5`.
 */
const ZONE_NAME = /^[A-Za-z][A-Za-z_+-]*(?:\/[A-Za-z][A-Za-z0-9_+-]*)*$/

/**
 * The names of UTC, which Node 20's `Intl` calls `UTC` whichever the system uses. Node 22's
 * calls `GMT` `+00:00`, an offset rather than a zone's name: `UTC` is sent for it too.
 */
const UTC_NAMES = new Set(['UTC', 'UCT', 'Universal', 'Zulu', 'GMT', 'GMT0', 'GMT+0', 'GMT-0', 'Greenwich'].flatMap((n) => [n, `Etc/${n}`]))

/**
 * Zones Node 20's `Intl` calls otherwise than the system's zone files do (tzdata 2025b): links
 * kept for former names (`US/Eastern` is `America/New_York` there), and zones that CLDR, whose
 * names ICU uses, still calls by a former name (`Asia/Kolkata` is `Asia/Calcutta`). They are
 * read through `Intl`, so that the name sent stays the one it was. So are the names of one
 * segment but UTC's (`CET`, `Japan`, `posixrules`) and the areas of such links only (`US/`,
 * `Canada/`, `Brazil/`, `Chile/`, `Mexico/`). A test holds every zone file of the system
 * against `Intl`.
 */
const INTL_NAMES_OTHERWISE = new Set(Object.entries({
  Africa: 'Asmara Timbuktu',
  America: 'Argentina/Buenos_Aires Argentina/Catamarca Argentina/ComodRivadavia Argentina/Cordoba Argentina/Jujuy Argentina/Mendoza Atikokan Atka Ensenada Fort_Wayne Indiana/Indianapolis Kentucky/Louisville Knox_IN Montreal Nipigon Nuuk Pangnirtung Porto_Acre Rainy_River Rosario Santa_Isabel Shiprock Thunder_Bay Virgin Yellowknife',
  Antarctica: 'South_Pole',
  Asia: 'Ashkhabad Choibalsan Chongqing Chungking Dacca Harbin Ho_Chi_Minh Istanbul Kashgar Kathmandu Kolkata Macao Tel_Aviv Thimbu Ujung_Pandang Ulan_Bator Yangon',
  Atlantic: 'Faroe Jan_Mayen',
  Australia: 'ACT Canberra Currie LHI NSW North Queensland South Tasmania Victoria West Yancowinna',
  Europe: 'Belfast Kyiv Nicosia Tiraspol Uzhgorod Zaporozhye',
  Pacific: 'Chuuk Johnston Kanton Pohnpei Samoa Yap',
}).flatMap(([area, names]) => names.split(' ').map((name) => `${area}/${name}`)))
const LINK_AREAS = /^(?:US|Canada|Brazil|Chile|Mexico)\//

/**
 * The time zone the system is set to, by its IANA name, read the way the C library and ICU read
 * it, without ICU: `TZ` when set (a leading `:` dropped), if it names a zone file; else the zone
 * file `/etc/localtime` links to (how Linux distributions and macOS set the zone). Undefined
 * where it is anything else, left to `Intl`: Windows, a `TZ` that is a POSIX rule or a path, an
 * `/etc/localtime` that is a copy rather than a link.
 * The name is the one `Intl` gives: where Node 20's `Intl` spells a zone otherwise than its
 * file, that zone too is left to `Intl` (`INTL_NAMES_OTHERWISE`).
 * @param {NodeJS.ProcessEnv} [env]
 * @returns {string | undefined}
 */
export function systemTimeZone(env = process.env) {
  if (process.platform === 'win32') return undefined
  /** @param {string} name */
  const plain = (name) => {
    if (UTC_NAMES.has(name)) return 'UTC'
    // `posix/` and `right/` hold the same zones again, with or without leap seconds.
    const elsewhere = !name.includes('/') || /^(?:posix|right)\//.test(name) || LINK_AREAS.test(name) || INTL_NAMES_OTHERWISE.has(name)
    return ZONE_NAME.test(name) && !elsewhere ? name : undefined
  }
  try {
    if (env.TZ !== undefined) {
      const name = env.TZ.startsWith(':') ? env.TZ.slice(1) : env.TZ
      return plain(name) && fs.statSync(path.join(ZONEINFO, name)).isFile() ? plain(name) : undefined
    }
    const target = fs.readlinkSync('/etc/localtime')
    const at = target.lastIndexOf('/zoneinfo/')
    return at < 0 ? undefined : plain(target.slice(at + '/zoneinfo/'.length))
  } catch {
    return undefined
  }
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
    if (!fs.statSync(dir, { throwIfNoEntry: false })) continue // the usual case, without an exception
    try {
      for (const name of fs.readdirSync(dir).sort()) if (name.endsWith('.mdc') || name.endsWith('.md')) addRule(path.join(dir, name))
    } catch {}
  }
  return rules
}
