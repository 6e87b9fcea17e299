// Temporary directories for tests, removed when the test process exits (node:test runs each
// file in a process of its own), so a run leaves nothing behind in the system's temp dir.
import fs from 'node:fs'
import os from 'node:os'
import path from 'node:path'

const made = []

process.on('exit', () => {
  for (const dir of made) {
    try {
      fs.rmSync(dir, { recursive: true, force: true, maxRetries: 3 })
    } catch {
      // A child still writing into it must not turn a passing run into a failure.
    }
  }
})

/** A fresh directory (real path, symlinks resolved) that is removed at exit. */
export function tempDir(prefix = 'acp-test-') {
  const dir = fs.realpathSync(fs.mkdtempSync(path.join(os.tmpdir(), prefix)))
  made.push(dir)
  return dir
}
