// The shells an agent starts end with it, however it ends: killed outright (SIGKILL: no
// destructor runs) or exiting without closing its tools. Read from /proc, so Linux only.
import { test } from 'node:test'
import assert from 'node:assert/strict'
import { spawn } from 'node:child_process'
import fs from 'node:fs'
import { fileURLToPath } from 'node:url'
import { tempDir } from './acp-harness.mjs'

const FIXTURE = fileURLToPath(new URL('./fixtures/shells-then-exit.mjs', import.meta.url))
const linux = process.platform === 'linux'

/** Live (not zombie) processes, with their process group and command line. */
function processes() {
  const out = []
  for (const name of fs.readdirSync('/proc')) {
    if (!/^\d+$/.test(name)) continue
    try {
      // Fields after the command's closing parenthesis: state, ppid, pgrp, …
      const stat = fs.readFileSync(`/proc/${name}/stat`, 'utf8')
      const [state, , pgrp] = stat.slice(stat.lastIndexOf(')') + 2).split(' ')
      if (state === 'Z') continue
      out.push({ pid: Number(name), pgrp: Number(pgrp), cmdline: fs.readFileSync(`/proc/${name}/cmdline`, 'utf8').split('\0') })
    } catch {
      // Gone meanwhile.
    }
  }
  return out
}

/** Runs the fixture; resolves its shells' groups and its pid once it has ended. */
function runFixture(mode) {
  const child = spawn(process.execPath, [FIXTURE, mode, tempDir('reaper-')], { stdio: ['ignore', 'pipe', 'inherit'] })
  let out = ''
  child.stdout.on('data', (c) => { out += c })
  return new Promise((resolve, reject) => {
    child.on('error', reject)
    child.on('exit', (code, signal) => {
      try {
        resolve({ code, signal, pid: child.pid, ...JSON.parse(out) })
      } catch (e) {
        reject(new Error(`the fixture printed ${JSON.stringify(out)} and ended with ${code ?? signal}: ${e}`))
      }
    })
  })
}

/** What is left after up to `ms`: processes of `groups`, and the watcher of process `pid`. */
async function leftAfter(ms, groups, pid) {
  const deadline = Date.now() + ms
  for (;;) {
    const all = processes()
    const shells = all.filter((p) => groups.includes(p.pgrp))
    const watcher = all.filter((p) => p.cmdline.includes('cursor-acp-native-reaper') && p.cmdline.at(-2) === String(pid))
    if ((shells.length === 0 && watcher.length === 0) || Date.now() > deadline) return { shells, watcher }
    await new Promise((resolve) => setTimeout(resolve, 50))
  }
}

for (const [mode, how] of [['kill', 'killed by SIGKILL'], ['exit', 'exiting without closing its tools']]) {
  test(`a process ${how} leaves none of its shells running, and no watcher`, { skip: !linux && 'reads /proc' }, async () => {
    const run = await runFixture(mode)
    assert.deepEqual([run.code, run.signal], mode === 'kill' ? [null, 'SIGKILL'] : [0, null])
    assert.equal(run.groups.length, 3)
    // Each group was running when the fixture ended: a background shell, one that ignores
    // SIGTERM (it takes the SIGKILL a second later), a foreground shell mid-command.
    // A deadline, not a wait: on a loaded machine the watcher may take seconds to be scheduled.
    const { shells, watcher } = await leftAfter(15_000, run.groups, run.pid)
    assert.deepEqual(shells.map((p) => p.cmdline.join(' ')), [], 'no shell of the fixture is left')
    assert.deepEqual(watcher.map((p) => p.pid), [], 'the watcher has ended too')
  })
}
