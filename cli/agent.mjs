// @ts-check
// The ACP agent: `initialize`, `authenticate`, the session lifecycle (new, load, resume, list,
// close, delete), modes and config options, and prompt and cancel handed to the session — on
// the agent app of acp.mjs (the ACP SDK's, without its zod schemas), with every session backed
// by the addon. The first `session/new` can be answered before the connection is made (see
// `newSessionEarly` and cli/stdio.mjs).

import { loadAddon } from './addon.mjs'
import { Credentials, isCursorHost } from './auth.mjs'
import { forkParams, forkRecord } from './fork.mjs'
import { initializeResponse } from './initialize.mjs'
import { ModelCache } from './model-cache.mjs'
import { echo, toRequestError } from './request-errors.mjs'
import { RequestError, agent } from './acp.mjs'
import { AgentSession } from './session.mjs'
import { builtin } from './builtin.mjs'

const path = builtin('node:path')

/** A new session's id: the addon's, as it names conversations (node:crypto stays unloaded). */
const newSessionId = () => loadAddon().newConversationId()

/** @typedef {import('@agentclientprotocol/sdk').AgentApp} AgentApp */
/** @typedef {import('@agentclientprotocol/sdk').AgentContext} AgentContext */
/** @typedef {import('@agentclientprotocol/sdk').ClientCapabilities} ClientCapabilities */
/** @typedef {import('@agentclientprotocol/sdk').InitializeRequest} InitializeRequest */
/** @typedef {import('@agentclientprotocol/sdk').McpServer} McpServerConfig */
/** @typedef {import('@agentclientprotocol/sdk').NewSessionResponse} NewSessionResponse */
/** @typedef {import('@agentclientprotocol/sdk/unstable').ForkSessionResponse} ForkSessionResponse */
/** @typedef {import('./store.mjs').SessionRecord} SessionRecord */

/**
 * The agent, in two parts: the app the connection serves, and the one request served before the
 * connection is made.
 * @typedef {object} Agent
 * @property {() => Promise<AgentApp>} app  builds the app (once)
 * @property {(initialize: InitializeRequest, params: unknown) => Promise<NewSessionResponse | null>} newSessionEarly
 *   the first `session/new` (right after `initialize`, whose params it takes), answered before
 *   connection is made: the session is made, and the app's own handler answers the same when the
 *   connection reads that request; null (nothing made) for anything it leaves to the connection
 */

/**
 * How the agent was started.
 * @typedef {import('./session.mjs').SessionSettings & {
 *   embedded: boolean,
 *   store: import('./store.mjs').SessionStore,
 *   credentialStore: import('./credentials.mjs').CredentialStore,
 *   log: import('./log.mjs').Logger,
 *   env?: NodeJS.ProcessEnv,
 * }} AgentConfig
 */

/** Sessions per page of `session/list`. */
const PAGE_SIZE = 50

/**
 * The params of `_cursor/steer`: `{ sessionId, prompt }`.
 * @param {unknown} params
 * @returns {{ sessionId: string, prompt: unknown[] }}
 */
function steerParams(params) {
  const p = /** @type {{ sessionId?: unknown, prompt?: unknown }} */ (params ?? {})
  if (typeof p.sessionId !== 'string') throw RequestError.invalidParams(undefined, '_cursor/steer: sessionId must be a string')
  if (!Array.isArray(p.prompt)) throw RequestError.invalidParams(undefined, '_cursor/steer: prompt must be an array of content blocks')
  return { sessionId: p.sessionId, prompt: p.prompt }
}

/**
 * @param {unknown} cwd
 * @param {string} [what]
 * @returns {string}
 */
function absolute(cwd, what = 'cwd') {
  if (typeof cwd !== 'string' || !path.isAbsolute(cwd)) throw RequestError.invalidParams(undefined, `${what} must be an absolute path, got ${echo(cwd)}`)
  return cwd
}

/**
 * The params of a `session/new` whose early answer is the one the app's handler would give: a
 * plain object with an absolute `cwd`, absolute `additionalDirectories` if any, and no MCP
 * servers (connecting them loads the MCP client SDK; their configs are the connection's to check).
 * @param {unknown} params
 * @returns {{ cwd: string, additionalDirectories: string[] } | null}
 */
function plainNewSession(params) {
  if (typeof params !== 'object' || params === null || Array.isArray(params)) return null
  const { cwd, additionalDirectories, mcpServers } = /** @type {Record<string, unknown>} */ (params)
  if (typeof cwd !== 'string' || !path.isAbsolute(cwd)) return null
  if (!Array.isArray(mcpServers) || mcpServers.length > 0) return null
  const dirs = additionalDirectories ?? []
  if (!Array.isArray(dirs) || !dirs.every((d) => typeof d === 'string' && path.isAbsolute(d))) return null
  return { cwd, additionalDirectories: dirs }
}

/**
 * @param {AgentConfig} config
 * @returns {Agent}
 */
export function createAgent(config) {
  const { store, log } = config
  // Cursor's own service refuses requests without credentials; local gateways and the embedded backend need none.
  const needsAuth = !config.embedded && isCursorHost(config.baseUrl)
  const credentials = new Credentials({ baseUrl: config.baseUrl, env: config.env ?? process.env, needsAuth, store: config.credentialStore, log, clientOptions: config.clientOptions })
  /** The addon's `accessToken`: asked before every stream, so a login made meanwhile is used. */
  const accessToken = (/** @type {{ reason: 'request' | 'unauthenticated' }} */ request) => credentials.token(request)
  /** The account's models, shared by the sessions of this process. */
  const models = new ModelCache()
  /** @type {AgentContext | null} */
  let client = null
  /** @type {ClientCapabilities} */
  let capabilities = {}
  /** @type {import('./session.mjs').ClientPeer} */
  const peer = {
    client: () => {
      if (!client) throw new Error('the agent is not connected')
      return client
    },
    capabilities: () => capabilities,
  }
  /** @type {Map<string, AgentSession>} */
  const sessions = new Map()

  /** @param {string} sessionId */
  const live = (sessionId) => {
    const session = sessions.get(sessionId)
    if (!session) throw RequestError.sessionNotFound(sessionId)
    return session
  }

  /** @param {string} sessionId */
  const stored = (sessionId) => {
    const record = store.get(sessionId)
    if (!record) throw RequestError.sessionNotFound(sessionId)
    return record
  }

  /**
   * @param {{ sessionId: string, cwd: string, additionalDirectories?: string[] | null, mcpServers?: McpServerConfig[], record?: SessionRecord }} o
   */
  const open = async ({ sessionId, cwd, additionalDirectories, mcpServers, record }) => {
    credentials.ensure()
    let session
    try {
      session = new AgentSession({ sessionId, cwd, additionalDirectories: additionalDirectories ?? [], mcpServers, record, peer, settings: config, store, log, accessToken })
    } catch (e) {
      throw toRequestError(e)
    }
    // The connection and the server warmed while the account's models are asked for and the user
    // types the first prompt. Started once the answer waits for the models (not after the
    // answer): a prompt sent the moment session/new is answered then finds the turns' connection
    // ready, where it would still be in its handshake and the prompt would open one of its own
    // (a new TCP and TLS connection: 3 round trips before the first chunk, not 1).
    session.prewarm()
    // The account's models for the picker (bounded: without them the picker has Auto and --models).
    const detailed = await session.loadModels(() => models.get(() => session.client.listModels()))
    unlessDeleted(session)
    sessions.set(sessionId, session)
    // The catalogue gave the session's model its details: warmed with them (folded into the
    // first when that has not gone yet).
    if (detailed) session.prewarm()
    return session
  }

  /**
   * A session deleted while its load or resume was under way is not found: the delete wins.
   * @param {AgentSession} session
   */
  const unlessDeleted = (session) => {
    if (!session.files.deleted) return
    session.close()
    if (sessions.get(session.sessionId) === session) sessions.delete(session.sessionId)
    throw RequestError.sessionNotFound(session.sessionId)
  }

  /**
   * What new/load/resume answer with.
   * @param {AgentSession} session
   */
  const state = (session) => ({ modes: session.modes(), configOptions: session.configOptions() })

  /**
   * Updates that must follow the response (clients drop updates for sessions they do not know yet).
   * @param {AgentSession} session
   * @param {{ title?: boolean }} [also]  title: its title too (a fork has one the client never got)
   */
  const afterResponse = (session, also) => session.sendCommandsAfterResponse(also)

  /**
   * Made by `newSessionEarly`, answered, and waiting for the app's handler to reach the same
   * request: the first `session/new` it dispatches (stdio.mjs holds everything after it back).
   * @type {{ session: AgentSession, answer: NewSessionResponse } | null}
   */
  let early = null

  /** @type {Agent['newSessionEarly']} */
  const newSessionEarly = async (initialize, params) => {
    const plain = plainNewSession(params)
    if (!plain || early || !credentials.tokenAtHand()) return null
    // As the app's initialize handler will set them when it reads that request.
    capabilities = initialize.clientCapabilities ?? {}
    /** @type {AgentSession | undefined} */
    let session
    try {
      session = await open({ sessionId: newSessionId(), ...plain, mcpServers: [] })
      session.persist()
      early = { session, answer: { sessionId: session.sessionId, ...state(session) } }
      return early.answer
    } catch (e) {
      log.debug('session/new left to the connection:', e)
      if (session) {
        session.close()
        sessions.delete(session.sessionId)
      }
      return null
    }
  }

  /** @type {Promise<AgentApp> | undefined} */
  let app
  return { app: () => (app ??= Promise.resolve(build())), newSessionEarly }

  function build() {
    return agent({ name: 'cursor-acp-native' })
      .onConnect((connection) => {
        client = connection.client
        // The editor went away: stop every turn and every background shell.
        connection.closed.finally(() => {
          for (const session of sessions.values()) session.close()
          sessions.clear()
        })
      })
      .onRequest('initialize', async ({ params }) => {
        capabilities = params.clientCapabilities ?? {}
        log.info(`client ${params.clientInfo?.name ?? 'unknown'} ${params.clientInfo?.version ?? ''} (protocol ${params.protocolVersion})`)
        return initializeResponse(params)
      })
      .onRequest('authenticate', async ({ params }) => {
        models.clear()
        await credentials.authenticate(params.methodId)
        return {}
      })
      .onRequest('logout', async () => {
        models.clear()
        config.credentialStore.remove()
        return {}
      })
      .onRequest('session/new', async ({ params }) => {
        if (early) {
          const { session, answer } = early
          early = null
          afterResponse(session)
          return answer
        }
        const cwd = absolute(params.cwd)
        for (const dir of params.additionalDirectories ?? []) absolute(dir, 'additionalDirectories')
        const session = await open({ sessionId: newSessionId(), cwd, additionalDirectories: params.additionalDirectories, mcpServers: params.mcpServers })
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
        // The whole history goes out before the response: load replays, then answers.
        try {
          await session.replay()
        } catch (e) {
          unlessDeleted(session)
          throw toRequestError(e)
        }
        unlessDeleted(session)
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
      .onRequest('session/fork', forkParams, async ({ params }) => {
        // The source's last save, whether or not it is open here: a turn running in it now
        // adds nothing to the fork (its record is saved when the turn ends).
        const source = stored(params.sessionId)
        const cwd = absolute(params.cwd)
        for (const dir of params.additionalDirectories ?? []) absolute(dir, 'additionalDirectories')
        const additionalDirectories = params.additionalDirectories ?? source.additionalDirectories ?? []
        const sessionId = newSessionId()
        const record = forkRecord(source, { sessionId, cwd, additionalDirectories })
        store.fork(source.sessionId, record)
        let session
        try {
          session = await open({ sessionId, cwd, additionalDirectories, mcpServers: params.mcpServers, record })
        } catch (e) {
          // Nothing of a fork that could not be opened stays behind.
          sessions.get(sessionId)?.close()
          sessions.delete(sessionId)
          store.delete(sessionId)
          throw e
        }
        afterResponse(session, { title: true })
        /** @type {ForkSessionResponse} */
        const answer = { sessionId, ...state(session) }
        return answer
      })
      .onRequest('session/list', async ({ params }) => {
        const all = store.list(params.cwd ?? undefined)
        let offset = 0
        if (params.cursor) {
          offset = Number.parseInt(Buffer.from(params.cursor, 'base64url').toString('utf8'), 10)
          if (!Number.isInteger(offset) || offset < 0) throw RequestError.invalidParams(undefined, `invalid cursor ${echo(params.cursor)}`)
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
        // Its tools closed before its folders go (closed tools never make theirs again); the
        // store then refuses every later save of it, the running turn's last one included.
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
      // An extension method (advertised as `_meta.cursor.steer`): a message into the running turn.
      .onRequest('_cursor/steer', steerParams, async ({ params }) => live(params.sessionId).steer(params.prompt))
      .onNotification('session/cancel', ({ params }) => {
        // A notification: an unknown session is ignored, never an error.
        sessions.get(params.sessionId)?.cancel()
      })
  }
}
