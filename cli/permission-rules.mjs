// @ts-check
// The permission rules of the user's Cursor set-up, as the Cursor CLI reads them:
// `permissions.allow` / `permissions.deny` in `~/.cursor/cli-config.json` (user) and
// `<project>/.cursor/cli.json` (the session's folder up to its git root). Tokens:
//
//   Shell(npm)  Shell(git:*)  Shell(curl:-s *)   a shell's program (glob), optionally `:args` (glob)
//   Write(src/**)  Write(**/.env*)                a file written or deleted (relative to the folder)
//   Read(.env*)                                   read, but not applied: reads never ask here
//   WebFetch(docs.rs)  WebFetch(*.github.com)      a fetched URL's host
//   Mcp(server:tool)  Mcp(server, tool)  Mcp(server:*)
//
// Deny wins over allow; what no rule names is left to the user. A rule that does not parse, or a
// file that is not JSON, is skipped with a warning, never a failed session.

import { projectFolders } from './commands.mjs'
import { builtin } from './builtin.mjs'

const fs = builtin('node:fs')
const os = builtin('node:os')
const path = builtin('node:path')

/** @typedef {import('../index.js').PermissionRequest} PermissionRequest */

/**
 * @typedef {{ type: 'Shell', program: RegExp, args: RegExp | null }
 *   | { type: 'Write' | 'Read', path: RegExp }
 *   | { type: 'WebFetch', host: RegExp }
 *   | { type: 'Mcp', server: RegExp, tool: RegExp }} Matcher
 * @typedef {Matcher & { text: string, source: string }} Rule
 * @typedef {{ allow: Rule[], deny: Rule[] }} RuleSet
 */

const TOKEN = /^(Shell|Read|Write|WebFetch|Mcp)\((.*)\)$/s

/**
 * A glob as a regular expression: `**` any path, `*` and `?` within one segment, `{a,b}` either.
 * @param {string} glob
 * @param {{ segments?: boolean }} [o]  `false`: `*` crosses `/` too (programs, hosts, arguments)
 */
export function globToRegExp(glob, { segments = true } = {}) {
  let out = ''
  for (let i = 0; i < glob.length; i++) {
    const c = glob[i]
    if (c === '*' && glob[i + 1] === '*') {
      // `**/` also matches nothing, so `**/.env` names `.env` at the top too.
      const slash = glob[i + 2] === '/'
      out += slash ? '(?:.*/)?' : '.*'
      i += slash ? 2 : 1
    } else if (c === '*') out += segments ? '[^/]*' : '.*'
    else if (c === '?') out += segments ? '[^/]' : '.'
    else if (c === '{') {
      const end = glob.indexOf('}', i)
      if (end < 0) out += '\\{'
      else {
        out += `(?:${glob.slice(i + 1, end).split(',').map((part) => part.replace(/[.+^$()|[\]\\]/g, '\\$&').replace(/\*/g, '[^/]*')).join('|')})`
        i = end
      }
    } else out += c.replace(/[.+^$()|[\]\\{}]/g, '\\$&')
  }
  return new RegExp(`^${out}$`)
}

/**
 * One token, as a matcher; throws with the reason when it does not parse.
 * @param {string} token
 * @param {string} folder  where relative paths start (the session's folder)
 * @returns {Matcher}
 */
export function parseRule(token, folder) {
  const m = TOKEN.exec(token.trim())
  if (!m) throw new Error('expected Shell(…), Read(…), Write(…), WebFetch(…) or Mcp(…)')
  const [, type, inner] = m
  const value = inner.trim()
  if (!value) throw new Error('the pattern is empty')
  switch (type) {
    case 'Shell': {
      const colon = value.indexOf(':')
      const program = colon < 0 ? value : value.slice(0, colon)
      const args = colon < 0 ? null : value.slice(colon + 1).trim()
      if (!program.trim()) throw new Error('no program before the colon')
      return { type, program: globToRegExp(program.trim(), { segments: false }), args: args ? globToRegExp(args, { segments: false }) : null }
    }
    case 'Read':
    case 'Write': {
      const absolute = path.isAbsolute(value) ? value : path.join(folder, value)
      return { type, path: globToRegExp(absolute.split(path.sep).join('/')) }
    }
    case 'WebFetch':
      return { type, host: globToRegExp(value.toLowerCase(), { segments: false }) }
    default: {
      const parts = value.includes(',') ? value.split(',') : value.split(':')
      if (parts.length !== 2 || !parts[0].trim() || !parts[1].trim()) throw new Error('expected Mcp(server:tool)')
      return { type: 'Mcp', server: globToRegExp(parts[0].trim(), { segments: false }), tool: globToRegExp(parts[1].trim(), { segments: false }) }
    }
  }
}

/**
 * The rule files that apply to a session in `cwd`: the user's, then the project's (nearest last).
 * @param {string} cwd
 * @param {string} [home]
 */
export function ruleFiles(cwd, home = os.homedir()) {
  const project = projectFolders(cwd).map((dir) => path.join(dir, '.cursor', 'cli.json')).reverse()
  return [path.join(home, '.cursor', 'cli-config.json'), ...project]
}

/**
 * The allow and deny rules of the user's Cursor set-up for a session in `cwd`.
 * @param {object} o
 * @param {string} o.cwd
 * @param {string} [o.home]
 * @param {import('./log.mjs').Logger} o.log
 * @returns {RuleSet}
 */
export function loadRules({ cwd, home, log }) {
  /** @type {RuleSet} */
  const rules = { allow: [], deny: [] }
  let readRules = false
  for (const file of ruleFiles(cwd, home)) {
    let text
    try {
      text = fs.readFileSync(file, 'utf8')
    } catch (e) {
      const code = /** @type {NodeJS.ErrnoException} */ (e).code
      if (code !== 'ENOENT' && code !== 'ENOTDIR') log.warn(`cannot read the permission rules in ${file}:`, e)
      continue
    }
    let permissions
    try {
      permissions = JSON.parse(text)?.permissions
    } catch (e) {
      log.warn(`the permission rules in ${file} are not JSON; skipped:`, e)
      continue
    }
    if (permissions === undefined) continue
    for (const list of /** @type {const} */ (['allow', 'deny'])) {
      const tokens = permissions?.[list]
      if (tokens === undefined) continue
      if (!Array.isArray(tokens)) {
        log.warn(`permissions.${list} in ${file} is not a list; skipped`)
        continue
      }
      for (const token of tokens) {
        if (typeof token !== 'string') {
          log.warn(`a rule of permissions.${list} in ${file} is not a string; skipped`)
          continue
        }
        try {
          const matcher = parseRule(token, cwd)
          if (matcher.type === 'Read') readRules = true
          rules[list].push({ ...matcher, text: token.trim(), source: file })
        } catch (e) {
          log.warn(`the rule ${JSON.stringify(token)} in ${file} does not parse (${e instanceof Error ? e.message : e}); skipped`)
        }
      }
    }
  }
  if (readRules) log.info('Read(…) rules are not applied by this agent: reads run without a question')
  return rules
}

/**
 * Whether `rule` names this call: for a shell, any one of its programs (deny) or each of them
 * (allow, checked by the caller program by program).
 * @param {Rule} rule
 * @param {PermissionRequest} request
 * @param {string} program  for shells: the program checked
 */
function names(rule, request, program) {
  switch (rule.type) {
    case 'Shell': {
      if (request.kind !== 'execute' || !rule.program.test(program)) return false
      if (!rule.args) return true
      // Arguments are only known for a command of one program.
      const command = (request.command ?? '').trim()
      const rest = command.startsWith(program) ? command.slice(program.length).trim() : null
      return rest !== null && request.programs.length <= 1 && rule.args.test(rest)
    }
    case 'Write':
      return (request.kind === 'edit' || request.kind === 'delete') && request.paths.length > 0 && request.paths.every((p) => rule.path.test(p.split(path.sep).join('/')))
    case 'WebFetch': {
      if (request.kind !== 'fetch' || !request.url) return false
      try {
        return rule.host.test(new URL(request.url).hostname.toLowerCase())
      } catch {
        return false
      }
    }
    case 'Mcp':
      return request.mcpServer !== undefined && rule.server.test(request.mcpServer) && rule.tool.test(request.mcpTool ?? '')
    default:
      return false
  }
}

/**
 * What the rules say of a call: the deny rule that refuses it, else `allow` when allow rules
 * cover it (every program of a shell command), else nothing.
 * @param {RuleSet} rules
 * @param {PermissionRequest} request
 * @returns {{ outcome: 'deny', rule: Rule } | { outcome: 'allow' } | null}
 */
export function verdict(rules, request) {
  const programs = request.kind === 'execute'
    ? (request.programs.length > 0 ? request.programs : [(request.command ?? '').trim().split(/\s+/)[0] ?? '']).filter(Boolean)
    : ['']
  if (programs.length === 0) return null
  for (const rule of rules.deny) {
    if (programs.some((p) => names(rule, request, p))) return { outcome: 'deny', rule }
  }
  const allowed = programs.every((p) => rules.allow.some((rule) => names(rule, request, p)))
  return allowed ? { outcome: 'allow' } : null
}
