// Event-loop behaviour: callbacks never keep Node alive; a running turn does.
import { test } from 'node:test'
import assert from 'node:assert/strict'
import { spawnSync } from 'node:child_process'
import { fileURLToPath } from 'node:url'

const index = fileURLToPath(new URL('../index.js', import.meta.url))

function run(source) {
  return spawnSync(process.execPath, ['-e', source], { encoding: 'utf8', timeout: 15_000 })
}

test('a client with callbacks and no turn lets the process exit', () => {
  const started = Date.now()
  const r = run(`const { AgentClient } = require(${JSON.stringify(index)});
    new AgentClient({ baseUrl: 'http://127.0.0.1:9', exec: async () => ({}), interaction: () => null });
    console.log('ok')`)
  assert.equal(r.status, 0, r.stderr)
  assert.equal(r.stdout.trim(), 'ok')
  assert.ok(Date.now() - started < 5000)
})

test('a running turn keeps the process alive until it ends', () => {
  const r = run(`const { AgentClient, startEmbeddedBackend } = require(${JSON.stringify(index)});
    (async () => {
      const b = await startEmbeddedBackend({ scenario: { steps: [{ type: 'sleep', ms: 300 }, { type: 'text', text: 'late' }, { type: 'turnEnded' }] } });
      const turn = new AgentClient({ baseUrl: b.url }).newSession().prompt('x');
      let text = '';
      for await (const u of turn) text += u.content.text;
      console.log(text, (await turn.result).stopReason);
      b.close();
    })()`)
  assert.equal(r.status, 0, r.stderr)
  assert.equal(r.stdout.trim(), 'late end_turn')
})

test('pending nextBatch and result promises keep the process alive; settled ones let it exit', () => {
  const started = Date.now()
  const r = run(`const { AgentClient, startEmbeddedBackend } = require(${JSON.stringify(index)});
    (async () => {
      const b = await startEmbeddedBackend({ scenario: { steps: [{ type: 'sleep', ms: 300 }, { type: 'text', text: 'late' }, { type: 'turnEnded' }] } });
      const turns = Array.from({ length: 50 }, () => new AgentClient({ baseUrl: b.url }).newSession().prompt('x'));
      const texts = await Promise.all(turns.map(async (turn) => {
        let text = '';
        for (let batch; (batch = await turn.nextBatch(16)).length;) for (const u of batch) text += u.content.text;
        return text + ' ' + (await turn.result).stopReason;
      }));
      console.log(new Set(texts).size, texts[0], texts.length);
      // The backend is left open on purpose: it lives on the runtime, not the event loop.
    })()`)
  assert.equal(r.status, 0, r.stderr)
  assert.equal(r.stdout.trim(), '1 late end_turn 50')
  assert.ok(Date.now() - started < 8000, 'the process exits once every promise is settled')
})
