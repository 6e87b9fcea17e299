// @ts-check
// V8's optimizing compiler (TurboFan) is kept off while the agent starts, and switched on for
// good with its first turn (or after `DEFER_LIMIT_MS`, whichever comes first).
//
// What runs before the first prompt runs about once: loading the agent's modules and the set-up's
// file lookups. Only one function gets hot enough to be optimized then, `path`'s
// `normalizeString` (about 230 path operations, most of them the ES module loader resolving
// the agent's modules), and compiling it touches 3.3 MiB of TurboFan's code in node's binary:
// 5 % of an idle agent's RSS, for code that is not run much again. An editor starts an agent per
// thread, and most of them sit idle. Nothing a turn runs is optimized any later than before
// (turns only begin with the first prompt), so the relay is as fast as it was.
//
// Maglev, V8's tier below TurboFan (on by default from Node 24, where it compiles that function
// instead), is left as it is: keeping it off as well saved 0.35 MiB there (66.1 → 65.7 MiB after
// session/new), and turning it on again would turn it on where a node ships it off (Node 20, 22).
//
// Flags changed at run time are V8's to honour; this one is read at each decision to optimize
// (V8 optimizes again as soon as it is back on). It is left alone when node was started with
// flags of the same family (a user debugging with `--jitless` or `--no-opt`).
import { builtin } from './builtin.mjs'

const v8 = builtin('node:v8')

/** The longest the compiler stays off, for an agent that is used but never prompted. */
const DEFER_LIMIT_MS = 30_000

/** Node's own flags that choose the compilers: when any is given, the agent leaves them alone. */
const COMPILER_FLAGS = /--(?:no-)?(?:turbofan|opt|jitless|max-opt|maglev|sparkplug|always-opt|always-turbofan)\b/

let deferred = false

/** Keeps TurboFan off until `optimizeFromNow` (the agent's start). */
export function deferOptimizing() {
  if (COMPILER_FLAGS.test([...process.execArgv, process.env.NODE_OPTIONS ?? ''].join(' '))) return
  v8.setFlagsFromString('--no-turbofan')
  deferred = true
  setTimeout(optimizeFromNow, DEFER_LIMIT_MS).unref()
}

/** TurboFan on again (the first turn); does nothing after the first call. */
export function optimizeFromNow() {
  if (!deferred) return
  deferred = false
  v8.setFlagsFromString('--turbofan')
}
