// The agent keeps V8's optimizing compiler off until its first turn (cli/optimizer.mjs): nothing
// is optimized while it is off, code is optimized again once it is back on, and a node started
// with compiler flags of its own keeps them. Read from V8's own trace (`--trace-opt`), with
// compilation on the main thread so that the trace is written before the next line of output.
import { test } from 'node:test'
import assert from 'node:assert/strict'
import { spawnSync } from 'node:child_process'

const OPTIMIZER = new URL('../cli/optimizer.mjs', import.meta.url).href

/** Runs a program that makes `before` hot, switches the compiler back on, then makes `after` hot. */
function run(flags = []) {
  const program = `
    const { deferOptimizing, optimizeFromNow } = await import(${JSON.stringify(OPTIMIZER)})
    deferOptimizing()
    function before(n) { let s = 0; for (let i = 0; i < n; i++) s += i % 7; return s }
    for (let i = 0; i < 3000; i++) before(1000)
    console.log('--- back on')
    optimizeFromNow()
    function after(n) { let s = 0; for (let i = 0; i < n; i++) s += i % 5; return s }
    for (let i = 0; i < 3000; i++) after(1000)
  `
  const r = spawnSync(process.execPath, ['--trace-opt', '--no-concurrent-recompilation', ...flags, '--input-type=module', '-e', program], { encoding: 'utf8', timeout: 60_000 })
  assert.equal(r.status, 0, r.stderr)
  const [off, on] = r.stdout.split('--- back on')
  // TurboFan's compiles only: Maglev, the tier below it (on by default from Node 24), is left as it is.
  const optimized = (text, name) => new RegExp(`completed (?:optimizing|compiling).*<JSFunction ${name} .*\\(target TURBOFAN`).test(text)
  return { before: optimized(off, 'before') || optimized(on, 'before'), after: optimized(on, 'after') }
}

test('nothing is optimized until the first turn, and code is once it has come', () => {
  assert.deepEqual(run(), { before: false, after: true })
})

test('compiler flags given to node are left as they are', () => {
  assert.deepEqual(run(['--no-opt']), { before: false, after: false })
  assert.deepEqual(run(['--turbofan']), { before: true, after: true })
})
