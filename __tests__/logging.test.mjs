// The core's log events: off by default, on stderr at the level asked (setLogLevel, or the stdio
// agent's --log-level), never on stdout, never carrying a prompt or a credential.
import { test } from 'node:test'
import assert from 'node:assert/strict'
import { spawnSync } from 'node:child_process'
import { fileURLToPath } from 'node:url'
import { INIT, assertOnlyJsonRpc, startAgent, tempDir } from './acp-harness.mjs'
import { within } from './helpers.mjs'

const index = fileURLToPath(new URL('../index.js', import.meta.url))
const testing = fileURLToPath(new URL('../testing.js', import.meta.url))
const PROMPT = 'prompt-text-that-must-not-be-logged'
const coreLines = (stderr) => stderr.split('\n').filter((l) => l.includes('cursor_acp_core'))

test('the stdio agent with --log-level debug: core events on stderr, only ACP JSON on stdout', async () => {
  const agent = startAgent({
    scenario: { steps: [{ type: 'text', text: 'hi' }, { type: 'turnEnded' }] },
    args: ['--log-level', 'debug'],
  })
  try {
    await agent.agent.request('initialize', INIT)
    const { sessionId } = await agent.agent.request('session/new', { cwd: tempDir(), mcpServers: [] })
    const { stopReason } = await within(20_000, agent.agent.request('session/prompt', { sessionId, prompt: [{ type: 'text', text: PROMPT }] }))
    assert.equal(stopReason, 'end_turn')
  } finally {
    await agent.stop()
  }
  const lines = coreLines(agent.stderr())
  assert.ok(lines.some((l) => /INFO .*turn started/.test(l)), agent.stderr())
  assert.ok(lines.some((l) => /INFO .*turn over.*stop_reason=EndTurn/.test(l)), agent.stderr())
  assert.ok(!agent.stderr().includes(PROMPT), 'the prompt is not logged')
  assert.ok(!agent.stdout().includes('cursor_acp_core'), 'no log line on stdout')
  assertOnlyJsonRpc(agent.stdout(), assert)
})

test('the stdio agent at its default level (warn) writes no info events of the core', async () => {
  const agent = startAgent({ scenario: { steps: [{ type: 'turnEnded' }] } })
  try {
    await agent.agent.request('initialize', INIT)
    const { sessionId } = await agent.agent.request('session/new', { cwd: tempDir(), mcpServers: [] })
    await within(20_000, agent.agent.request('session/prompt', { sessionId, prompt: [{ type: 'text', text: 'x' }] }))
  } finally {
    await agent.stop()
  }
  assert.deepEqual(coreLines(agent.stderr()), [])
})

test('setLogLevel: off by default, on and off again at run time; a bad level is E_INVALID', () => {
  const r = spawnSync(process.execPath, ['-e', `const { AgentClient, setLogLevel } = require(${JSON.stringify(index)}); const { startEmbeddedBackend } = require(${JSON.stringify(testing)});
    (async () => {
      const b = await startEmbeddedBackend({ scenario: { steps: [{ type: 'turnEnded' }] } });
      const client = new AgentClient({ baseUrl: b.url });
      const turn = async (label) => { console.error('--', label); await client.newSession().prompt('x').result };
      await turn('default');
      setLogLevel('info');
      await turn('info');
      setLogLevel('off');
      await turn('off');
      try { setLogLevel('loud') } catch (e) { console.log(e.code, e.message) }
      b.close();
    })()`], { encoding: 'utf8', timeout: 20_000 })
  assert.equal(r.status, 0, r.stderr)
  assert.match(r.stdout, /^E_INVALID .*'error', 'warn', 'info', 'debug' or 'off'.*"loud"/)
  const sections = r.stderr.split(/^-- /m).slice(1)
  const started = (section) => coreLines(section).filter((l) => l.includes('turn started')).length
  assert.deepEqual(sections.map((s) => [s.split('\n')[0], started(s)]), [['default', 0], ['info', 1], ['off', 0]])
})
