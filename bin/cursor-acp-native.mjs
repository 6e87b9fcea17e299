#!/usr/bin/env node
// @ts-check
// cursor-acp-native: an Agent Client Protocol agent over stdio, backed by Cursor's agent
// backend (or a local gateway, or the embedded backend with --embedded).
//
// This file turns Node's compile cache on for the agent's own modules (cli/compile-cache.mjs)
// before they load; the command line itself is cli/main.mjs.
import { useCompileCache } from '../cli/compile-cache.mjs'

useCompileCache()
await import('../cli/main.mjs')
