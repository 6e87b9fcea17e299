// Event-loop and thread behaviour: callbacks never keep Node alive; a running turn does; worker threads work.
import { test } from 'node:test'
import assert from 'node:assert/strict'
import { spawnSync } from 'node:child_process'
import { fileURLToPath } from 'node:url'

const index = fileURLToPath(new URL('../index.js', import.meta.url))
const testing = fileURLToPath(new URL('../testing.js', import.meta.url))

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
  const r = run(`const { AgentClient } = require(${JSON.stringify(index)}); const { startEmbeddedBackend } = require(${JSON.stringify(testing)});
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
  const r = run(`const { AgentClient } = require(${JSON.stringify(index)}); const { startEmbeddedBackend } = require(${JSON.stringify(testing)});
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

test('worker threads: turns run in workers and the main thread at once; a worker ended mid-turn harms nothing', () => {
  // Each thread answers execs with its own callback; a worker terminated while its exec callback
  // is still pending must leave the process and the other threads' clients working, and the
  // process must still exit on its own.
  const r = run(`const { Worker } = require('node:worker_threads');
    const { AgentClient } = require(${JSON.stringify(index)}); const { startEmbeddedBackend } = require(${JSON.stringify(testing)});
    const inWorker = (url, hang) => new Worker(\`
      const { parentPort } = require('node:worker_threads');
      const { AgentClient } = require(${JSON.stringify(index)});
      let execs = 0;
      const client = new AgentClient({ baseUrl: '\${url}', exec: (req) => {
        execs++;
        parentPort.postMessage({ exec: true });
        return \${hang} ? new Promise(() => {}) : { success: { path: req.args.path, content: 'worker' } };
      } });
      (async () => {
        const turn = client.newSession().prompt('x');
        for await (const u of turn) {}
        parentPort.postMessage({ stop: (await turn.result).stopReason, execs });
      })();\`, { eval: true });
    const finished = (w) => new Promise((resolve, reject) => {
      w.on('message', (m) => { if (m.stop) { resolve(m.stop + '/' + m.execs); w.terminate() } });
      w.on('error', reject);
    });
    (async () => {
      const b = await startEmbeddedBackend({ scenario: { steps: [
        { type: 'text', text: 'hi' }, { type: 'exec', id: 1, args: { readArgs: { path: '/x' } } }, { type: 'turnEnded' }] } });
      let mainExecs = 0;
      const client = new AgentClient({ baseUrl: b.url, exec: (req) => { mainExecs++; return { success: { path: req.args.path, content: 'main' } } } });
      const mainTurn = async () => {
        const turn = client.newSession().prompt('x');
        for await (const u of turn) {}
        return (await turn.result).stopReason;
      };
      const together = await Promise.all([finished(inWorker(b.url, false)), finished(inWorker(b.url, false)), mainTurn()]);
      console.log(together.join(' '), mainExecs);
      const hanging = inWorker(b.url, true);
      await new Promise((resolve) => hanging.on('message', (m) => m.exec && resolve()));
      console.log('terminated', await hanging.terminate());
      console.log('after', await mainTurn(), mainExecs);
      b.close();
    })()`)
  assert.equal(r.status, 0, r.stderr)
  assert.deepEqual(r.stdout.trim().split('\n'), ['end_turn/1 end_turn/1 end_turn 1', 'terminated 1', 'after end_turn 2'])
})

test('a worker that is terminated or exits mid-turn tears down quietly: no panic, nothing on stderr', () => {
  // The worker is the only thread with the addon, so its end shuts the addon's runtime down with
  // the turn still running: the turn's end then runs during that shutdown.
  for (const end of ['terminate', 'exit']) {
    const r = run(`const { Worker } = require('node:worker_threads');
      const w = new Worker(\`
        const { parentPort } = require('node:worker_threads');
        const { AgentClient } = require(${JSON.stringify(index)}); const { startEmbeddedBackend } = require(${JSON.stringify(testing)});
        (async () => {
          const b = await startEmbeddedBackend({ scenario: { steps: [{ type: 'text', text: 'hi' }, { type: 'sleep', ms: 5000 }, { type: 'turnEnded' }] } });
          const turn = new AgentClient({ baseUrl: b.url }).newSession().prompt('x');
          for await (const u of turn) {
            if ('${end}' === 'exit') process.exit(0);
            parentPort.postMessage('mid-turn');
          }
        })();\`, { eval: true });
      w.on('message', () => w.terminate());
      w.on('exit', (code) => console.log('worker ended', code));`)
    assert.equal(r.status, 0, `${end}: ${r.stderr}`)
    assert.equal(r.stdout.trim(), `worker ended ${end === 'exit' ? 0 : 1}`, end)
    assert.equal(r.stderr, '', `${end}: stderr must stay empty`)
  }
})
