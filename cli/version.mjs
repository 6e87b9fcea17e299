// @ts-check
// The package's version: `agentInfo` in the answer to `initialize`, `--version`, and the name
// the MCP client gives servers.
import { createRequire } from 'node:module'

const require = createRequire(import.meta.url)
/** @type {{ version: string }} */
const packageJson = require('../package.json')

export const VERSION = packageJson.version
