// @ts-check
// What a session offers the editor: its modes (agent / plan / ask), the model picker, both as
// ACP config options, and its slash commands.
import { RequestError } from './sdk.mjs'

/** @typedef {import('@agentclientprotocol/sdk').SessionModeState} SessionModeState */
/** @typedef {import('@agentclientprotocol/sdk').SessionConfigOption} SessionConfigOption */
/** @typedef {import('@agentclientprotocol/sdk').AvailableCommand} AvailableCommand */

export const MODES = [
  { id: 'agent', name: 'Agent', description: 'Reads, edits files and runs commands' },
  { id: 'plan', name: 'Plan', description: 'Researches and proposes a plan before changing anything' },
  { id: 'ask', name: 'Ask', description: 'Answers questions without changing anything' },
]

/** @type {AvailableCommand[]} */
export const COMMANDS = [
  { name: 'summarize', description: 'Summarize the conversation so far to free context' },
]

/** @param {string} modeId */
export function isMode(modeId) {
  return MODES.some((m) => m.id === modeId)
}

/**
 * Throws the invalid-params error `session/set_mode` answers an unknown mode with.
 * @param {string} modeId
 */
export function checkMode(modeId) {
  if (!isMode(modeId)) throw RequestError.invalidParams({ modeId }, `unknown mode ${JSON.stringify(modeId)} (agent, plan or ask)`)
}

/**
 * @param {string} currentModeId
 * @returns {SessionModeState}
 */
export function modeState(currentModeId) {
  return { currentModeId, availableModes: MODES.map(({ id, name, description }) => ({ id, name, description })) }
}

/**
 * The mode select and the model select: Auto, the models the agent was started with, and the
 * session's own.
 * @param {{ mode: string, model: string, extraModels: readonly string[] }} current
 * @returns {SessionConfigOption[]}
 */
export function configOptions({ mode, model, extraModels }) {
  const models = [...new Set(['default', ...extraModels, model])].map((id) => ({ value: id, name: id === 'default' ? 'Auto' : id }))
  return [
    {
      id: 'mode', name: 'Mode', category: 'mode', type: 'select', currentValue: mode,
      options: MODES.map(({ id, name, description }) => ({ value: id, name, description })),
    },
    { id: 'model', name: 'Model', category: 'model', type: 'select', currentValue: model, options: models },
  ]
}
