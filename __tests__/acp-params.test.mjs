// cli/acp-params.mjs checks the params of the agent's requests by hand, as the ACP SDK's zod
// schemas do: wherever it takes a value rather than leaving it to the SDK, the result must be
// the schema's, to the order of its keys. Checked against the schemas themselves on what editors
// send and on thousands of variants of it (each field dropped, null, of another type, nested
// fields changed, unknown fields added); and what editors send must be taken (not left to the SDK).
import { test } from 'node:test'
import assert from 'node:assert/strict'
import { createRequire } from 'node:module'
import path from 'node:path'
import { pathToFileURL } from 'node:url'

import { NOT_HERE, NOTIFICATION_METHODS, REQUEST_METHODS, notificationParams, requestParams } from '../cli/acp-params.mjs'

// The schemas are not among the SDK's exports: they are read from its files, next to its entry.
const require = createRequire(import.meta.url)
const sdkDir = path.dirname(require.resolve('@agentclientprotocol/sdk'))
const schemas = await import(pathToFileURL(path.join(sdkDir, '..', 'schema', 'zod.gen.js')).href)

const SCHEMA = {
  initialize: 'zInitializeRequest',
  authenticate: 'zAuthenticateRequest',
  logout: 'zLogoutRequest',
  'session/new': 'zNewSessionRequest',
  'session/load': 'zLoadSessionRequest',
  'session/list': 'zListSessionsRequest',
  'session/delete': 'zDeleteSessionRequest',
  'session/resume': 'zResumeSessionRequest',
  'session/close': 'zCloseSessionRequest',
  'session/set_mode': 'zSetSessionModeRequest',
  'session/set_config_option': 'zSetSessionConfigOptionRequest',
  'session/prompt': 'zPromptRequest',
  'session/cancel': 'zCancelNotification',
}

const meta = { 'terminal-auth': true, nested: { a: [1, 2] } }
const mcpStdio = { name: 'files', command: 'node', args: ['server.js'], env: [{ name: 'TOKEN', value: 'x' }] }
const mcpHttp = { type: 'http', name: 'web', url: 'https://example.test/mcp', headers: [{ name: 'Authorization', value: 'Bearer x' }] }
const textBlock = { type: 'text', text: 'Fix the test' }

/** What editors send (Zed, JetBrains, Neovim and Emacs clients, the tests' harness), by method. */
const SENT = {
  initialize: [
    { protocolVersion: 1 },
    { protocolVersion: 1, clientCapabilities: {} },
    { protocolVersion: 1, clientCapabilities: { fs: { readTextFile: true, writeTextFile: true }, terminal: true, _meta: { terminal_output: true, 'terminal-auth': true } }, clientInfo: { name: 'zed', title: 'Zed', version: '0.210.0' } },
    { protocolVersion: 1, clientCapabilities: { fs: { readTextFile: true }, auth: { terminal: true }, elicitation: { form: {}, url: {} }, session: { configOptions: { boolean: {} }, compaction: {}, notices: {} } }, clientInfo: { name: 'test', version: '1' }, _meta: meta },
  ],
  authenticate: [{ methodId: 'cursor_login' }, { methodId: 'cursor-api-key', _meta: null }],
  logout: [{}, { _meta: meta }],
  'session/new': [
    { cwd: '/work', mcpServers: [] },
    { cwd: '/work', mcpServers: null, additionalDirectories: ['/lib'] },
    { cwd: '/work', additionalDirectories: null, mcpServers: [mcpStdio, mcpHttp, { ...mcpHttp, type: 'sse', headers: null }, { ...mcpStdio, args: null, env: null, type: 'stdio' }], _meta: meta },
  ],
  'session/load': [{ sessionId: 's1', cwd: '/work', mcpServers: [] }, { sessionId: 's1', cwd: '/work', mcpServers: [mcpStdio], additionalDirectories: ['/lib'] }],
  'session/list': [{}, { cwd: '/work' }, { cwd: null, cursor: 'NTA' }],
  'session/delete': [{ sessionId: 's1' }],
  'session/resume': [{ sessionId: 's1', cwd: '/work' }, { sessionId: 's1', cwd: '/work', mcpServers: [], additionalDirectories: [] }],
  'session/close': [{ sessionId: 's1' }],
  'session/set_mode': [{ sessionId: 's1', modeId: 'plan' }],
  'session/set_config_option': [
    { sessionId: 's1', configId: 'model', value: 'default' },
    { sessionId: 's1', configId: 'max_mode', type: 'boolean', value: true },
    { sessionId: 's1', configId: 'mode', type: 'select', value: 'ask' },
  ],
  'session/prompt': [
    { sessionId: 's1', prompt: [textBlock] },
    { sessionId: 's1', prompt: [] },
    {
      sessionId: 's1',
      prompt: [
        { ...textBlock, annotations: { audience: ['user'], priority: 0.5, lastModified: '2026-01-01' } },
        { type: 'image', data: 'iVBORw0KGgo=', mimeType: 'image/png', uri: 'file:///work/a.png' },
        { type: 'audio', data: 'AAAA', mimeType: 'audio/wav' },
        { type: 'resource_link', name: 'a.ts', uri: 'file:///work/a.ts', mimeType: 'text/x-typescript', size: 120, title: null, description: 'the file' },
        { type: 'resource', resource: { uri: 'file:///work/a.ts', text: 'export {}', mimeType: 'text/x-typescript' } },
        { type: 'resource', resource: { uri: 'file:///work/a.bin', blob: 'AAEC' }, _meta: meta },
      ],
      _meta: meta,
    },
  ],
  'session/cancel': [{ sessionId: 's1' }, { sessionId: 's1', _meta: null }],
}

/** Values a field is replaced with. */
const ODD = [undefined, null, 'text', '', 0, 1.5, 2 ** 60, -1, 70000, true, false, [], ['x'], [1], {}, { x: 1 }, JSON.parse('{"__proto__": {"x": 1}, "y": 2}'), [null], [{}]]

/**
 * `value` and variants of it: each field (to `depth` levels) dropped, replaced by each of ODD,
 * or varied itself; an unknown field added; each array item varied, and one added.
 * @param {unknown} value
 * @param {number} depth
 * @returns {unknown[]}
 */
function variants(value, depth) {
  const out = [value]
  if (depth === 0) return out
  if (Array.isArray(value)) {
    out.push([...value, 'extra'], [...value, null])
    value.forEach((item, i) => {
      for (const v of variants(item, depth - 1).slice(1)) out.push(value.map((x, j) => (j === i ? v : x)))
    })
  } else if (typeof value === 'object' && value !== null) {
    out.push({ ...value, unknownField: 1 })
    for (const key of Object.keys(value)) {
      const { [key]: _, ...without } = /** @type {Record<string, unknown>} */ (value)
      out.push(without)
      for (const odd of ODD) out.push({ ...value, [key]: odd })
      for (const v of variants(/** @type {Record<string, unknown>} */ (value)[key], depth - 1).slice(1)) out.push({ ...value, [key]: v })
    }
  }
  return out
}

/** `requestParams` or `notificationParams`, and the schema's result (as the SDK applies it). */
function both(method, params) {
  const notification = NOTIFICATION_METHODS.includes(method)
  const ours = notification ? notificationParams(method, params) : requestParams(method, params)
  const theirs = schemas[SCHEMA[method]].safeParse(notification ? params : params ?? {})
  return { ours, theirs }
}

test('every method the agent takes params of has a schema here', () => {
  assert.deepEqual([...REQUEST_METHODS, ...NOTIFICATION_METHODS].sort(), Object.keys(SCHEMA).sort())
})

for (const method of Object.keys(SCHEMA)) {
  test(`${method}: what the hand checks take is what the SDK's schema gives, key for key`, () => {
    let taken = 0
    let cases = 0
    const seen = new Set()
    for (const sent of SENT[method]) {
      const { ours } = both(method, sent)
      assert.notEqual(ours, NOT_HERE, `what editors send is left to the SDK: ${JSON.stringify(sent)}`)
      for (const params of [...variants(sent, 3), undefined, null, 'x', []]) {
        const key = JSON.stringify(params) ?? 'undefined'
        if (seen.has(key) && typeof params === 'object' && params !== null && !Object.hasOwn(params, '__proto__')) continue
        seen.add(key)
        cases++
        const { ours, theirs } = both(method, params)
        if (ours === NOT_HERE) continue
        taken++
        assert.ok(theirs.success, `taken by hand, refused by the schema: ${JSON.stringify(params)}`)
        assert.equal(JSON.stringify(ours), JSON.stringify(theirs.data), `${JSON.stringify(params)}`)
        assert.deepStrictEqual(ours, theirs.data, `${JSON.stringify(params)}`)
      }
    }
    assert.ok(taken > 0 && cases > taken, `${taken} of ${cases} variants taken by hand`)
  })
}
