// @ts-check
// V8's young generation given back once the agent is idle.
//
// While turns run, V8 grows its young generation (new space) to keep up with their allocations
// and then keeps it at that size: after 50, 400 and 1,000 turns of the memory bench's turn, new
// space held 3.8, 15 and 31 MiB of an agent's RSS of 72, 91 and 117 MiB, while the JavaScript
// objects alive stayed about 5 MiB throughout (heap snapshots). That was most of what an agent
// grew by over a session. V8 shrinks it only at a garbage collection that finds allocation has
// slowed, and an idle agent collects nothing: it kept the memory for as long as the editor kept
// the thread open.
//
// So when no turn (nor a `session/load`'s replay) has run for `IDLE_MS`, the agent collects
// once (a full GC, 5-11 ms of the JS thread). Measured after 400 turns: a GC 1.5 s after the
// last turn left new space as it was, one 10 s after shrank it to 1 MiB (RSS 88.7 → 74.4 MiB).
// `IDLE_MS` is twice that. It runs once per idle period; the next turn grows new space again
// as it needs.
//
// The collector is the one `--expose-gc` gives, taken for this process at the first idle
// period and never left in a global: the flag is set, a context is made to fetch `gc`, and the
// flag is cleared again. With node started under `--expose-gc`, its own `gc` is used.
import { builtin } from './builtin.mjs'

const v8 = builtin('node:v8')

/** How long without a turn before the agent collects. */
export const IDLE_MS = 20_000

/** @typedef {{ debug: (...args: unknown[]) => void }} DebugLog */

/** The collector, fetched at the first call (null: this node offers none). @type {Promise<(() => void) | null> | undefined} */
let collector

/** `gc`: node's own when started under `--expose-gc`, else one fetched with the flag set for a moment. */
async function fetchCollector() {
  if (typeof globalThis.gc === 'function') return globalThis.gc
  const vm = builtin('node:vm')
  v8.setFlagsFromString('--expose-gc')
  try {
    const gc = vm.runInNewContext('gc')
    return typeof gc === 'function' ? gc : null
  } finally {
    v8.setFlagsFromString('--no-expose-gc')
  }
}

/**
 * A full garbage collection now. Throws if this node offers no collector.
 * @returns {Promise<void>}
 */
export async function collectGarbage() {
  // One fetch, however many calls come while it is under way.
  collector ??= fetchCollector().catch(() => null)
  const gc = await collector
  if (!gc) throw new Error('this node offers no garbage collector to call')
  gc()
}

/**
 * Counts running turns (and replays); `idleMs` after the last one ends (and none started
 * since), `collect` runs once.
 * @param {object} o
 * @param {number} [o.idleMs]
 * @param {() => Promise<void>} [o.collect]
 * @param {() => number} [o.rss]  bytes, for the log line
 */
export function idleCollector({ idleMs = IDLE_MS, collect = collectGarbage, rss = () => process.memoryUsage.rss() } = {}) {
  let running = 0
  /** @type {ReturnType<typeof setTimeout> | undefined} */
  let timer
  /** Once a collection failed (no collector), none is tried again. */
  let unavailable = false

  /** @param {DebugLog} log */
  const collectNow = async (log) => {
    timer = undefined
    if (running > 0 || unavailable) return
    const before = rss()
    try {
      await collect()
    } catch (e) {
      unavailable = true
      log.debug('idle: no garbage collection:', e)
      return
    }
    const mib = (/** @type {number} */ bytes) => (bytes / 1048576).toFixed(1)
    log.debug(`idle for ${idleMs / 1000} s: garbage collected, RSS ${mib(before)} → ${mib(rss())} MiB`)
  }

  return {
    /**
     * Runs `work` (a turn, a history's replay), counted as running until it settles.
     * @template T
     * @param {() => Promise<T>} work
     * @param {DebugLog} log
     * @returns {Promise<T>}
     */
    async during(work, log) {
      running++
      clearTimeout(timer)
      timer = undefined
      try {
        return await work()
      } finally {
        running--
        if (running === 0 && !unavailable) {
          timer = setTimeout(() => void collectNow(log), idleMs)
          timer.unref()
        }
      }
    },
    /** Whether a collection is waiting for its time. */
    get scheduled() {
      return timer !== undefined
    },
  }
}

/** This process's: every session's turns are counted here (the V8 heap is the process's). */
export const agentIdleMemory = idleCollector()
