// @ts-check
// The editor's file hooks for the addon's built-in tools: reads through `fs/read_text_file`
// (the editor may hold unsaved text) and text writes through `fs/write_text_file` (so its
// review, Keep / Reject, tracks the change), for clients that offer them. The core decides
// when to use them; a read the editor cannot answer falls back to the disk.

/** @typedef {import('@agentclientprotocol/sdk').AgentContext} AgentContext */
/** @typedef {import('@agentclientprotocol/sdk').ClientCapabilities} ClientCapabilities */

/**
 * The addon's `editor` option for one session, or undefined when the client offers neither.
 * @param {object} o
 * @param {string} o.sessionId
 * @param {() => AgentContext} o.client
 * @param {ClientCapabilities} o.capabilities  the client's, from its latest `initialize`
 * @param {import('./update-relay.mjs').UpdateRelay} o.relay  the session's updates: a call about
 *   a card goes out after it
 * @param {import('./log.mjs').Logger} o.log
 * @returns {import('../index.js').EditorHooks | undefined}
 */
export function editorFiles({ sessionId, client, capabilities, relay, log }) {
  const fs = capabilities.fs
  if (!fs?.readTextFile && !fs?.writeTextFile) return undefined
  return {
    readTextFile: fs.readTextFile
      ? async ({ path, line, limit }) => {
          /** @type {import('@agentclientprotocol/sdk').ReadTextFileRequest} */
          const params = { sessionId, path }
          if (line) params.line = line
          if (limit) params.limit = limit
          await relay.queued()
          try {
            const { content } = await client().request('fs/read_text_file', params)
            return typeof content === 'string' ? content : null
          } catch (e) {
            log.debug('fs/read_text_file failed, using the file on disk:', e)
            return null
          }
        }
      : undefined,
    writeTextFile: fs.writeTextFile
      ? async ({ path, content }) => {
          await relay.queued()
          await client().request('fs/write_text_file', { sessionId, path, content })
          return true
        }
      : undefined,
  }
}
