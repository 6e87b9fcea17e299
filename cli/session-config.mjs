// @ts-check
// What a session offers the editor: its modes (agent / plan / ask), the model picker and the
// approval mode (ask / auto-approve edits / full access), as ACP config options, and its slash
// commands.
import { echo } from './request-errors.mjs'
import { RequestError } from './acp.mjs'

/** @typedef {import('@agentclientprotocol/sdk').SessionModeState} SessionModeState */
/** @typedef {import('@agentclientprotocol/sdk').SessionConfigOption} SessionConfigOption */
/** @typedef {import('@agentclientprotocol/sdk').AvailableCommand} AvailableCommand */

export const MODES = [
  { id: 'agent', name: 'Agent', description: 'Reads, edits files and runs commands' },
  { id: 'plan', name: 'Plan', description: 'Researches and proposes a plan before changing anything' },
  { id: 'ask', name: 'Ask', description: 'Answers questions without changing anything' },
]

/**
 * The built-in commands: conversation actions the backend offers, each a turn of its own.
 * @type {AvailableCommand[]}
 */
export const COMMANDS = [
  { name: 'summarize', description: 'Summarize the conversation so far to free context' },
  { name: 'plan', description: 'Research and propose a plan before changing anything', input: { hint: 'what to plan' } },
  { name: 'shell', description: 'Run a shell command in the conversation', input: { hint: 'command' } },
  { name: 'continue', description: "Continue working towards the conversation's goal" },
]

/** How much runs without a question (the `approval` config option). */
export const APPROVALS = [
  { value: 'ask', name: 'Ask', description: 'Ask before edits, commands, fetches and MCP tools' },
  { value: 'edits', name: 'Auto-approve edits', description: 'Edit files in the workspace without asking; ask for the rest' },
  { value: 'full', name: 'Full access', description: 'Run everything without asking (deny rules still apply)' },
]

/**
 * Throws the invalid-params error an unknown approval mode gets.
 * @param {string} value
 */
export function checkApproval(value) {
  if (!APPROVALS.some((a) => a.value === value)) {
    throw RequestError.invalidParams({ configId: 'approval' }, `unknown approval mode ${echo(value)} (${APPROVALS.map((a) => a.value).join(', ')})`)
  }
}

/** @param {string} modeId */
export function isMode(modeId) {
  return MODES.some((m) => m.id === modeId)
}

/**
 * Throws the invalid-params error `session/set_mode` answers an unknown mode with.
 * @param {string} modeId
 */
export function checkMode(modeId) {
  if (!isMode(modeId)) throw RequestError.invalidParams(undefined, `unknown mode ${echo(modeId)} (agent, plan or ask)`)
}

/**
 * @param {string} currentModeId
 * @returns {SessionModeState}
 */
export function modeState(currentModeId) {
  return { currentModeId, availableModes: MODES.map(({ id, name, description }) => ({ id, name, description })) }
}

/**
 * The mode select and the model select: Auto, the account's models with their display names,
 * the models the agent was started with (`--models`), and the session's own.
 * A model that offers Max Mode adds its switch: a boolean option for clients that take them,
 * else an `on` / `off` select.
 * @param {{ mode: string, model: string, approval?: string, models?: readonly { modelId: string, displayName: string }[], extraModels: readonly string[], maxMode?: { on: boolean, boolean: boolean } | null }} current
 * @returns {SessionConfigOption[]}
 */
export function configOptions({ mode, model, approval = 'ask', models: account = [], extraModels, maxMode = null }) {
  /** @type {Map<string, string>} */
  const names = new Map([['default', 'Auto']])
  for (const m of account) if (!names.has(m.modelId)) names.set(m.modelId, m.displayName || m.modelId)
  for (const id of [...extraModels, model]) if (!names.has(id)) names.set(id, id)
  const models = [...names].map(([value, name]) => ({ value, name }))
  return [
    {
      id: 'mode', name: 'Mode', category: 'mode', type: 'select', currentValue: mode,
      options: MODES.map(({ id, name, description }) => ({ value: id, name, description })),
    },
    { id: 'model', name: 'Model', category: 'model', type: 'select', currentValue: model, options: models },
    ...(maxMode ? [maxModeOption(maxMode)] : []),
    { id: 'approval', name: 'Approvals', category: '_approval', type: 'select', currentValue: approval, options: APPROVALS },
  ]
}

/**
 * @param {{ on: boolean, boolean: boolean }} maxMode
 * @returns {SessionConfigOption}
 */
function maxModeOption({ on, boolean }) {
  const about = { id: 'max_mode', name: 'Max Mode', description: 'The model\'s largest context and more tool calls per turn', category: 'model_config' }
  if (boolean) return /** @type {SessionConfigOption} */ ({ ...about, type: 'boolean', currentValue: on })
  return { ...about, type: 'select', currentValue: on ? 'on' : 'off', options: [{ value: 'off', name: 'Off' }, { value: 'on', name: 'On' }] }
}
