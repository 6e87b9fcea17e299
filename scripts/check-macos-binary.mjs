#!/usr/bin/env node
// Checks a macOS build of the addon before it is packaged, from its Mach-O load commands alone
// (no Apple tool needed, so it runs on the Linux machine that cross-builds it): the CPU, that it
// is a loadable image, the oldest macOS it asks for (at most the release's deployment target)
// and the libraries it loads, which must all be the system's own (/usr/lib, or a framework under
// /System/Library): nothing of the build machine, no @rpath, nothing to ship beside it.
// N-API itself is not a library it loads: napi-rs links with `-undefined dynamic_lookup`, so the
// napi_* functions are found in the process that loads it. Prints what it found.
//
//   node scripts/check-macos-binary.mjs <file.node> <darwin-arm64|darwin-x64>
import fs from 'node:fs'
import path from 'node:path'
import { fileURLToPath } from 'node:url'

/** What each package is built for, as the release workflow builds it. */
export const MACOS = {
  'darwin-arm64': { cpu: 'arm64', minimum: '11.0' },
  'darwin-x64': { cpu: 'x86_64', minimum: '10.15' },
}

const CPU = { 0x01000007: 'x86_64', 0x0100000c: 'arm64' }
const FILETYPE = { 6: 'dylib', 8: 'bundle' }
const LC = {
  LOAD_DYLIB: 0x0c,
  LOAD_WEAK_DYLIB: 0x80000018,
  REEXPORT_DYLIB: 0x8000001f,
  LAZY_LOAD_DYLIB: 0x20,
  LOAD_UPWARD_DYLIB: 0x80000023,
  VERSION_MIN_MACOSX: 0x24,
  BUILD_VERSION: 0x32,
}
const DYLIB_COMMANDS = new Set([LC.LOAD_DYLIB, LC.LOAD_WEAK_DYLIB, LC.REEXPORT_DYLIB, LC.LAZY_LOAD_DYLIB, LC.LOAD_UPWARD_DYLIB])

/** `x.y.z` packed as macOS packs it (xxxx.yy.zz in nibbles). */
const version = (v) => `${v >>> 16}.${(v >>> 8) & 0xff}${v & 0xff ? `.${v & 0xff}` : ''}`
const older = (a, b) => {
  const [x, y] = [a, b].map((s) => s.split('.').map(Number))
  for (let i = 0; i < 3; i++) if ((x[i] ?? 0) !== (y[i] ?? 0)) return (x[i] ?? 0) < (y[i] ?? 0)
  return false
}

/**
 * The Mach-O facts of `bytes`: cpu, file type, the libraries it loads and the oldest macOS it
 * runs on.
 */
export function readMachO(bytes) {
  if (bytes.length < 32 || bytes.readUInt32LE(0) !== 0xfeedfacf) {
    throw new Error(bytes.readUInt32BE(0) === 0xcafebabe ? 'a universal (fat) binary, not one architecture' : 'not a 64-bit little-endian Mach-O file')
  }
  const cpu = CPU[bytes.readUInt32LE(4)] ?? `cputype ${bytes.readUInt32LE(4).toString(16)}`
  const filetype = FILETYPE[bytes.readUInt32LE(12)] ?? `filetype ${bytes.readUInt32LE(12)}`
  const ncmds = bytes.readUInt32LE(16)
  const libraries = []
  let minimumMacOS = null
  let at = 32
  for (let i = 0; i < ncmds; i++) {
    const cmd = bytes.readUInt32LE(at)
    const size = bytes.readUInt32LE(at + 4)
    if (DYLIB_COMMANDS.has(cmd)) {
      const nameAt = at + bytes.readUInt32LE(at + 8)
      const end = bytes.indexOf(0, nameAt)
      libraries.push(bytes.toString('utf8', nameAt, Math.min(end, at + size)))
    } else if (cmd === LC.BUILD_VERSION) {
      // platform 1 is macOS.
      if (bytes.readUInt32LE(at + 8) === 1) minimumMacOS = version(bytes.readUInt32LE(at + 12))
    } else if (cmd === LC.VERSION_MIN_MACOSX) {
      minimumMacOS = version(bytes.readUInt32LE(at + 8))
    }
    at += size
  }
  return { cpu, filetype, libraries, minimumMacOS }
}

/** The system's own libraries: what every Mac has, at these paths. */
const isSystemLibrary = (lib) => /^\/usr\/lib\/[^/]+\.dylib$/.test(lib) || /^\/usr\/lib\/system\//.test(lib) ||
  /^\/System\/Library\/(Frameworks|PrivateFrameworks)\/[^/]+\.framework\//.test(lib)

/** What is wrong with `facts` for package `pkg` (empty when nothing). */
export function macOSProblems(facts, pkg) {
  const wanted = MACOS[pkg]
  if (!wanted) return [`unknown package ${pkg} (${Object.keys(MACOS).join(' or ')})`]
  const problems = []
  if (facts.cpu !== wanted.cpu) problems.push(`built for ${facts.cpu}, not ${wanted.cpu}`)
  if (facts.filetype !== 'dylib' && facts.filetype !== 'bundle') problems.push(`a ${facts.filetype}, which Node.js cannot load`)
  if (!facts.minimumMacOS) problems.push('names no minimum macOS version')
  else if (older(wanted.minimum, facts.minimumMacOS)) problems.push(`needs macOS ${facts.minimumMacOS}, newer than the release's ${wanted.minimum}`)
  for (const lib of facts.libraries.filter((l) => !isSystemLibrary(l))) problems.push(`loads ${lib}, which is not a system library`)
  if (!facts.libraries.some((l) => l.startsWith('/usr/lib/libSystem'))) problems.push('does not load libSystem')
  return problems
}

if (process.argv[1] === fileURLToPath(import.meta.url)) {
  const [file, pkg] = process.argv.slice(2)
  if (!file || !pkg) {
    console.error('usage: node scripts/check-macos-binary.mjs <file.node> <darwin-arm64|darwin-x64>')
    process.exit(2)
  }
  const facts = readMachO(fs.readFileSync(file))
  console.log(`${pkg}: ${path.basename(file)}, ${fs.statSync(file).size} bytes\n  cpu: ${facts.cpu}, ${facts.filetype}\n  minimum macOS: ${facts.minimumMacOS}\n  loads: ${facts.libraries.join(' ')}`)
  const problems = macOSProblems(facts, pkg)
  for (const p of problems) console.error(`${pkg}: ${p}`)
  process.exit(problems.length ? 1 : 0)
}
