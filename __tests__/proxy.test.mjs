// The stdio agent behind a forward proxy (HTTP_PROXY / HTTPS_PROXY): signing in, refreshing a
// stored login, exchanging an API key and running turns all go through the proxy, because the
// core makes every one of those calls on the same HTTP stack. The backend is named by a host name
// only the proxy resolves (loopback addresses are never proxied, which would let a test pass
// around the proxy). A proxy that is down or refuses is named in the error, with the fix.
import { test } from 'node:test'
import assert from 'node:assert/strict'
import { spawn } from 'node:child_process'
import net from 'node:net'
import path from 'node:path'
import { fileURLToPath } from 'node:url'

import { CredentialStore } from '../cli/credentials.mjs'
import { CLI, INIT, startAgent, tempDir } from './acp-harness.mjs'
import { startEmbeddedBackend, within } from './helpers.mjs'

const TURN = { steps: [{ type: 'text', text: 'through the proxy' }, { type: 'turnEnded' }] }
const HOST = 'cursor-proxy-test.invalid'
const PROXY_SCRIPT = fileURLToPath(new URL('./fixtures/proxy.mjs', import.meta.url))
/** Test-only certificates for that host name (see the folder's README). */
const TLS_DIR = fileURLToPath(new URL('./fixtures/proxy-tls/', import.meta.url))
/** Every proxy variable the agent could inherit, cleared; the test sets the ones it means. */
const NO_PROXY_ENV = Object.fromEntries(
  ['HTTP_PROXY', 'HTTPS_PROXY', 'ALL_PROXY', 'NO_PROXY'].flatMap((n) => [[n, ''], [n.toLowerCase(), '']]),
)
const NO_CREDENTIALS = { CURSOR_ACCESS_TOKEN: '', CURSOR_API_KEY: '', CURSOR_ACP_LOGIN_URL: '' }

/**
 * Starts the proxy fixture as a process of its own; `log` is every request it was asked for.
 * @param {string[]} args
 */
async function startProxy(args) {
  const child = spawn(process.execPath, [PROXY_SCRIPT, '--host', HOST, ...args], { stdio: ['ignore', 'pipe', 'inherit'] })
  /** @type {{ method: string, target?: string }[]} */
  const log = []
  let buffered = ''
  const port = await within(10_000, new Promise((resolve, reject) => {
    child.stdout.on('data', (chunk) => {
      buffered += chunk
      let newline
      while ((newline = buffered.indexOf('\n')) >= 0) {
        const entry = JSON.parse(buffered.slice(0, newline))
        buffered = buffered.slice(newline + 1)
        if ('port' in entry) resolve(entry.port)
        else log.push(entry)
      }
    })
    child.on('exit', (code) => reject(new Error(`the proxy exited (${code})`)))
  }), 'the proxy starting')
  const exited = new Promise((resolve) => child.on('exit', resolve))
  return { url: `http://127.0.0.1:${port}`, log, stop: async () => { child.kill('SIGTERM'); await exited } }
}

/**
 * Waits (with a deadline) until `holds()`: the proxy's log comes through a pipe, a moment after
 * the request it names.
 * @param {() => boolean} holds
 */
async function eventually(holds) {
  const deadline = Date.now() + 5000
  while (!holds() && Date.now() < deadline) await new Promise((r) => setTimeout(r, 20))
  return holds()
}

/** Runs the CLI with `args` and `env`. */
function run(args, env) {
  const child = spawn(process.execPath, [CLI, ...args], { env: { ...process.env, ...NO_PROXY_ENV, ...NO_CREDENTIALS, ...env }, stdio: ['ignore', 'pipe', 'pipe'] })
  let stdout = ''
  let stderr = ''
  child.stdout.on('data', (c) => { stdout += c })
  child.stderr.on('data', (c) => { stderr += c })
  return within(30_000, new Promise((resolve) => child.on('exit', (code) => resolve({ code, stdout, stderr }))), `cursor-acp-native ${args.join(' ')}`)
}

/** A port nothing listens on. */
async function closedPort() {
  const server = net.createServer()
  await new Promise((resolve) => server.listen(0, '127.0.0.1', () => resolve(undefined)))
  const { port } = /** @type {net.AddressInfo} */ (server.address())
  await new Promise((resolve) => server.close(resolve))
  return port
}

/** One prompt in a new session of `agent`: its stop reason. */
async function oneTurn(agent) {
  await agent.agent.request('initialize', INIT)
  const { sessionId } = await agent.agent.request('session/new', { cwd: tempDir(), mcpServers: [] })
  const answer = await within(30_000, agent.agent.request('session/prompt', { sessionId, prompt: [{ type: 'text', text: 'hi' }] }))
  return answer.stopReason
}

test('behind HTTP_PROXY: sign-in poll, login refresh, API-key exchange and turns all go through the proxy', async () => {
  // Tokens live 1.5 s: each is "about to expire" when used, so the stored login is refreshed.
  const backend = await startEmbeddedBackend({ scenario: TURN, auth: { autoApprove: true, accessTokenTtlMs: 1500 } })
  const port = Number(new URL(backend.url).port)
  const proxy = await startProxy(['--to', String(port)])
  const base = `http://${HOST}:${port}`
  const viaProxy = { HTTP_PROXY: proxy.url, http_proxy: proxy.url }
  const configDir = tempDir('acp-config-')
  // Every call carries the client version the agent is started with.
  const version = ['--client-version', 'cli-2099.01.01-proxy']
  /** @param {string} method @param {string} p */
  const asked = (method, p) => proxy.log.filter((e) => e.method === method && e.target === `${base}${p}` && e.clientVersion === version[1]).length
  try {
    // Without the proxy the name resolves nowhere: whatever reaches the backend came through it.
    const direct = await run(['login', '--no-browser', '--base-url', base], { CURSOR_ACP_CONFIG_DIR: tempDir('acp-config-') })
    assert.equal(direct.code, 1, direct.stdout)
    assert.match(direct.stdout, new RegExp(`cannot connect to ${base.replaceAll('.', '\\.')}: the host name does not resolve`))

    // `login`: its polls go through the proxy, and the login is stored.
    const login = await run(['login', '--no-browser', '--base-url', base, ...version], { ...viaProxy, CURSOR_ACP_CONFIG_DIR: configDir })
    assert.equal(login.code, 0, login.stdout + login.stderr)
    assert.ok(await eventually(() => asked('GET', '/auth/poll') >= 1), JSON.stringify(proxy.log))
    const stored = new CredentialStore(configDir).read()
    assert.equal(stored?.baseUrl, base)

    // A new agent refreshes the stored login and runs a turn, both through the proxy.
    await new Promise((r) => setTimeout(r, 100))
    const agent = startAgent({ embedded: false, args: ['--base-url', base, ...version], env: { ...NO_PROXY_ENV, ...viaProxy, CURSOR_ACP_CONFIG_DIR: configDir } })
    try {
      assert.equal(await oneTurn(agent), 'end_turn', agent.stderr())
    } finally {
      await agent.stop()
    }
    assert.ok(await eventually(() => asked('POST', '/oauth/token') >= 1), JSON.stringify(proxy.log))
    assert.notEqual(new CredentialStore(configDir).read()?.accessToken, stored?.accessToken, 'the refreshed login was stored')

    // An API key is exchanged through it too.
    const keyed = startAgent({ embedded: false, args: ['--base-url', base, ...version], env: { ...NO_PROXY_ENV, ...viaProxy, CURSOR_ACP_CONFIG_DIR: tempDir('acp-config-'), CURSOR_API_KEY: 'key_behind_proxy' } })
    try {
      assert.equal(await oneTurn(keyed), 'end_turn', keyed.stderr())
    } finally {
      await keyed.stop()
    }
    assert.ok(await eventually(() => asked('POST', '/auth/exchange_user_api_key') >= 1), JSON.stringify(proxy.log))

    // Both turns' streams went through it, and reached the backend with a token it issued.
    const streams = () => proxy.log.filter((e) => e.method === 'POST' && /AgentService\/(RunSSE|Run)$/.test(e.target ?? '') && e.clientVersion === version[1])
    assert.ok(await eventually(() => streams().length >= 2), JSON.stringify(proxy.log))
    const ended = backend.records().filter((r) => r.outcome === 'end')
    assert.equal(ended.length, 2)
    for (const r of ended) assert.match(r.headers.authorization, /^Bearer <redacted: access token \d+ issued by this backend>$/)
    // Nothing went to any other host, and no secret is in the proxy's log.
    const others = proxy.log.filter((e) => e.target && !e.target.startsWith(base))
    assert.deepEqual(others, [])
    assert.ok(!JSON.stringify(proxy.log).includes('verifier='), 'queries are not logged')
  } finally {
    await proxy.stop()
    backend.close()
  }
})

test('behind HTTPS_PROXY, through CONNECT to a TLS service: sign-in poll, API-key exchange and a turn on the default transport', async () => {
  const backend = await startEmbeddedBackend({ scenario: TURN, auth: { autoApprove: true } })
  const proxy = await startProxy(['--to', new URL(backend.url).port, '--tls', TLS_DIR])
  const base = `https://${HOST}`
  // The service's certificate authority is the system's (as a corporate one would be).
  const env = { ...NO_PROXY_ENV, HTTPS_PROXY: proxy.url, https_proxy: proxy.url, SSL_CERT_FILE: path.join(TLS_DIR, 'ca.pem'), SSL_CERT_DIR: '' }
  try {
    const login = await run(['login', '--no-browser', '--base-url', base], { ...env, CURSOR_ACP_CONFIG_DIR: tempDir('acp-config-') })
    assert.equal(login.code, 0, login.stdout + login.stderr)
    const agent = startAgent({ embedded: false, args: ['--base-url', base], env: { ...env, CURSOR_ACP_CONFIG_DIR: tempDir('acp-config-'), CURSOR_API_KEY: 'key_behind_tls' } })
    try {
      assert.equal(await oneTurn(agent), 'end_turn', agent.stderr())
    } finally {
      await agent.stop()
    }
    const ended = backend.records().filter((r) => r.outcome === 'end')
    assert.equal(ended.length, 1)
    assert.match(ended[0].headers.authorization, /^Bearer <redacted: access token \d+ issued by this backend>$/)
    // Every connection was a tunnel to that one host: the login's, the exchange's, the turn's.
    assert.ok(await eventually(() => proxy.log.length >= 3), JSON.stringify(proxy.log))
    assert.ok(proxy.log.every((e) => e.method === 'CONNECT' && e.target === `${HOST}:443`), JSON.stringify(proxy.log))
  } finally {
    await proxy.stop()
    backend.close()
  }
})

test('a proxy that is down or refuses the tunnel is named in the error, with the fix', async () => {
  const closed = await closedPort()
  const down = `http://127.0.0.1:${closed}`
  const base = `http://${HOST}:8080`
  // `login`: each poll fails to reach the proxy; after three it gives up, naming it.
  const login = await run(['login', '--no-browser', '--base-url', base], { HTTP_PROXY: down, http_proxy: down, CURSOR_ACP_CONFIG_DIR: tempDir('acp-config-') })
  assert.equal(login.code, 1)
  assert.match(login.stdout, /giving up after 3 failed polls in a row: cannot reach the sign-in service/)
  assert.ok(login.stdout.includes(`cannot connect to the proxy ${down} (HTTP_PROXY) for ${base}: connection refused`), login.stdout)
  assert.match(login.stdout, /fix or unset HTTP_PROXY, or add the host to NO_PROXY/)

  // An API key behind a proxy that refuses CONNECT: `authenticate` says the proxy would not
  // open a tunnel, and the key never appears.
  const refusing = await startProxy(['--refuse'])
  const key = 'key_that_stays_secret'
  const agent = startAgent({ embedded: false, args: ['--base-url', `https://${HOST}`], env: { ...NO_PROXY_ENV, HTTPS_PROXY: refusing.url, https_proxy: refusing.url, CURSOR_API_KEY: key, CURSOR_ACP_CONFIG_DIR: tempDir('acp-config-') } })
  try {
    await agent.agent.request('initialize', INIT)
    await assert.rejects(agent.agent.request('authenticate', { methodId: 'cursor-api-key' }), (e) => {
      assert.equal(e.code, -32000)
      assert.ok(e.message.includes(`cannot reach https://${HOST} through the proxy ${refusing.url} (HTTPS_PROXY)`), e.message)
      assert.match(e.message, /would not open a tunnel/)
      assert.ok(!e.message.includes(key))
      return true
    })
    // (The proxy's log arrives through a pipe: waited for, with a deadline.)
    assert.ok(await eventually(() => refusing.log.length > 0), 'the proxy was asked')
    assert.deepEqual(refusing.log[0], { method: 'CONNECT', target: `${HOST}:443` })
    assert.ok(refusing.log.every((e) => e.method === 'CONNECT'), JSON.stringify(refusing.log))
    assert.ok(!agent.stderr().includes(key))
  } finally {
    await agent.stop()
    await refusing.stop()
  }
})
