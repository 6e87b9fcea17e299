// examples/vscode-extension as its author ships it: the packed package and esbuild installed,
// bundled by the example's own `npm run bundle` (esbuild, `--loader:.node=copy`), then
// node_modules removed, so the bundle runs with nothing but what a VSIX would hold, against the
// embedded backend with a stand-in for the `vscode` module.
import { test } from 'node:test'
import assert from 'node:assert/strict'
import fs from 'node:fs'
import path from 'node:path'
import { fileURLToPath } from 'node:url'
import { hostPlatform, npm, packPackages, root, run } from './packed.mjs'
import { tempDir } from './tmp.mjs'

const ESBUILD = '0.28.2'
const example = path.join(root, 'examples', 'vscode-extension')
const fixtures = fileURLToPath(new URL('./fixtures/vscode/', import.meta.url))
const packs = packPackages()

/** A copy of the example with its bundling dependencies installed. */
function exampleProject() {
  const dir = tempDir('acp-vscode-')
  fs.cpSync(path.join(example, 'src'), path.join(dir, 'src'), { recursive: true })
  // The example's manifest without its dependencies: the test installs the packed package
  // (not yet on the registry) and esbuild (vsce is not needed to bundle).
  const manifest = JSON.parse(fs.readFileSync(path.join(example, 'package.json'), 'utf8'))
  assert.ok(manifest.dependencies['cursor-acp-native'] && manifest.devDependencies.esbuild)
  delete manifest.dependencies
  delete manifest.devDependencies
  fs.writeFileSync(path.join(dir, 'package.json'), JSON.stringify(manifest, null, 2))
  npm(['install', '--no-audit', '--no-fund', '--prefer-offline', '--loglevel=error', packs.root, packs.platform, `esbuild@${ESBUILD}`], { cwd: dir, timeout: 300_000 })
  return { dir, bundleScript: manifest.scripts.bundle }
}

const project = exampleProject()

test('the example bundles into one script and the platform binary beside it', { timeout: 120_000 }, () => {
  assert.match(project.bundleScript, /--loader:\.node=copy/)
  assert.match(project.bundleScript, /--external:vscode/)
  npm(['run', 'bundle'], { cwd: project.dir })
  const files = fs.readdirSync(path.join(project.dir, 'dist'))
  assert.equal(files.length, 2, files.join(', '))
  assert.ok(files.includes('extension.js'))
  assert.ok(files.some((f) => new RegExp(`^cursor-acp-native\\.${hostPlatform()}-[A-Z0-9]+\\.node$`).test(f)), files.join(', '))
})

test("esbuild's other ways fail as the README says: no loader for .node, or the file loader", { timeout: 60_000 }, () => {
  // In the example's project, before the next test removes its node_modules.
  fs.writeFileSync(path.join(project.dir, 'other-ways.cjs'), `
    const esbuild = require('esbuild')
    const loader = process.argv[2] === 'file' ? { '.node': 'file' } : {}
    esbuild.buildSync({ stdin: { contents: "module.exports = require('cursor-acp-native')", resolveDir: __dirname },
      bundle: true, platform: 'node', format: 'cjs', outdir: 'other-' + process.argv[2], loader, logLevel: 'silent' })
  `)
  const build = (how) => run(process.execPath, ['other-ways.cjs', how], { cwd: project.dir })
  assert.throws(() => build('default'), /No loader is configured for "\.node" files/)
  build('file')
  // The file loader turns the addon's require() into its path: a string, no functions.
  const loaded = run(process.execPath, ['-e', "console.log(typeof require('./other-file/stdin.js').AgentClient)"], { cwd: project.dir })
  assert.equal(loaded.trim(), 'undefined')
})

test('the bundled extension runs a turn with nothing but dist/ and the vscode module', { timeout: 60_000 }, () => {
  fs.rmSync(path.join(project.dir, 'node_modules'), { recursive: true, force: true })
  fs.mkdirSync(path.join(project.dir, 'node_modules', 'vscode'), { recursive: true })
  fs.copyFileSync(path.join(fixtures, 'stand-in.cjs'), path.join(project.dir, 'node_modules', 'vscode', 'index.js'))
  fs.copyFileSync(path.join(fixtures, 'host.cjs'), path.join(project.dir, 'host.cjs'))
  const shown = JSON.parse(run(process.execPath, ['host.cjs'], { cwd: project.dir }))
  assert.deepEqual(shown.errors, [])
  assert.equal(shown.stopReason, 'end_turn')
  assert.deepEqual(shown.warnings, ['The agent wants to run: echo hello from the extension'])
  assert.deepEqual(shown.output, [
    '> What is in this workspace?',
    'agent_message_chunk: Looking at your workspace. ',
    'tool_call ls: List . (in_progress)',
    'tool_call_update ls: completed',
    'agent_message_chunk: Done.',
    'stop reason: end_turn',
  ])
})
