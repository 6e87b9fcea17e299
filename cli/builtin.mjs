// @ts-check
// node's own modules as `require` gives them, rather than through `import … from 'node:fs'`.
// An ES module import of a built-in makes its ES module facade, which reads every export, the
// lazy ones too: node:fs's `promises` loads node's streams, readline and file watchers, and
// node:util's loads worker_threads. Most of that is code the agent never runs, and compiling it
// was the largest part of its start-up after Node's own (docs/agent.md, "Start-up").
// `process.getBuiltinModule` is there from Node 20.16 and 22.3; older ones get `require`.
import { createRequire } from 'node:module'

/** @type {NodeJS.Process['getBuiltinModule']} */
export const builtin = process.getBuiltinModule ? process.getBuiltinModule.bind(process) : /** @type {any} */ (createRequire(import.meta.url))
