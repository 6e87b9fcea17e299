// A network that has latency (issue 43): the embedded backend (its own process) behind TLS,
// with a certificate of a test CA the clients are told to trust, reached through a loopback
// relay that holds every byte for a fixed one-way time. Measured in round trips of that relay,
// the RTT itself measured in the same run:
//   - the stdio agent, a new process: `session/prompt` of a new session → its first
//     `agent_message_chunk` line, the prompt sent 0 ms and 500 ms after `session/new` answered;
//   - a second prompt of the same session;
//   - a third, whose connection the relay cuts (both ways, a reset) once its first chunk is out:
//     from the cut, which the agent sees at once, to the first chunk of the resumed turn;
//   - the Connect baseline (bench/baseline) from cold, in a process of its own: its first
//     prompt → first update, then a second prompt.
// Prints one JSON line. `node bench/latency.mjs [--smoke] [--one-way-ms 20] [--runs 5]`.
import { spawn, spawnSync } from 'node:child_process'
import fs from 'node:fs'
import net from 'node:net'
import os from 'node:os'
import path from 'node:path'
import tls from 'node:tls'
import { fileURLToPath } from 'node:url'
import { parseArgs } from 'node:util'

import { agentDirs, startAgent, startBackend } from './acp-pipe.mjs'

const here = path.dirname(fileURLToPath(import.meta.url))
const { values: opts } = parseArgs({ options: { smoke: { type: 'boolean', default: false }, 'one-way-ms': { type: 'string' }, runs: { type: 'string' } } })
const oneWayMs = Number(opts['one-way-ms'] ?? (opts.smoke ? 5 : 20))
const runs = Number(opts.runs ?? (opts.smoke ? 1 : 5))
const LATER_PAUSE_MS = opts.smoke ? 50 : 500
const tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'acp-latency-'))
const log = (s) => process.stderr.write(`${s}\n`)
const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms))
const median = (xs) => {
  const s = [...xs].sort((a, b) => a - b)
  return s.length % 2 ? s[(s.length - 1) / 2] : (s[s.length / 2 - 1] + s[s.length / 2]) / 2
}

// ---------- a test CA and a certificate for 127.0.0.1 ----------

function certificates() {
  const f = (name) => path.join(tmp, name)
  const ssl = (...args) => {
    const r = spawnSync('openssl', args, { encoding: 'utf8' })
    if (r.status !== 0) throw new Error(`openssl ${args[0]}: ${r.stderr || r.error}`)
  }
  const ec = ['-newkey', 'ec', '-pkeyopt', 'ec_paramgen_curve:prime256v1', '-nodes']
  ssl('req', '-x509', ...ec, '-keyout', f('ca.key'), '-out', f('ca.pem'), '-days', '2', '-subj', '/CN=cursor-acp-native bench CA',
    '-addext', 'basicConstraints=critical,CA:TRUE', '-addext', 'keyUsage=critical,keyCertSign,cRLSign')
  ssl('req', ...ec, '-keyout', f('leaf.key'), '-out', f('leaf.csr'), '-subj', '/CN=127.0.0.1')
  fs.writeFileSync(f('leaf.ext'), 'subjectAltName=IP:127.0.0.1,DNS:localhost\nbasicConstraints=critical,CA:FALSE\nkeyUsage=critical,digitalSignature\nextendedKeyUsage=serverAuth\n')
  ssl('x509', '-req', '-in', f('leaf.csr'), '-CA', f('ca.pem'), '-CAkey', f('ca.key'), '-CAcreateserial', '-out', f('leaf.pem'), '-days', '2', '-extfile', f('leaf.ext'))
  return { caFile: f('ca.pem'), key: fs.readFileSync(f('leaf.key')), cert: fs.readFileSync(f('leaf.pem')) }
}

// ---------- the path: relay (latency) → TLS front → backend ----------

const listen = (server) => new Promise((resolve) => server.listen(0, '127.0.0.1', () => resolve(server.address().port)))

/** TLS in front of a plain (HTTP/1.1 and h2c) backend, offering h2 and HTTP/1.1 by ALPN. */
async function tlsFront(backendPort, { key, cert }) {
  const server = tls.createServer({ key, cert, ALPNProtocols: ['h2', 'http/1.1'] }, (secure) => {
    // Both sides without Nagle's delay, as a real front end has it: otherwise a response's
    // small frames after its headers wait for the client's delayed acknowledgement (20–45 ms,
    // a round trip more for some turns).
    secure.setNoDelay(true)
    const plain = net.connect(backendPort, '127.0.0.1')
    plain.setNoDelay(true)
    const end = () => { secure.destroy(); plain.destroy() }
    secure.on('error', end).on('close', end)
    plain.on('error', end).on('close', end)
    secure.pipe(plain)
    plain.pipe(secure)
  })
  return { port: await listen(server), close: () => server.close() }
}

/**
 * A TCP relay that delivers every chunk `oneWayMs` after it arrived, in order, each way. The
 * kernel completes a loopback connection's handshake at once; the relay makes up for it by
 * holding a connection's client bytes until one RTT after it was accepted (then `oneWayMs`
 * more), as if the client's `connect()` had taken the round trip a SYN takes.
 * `cut()` resets every connection through it, both ways, at once.
 */
async function delayRelay(targetPort) {
  const pairs = new Set()
  const server = net.createServer((client) => {
    const openedAt = performance.now()
    client.setNoDelay(true)
    const upstream = net.connect(targetPort, '127.0.0.1')
    upstream.setNoDelay(true)
    const pair = { client, upstream, timers: new Set() }
    pairs.add(pair)
    const end = () => {
      pairs.delete(pair)
      for (const t of pair.timers) clearTimeout(t)
      client.destroy()
      upstream.destroy()
    }
    /** Chunks of one direction, each with the time it is due, delivered in order. */
    const direction = (from, to, notBefore) => {
      const queue = []
      let timer = null
      const pump = () => {
        pair.timers.delete(timer)
        timer = null
        const now = performance.now()
        while (queue.length && queue[0].due <= now + 0.5) {
          const { chunk } = queue.shift()
          if (chunk === null) to.end()
          else to.write(chunk)
        }
        if (queue.length) arm()
      }
      const arm = () => {
        timer = setTimeout(pump, Math.max(0, queue[0].due - performance.now()))
        pair.timers.add(timer)
      }
      const push = (chunk) => {
        queue.push({ chunk, due: Math.max(performance.now() + oneWayMs, notBefore, queue.at(-1)?.due ?? 0) })
        if (!timer) arm()
      }
      from.on('data', push)
      from.on('end', () => push(null))
    }
    direction(client, upstream, openedAt + 3 * oneWayMs)
    direction(upstream, client, 0)
    client.on('error', end).on('close', end)
    upstream.on('error', end).on('close', end)
  })
  return {
    port: await listen(server),
    /** Resets every connection; returns when it did. */
    cut() {
      for (const pair of [...pairs]) {
        pairs.delete(pair)
        for (const t of pair.timers) clearTimeout(t)
        pair.client.resetAndDestroy()
        pair.upstream.destroy()
      }
      return performance.now()
    },
    close: () => { server.close(); for (const p of pairs) { p.client.destroy(); p.upstream.destroy() } },
  }
}


/** The backend behind TLS behind the relay: its https URL, `cut()`, `close()`. */
async function chain(name, scenario, pki) {
  const backend = await startBackend(tmp, name, scenario)
  const front = await tlsFront(Number(new URL(backend.url).port), pki)
  const relay = await delayRelay(front.port)
  return { url: `https://127.0.0.1:${relay.port}`, cut: () => relay.cut(), close: () => { relay.close(); front.close(); backend.stop() } }
}

/** The relay's round trip as a client sees it: one byte out to an echo server and back (median of 15). */
async function measureRtt() {
  const echo = net.createServer((s) => { s.setNoDelay(true); s.pipe(s) })
  const relay = await delayRelay(await listen(echo))
  const socket = net.connect(relay.port, '127.0.0.1')
  socket.setNoDelay(true)
  await new Promise((resolve) => socket.once('connect', resolve))
  // Past the emulated handshake's hold.
  await sleep(4 * oneWayMs)
  const samples = []
  for (let i = 0; i < 15; i++) {
    const start = performance.now()
    socket.write('x')
    await new Promise((resolve) => socket.once('data', resolve))
    samples.push(performance.now() - start)
  }
  socket.destroy()
  relay.close()
  echo.close()
  return median(samples)
}

// ---------- the stdio agent ----------

// Each agent process plays four turns: two answered at once, one that streams and then waits
// (the relay cuts it), and the resumed turn. Prewarms play none.
const HELLO = [{ type: 'text', text: 'hello' }, { type: 'turnEnded' }]
const BEFORE_CUT = [{ type: 'text', text: 'before the cut' }, { type: 'sleep', ms: 60_000 }, { type: 'turnEnded' }]
const RESUMED = [{ type: 'text', text: 'resumed' }, { type: 'turnEnded' }]

/** One agent process: the first prompt `pauseMs` after session/new answered, a second, a cut one. */
async function agentSample(url, caFile, pauseMs, cut, name) {
  const { cacheDir, cwd } = agentDirs(tmp, name)
  const waiters = []
  const agent = startAgent({
    baseUrl: url,
    cacheDir,
    env: { SSL_CERT_FILE: caFile, CURSOR_ACP_LOG: process.env.LAT_LOG ?? 'error' },
    onUpdate: (update, _sessionId, at) => {
      if (update.sessionUpdate !== 'agent_message_chunk') return
      for (const w of [...waiters]) {
        if (update.content.text.includes(w.text)) {
          waiters.splice(waiters.indexOf(w), 1)
          w.resolve(at)
        }
      }
    },
  })
  const chunk = (text) => new Promise((resolve) => waiters.push({ text, resolve }))
  try {
    await agent.initialize()
    const { sessionId } = await agent.newSession(cwd)
    await sleep(pauseMs)
    const timed = async (text) => {
      const seen = chunk(text)
      const p = agent.prompt(sessionId, 'hi')
      const at = await seen
      return { ms: at - p.sentAt, answer: p.answer }
    }
    const first = await timed('hello')
    await first.answer
    await sleep(LATER_PAUSE_MS)
    const second = await timed('hello')
    await second.answer
    await sleep(LATER_PAUSE_MS)
    const before = chunk('before the cut')
    const resumed = chunk('resumed')
    const third = agent.prompt(sessionId, 'hi')
    await before
    const cutAt = cut()
    const resumedAt = await resumed
    const { result } = await third.answer
    if (result.stopReason !== 'end_turn') throw new Error(`the resumed turn ended ${result.stopReason}`)
    return { firstMs: first.ms, secondMs: second.ms, resumeMs: resumedAt - cutAt }
  } finally {
    await agent.stop()
  }
}

/** The Connect baseline from cold, in a worker process of its own (not spawnSync: the relay runs here). */
function connectSample(url, caFile) {
  const spec = JSON.stringify({ impl: 'connect', scenario: 'cold', url, size: {} })
  const child = spawn(process.execPath, [path.join(here, 'worker.mjs'), spec], { env: { ...process.env, NODE_EXTRA_CA_CERTS: caFile }, stdio: ['ignore', 'pipe', 'inherit'] })
  let out = ''
  child.stdout.on('data', (c) => { out += c })
  return new Promise((resolve, reject) => child.on('exit', (code) => (code === 0 ? resolve(JSON.parse(out)) : reject(new Error(`connect cold sample failed (exit ${code})`)))))
}

const pki = certificates()
const rttMs = await measureRtt()
log(`  latency: one way ${oneWayMs} ms, measured RTT ${rttMs.toFixed(1)} ms; ${runs} run(s)`)
const turns = Array.from({ length: 2 * runs + 2 }, () => [HELLO, HELLO, BEFORE_CUT, RESUMED]).flat()
const agentPath = await chain('latency-agent', { record: false, turns }, pki)
const connectPath = await chain('latency-connect', { record: false, steps: HELLO }, pki)
const samples = { at0: [], at500: [], second: [], resume: [], connectFirst: [], connectSecond: [] }
try {
  for (let i = 0; i < runs; i++) {
    for (const pause of i % 2 ? [500, 0] : [0, 500]) {
      const s = await agentSample(agentPath.url, pki.caFile, pause, agentPath.cut, `agent-${i}-${pause}`)
      samples[pause === 0 ? 'at0' : 'at500'].push(s.firstMs)
      samples.second.push(s.secondMs)
      samples.resume.push(s.resumeMs)
    }
    const c = await connectSample(connectPath.url, pki.caFile)
    samples.connectFirst.push(c.firstMs)
    samples.connectSecond.push(c.secondMs)
  }
} finally {
  agentPath.close()
  connectPath.close()
  fs.rmSync(tmp, { recursive: true, force: true })
}
const figure = (xs) => ({ ms: median(xs), rtt: median(xs) / rttMs })
process.stdout.write(`${JSON.stringify({
  oneWayMs,
  rttMs,
  runs,
  first0: figure(samples.at0),
  first500: figure(samples.at500),
  second: figure(samples.second),
  resume: figure(samples.resume),
  connectFirst: figure(samples.connectFirst),
  connectSecond: figure(samples.connectSecond),
  samples,
})}\n`)
