// @ts-check
// The params of the ACP requests (and the notification) the agent serves, checked and shaped by
// hand as the ACP SDK's schemas (its zod schemas, `schema/zod.gen.js`) check and shape them:
// for the values editors send, a handler gets what the SDK would have handed it, field for field
// and in the same order (defaults filled in, unknown fields left out, `null` where the schema
// turns it into `[]`). Anything outside that (a wrong type, a malformed `_meta`, a field the
// schema would quietly drop or repair) is `NOT_HERE`: the SDK's own schemas take it (acp.mjs),
// so that the result, and every error, is still the SDK's.
// __tests__/acp-params.test.mjs holds each shape here against those schemas.

/** The value is left to the SDK's schemas. */
export const NOT_HERE = Symbol('left to the SDK')

/** The key is left out of the result (absent in the input, and no default). */
const ABSENT = Symbol('absent')

/** @typedef {(value: unknown) => unknown} Check  the value shaped, or ABSENT, or NOT_HERE */

/**
 * @param {unknown} value
 * @returns {value is Record<string, unknown>}
 */
const isObject = (value) => typeof value === 'object' && value !== null && !Array.isArray(value)

/** @type {Check} */
const string = (v) => (typeof v === 'string' ? v : NOT_HERE)
/** @type {Check} */
const boolean = (v) => (typeof v === 'boolean' ? v : NOT_HERE)
/** @type {Check} */
const number = (v) => (typeof v === 'number' ? v : NOT_HERE)
/** A JSON integer of any size (the SDK's `wideInt`). @type {Check} */
const integer = (v) => (Number.isInteger(v) ? v : NOT_HERE)

/**
 * A key the schema requires.
 * @param {Check} check
 * @returns {Check}
 */
const required = (check) => (v) => (v === undefined ? NOT_HERE : check(v))

/**
 * `.nullish()`: left out when absent, `null` kept.
 * @param {Check} check
 * @returns {Check}
 */
const nullish = (check) => (v) => (v === undefined ? ABSENT : v === null ? null : check(v))

/**
 * `.optional().default(…)`: the default when absent.
 * @param {Check} check
 * @param {() => unknown} fallback
 * @returns {Check}
 */
const withDefault = (check, fallback) => (v) => (v === undefined ? fallback() : check(v))

/**
 * The SDK's `defaultOnNull(z.array(…), () => [])`: `null` is `[]`; absent fails, unless `optional`.
 * @param {Check} item
 * @param {{ optional?: boolean }} [o]
 * @returns {Check}
 */
const list = (item, { optional = false } = {}) => (v) => {
  if (v === undefined) return optional ? ABSENT : NOT_HERE
  if (v === null) return []
  return array(item)(v)
}

/**
 * @param {Check} item
 * @returns {Check}
 */
const array = (item) => (v) => {
  if (!Array.isArray(v)) return NOT_HERE
  const out = []
  for (const x of v) {
    const shaped = item(x)
    if (shaped === NOT_HERE || shaped === ABSENT) return NOT_HERE
    out.push(shaped)
  }
  return out
}

/**
 * A free-form object (`z.record(z.string(), z.unknown())`, `_meta` and the like), nullish. One
 * with a key `__proto__` is left to the SDK, whose copy drops that key.
 * @type {Check}
 */
const record = nullish((v) => (isObject(v) && !Object.hasOwn(v, '__proto__') ? { ...v } : NOT_HERE))

/**
 * `z.object(…)`: the fields in the schema's order, unknown ones left out.
 * @param {Record<string, Check>} fields
 * @returns {Check}
 */
const object = (fields) => (v) => {
  if (!isObject(v)) return NOT_HERE
  /** @type {Record<string, unknown>} */
  const out = {}
  for (const [key, check] of Object.entries(fields)) {
    const shaped = check(v[key])
    if (shaped === NOT_HERE) return NOT_HERE
    if (shaped !== ABSENT) out[key] = shaped
  }
  return out
}

/**
 * `z.object(…).and(z.object({ type: z.literal(type) }))`: the object's fields, then `type`.
 * @param {string} type
 * @param {Record<string, Check>} fields
 * @returns {Check}
 */
const tagged = (type, fields) => {
  const body = object(fields)
  return (v) => {
    const shaped = body(v)
    return shaped === NOT_HERE ? NOT_HERE : { .../** @type {object} */ (shaped), type }
  }
}

// ---------- content blocks (a prompt) ----------

const ROLES = ['assistant', 'user']
/** Annotations, nullish; a role outside the two (which the schema would skip) is left to the SDK. */
const annotations = nullish(object({
  audience: nullish(array((v) => (typeof v === 'string' && ROLES.includes(v) ? v : NOT_HERE))),
  lastModified: nullish(string),
  priority: nullish(number),
  _meta: record,
}))

/** An embedded resource's contents: text if it has text, else a blob (the schema's first match). */
/** @type {Check} */
const resourceContents = (v) => {
  if (!isObject(v)) return NOT_HERE
  if (typeof v.text === 'string') return object({ mimeType: nullish(string), text: required(string), uri: required(string), _meta: record })(v)
  return object({ blob: required(string), mimeType: nullish(string), uri: required(string), _meta: record })(v)
}

/** @type {Record<string, Check>} */
const BLOCKS = {
  text: tagged('text', { annotations, text: required(string), _meta: record }),
  image: tagged('image', { annotations, data: required(string), mimeType: required(string), uri: nullish(string), _meta: record }),
  audio: tagged('audio', { annotations, data: required(string), mimeType: required(string), _meta: record }),
  resource_link: tagged('resource_link', {
    annotations,
    description: nullish(string),
    mimeType: nullish(string),
    name: required(string),
    size: nullish(integer),
    title: nullish(string),
    uri: required(string),
    _meta: record,
  }),
  resource: tagged('resource', { annotations, resource: required(resourceContents), _meta: record }),
}
/** @type {Check} */
const contentBlock = (v) => (isObject(v) && typeof v.type === 'string' && Object.hasOwn(BLOCKS, v.type) ? BLOCKS[v.type](v) : NOT_HERE)

// ---------- MCP servers ----------

const nameValue = object({ name: required(string), value: required(string), _meta: record })
const httpServer = (/** @type {string} */ type) => tagged(type, { name: required(string), url: required(string), headers: list(nameValue), _meta: record })
const MCP_SERVERS = {
  http: httpServer('http'),
  sse: httpServer('sse'),
  stdio: object({ name: required(string), command: required(string), args: list(string), env: list(nameValue), _meta: record }),
}
/**
 * An MCP server: the schema tries http, then sse (each by its `type`), then stdio (whose `type`,
 * if any, it leaves out), and takes the first that fits.
 * @type {Check}
 */
const mcpServer = (v) => {
  if (!isObject(v)) return NOT_HERE
  for (const kind of /** @type {const} */ (['http', 'sse'])) {
    if (v.type !== kind) continue
    const shaped = MCP_SERVERS[kind](v)
    if (shaped !== NOT_HERE) return shaped
  }
  return MCP_SERVERS.stdio(v)
}

// ---------- initialize ----------

const fileSystem = () => ({ readTextFile: false, writeTextFile: false })
const clientCapabilities = object({
  fs: withDefault(object({ readTextFile: withDefault(boolean, () => false), writeTextFile: withDefault(boolean, () => false), _meta: record }), fileSystem),
  terminal: withDefault(boolean, () => false),
  session: nullish(object({
    compaction: record,
    configOptions: nullish(object({ boolean: nullish(object({ _meta: record })), _meta: record })),
    notices: record,
    _meta: record,
  })),
  auth: withDefault(object({ terminal: withDefault(boolean, () => false), _meta: record }), () => ({ terminal: false })),
  elicitation: nullish(object({ form: nullish(object({ _meta: record })), url: nullish(object({ _meta: record })), _meta: record })),
  _meta: record,
})

// ---------- the methods ----------

const sessionId = required(string)
const directories = list(string, { optional: true })

/** The requests' params by method (applied to `params ?? {}`, as the SDK does). @type {Record<string, Check>} */
const REQUESTS = {
  initialize: object({
    protocolVersion: required((v) => (Number.isSafeInteger(v) && /** @type {number} */ (v) >= 0 && /** @type {number} */ (v) <= 65535 ? v : NOT_HERE)),
    clientCapabilities: withDefault(clientCapabilities, () => ({ fs: fileSystem(), terminal: false, auth: { terminal: false } })),
    clientInfo: nullish(object({ name: required(string), title: nullish(string), version: required(string), _meta: record })),
    _meta: record,
  }),
  authenticate: object({ methodId: required(string), _meta: record }),
  logout: object({ _meta: record }),
  'session/new': object({ cwd: required(string), additionalDirectories: directories, mcpServers: list(mcpServer), _meta: record }),
  'session/load': object({ mcpServers: list(mcpServer), cwd: required(string), additionalDirectories: directories, sessionId, _meta: record }),
  'session/list': object({ cwd: nullish(string), cursor: nullish(string), _meta: record }),
  'session/delete': object({ sessionId, _meta: record }),
  'session/resume': object({ sessionId, cwd: required(string), additionalDirectories: directories, mcpServers: list(mcpServer, { optional: true }), _meta: record }),
  'session/close': object({ sessionId, _meta: record }),
  'session/set_mode': object({ sessionId, modeId: required(string), _meta: record }),
  'session/set_config_option': (v) => {
    // An intersection: a boolean option ({ type: 'boolean', value }) or a value id, then the rest.
    if (!isObject(v)) return NOT_HERE
    const value = v.type === 'boolean' && typeof v.value === 'boolean' ? { type: 'boolean', value: v.value } : typeof v.value === 'string' ? { value: v.value } : NOT_HERE
    const rest = object({ sessionId, configId: required(string), _meta: record })(v)
    return value === NOT_HERE || rest === NOT_HERE ? NOT_HERE : { ...value, .../** @type {object} */ (rest) }
  },
  'session/prompt': object({ sessionId, prompt: required(array(contentBlock)), _meta: record }),
}

/** The notifications' params by method (applied to `params` as they are). @type {Record<string, Check>} */
const NOTIFICATIONS = {
  'session/cancel': object({ sessionId, _meta: record }),
}

/** The methods whose params the SDK's schemas check: the rest (extensions) have their own parsers. */
export const REQUEST_METHODS = Object.keys(REQUESTS)
export const NOTIFICATION_METHODS = Object.keys(NOTIFICATIONS)

/**
 * A request's params as the SDK's schema for `method` gives them, or NOT_HERE.
 * @param {string} method
 * @param {unknown} params
 * @returns {unknown}
 */
export function requestParams(method, params) {
  return REQUESTS[method](params ?? {})
}

/**
 * A notification's params as the SDK's schema for `method` gives them, or NOT_HERE.
 * @param {string} method
 * @param {unknown} params
 * @returns {unknown}
 */
export function notificationParams(method, params) {
  return NOTIFICATIONS[method](params)
}
