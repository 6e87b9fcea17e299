// Signing in with a Cursor account, offline: the embedded backend stands in for Cursor's sign-in
// service (its `/loginDeepControl` page, `/auth/poll`, `/oauth/token`, API-key exchange, tokens
// that expire and are refused with 401). The login command, the polling rules, the stored
// credentials (private, picked up by a new agent process, refreshed, removed by logout),
// `status`, `--list-models`, `--client-version`, the auth methods an editor sees, and the
// account's models in the ACP select.
import { test } from 'node:test'
import assert from 'node:assert/strict'
import { spawn } from 'node:child_process'
import crypto from 'node:crypto'
import fs from 'node:fs'
import path from 'node:path'

import { CredentialStore } from '../cli/credentials.mjs'
import { LoginError, loginParams, loginUrl, pollForLogin } from '../cli/login.mjs'
import { CLI, INIT, startAgent, tempDir } from './acp-harness.mjs'
import { startEmbeddedBackend, within } from './helpers.mjs'

const TURN = { steps: [{ type: 'text', text: 'hello' }, { type: 'turnEnded' }] }
const FAST_POLLS = { firstDelayMs: 5, maxDelayMs: 20 }
const claims = (token) => JSON.parse(Buffer.from(token.split('.')[1], 'base64url').toString())
/** How a backend record shows a request carrying `token` (one it issued): its kind and serial, never the token. */
const recordedAs = (token) => `Bearer <redacted: access token ${claims(token).jti} issued by this backend>`
const NO_CREDENTIALS = { CURSOR_ACCESS_TOKEN: '', CURSOR_API_KEY: '', CURSOR_ACP_LOGIN_URL: '' }

/** Runs the CLI with `args`; `onStdout` sees its output as it comes. */
function run(args, { env = {}, onStdout = () => {} } = {}) {
  const child = spawn(process.execPath, [CLI, ...args], { env: { ...process.env, ...NO_CREDENTIALS, ...env }, stdio: ['ignore', 'pipe', 'pipe'] })
  let stdout = ''
  let stderr = ''
  child.stdout.on('data', (c) => { stdout += c; onStdout(stdout) })
  child.stderr.on('data', (c) => { stderr += c })
  return within(20_000, new Promise((resolve) => child.on('exit', (code) => resolve({ code, stdout, stderr }))), `cursor-acp-native ${args.join(' ')}`)
}

/** The user signing in on the page the login command printed (the backend serves it). */
async function signInAt(url) {
  const r = await fetch(url)
  assert.equal(r.status, 200)
}

test('login parameters are the official client\'s: a 32-byte verifier, its SHA-256 challenge, a UUID', () => {
  const p = loginParams()
  assert.equal(Buffer.from(p.verifier, 'base64url').length, 32)
  assert.equal(p.challenge, crypto.createHash('sha256').update(p.verifier).digest('base64url'))
  assert.match(p.uuid, /^[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/)
  const url = new URL(loginUrl('https://cursor.com', p))
  assert.equal(url.origin + url.pathname, 'https://cursor.com/loginDeepControl')
  assert.deepEqual(Object.fromEntries(url.searchParams), { challenge: p.challenge, uuid: p.uuid, mode: 'login', redirectTarget: 'cli' })
  assert.ok(!url.toString().includes(p.verifier), 'the verifier stays with the client')
})

test('the credentials file is private even when it was not, and a broken one counts as signed out', { skip: process.platform === 'win32' && 'POSIX modes' }, () => {
  const dir = path.join(tempDir('acp-config-'), 'nested', 'cursor-acp-native')
  const store = new CredentialStore(dir)
  const old = process.umask(0o000)
  try {
    store.write({ accessToken: 'a.b.c', refreshToken: 'r', baseUrl: 'http://x' })
  } finally {
    process.umask(old)
  }
  assert.equal(fs.statSync(store.file).mode & 0o777, 0o600, 'whatever the umask')
  assert.equal(fs.statSync(dir).mode & 0o777, 0o700)
  fs.chmodSync(store.file, 0o644)
  assert.equal(store.read().accessToken, 'a.b.c')
  assert.equal(fs.statSync(store.file).mode & 0o777, 0o600, 'made private again when read')
  assert.deepEqual(fs.readdirSync(dir), ['credentials.json'], 'no temporary left behind')
  fs.writeFileSync(store.file, '{ not json')
  assert.equal(store.read(), null)
  assert.equal(store.remove(), true)
  assert.equal(store.remove(), false)
})

test('the stored login is read again whenever the file changes, and only then', () => {
  const store = new CredentialStore(path.join(tempDir('acp-config-'), 'cursor-acp-native'))
  assert.equal(store.read(), null, 'none yet')
  store.write({ accessToken: 'a.b.c', refreshToken: 'r1', baseUrl: 'http://x' })
  const first = store.read()
  assert.equal(first.refreshToken, 'r1')
  assert.equal(store.read(), first, 'the same file: what was read before')
  // Another process signs in again: a new file renamed over this one.
  new CredentialStore(store.dir).write({ accessToken: 'd.e.f', refreshToken: 'r2', baseUrl: 'http://x' })
  assert.equal(store.read().refreshToken, 'r2')
  // Edited in place, the same size: still seen.
  fs.writeFileSync(store.file, fs.readFileSync(store.file, 'utf8').replace('r2', 'r3'))
  assert.equal(store.read().refreshToken, 'r3')
  if (process.platform !== 'win32') {
    fs.chmodSync(store.file, 0o644)
    store.read()
    assert.equal(fs.statSync(store.file).mode & 0o777, 0o600, 'a mode change is a change: tightened again')
  }
  fs.rmSync(store.file)
  assert.equal(store.read(), null, 'signed out elsewhere')
})

test('polling: pending until signed in, errors tolerated unless three in a row, bounded attempts', async () => {
  const backend = await startEmbeddedBackend({ scenario: TURN, auth: { pollStatuses: [404, 503, 404, 500, 404] } })
  try {
    const p = loginParams()
    const polling = pollForLogin({ baseUrl: backend.url, uuid: p.uuid, verifier: p.verifier, polling: FAST_POLLS })
    await new Promise((r) => setTimeout(r, 150))
    await signInAt(loginUrl(backend.url, p))
    const tokens = await polling
    assert.equal(claims(tokens.accessToken).type, 'access')
    assert.equal(claims(tokens.refreshToken).type, 'refresh')

    // Another client's verifier never completes someone else's login.
    const q = loginParams()
    await signInAt(loginUrl(backend.url, q))
    await assert.rejects(
      pollForLogin({ baseUrl: backend.url, uuid: q.uuid, verifier: loginParams().verifier, polling: { ...FAST_POLLS, maxAttempts: 8 } }),
      (e) => e instanceof LoginError && /did not complete \(no answer after 8 polls\)/.test(e.message),
    )
  } finally {
    backend.close()
  }

  // Three failures in a row stop it, though the fourth poll would have succeeded.
  const failing = await startEmbeddedBackend({ scenario: TURN, auth: { pollStatuses: [502, 500, 503], autoApprove: true } })
  try {
    const p = loginParams()
    await assert.rejects(
      pollForLogin({ baseUrl: failing.url, uuid: p.uuid, verifier: p.verifier, polling: FAST_POLLS }),
      (e) => e instanceof LoginError && /giving up after 3 failed polls in a row: the sign-in service answered HTTP 503/.test(e.message),
    )
  } finally {
    failing.close()
  }
  // A service that cannot be reached counts as failures too.
  const p = loginParams()
  await assert.rejects(pollForLogin({ baseUrl: failing.url, uuid: p.uuid, verifier: p.verifier, polling: FAST_POLLS }), /giving up after 3 failed polls in a row: cannot reach/)
})

test('login signs in through the browser page and stores the tokens for this user only; a new agent uses them', async () => {
  const backend = await startEmbeddedBackend({ scenario: TURN, auth: { pendingPolls: 1 } })
  const configDir = path.join(tempDir('acp-config-'), 'cursor-acp-native')
  try {
    let signedIn = false
    const result = await run(['login', '--no-browser', '--base-url', backend.url], {
      env: { CURSOR_ACP_CONFIG_DIR: configDir },
      onStdout: (out) => {
        const url = out.match(/https?:\/\/\S+loginDeepControl\S+/)?.[0]
        if (url && !signedIn) { signedIn = true; signInAt(url) }
      },
    })
    assert.equal(result.code, 0, result.stdout + result.stderr)
    assert.match(result.stdout, /Signed in as embedded\|user_login\. The login is saved in .*credentials\.json \(readable by you only\)/)
    const file = path.join(configDir, 'credentials.json')
    const stored = JSON.parse(fs.readFileSync(file, 'utf8'))
    for (const secret of [stored.accessToken, stored.refreshToken]) {
      assert.ok(!result.stdout.includes(secret) && !result.stderr.includes(secret), 'no token is printed')
    }
    if (process.platform !== 'win32') {
      assert.equal(fs.statSync(file).mode & 0o777, 0o600, 'the file is readable by its owner only')
      assert.equal(fs.statSync(configDir).mode & 0o777, 0o700, 'and so is its folder')
    }

    // `status` says what is configured, no secret.
    const status = await run(['status', '--base-url', backend.url], { env: { CURSOR_ACP_CONFIG_DIR: configDir } })
    assert.equal(status.code, 0)
    assert.match(status.stdout, /the login saved in .*credentials\.json \(account embedded\|user_login, access token valid for \d+ min\)/)
    assert.ok(!status.stdout.includes(stored.accessToken))

    // A new agent process picks the login up, and its turns carry the stored token.
    const agent = startAgent({ embedded: false, args: ['--base-url', backend.url], env: { CURSOR_ACP_CONFIG_DIR: configDir } })
    try {
      await agent.agent.request('initialize', INIT)
      await agent.agent.request('authenticate', { methodId: 'cursor_login' })
      const { sessionId } = await agent.agent.request('session/new', { cwd: tempDir(), mcpServers: [] })
      const answer = await within(20_000, agent.agent.request('session/prompt', { sessionId, prompt: [{ type: 'text', text: 'hi' }] }))
      assert.equal(answer.stopReason, 'end_turn')
      const run0 = backend.records().find((r) => r.outcome === 'end')
      assert.equal(run0.headers.authorization, recordedAs(stored.accessToken))
      assert.ok(!agent.stderr().includes(stored.accessToken) && !agent.stderr().includes(stored.refreshToken))
    } finally {
      await agent.stop()
    }

    // logout removes it.
    const out = await run(['logout'], { env: { CURSOR_ACP_CONFIG_DIR: configDir } })
    assert.match(out.stdout, /Signed out: removed .*credentials\.json/)
    assert.ok(!fs.existsSync(file))
  } finally {
    backend.close()
  }
})

test('login gives up after three failed polls in a row, saying why, and stores nothing', async () => {
  const backend = await startEmbeddedBackend({ scenario: TURN, auth: { pollStatuses: [500, 500, 500] } })
  const configDir = tempDir('acp-config-')
  try {
    const result = await run(['login', '--no-browser', '--base-url', backend.url], { env: { CURSOR_ACP_CONFIG_DIR: configDir } })
    assert.equal(result.code, 1)
    assert.match(result.stdout, /Sign-in failed: giving up after 3 failed polls in a row: the sign-in service answered HTTP 500/)
    assert.ok(!fs.existsSync(path.join(configDir, 'credentials.json')))
  } finally {
    backend.close()
  }
})

test('the agent refreshes an expiring login and re-exchanges an expiring API key before each turn', async () => {
  // Tokens live 1.5 s here, so each is "about to expire" (under 5 minutes) when used.
  const backend = await startEmbeddedBackend({ scenario: TURN, auth: { accessTokenTtlMs: 1500 } })
  const configDir = tempDir('acp-config-')
  try {
    const p = loginParams()
    await signInAt(loginUrl(backend.url, p))
    const tokens = await pollForLogin({ baseUrl: backend.url, uuid: p.uuid, verifier: p.verifier, polling: FAST_POLLS })
    new CredentialStore(configDir).write({ ...tokens, baseUrl: backend.url })
    backend.advanceClock(1600) // the stored access token has expired
    for (const env of [{ CURSOR_ACP_CONFIG_DIR: configDir }, { CURSOR_ACP_CONFIG_DIR: tempDir('acp-config-'), CURSOR_API_KEY: 'key_agent' }]) {
      const before = backend.records().length
      const agent = startAgent({ embedded: false, args: ['--base-url', backend.url], env })
      try {
        await agent.agent.request('initialize', INIT)
        const { sessionId } = await agent.agent.request('session/new', { cwd: tempDir(), mcpServers: [] })
        for (const text of ['one', 'two']) {
          const answer = await within(20_000, agent.agent.request('session/prompt', { sessionId, prompt: [{ type: 'text', text }] }))
          assert.equal(answer.stopReason, 'end_turn', JSON.stringify(env))
        }
      } finally {
        await agent.stop()
      }
      const runs = backend.records().slice(before)
      assert.ok(runs.every((r) => r.outcome === 'end'), `no stream refused: ${runs.map((r) => r.outcome)}`)
      const used = new Set(runs.map((r) => r.headers.authorization))
      assert.equal(used.size, 2, 'a fresh token for each turn')
      assert.ok(!used.has(recordedAs(tokens.accessToken)), 'the expired one was never sent')
    }
    // The refreshed login was stored, with the same refresh token.
    const stored = new CredentialStore(configDir).read()
    assert.notEqual(stored.accessToken, tokens.accessToken)
    assert.equal(stored.refreshToken, tokens.refreshToken)
  } finally {
    backend.close()
  }
})

test('auth methods: a terminal login as the client asks for it; authenticate succeeds when the agent can work', async () => {
  const configDir = tempDir('acp-config-')
  const agent = startAgent({ embedded: false, args: ['--base-url', 'https://api2.cursor.sh'], env: { CURSOR_ACP_CONFIG_DIR: configDir } })
  try {
    const init = await agent.agent.request('initialize', { ...INIT, clientCapabilities: { ...INIT.clientCapabilities, auth: { terminal: true }, _meta: { 'terminal-auth': true } } })
    const [login, apiKey, accessToken] = init.authMethods
    assert.equal(login.id, 'cursor_login')
    assert.equal(login.type, 'terminal')
    assert.deepEqual(login.args, ['login'])
    const launch = login._meta['terminal-auth']
    assert.equal(launch.command, process.execPath)
    assert.deepEqual(launch.args.slice(-3), ['--base-url', 'https://api2.cursor.sh', 'login'])
    assert.ok(launch.args.includes(CLI), 'it runs this agent')
    assert.deepEqual([apiKey.id, accessToken.id], ['cursor-api-key', 'cursor-access-token'])
    assert.ok(init.agentCapabilities.auth.logout, 'ACP logout is offered')

    // Signed out on Cursor's service: every method says how to sign in.
    await assert.rejects(agent.agent.request('authenticate', { methodId: 'cursor_login' }), (e) => e.code === -32000 && /cursor-acp-native login/.test(e.message))
    await assert.rejects(agent.agent.request('session/new', { cwd: tempDir(), mcpServers: [] }), (e) => e.code === -32000)
    // A login stored meanwhile (by `login` in a terminal) is picked up without a restart.
    const far = Math.floor(Date.now() / 1000) + 3600
    const jwt = (payload) => ['{"alg":"none"}', JSON.stringify(payload)].map((s) => Buffer.from(s).toString('base64url')).join('.') + '.sig'
    new CredentialStore(configDir).write({ accessToken: jwt({ sub: 'user_1', exp: far }), refreshToken: 'r', baseUrl: 'https://api2.cursor.sh' })
    await agent.agent.request('authenticate', { methodId: 'cursor_login' })
    await agent.agent.request('logout', {})
    assert.ok(!fs.existsSync(path.join(configDir, 'credentials.json')), 'ACP logout removes it')
  } finally {
    await agent.stop()
  }

  // A client without terminal support sees an ordinary method, without the launch hint.
  const plain = startAgent({})
  try {
    const init = await plain.agent.request('initialize', INIT)
    assert.equal(init.authMethods[0].id, 'cursor_login')
    assert.equal(init.authMethods[0].type, undefined)
    assert.equal(init.authMethods[0]._meta, undefined)
    await plain.agent.request('authenticate', { methodId: 'cursor_login' }) // the embedded backend needs none
  } finally {
    await plain.stop()
  }
})

test('the account\'s models: in the ACP select with their names, the chosen one\'s details in the run request, Auto by default', async () => {
  const models = [{ modelId: 'team-fast', displayName: 'Team Fast' }, { modelId: 'team-max', displayName: 'Team Max', maxMode: true }]
  const backend = await startEmbeddedBackend({ scenario: { turns: [[{ type: 'turnEnded' }]] }, models })
  const agent = startAgent({ embedded: false, args: ['--base-url', backend.url, '--client-version', 'cli-2099.01.01-test'] })
  try {
    await agent.agent.request('initialize', INIT)
    const { sessionId, configOptions } = await agent.agent.request('session/new', { cwd: tempDir(), mcpServers: [] })
    const select = configOptions.find((o) => o.id === 'model')
    assert.deepEqual(select.options.map((o) => [o.value, o.name]), [['default', 'Auto'], ['team-fast', 'Team Fast'], ['team-max', 'Team Max']])
    assert.equal(select.currentValue, 'default')
    assert.equal(configOptions.find((o) => o.id === 'max_mode'), undefined, 'Auto offers no Max Mode')
    await agent.agent.request('session/prompt', { sessionId, prompt: [{ type: 'text', text: 'one' }] })
    const picked = await agent.agent.request('session/set_config_option', { sessionId, configId: 'model', value: 'team-max' })
    // A model the catalogue says offers Max Mode gets the switch, off until chosen.
    assert.deepEqual(picked.configOptions.find((o) => o.id === 'max_mode')?.currentValue, 'off')
    await agent.agent.request('session/prompt', { sessionId, prompt: [{ type: 'text', text: 'two' }] })
    await agent.agent.request('session/set_config_option', { sessionId, configId: 'max_mode', value: 'on' })
    await agent.agent.request('session/prompt', { sessionId, prompt: [{ type: 'text', text: 'three' }] })
    // What the account does not offer is refused, naming what it does, and nothing changes.
    await assert.rejects(
      agent.agent.request('session/set_config_option', { sessionId, configId: 'model', value: 'team-nope' }),
      (e) => e.code === -32602 && /valid: default, team-fast, team-max/.test(e.message),
    )
    await agent.agent.request('session/set_config_option', { sessionId, configId: 'model', value: 'team-fast' })
    await assert.rejects(
      agent.agent.request('session/set_config_option', { sessionId, configId: 'max_mode', value: 'on' }),
      (e) => e.code === -32602 && /not available for the model "?team-fast/.test(e.message),
    )
    const runs = backend.records().map((r) => ({ run: r.messages[0].message.runRequest, headers: r.headers }))
    assert.deepEqual([runs[0].run.modelDetails.modelId, runs[0].run.modelDetails.displayName, runs[0].run.requestedModel.modelId], ['default', 'Auto', 'default'])
    assert.deepEqual([runs[1].run.modelDetails.displayName, runs[1].run.requestedModel.modelId, runs[1].run.requestedModel.maxMode ?? false], ['Team Max', 'team-max', false])
    assert.deepEqual([runs[2].run.requestedModel.modelId, runs[2].run.requestedModel.maxMode, runs[2].run.modelDetails.maxMode], ['team-max', true, true])
    assert.ok(runs.every((r) => r.headers['x-cursor-client-version'] === 'cli-2099.01.01-test'), '--client-version is sent')
  } finally {
    await agent.stop()
    backend.close()
  }

  const listed = await run(['--list-models', '--embedded'])
  assert.equal(listed.code, 0, listed.stderr)
  assert.deepEqual(listed.stdout.trim().split('\n'), ['default\tAuto', 'embedded-fast\tEmbedded Fast', 'embedded-thinking\tEmbedded Thinking (MAX)'])
  const versioned = startAgent({ env: { CURSOR_ACP_CLIENT_VERSION: 'cli-from-env' } })
  try {
    await versioned.agent.request('initialize', INIT)
    const { sessionId } = await versioned.agent.request('session/new', { cwd: tempDir(), mcpServers: [] })
    await within(20_000, versioned.agent.request('session/prompt', { sessionId, prompt: [{ type: 'text', text: 'hi' }] }))
  } finally {
    const { records } = await versioned.stop()
    assert.equal(records[0].headers['x-cursor-client-version'], 'cli-from-env')
  }
})

test('the account calls load the addon only when one is made; a refused key or login says what to do, without the secret', async () => {
  const backend = await startEmbeddedBackend({ scenario: TURN, auth: { apiKeys: ['key_accepted'] } })
  try {
    // A process of its own, so that the addon is not loaded already.
    const script = `
      import { createRequire } from 'node:module'
      const { Credentials } = await import(${JSON.stringify(new URL('../cli/auth.mjs', import.meta.url).href)})
      const require = createRequire(import.meta.url)
      const addonLoaded = () => Object.keys(require.cache).some((k) => k.endsWith('.node'))
      const baseUrl = process.argv[1]
      const log = { info() {}, warn() {}, error() {}, debug() {} }
      const stale = ['{"alg":"none"}', JSON.stringify({ exp: 1 })].map((s) => Buffer.from(s).toString('base64url')).join('.') + '.sig'
      const store = (login) => ({ read: () => login, write() {} })
      const credentials = (env, login = null) => new Credentials({ baseUrl, env, needsAuth: true, store: store(login), log })
      const failure = (p) => p.then(() => null, (e) => ({ code: e.code, httpStatus: e.httpStatus, message: e.message }))
      const out = {}
      out.tokenFromEnv = await credentials({ CURSOR_ACCESS_TOKEN: 'tok_env' }).token()
      out.loadedBeforeACall = addonLoaded()
      out.refusedKey = await failure(credentials({ CURSOR_API_KEY: 'key_refused_secret' }).token())
      out.loadedAfter = addonLoaded()
      out.exchanged = typeof (await credentials({ CURSOR_API_KEY: 'key_accepted' }).token())
      out.loginOver = await failure(credentials({}, { accessToken: stale, refreshToken: 'refresh_refused_secret', baseUrl }).token())
      process.stdout.write(JSON.stringify(out))
    `
    const child = spawn(process.execPath, ['--input-type=module', '-e', script, backend.url], { stdio: ['ignore', 'pipe', 'inherit'] })
    let stdout = ''
    child.stdout.on('data', (c) => { stdout += c })
    await within(20_000, new Promise((resolve) => child.on('exit', resolve)), 'the child process')
    const out = JSON.parse(stdout)
    assert.equal(out.tokenFromEnv, 'tok_env')
    assert.equal(out.loadedBeforeACall, false, 'a token at hand needs no addon')
    assert.equal(out.refusedKey.code, 'E_AUTH')
    assert.equal(out.refusedKey.httpStatus, 401)
    assert.match(out.refusedKey.message, /the API key was refused \(HTTP 401\): check CURSOR_API_KEY/)
    assert.equal(out.loadedAfter, true)
    assert.equal(out.exchanged, 'string')
    assert.equal(out.loginOver.code, 'E_AUTH')
    assert.match(out.loginOver.message, /the Cursor login has expired or was revoked: run `cursor-acp-native login`/)
    assert.ok(!stdout.includes('key_refused_secret') && !stdout.includes('refresh_refused_secret'), stdout)
  } finally {
    backend.close()
  }
})
