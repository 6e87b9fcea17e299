// Permission prompts for tools that change things (edit, delete, execute, fetch, MCP): one
// `session/request_permission` per call with a renderable payload, and "always allow" rules
// remembered for the session (shells by their program, everything else by tool).

export const OPTIONS = [
  { optionId: 'allow-once', name: 'Allow', kind: 'allow_once' },
  { optionId: 'allow-always', name: 'Always allow', kind: 'allow_always' },
  { optionId: 'reject-once', name: 'Reject', kind: 'reject_once' },
]

/** The rule an "always allow" answer creates: `execute:npm` for `npm test`, `edit` for writes. */
export function ruleKey(kind, command) {
  if (kind !== 'execute' || !command) return kind
  const program = command.trim().split(/\s+/)[0] ?? ''
  return `execute:${program}`
}

export class Permissions {
  constructor() {
    this.rules = new Set()
  }

  allows(key) {
    return this.rules.has(key)
  }

  remember(key) {
    this.rules.add(key)
  }
}
