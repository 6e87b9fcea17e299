// The embedded backend in a process of its own, so the client being measured shares its CPU
// time with nothing else: reads a scenario file, prints `{ url }` on stdout, exits when stdin ends.
// A scenario of `{ "floorServer": true }` starts the transport floor's do-nothing server instead.
import fs from 'node:fs'
import { createRequire } from 'node:module'

const require = createRequire(import.meta.url)
const { startEmbeddedBackend, bench } = require('../testing.js')

const scenario = JSON.parse(fs.readFileSync(process.argv[2], 'utf8'))
const backend = scenario.floorServer ? await bench.startFloorServer() : await startEmbeddedBackend({ scenario })
process.stdout.write(`${JSON.stringify({ url: backend.url })}\n`)
process.stdin.resume()
process.stdin.on('end', () => {
  backend.close()
  process.exit(0)
})
