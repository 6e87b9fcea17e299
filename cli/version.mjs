// @ts-check
// The package's version: `agentInfo` in the answer to `initialize`, `--version`, and the name
// the MCP client gives servers. Read with `fs`, not `require`: the agent reads it before it
// answers `initialize`, and the first `require` sets up the CommonJS loader (1.3 ms here).
import { builtin } from './builtin.mjs'

const fs = builtin('node:fs')

/** @type {{ version: string }} */
const packageJson = JSON.parse(fs.readFileSync(new URL('../package.json', import.meta.url), 'utf8'))

export const VERSION = packageJson.version
