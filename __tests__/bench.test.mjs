// Smoke run of `bench/` with tiny sizes: the baselines' code is generated from proto/, all three
// clients (the addon, the hand-written baseline, the Connect client) run every scenario against
// the embedded backend in its own process, their updates agree, the stdio agent's start-up is
// timed, and the report carries every figure the targets are judged on. Speed is not asserted here.
import { test } from 'node:test'
import assert from 'node:assert/strict'
import { spawnSync } from 'node:child_process'
import fs from 'node:fs'
import path from 'node:path'
import { fileURLToPath } from 'node:url'
import { tempDir } from './tmp.mjs'

const root = fileURLToPath(new URL('..', import.meta.url))

test('bench smoke run: every scenario measured for all three clients, and they produce the same updates', () => {
  const gen = spawnSync('npm', ['run', '--silent', 'bench:gen'], { cwd: root, encoding: 'utf8' })
  assert.equal(gen.status, 0, gen.stderr)
  const out = path.join(tempDir('bench-smoke-'), 'results.json')
  const run = spawnSync(process.execPath, ['bench/run.mjs', '--smoke', '--out', out], { cwd: root, encoding: 'utf8', timeout: 300_000 })
  assert.equal(run.status, 0, run.stderr)
  const results = JSON.parse(fs.readFileSync(out, 'utf8'))
  assert.equal(results.results.check.pass, true)
  assert.ok(results.results.check.addon.updates.length >= 5, 'the check scenario produced updates')
  for (const name of ['stream', 'stream-frames', 'large-up', 'large-down', 'many', 'cancel-ack', 'cancel-silent', 'first']) {
    for (const impl of ['addon', 'baseline', 'connect']) {
      const { transport, ...figures } = results.results[name]?.[impl] ?? {}
      assert.ok(Object.keys(figures).length && Object.values(figures).every(Number.isFinite), `${name} ${impl}: ${JSON.stringify(figures)}`)
      // Like for like: the addon's default transport settles on h2 here, and the baselines use h2.
      assert.equal(transport, 'h2', `${name} ${impl}`)
    }
  }
  assert.match(run.stdout, /All three clients on h2: the addon on its default transport/)
  assert.equal(results.results.many.addon.completed, results.size.many.sessions)
  assert.equal(results.results.many10k.addon.completed, results.size.many10k.sessions, 'many-10k: every turn completed')
  assert.ok(results.results.many10k.addon.perIdleSessionKiB > 0)
  // Its wall ratio is read pair by pair against many's runs alternated with it.
  const { wallRatios, wallRatio, alternatedManyWallMs } = results.results.many10k.addon
  assert.equal(wallRatios.length, results.size.many10k.pairs)
  assert.ok(wallRatios.every((x) => x > 0) && wallRatio > 0 && alternatedManyWallMs > 0, JSON.stringify(results.results.many10k.addon))
  assert.match(run.stdout, /\| many-10k \| total wall \/ many's, pair by pair \|/)
  // The baselines' pairs beside it, every turn completed, one ratio per pair.
  for (const base of ['baseline', 'connect']) {
    const peer = results.results.many10k[base]
    assert.equal(peer.completed, results.size.many10k.sessions, `many-10k ${base}: every turn completed`)
    assert.equal(peer.wallRatios.length, results.size.many10k.baselinePairs, `many-10k ${base}`)
    assert.ok(peer.wallRatio > 0 && peer.alternatedManyWallMs > 0 && peer.transport === 'h2', JSON.stringify(peer))
  }
  assert.match(run.stdout, /\| many-10k \| total wall \/ many's: median of the pairs \| [\d.]+× \| [\d.]+× \| [\d.]+× \|/)
  assert.ok(results.results.decodeCeiling.framesPerSec > 0)
  // The bounds the targets are read against, measured in the same run.
  const floor = results.results.floor
  assert.ok(floor.firstP50Ms > 0 && floor.firstP50Ms <= floor.firstP99Ms && floor.firstP99Ms <= floor.wallMs, JSON.stringify(floor))
  assert.ok(results.results['large-up'].addon.stringReadMs > 0)
  const manySse = results.results.manySse
  assert.equal(manySse.completed, results.size.many.sessions, 'many on RunSSE: every turn completed')
  assert.equal(manySse.transport, 'sse')
  const upSse = results.results.largeUpSse
  assert.ok(upSse.mbPerSec > 0 && upSse.peakRssAboveIdleMiB > 0, `large-up on RunSSE: ${JSON.stringify(upSse)}`)
  assert.equal(upSse.transport, 'sse')
  assert.match(run.stdout, /\| large-up \| on transport 'sse': MB\/s \/ peak RSS above idle MiB \|/)
  assert.match(run.stdout, /\| many \| HTTP\/1.1 floor under 'sse': first byte p99 ms/)
  // Start-up: the agent answered initialize and session/new; node -e 0 beside it.
  const startup = results.results.startup
  for (const key of ['nodeMs', 'initializeMs', 'sessionNewMs', 'initializeRatio', 'sessionNewRatio']) assert.ok(startup[key] > 0, `startup ${key}: ${startup[key]}`)
  assert.equal(startup.history.sessions, 1000)
  for (const key of ['initializeMs', 'sessionNewMs']) assert.ok(startup.history[key] > 0, `startup history ${key}: ${startup.history[key]}`)
  assert.match(results.startupMd, /1,000 saved sessions: spawn → initialize answered/)
  assert.match(run.stdout, /\| cursor-acp-native: spawn → initialize answered \|/)
  // Latency through a relay that delays every byte, over TLS: every figure measured, in RTT of
  // that relay (speed is not asserted here).
  const latency = results.results.latency
  assert.ok(latency.rttMs >= 2 * latency.oneWayMs, JSON.stringify(latency))
  for (const key of ['first0', 'first500', 'second', 'resume', 'connectFirst', 'connectSecond']) {
    assert.ok(latency[key].ms > 0 && latency[key].rtt > 0, `latency ${key}: ${JSON.stringify(latency[key])}`)
  }
  assert.match(run.stdout, /\| agent: resume, the connection reset mid-stream → first chunk of the resumed turn \|/)
  // The agent's relay: the turns' updates arrived whole and in order, beside the addon alone.
  for (const name of ['stream', 'many']) {
    const x = results.results.relay[name]
    assert.equal(x.intact, true, `relay ${name}`)
    assert.ok(x.agentWallMs > 0 && x.addonWallMs > 0 && x.wallRatio > 0 && x.agentUpdates > 0 && x.agentCpuPer1000Updates >= 0, `relay ${name}: ${JSON.stringify(x)}`)
  }
  assert.match(run.stdout, /\| agent CPU ms per 1,000 updates \|/)
  // The agent's weight: node idle, the agent after session/new and after its turns, and what
  // each module costs (the peers only in a full run).
  const memory = results.results.memory
  for (const x of [memory.nodeIdleMiB, memory.addonIdleMiB, memory.agent.afterNewMiB, memory.agent.afterTurnsMiB, memory.agent.peakMiB]) assert.ok(x > 0, JSON.stringify(memory.agent))
  assert.ok(memory.agent.afterNewRatio > 0 && memory.turns > 0, JSON.stringify(memory.agent))
  // A smoke run does not wait out the agent's idle delay (a full run does).
  assert.equal(memory.agent.afterIdleMiB, null, JSON.stringify(memory.agent))
  assert.ok(memory.idleMs > 0, 'the idle delay is reported')
  for (const name of ['addon', 'zod', '@agentclientprotocol/sdk', '@modelcontextprotocol/client']) assert.ok(memory.modules.alone.some((m) => m.name === name), name)
  assert.ok(memory.modules.alone.every((m) => Number.isFinite(m.rssMiB) && Number.isFinite(m.heapMiB)), JSON.stringify(memory.modules))
  assert.match(run.stdout, /\| cursor-acp-native: after initialize \+ session\/new \|/)
  // The download: the addon this run used, gzipped, and both tarballs npm would publish.
  const download = results.results.download
  assert.ok(download.addon.bytes > download.addon.gzipBytes && download.addon.gzipBytes > 0, JSON.stringify(download.addon))
  assert.ok(download.platformPackage.packedBytes > 0 && download.platformPackage.unpackedBytes >= download.addon.bytes, JSON.stringify(download.platformPackage))
  assert.ok(download.rootPackage.packedBytes > 0, JSON.stringify(download.rootPackage))
  assert.match(run.stdout, /\| addon, gzip -9 \|/)
  // The test build carries both optional parts, and the figures say so (bench/size.mjs reads
  // them from the exports napi-rs registers; a client-only build has neither name).
  assert.deepEqual(download.addon.features, { embedded: true, bench: true })
  assert.match(run.stdout, /\| download: \S+ \(with the embedded backend and `bench`\) \| size \|/)
  // The first round's 13, the three ratios against the baseline again against Connect, three
  // for many-10k, three for the start-up, four for latency, two for the relay, two for the
  // agent's weight and one for the download.
  assert.equal(results.targets.length, 31)
  assert.match(run.stdout, /\| stream \| wall ms \|/)
  assert.match(run.stdout, /\| stream-frames \| frames\/s \|/)
  assert.equal(results.results['stream-frames'].addon.frames, results.size.streamFrames.count)
})

test("bench/update-lines.mjs: both ways of writing a turn's updates measured, and they wrote the same lines", () => {
  const run = spawnSync(process.execPath, ['bench/update-lines.mjs', '--runs', '2', '--updates', '200'], { cwd: root, encoding: 'utf8', timeout: 120_000 })
  assert.equal(run.status, 0, run.stderr)
  const result = JSON.parse(run.stdout)
  for (const way of ['objects', 'lines']) {
    assert.equal(result[way].lines, 200, `${way}: a line per update`)
    assert.deepEqual(result[way].samples.lines, [200, 200], `${way}: every round`)
    for (const figure of ['loopMs', 'cpuMs', 'wallMs']) assert.ok(result[way][figure] > 0, `${way} ${figure}: ${result[way][figure]}`)
  }
  assert.ok(Number.isFinite(result.loopRatio) && Number.isFinite(result.cpuRatio), run.stdout)
})
