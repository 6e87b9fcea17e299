#!/usr/bin/env node
// Checks that the packages a release publishes agree with each other: the root package.json,
// its `napi.targets`, the platform packages under npm/ and the loader napi generates. A mismatch
// here is a broken install for some users (npm installing no binary, or two, or the loader
// refusing the one it found), so `npm run release:dry-run` and __tests__/release.test.mjs run it.
//
//   node scripts/release-check.mjs [dir]      (default: the checkout; exits 1 on any problem)
//
// What agrees, for each target of `napi.targets`:
//   - npm/<platform>/package.json exists, is named `<napi.packageName>-<platform>` and has the
//     root's version, license, engines and repository (npm provenance checks the repository);
//   - its `os`, `cpu` and `libc` are the target's, and npm's own platform check (npm's
//     npm-install-checks, as `npm install` runs it) accepts it on that target's system and
//     refuses it on every other target's: on each system npm installs exactly one of them;
//   - its `main` and `files` name the target's binary, and nothing else;
//   - the root's `optionalDependencies`, once `napi prepublish` has written them, name exactly
//     these packages, each at the root's version;
//   - the loader napi generated (a file of the root's `files`) requires each package and expects
//     the root's version of it.
// And for the root: the files its manifest points at (`main`, `types`, `bin`, `exports`) are in
// its `files` list and on disk, and `files` ships no binary; npm/ holds no package of a target
// that is not in `napi.targets`.
import fs from 'node:fs'
import path from 'node:path'
import { createRequire } from 'node:module'
import { execFileSync } from 'node:child_process'
import { fileURLToPath, pathToFileURL } from 'node:url'

const root = fileURLToPath(new URL('..', import.meta.url))

/** npm's libc names for napi's ABIs on Linux. */
const LIBC = { gnu: 'glibc', musl: 'musl' }

/**
 * npm's own platform check (`checkPlatform` of npm-install-checks, bundled with npm), from the npm
 * that runs this script or else the one on PATH; null when no npm installation can be found.
 * @returns {null | ((manifest: object, force: boolean, environment: object) => void)}
 */
export function npmPlatformCheck() {
  const candidates = []
  if (process.env.npm_execpath) candidates.push(process.env.npm_execpath)
  try {
    const which = process.platform === 'win32' ? 'where' : 'which'
    candidates.push(execFileSync(which, ['npm'], { encoding: 'utf8' }).split(/\r?\n/)[0])
  } catch {
    // No npm on PATH: the one running this script, if any, is all there is.
  }
  for (const candidate of candidates.filter(Boolean)) {
    try {
      // npm's CLI lives in <npm>/bin/; its dependencies in <npm>/node_modules.
      const npmRoot = path.dirname(path.dirname(fs.realpathSync(candidate)))
      return createRequire(path.join(npmRoot, 'package.json'))('npm-install-checks').checkPlatform
    } catch {
      // Not an npm installation (a shim, a wrapper): try the next.
    }
  }
  return null
}

/** The target as napi names it: `{ triple, platformArchABI, platform, arch, abi }`. */
export async function parseTargets(triples) {
  const { parseTriple } = await import(pathToFileURL(path.join(root, 'node_modules', '@napi-rs', 'cli', 'dist', 'index.js')).href)
  return triples.map((t) => parseTriple(t))
}

/** The system a target's binary runs on, as npm describes the machine it installs on. */
function systemOf(target) {
  return { os: target.platform, cpu: target.arch, libc: target.platform === 'linux' ? LIBC[target.abi] : undefined }
}

const readJson = (file) => JSON.parse(fs.readFileSync(file, 'utf8'))
const same = (a, b) => JSON.stringify(a) === JSON.stringify(b)
const show = (v) => (v === undefined ? 'nothing' : JSON.stringify(v))

/** Whether `file` (relative, `/`-separated) is shipped by a `files` list of plain names and folders. */
function listed(files, file) {
  const wanted = path.posix.normalize(file.replace(/^\.\//, ''))
  return files.some((entry) => {
    const e = path.posix.normalize(entry.replace(/^\.\//, '')).replace(/\/$/, '')
    return wanted === e || wanted.startsWith(`${e}/`)
  })
}

/** Every file path an `exports` map points at. */
function exportTargets(exports) {
  if (typeof exports === 'string') return [exports]
  if (exports && typeof exports === 'object') return Object.values(exports).flatMap(exportTargets)
  return []
}

/**
 * What disagrees in the release packages of `dir` (a checkout, or a release stage).
 * @param {string} dir
 * @param {{ optionalDependencies?: 'required' | 'if-present', platformCheck?: ReturnType<typeof npmPlatformCheck> }} [options]
 *   `optionalDependencies: 'required'` for a stage after `napi prepublish`, which must have
 *   written them; `platformCheck` defaults to npm's own.
 * @returns {Promise<{ problems: string[], notes: string[] }>}
 */
export async function releaseProblems(dir, { optionalDependencies = 'if-present', platformCheck = npmPlatformCheck() } = {}) {
  const problems = []
  const notes = []
  const manifest = readJson(path.join(dir, 'package.json'))
  const { version, napi } = manifest
  if (!/^\d+\.\d+\.\d+(-[\w.]+)?$/.test(version ?? '')) problems.push(`package.json: version ${show(version)} is not a release version`)
  if (!napi?.packageName || !napi?.binaryName || !Array.isArray(napi?.targets) || napi.targets.length === 0) {
    problems.push('package.json: napi.packageName, napi.binaryName and napi.targets are needed')
    return { problems, notes }
  }
  const duplicated = napi.targets.filter((t, i) => napi.targets.indexOf(t) !== i)
  if (duplicated.length) problems.push(`napi.targets lists ${duplicated.join(', ')} twice`)
  const targets = await parseTargets([...new Set(napi.targets)])
  const packageOf = (t) => `${napi.packageName}-${t.platformArchABI}`
  const binaryOf = (t) => `${napi.binaryName}.${t.platformArchABI}.node`

  // The platform packages.
  const npmDir = path.join(dir, 'npm')
  const platformManifests = new Map()
  for (const t of targets) {
    const where = `npm/${t.platformArchABI}/package.json`
    const file = path.join(npmDir, t.platformArchABI, 'package.json')
    if (!fs.existsSync(file)) {
      problems.push(`${where} is missing (napi.targets has ${t.triple}): run \`npx napi create-npm-dirs\``)
      continue
    }
    const p = readJson(file)
    platformManifests.set(t.platformArchABI, p)
    const expect = (field, actual, wanted) => {
      if (!same(actual, wanted)) problems.push(`${where}: ${field} is ${show(actual)}, not ${show(wanted)}`)
    }
    expect('name', p.name, packageOf(t))
    expect('version', p.version, version)
    expect('os', p.os, [t.platform])
    expect('cpu', p.cpu, [t.arch])
    expect('libc', p.libc, t.platform === 'linux' ? [LIBC[t.abi]] : undefined)
    expect('main', p.main, binaryOf(t))
    expect('files', p.files, [binaryOf(t)])
    expect('license', p.license, manifest.license)
    expect('engines', p.engines, manifest.engines)
    expect('repository', p.repository, manifest.repository)
    expect('publishConfig.access', p.publishConfig?.access, 'public')
  }
  if (fs.existsSync(npmDir)) {
    const known = new Set(targets.map((t) => t.platformArchABI))
    for (const extra of fs.readdirSync(npmDir).filter((d) => !known.has(d))) {
      problems.push(`npm/${extra} is not a package of any target in napi.targets`)
    }
  }

  // On each target's system, npm installs exactly that target's package.
  if (platformCheck) {
    for (const system of targets) {
      const env = systemOf(system)
      const accepted = []
      for (const t of targets) {
        const p = platformManifests.get(t.platformArchABI)
        if (!p) continue
        try {
          platformCheck(p, false, env)
          accepted.push(t.platformArchABI)
        } catch (e) {
          if (e.code !== 'EBADPLATFORM') throw e
        }
      }
      if (!same(accepted, [system.platformArchABI])) {
        problems.push(`on ${system.platformArchABI} (${JSON.stringify(env)}) npm would install ${accepted.length ? accepted.join(' and ') : 'no platform package'}, not ${system.platformArchABI} alone`)
      }
    }
  } else {
    notes.push("npm's own platform check (npm-install-checks) was not found: which package npm installs where was not checked")
  }

  // The root's optionalDependencies, as `napi prepublish` writes them.
  const optional = manifest.optionalDependencies
  if (optional === undefined) {
    if (optionalDependencies === 'required') problems.push('package.json: no optionalDependencies (napi prepublish writes them)')
  } else {
    const wanted = Object.fromEntries(targets.map((t) => [packageOf(t), version]))
    const ours = Object.fromEntries(Object.entries(optional).filter(([name]) => name.startsWith(`${napi.packageName}-`)))
    for (const [name, v] of Object.entries(wanted)) {
      if (!(name in ours)) problems.push(`package.json: optionalDependencies lacks ${name}`)
      else if (ours[name] !== v) problems.push(`package.json: optionalDependencies has ${name}@${ours[name]}, not ${v}`)
    }
    for (const name of Object.keys(ours).filter((n) => !(n in wanted))) {
      problems.push(`package.json: optionalDependencies has ${name}, which no target of napi.targets builds`)
    }
  }

  // The root's files.
  const files = Array.isArray(manifest.files) ? manifest.files : []
  if (!files.length) problems.push('package.json: no files list (everything in the folder would be published)')
  for (const entry of files.filter((f) => f.endsWith('.node') || f.includes('*'))) {
    problems.push(`package.json: files has ${entry}: the root package ships no binary, and every entry is a plain name`)
  }
  const bins = typeof manifest.bin === 'string' ? [manifest.bin] : Object.values(manifest.bin ?? {})
  const pointedAt = [manifest.main, manifest.types, ...bins, ...exportTargets(manifest.exports)].filter(Boolean)
  for (const file of new Set(pointedAt.filter((f) => f !== './package.json' && f !== 'package.json'))) {
    if (!listed(files, file)) problems.push(`package.json points at ${file}, which its files list leaves out`)
    else if (!fs.existsSync(path.join(dir, file))) problems.push(`package.json points at ${file}, which is missing`)
  }

  // The loader napi generated: one of the root's files, requiring each platform package.
  const loaders = files
    .map((f) => path.join(dir, f))
    .filter((f) => f.endsWith('.js') && fs.existsSync(f) && fs.statSync(f).isFile())
    .filter((f) => fs.readFileSync(f, 'utf8').includes('auto-generated by NAPI-RS'))
  if (loaders.length !== 1) {
    problems.push(`the root's files hold ${loaders.length} loaders generated by napi, not one`)
  } else {
    const loader = fs.readFileSync(loaders[0], 'utf8')
    const name = path.relative(dir, loaders[0])
    for (const t of targets) {
      if (!loader.includes(`require('${packageOf(t)}')`)) problems.push(`${name} does not require ${packageOf(t)}`)
      if (!loader.includes(`./${binaryOf(t)}`)) problems.push(`${name} does not look for ./${binaryOf(t)}`)
    }
    const expected = [...new Set([...loader.matchAll(/bindingPackageVersion !== '([^']*)'/g)].map((m) => m[1]))]
    if (!same(expected, [version])) problems.push(`${name} expects its platform packages at ${expected.join(', ') || 'no version'}, not ${version}: rebuild so napi writes it again`)
  }
  return { problems, notes }
}

if (process.argv[1] === fileURLToPath(import.meta.url)) {
  const dir = path.resolve(process.argv[2] ?? root)
  const { problems, notes } = await releaseProblems(dir)
  for (const note of notes) console.log(`note: ${note}`)
  for (const problem of problems) console.error(`problem: ${problem}`)
  console.log(problems.length ? `${problems.length} problems in ${dir}` : `the release packages of ${dir} agree`)
  process.exit(problems.length ? 1 : 0)
}
