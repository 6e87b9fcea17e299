// Windows only (skipped elsewhere): the addon's turn on the embedded backend with the built-in
// tools, loaded through import (here) and require() (fixtures/windows-turn.cjs in a process of
// its own). Run under wine by scripts/build-windows.sh and on the workflow's Windows runners.
import { test } from 'node:test'
import assert from 'node:assert/strict'
import { spawnSync } from 'node:child_process'
import { createRequire } from 'node:module'
import { fileURLToPath } from 'node:url'
import addon from '../index.js'
import { tempDir } from './tmp.mjs'

const require = createRequire(import.meta.url)
const { playToolTurn } = require('./fixtures/windows-turn.cjs')
const windowsOnly = { skip: process.platform !== 'win32' && 'Windows only' }

/** What every played turn must show, whichever way the addon was loaded. */
function assertToolTurn(outcome) {
  assert.equal(outcome.stopReason, 'end_turn')
  assert.ok(outcome.kinds.includes('agent_message_chunk'), JSON.stringify(outcome.kinds))
  assert.deepEqual(outcome.listed, ['notes.txt'])
  // The file's CRLF line ends reach the model as they are on disk.
  assert.equal(outcome.read, 'first\r\nsecond\r\n')
  // cmd.exe ran the command: its echo, its line end, its exit code.
  assert.equal(outcome.shellStdout, 'turn-shell\r\n')
  assert.equal(outcome.shellExit?.code, 3, JSON.stringify(outcome.shellExit))
  assert.match(outcome.shell, /cmd(\.exe)?$/i)
}

test('the turn with the built-in tools, the addon loaded through import', windowsOnly, async () => {
  assertToolTurn(await playToolTurn(addon, tempDir('acp-win-esm-')))
})

test('the same turn, the addon loaded through require() in a CommonJS process', windowsOnly, () => {
  const script = fileURLToPath(new URL('./fixtures/windows-turn.cjs', import.meta.url))
  const run = spawnSync(process.execPath, [script], { encoding: 'utf8', timeout: 60_000 })
  assert.equal(run.status, 0, run.stderr)
  assertToolTurn(JSON.parse(run.stdout))
})
