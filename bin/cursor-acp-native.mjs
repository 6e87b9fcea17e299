#!/usr/bin/env node
// @ts-check
// cursor-acp-native: an Agent Client Protocol agent over stdio, backed by Cursor's agent
// backend (or a local gateway, or the embedded backend with --embedded).
//
// This file turns Node's compile cache on (cli/compile-cache.mjs) before the agent loads; the
// command line itself is cli/main.mjs. Both run from dist/, their bundles (scripts/bundle-cli.mjs
// says why): two modules to load instead of forty.
import { useCompileCache } from '../dist/compile-cache.mjs'

useCompileCache()
await import('../dist/main.mjs')
