// `watchProcessGroup` (the core's reaper, for groups a host starts): ids that cannot name a group
// this process started are refused with E_INVALID, since the watcher would signal whatever group
// has that id when the process ends. That a watched group ends with the agent however the agent
// ends is tested through the real agent in hostile-editor.test.mjs.
import { test } from 'node:test'
import assert from 'node:assert/strict'
import fs from 'node:fs'
import { addon } from './helpers.mjs'

const linux = process.platform === 'linux'

test('watchProcessGroup refuses 0, 1 and the caller\'s own process group', { skip: !linux && 'reads /proc' }, () => {
  const stat = fs.readFileSync('/proc/self/stat', 'utf8')
  const ownGroup = Number(stat.slice(stat.lastIndexOf(')') + 2).split(' ')[2])
  for (const pgid of [0, 1, ownGroup]) {
    assert.throws(() => addon.watchProcessGroup(pgid), (e) => e.code === 'E_INVALID' && /process group/.test(e.message), `pgid ${pgid}`)
  }
  // Forgetting a group never watched is no error.
  addon.forgetProcessGroup(2 ** 31)
})
