// Once no turn has run for a while, the stdio agent collects its garbage once, so that V8 gives
// back the young generation its turns grew (cli/idle-memory.mjs). The policy with a collector
// of the test's own; the real collector in a node of its own; and the agent doing it after a
// turn, with its idle delay shortened.
import assert from 'node:assert/strict'
import { spawnSync } from 'node:child_process'
import test from 'node:test'
import { fileURLToPath } from 'node:url'

import { IDLE_MS, idleCollector } from '../cli/idle-memory.mjs'
import { INIT, startAgent, tempDir } from './acp-harness.mjs'
import { within } from './helpers.mjs'

const IDLE_MODULE = new URL('../cli/idle-memory.mjs', import.meta.url).href
const SHORT_IDLE = fileURLToPath(new URL('./fixtures/short-idle.cjs', import.meta.url))
const quiet = { debug() {} }
const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms))

/** A collector counting its calls, with a short idle delay. */
function counted(idleMs = 40) {
  const calls = []
  const idle = idleCollector({ idleMs, collect: async () => { calls.push(Date.now()) } })
  return { idle, calls }
}

/** Waits until `check()` is true, failing after `ms`. */
async function until(check, what, ms = 5000) {
  const deadline = Date.now() + ms
  while (!check()) {
    assert.ok(Date.now() < deadline, what)
    await sleep(5)
  }
}

test('one collection once the last turn has been over for the idle delay', async () => {
  const { idle, calls } = counted()
  assert.equal(idle.scheduled, false, 'nothing before any turn')
  const ended = Date.now()
  assert.equal(await idle.during(async () => 'answer', quiet), 'answer')
  assert.equal(idle.scheduled, true)
  await until(() => calls.length === 1, 'collected')
  assert.ok(calls[0] - ended >= 35, `not before the delay (${calls[0] - ended} ms)`)
  await sleep(150)
  assert.equal(calls.length, 1, 'once per idle period')
  assert.equal(idle.scheduled, false)
})

test('a turn that starts within the delay puts the collection off until it ends', async () => {
  const { idle, calls } = counted(80)
  await idle.during(async () => {}, quiet)
  await sleep(30)
  let release = () => {}
  const second = idle.during(() => new Promise((resolve) => { release = resolve }), quiet)
  assert.equal(idle.scheduled, false, 'the first idle period ended with the turn')
  await sleep(200)
  assert.equal(calls.length, 0, 'nothing while a turn runs')
  release()
  await second
  await until(() => calls.length === 1, 'collected after the second turn')
})

test('overlapping turns: the collection waits for the last of them, and a failed turn counts too', async () => {
  const { idle, calls } = counted()
  let releaseLong = () => {}
  const long = idle.during(() => new Promise((resolve) => { releaseLong = resolve }), quiet)
  await assert.rejects(idle.during(async () => { throw new Error('turn failed') }, quiet), /turn failed/)
  await sleep(150)
  assert.equal(calls.length, 0, 'one turn still runs')
  releaseLong()
  await long
  await until(() => calls.length === 1, 'collected after both')
})

test('a collector that fails is logged once and not tried again', async () => {
  const logged = []
  let tries = 0
  const idle = idleCollector({ idleMs: 20, collect: async () => { tries++; throw new Error('no collector here') } })
  const log = { debug: (...args) => logged.push(args.map(String).join(' ')) }
  await idle.during(async () => {}, log)
  await until(() => logged.length === 1, 'logged')
  assert.match(logged[0], /no garbage collection.*no collector here/)
  await idle.during(async () => {}, log)
  assert.equal(idle.scheduled, false, 'not scheduled again')
  await sleep(100)
  assert.equal(tries, 1)
})

test('the real collector frees what nothing holds, and leaves no gc behind', () => {
  // In a node of its own: it sets V8 flags for its process.
  const program = `
    import vm from 'node:vm'
    const { collectGarbage } = await import(${JSON.stringify(IDLE_MODULE)})
    let held = { big: new Array(1e5).fill(7) }
    const ref = new WeakRef(held)
    held = null
    await new Promise((resolve) => setTimeout(resolve, 0)) // WeakRef targets live through their job
    await Promise.all([collectGarbage(), collectGarbage()]) // both, while the collector is fetched
    await collectGarbage() // the collector is kept, not fetched again
    console.log(JSON.stringify({ freed: ref.deref() === undefined, globalGc: typeof globalThis.gc, newContextGc: vm.runInNewContext('typeof gc') }))
  `
  const r = spawnSync(process.execPath, ['--input-type=module', '-e', program], { encoding: 'utf8', timeout: 60_000 })
  assert.equal(r.status, 0, r.stderr)
  assert.deepEqual(JSON.parse(r.stdout), { freed: true, globalGc: 'undefined', newContextGc: 'undefined' })
})

/** The stdio agent with its idle delay shortened, logging at debug level. */
const shortIdleAgent = (cacheDir) => startAgent({
  args: ['--log-level', 'debug'],
  env: { NODE_OPTIONS: `--require ${JSON.stringify(SHORT_IDLE)}`, SHORT_IDLE_FROM: String(IDLE_MS) },
  ...(cacheDir && { cacheDir }),
})
const COLLECTED = /garbage collected, RSS [\d.]+ → [\d.]+ MiB/

test('the agent collects once it has been idle after a turn or a replay, not before', async () => {
  const cwd = tempDir()
  const agent = shortIdleAgent()
  let sessionId
  try {
    await agent.agent.request('initialize', INIT)
    ;({ sessionId } = await agent.agent.request('session/new', { cwd, mcpServers: [] }))
    await sleep(300)
    assert.doesNotMatch(agent.stderr(), /garbage collected/, 'nothing before a turn')
    const answer = await within(20_000, agent.agent.request('session/prompt', { sessionId, prompt: [{ type: 'text', text: 'hi' }] }), 'the turn')
    assert.equal(answer.stopReason, 'end_turn')
    assert.doesNotMatch(agent.stderr(), /garbage collected/, 'not before the answer')
    await until(() => COLLECTED.test(agent.stderr()), `collected (stderr: ${agent.stderr().slice(-500)})`, 10_000)
  } finally {
    await agent.stop()
  }
  // Another agent process loads the session: its replay counts as a turn does.
  const loader = shortIdleAgent(agent.cacheDir)
  try {
    await loader.agent.request('initialize', INIT)
    await within(20_000, loader.agent.request('session/load', { sessionId, cwd, mcpServers: [] }), 'the load')
    assert.ok(loader.updatesFor(sessionId).some((u) => u.sessionUpdate === 'agent_message_chunk'), 'the turn was replayed')
    await until(() => COLLECTED.test(loader.stderr()), `collected after the replay (stderr: ${loader.stderr().slice(-500)})`, 10_000)
  } finally {
    await loader.stop()
  }
})
