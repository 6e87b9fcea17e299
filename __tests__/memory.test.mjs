// What a burst of turns leaves behind: once the last turn ends, the addon hands the memory it
// freed back to the operating system (glibc's `malloc_trim`, and jemalloc's purge where jemalloc
// is the addon's allocator), instead of keeping it for seconds or for good. An editor's
// extension host lives for days; a burst of parallel sessions must not raise its footprint.
import { test } from 'node:test'
import assert from 'node:assert/strict'
import v8 from 'node:v8'
import vm from 'node:vm'
import { setup, within } from './helpers.mjs'

v8.setFlagsFromString('--expose-gc')
const gc = vm.runInNewContext('gc')
v8.setFlagsFromString('--no-expose-gc')

const TURNS = 600
// The bench's `many` turn: a burst of deltas and an exec. Each delta is sizable, so that the
// turns' buffers, not V8's heap, are what the burst grows.
const MANY = { record: false, steps: [
  { type: 'textBurst', text: 'x'.repeat(400), count: 100 },
  { type: 'exec', id: 1, args: { readArgs: { path: '/w/a.txt' } } },
  { type: 'turnEnded' },
] }

const rss = () => process.memoryUsage.rss()
const sleep = (ms) => new Promise((r) => setTimeout(r, ms))

test('after a burst of turns the idle addon gives the memory it freed back', async () => {
  const { client, close } = await setup(MANY, {
    exec: (req) => ({ success: { path: req.args.path, content: 'hi\n' } }),
    // It measures memory, not stalls: a burst of 600 turns on a busy machine (the suites run in
    // parallel) may leave a stream quiet for longer than the fault tests' 1.5 s.
    stallTimeoutMs: 60_000,
  }, 'h2')
  try {
    const sessions = Array.from({ length: TURNS }, () => client.newSession({ cwd: '/w' }))
    gc()
    const before = rss()
    let peak = before
    const sampler = setInterval(() => { peak = Math.max(peak, rss()) }, 5)
    const ends = await within(60_000, Promise.all(sessions.map(async (s) => {
      const turn = s.prompt('go')
      for (;;) if ((await turn.nextBatch(1024)).length === 0) break
      return (await turn.result).stopReason
    })), 'the burst')
    clearInterval(sampler)
    peak = Math.max(peak, rss())
    assert.deepEqual(new Set(ends), new Set(['end_turn']))
    const grown = peak - before
    assert.ok(grown > 16 << 20, `the burst grew the process by only ${grown >> 20} MiB: it measures nothing`)

    // The trim runs on a blocking thread once the last turn has ended. jemalloc left alone
    // returns its free pages over ten seconds and more; glibc's arenas keep them.
    let kept = Infinity
    for (const deadline = Date.now() + 3_000; Date.now() < deadline; await sleep(100)) {
      gc()
      kept = rss() - before
      if (kept < grown / 3) break
    }
    assert.ok(kept < grown / 3, `idle, the process still holds ${kept >> 20} MiB of the ${grown >> 20} MiB the burst grew it by`)
  } finally {
    await close()
  }
})
