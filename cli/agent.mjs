// The ACP agent: `initialize`, `authenticate`, the session lifecycle (new, load, resume, list,
// close, delete), modes and config options, prompt and cancel — on @agentclientprotocol/sdk's
// agent app, with every session backed by the addon.
import { randomUUID } from 'node:crypto'
import path from 'node:path'
import { createRequire } from 'node:module'
import { agent, RequestError, PROTOCOL_VERSION } from '@agentclientprotocol/sdk'

import { AUTH_METHODS, Credentials } from './auth.mjs'
import { AgentSession, toRequestError } from './session.mjs'

const require = createRequire(import.meta.url)
const { version } = require('../package.json')

const PAGE_SIZE = 50

/**
 * @param {object} config
 * @param {string} config.baseUrl
 * @param {boolean} config.needsAuth   credentials are required (Cursor's own service)
 * @param {import('./store.mjs').SessionStore} config.store
 * @param {ReturnType<import('./log.mjs').createLogger>} config.log
 */
export function createAgent(config) {
  const { store, log } = config
  const credentials = new Credentials({ baseUrl: config.baseUrl, env: config.env ?? process.env, needsAuth: config.needsAuth, log })
  /** Shared by every session: the connection, the client's capabilities, the config. */
  const shared = { conn: null, caps: {}, config, store, log, token: null }
  const sessions = new Map()

  const live = (sessionId) => {
    const session = sessions.get(sessionId)
    if (!session) throw RequestError.sessionNotFound(sessionId)
    return session
  }

  const absolute = (cwd, what = 'cwd') => {
    if (typeof cwd !== 'string' || !path.isAbsolute(cwd)) throw RequestError.invalidParams({ [what]: cwd }, `${what} must be an absolute path`)
    return cwd
  }

  const open = async ({ sessionId, cwd, additionalDirectories, mcpServers, record }) => {
    shared.token = await credentials.token()
    try {
      const session = new AgentSession({ sessionId, cwd, additionalDirectories: additionalDirectories ?? [], mcpServers, agent: shared, record })
      sessions.set(sessionId, session)
      return session
    } catch (e) {
      throw toRequestError(e)
    }
  }

  /** What new/load/resume answer with. */
  const state = (session) => ({ modes: session.modes(), configOptions: session.configOptions() })

  /** Updates that must follow the response (clients drop updates for sessions they do not know yet). */
  const afterResponse = (session) =>
    setImmediate(() => session.sendCommands().catch((e) => log.debug('available_commands_update failed:', e)))

  const stored = (sessionId) => {
    const record = store.get(sessionId)
    if (!record) throw RequestError.sessionNotFound(sessionId)
    return record
  }

  return agent({ name: 'cursor-acp-native' })
    .onConnect((connection) => {
      shared.conn = connection.client
      // The editor went away: stop every turn and every background shell.
      connection.closed.finally(() => {
        for (const session of sessions.values()) session.close()
        sessions.clear()
      })
    })
    .onRequest('initialize', async ({ params }) => {
      shared.caps = params.clientCapabilities ?? {}
      log.info(`client ${params.clientInfo?.name ?? 'unknown'} ${params.clientInfo?.version ?? ''} (protocol ${params.protocolVersion})`)
      return {
        protocolVersion: Math.min(params.protocolVersion, PROTOCOL_VERSION),
        agentCapabilities: {
          loadSession: true,
          promptCapabilities: { image: true, audio: false, embeddedContext: true },
          mcpCapabilities: { http: true, sse: true },
          sessionCapabilities: { list: {}, resume: {}, close: {}, delete: {} },
        },
        authMethods: AUTH_METHODS,
        agentInfo: { name: 'cursor-acp-native', title: 'Cursor (native)', version },
      }
    })
    .onRequest('authenticate', async ({ params }) => {
      await credentials.authenticate(params.methodId)
      return {}
    })
    .onRequest('session/new', async ({ params }) => {
      const cwd = absolute(params.cwd)
      for (const dir of params.additionalDirectories ?? []) absolute(dir, 'additionalDirectories')
      const session = await open({ sessionId: randomUUID(), cwd, additionalDirectories: params.additionalDirectories, mcpServers: params.mcpServers })
      session.persist()
      afterResponse(session)
      return { sessionId: session.sessionId, ...state(session) }
    })
    .onRequest('session/load', async ({ params }) => {
      const record = stored(params.sessionId)
      const cwd = absolute(params.cwd)
      sessions.get(params.sessionId)?.close()
      const session = await open({
        sessionId: params.sessionId,
        cwd,
        additionalDirectories: params.additionalDirectories ?? record.additionalDirectories,
        mcpServers: params.mcpServers,
        record,
      })
      // The whole history goes out before the response (ACP: load replays, then answers).
      try {
        await session.replay()
      } catch (e) {
        throw toRequestError(e)
      }
      afterResponse(session)
      return state(session)
    })
    .onRequest('session/resume', async ({ params }) => {
      const existing = sessions.get(params.sessionId)
      if (existing) {
        afterResponse(existing)
        return state(existing)
      }
      const record = stored(params.sessionId)
      const session = await open({
        sessionId: params.sessionId,
        cwd: absolute(params.cwd),
        additionalDirectories: params.additionalDirectories ?? record.additionalDirectories,
        mcpServers: params.mcpServers,
        record,
      })
      afterResponse(session)
      return state(session)
    })
    .onRequest('session/list', async ({ params }) => {
      const all = store.list(params.cwd ?? undefined)
      let offset = 0
      if (params.cursor) {
        offset = Number.parseInt(Buffer.from(params.cursor, 'base64url').toString('utf8'), 10)
        if (!Number.isInteger(offset) || offset < 0) throw RequestError.invalidParams({ cursor: params.cursor }, 'invalid cursor')
      }
      const page = all.slice(offset, offset + PAGE_SIZE)
      const next = offset + PAGE_SIZE < all.length ? Buffer.from(String(offset + PAGE_SIZE)).toString('base64url') : null
      return {
        sessions: page.map((r) => ({
          sessionId: r.sessionId,
          cwd: r.cwd,
          title: r.title ?? null,
          updatedAt: r.updatedAt ?? null,
          ...(r.additionalDirectories?.length ? { additionalDirectories: r.additionalDirectories } : {}),
        })),
        nextCursor: next,
      }
    })
    .onRequest('session/close', async ({ params }) => {
      live(params.sessionId).close()
      sessions.delete(params.sessionId)
      return {}
    })
    .onRequest('session/delete', async ({ params }) => {
      sessions.get(params.sessionId)?.close()
      sessions.delete(params.sessionId)
      if (!store.get(params.sessionId)) throw RequestError.sessionNotFound(params.sessionId)
      store.delete(params.sessionId)
      return {}
    })
    .onRequest('session/set_mode', async ({ params }) => {
      const session = live(params.sessionId)
      session.setMode(params.modeId)
      await session.announceModeChange()
      return {}
    })
    .onRequest('session/set_config_option', async ({ params }) => {
      const session = live(params.sessionId)
      const before = session.mode
      session.setConfigOption(params.configId, params.value)
      if (session.mode !== before) await session.update({ sessionUpdate: 'current_mode_update', currentModeId: session.mode })
      return { configOptions: session.configOptions() }
    })
    .onRequest('session/prompt', async ({ params, signal }) => live(params.sessionId).prompt(params.prompt, signal))
    .onNotification('session/cancel', ({ params }) => {
      // A notification: an unknown session is ignored, never an error.
      sessions.get(params.sessionId)?.cancel()
    })
}

