// scripts/check-macos-binary.mjs reads a Mach-O's load commands and refuses what would not load
// on the release's macOS versions. No macOS binary links on this project's Linux machine (the
// frameworks are missing: docs/platforms.md), so the images here are made by the test, load
// command by load command, as a linker lays them out.
import { test } from 'node:test'
import assert from 'node:assert/strict'
import { macOSProblems, readMachO } from '../scripts/check-macos-binary.mjs'

const ARM64 = 0x0100000c
const X86_64 = 0x01000007
const MH_BUNDLE = 8

/** A load command: its 8-byte head, `body`, padded to 8 bytes. */
function command(cmd, body) {
  const size = Math.ceil((8 + body.length) / 8) * 8
  const out = Buffer.alloc(size)
  out.writeUInt32LE(cmd, 0)
  out.writeUInt32LE(size, 4)
  body.copy(out, 8)
  return out
}

function dylib(name, cmd = 0x0c) {
  const body = Buffer.alloc(16 + name.length + 1)
  body.writeUInt32LE(24, 0) // the name's offset from the command's start
  body.write(name, 16)
  return command(cmd, body)
}

const packVersion = (v) => { const [a, b = 0, c = 0] = v.split('.').map(Number); return (a << 16) | (b << 8) | c }
function buildVersion(minos, platform = 1) {
  const body = Buffer.alloc(16)
  body.writeUInt32LE(platform, 0)
  body.writeUInt32LE(packVersion(minos), 4)
  body.writeUInt32LE(packVersion('15.0'), 8)
  return command(0x32, body)
}

function machO(cpu, commands, filetype = MH_BUNDLE) {
  const header = Buffer.alloc(32)
  header.writeUInt32LE(0xfeedfacf, 0)
  header.writeUInt32LE(cpu, 4)
  header.writeUInt32LE(filetype, 12)
  header.writeUInt32LE(commands.length, 16)
  header.writeUInt32LE(commands.reduce((n, c) => n + c.length, 0), 20)
  return Buffer.concat([header, ...commands])
}

const SYSTEM = [
  dylib('/System/Library/Frameworks/Security.framework/Versions/A/Security'),
  dylib('/System/Library/Frameworks/CoreFoundation.framework/Versions/A/CoreFoundation'),
  dylib('/usr/lib/libiconv.2.dylib'),
  dylib('/usr/lib/libSystem.B.dylib'),
]

test('an arm64 bundle for macOS 11 loading only system libraries passes', () => {
  const facts = readMachO(machO(ARM64, [buildVersion('11.0'), ...SYSTEM]))
  assert.deepEqual(facts, {
    cpu: 'arm64',
    filetype: 'bundle',
    minimumMacOS: '11.0',
    libraries: [
      '/System/Library/Frameworks/Security.framework/Versions/A/Security',
      '/System/Library/Frameworks/CoreFoundation.framework/Versions/A/CoreFoundation',
      '/usr/lib/libiconv.2.dylib',
      '/usr/lib/libSystem.B.dylib',
    ],
  })
  assert.deepEqual(macOSProblems(facts, 'darwin-arm64'), [])
})

test('the x64 package may ask for macOS 10.15, not later; weak system libraries count as the system', () => {
  const ok = readMachO(machO(X86_64, [buildVersion('10.15'), ...SYSTEM, dylib('/usr/lib/libresolv.9.dylib', 0x80000018)]))
  assert.deepEqual(macOSProblems(ok, 'darwin-x64'), [])
  const tooNew = readMachO(machO(X86_64, [buildVersion('12.0.1'), ...SYSTEM]))
  assert.deepEqual(macOSProblems(tooNew, 'darwin-x64'), ['needs macOS 12.0.1, newer than the release\'s 10.15'])
})

test('a library of the build machine, an @rpath one and the wrong CPU are refused', () => {
  const facts = readMachO(machO(X86_64, [
    buildVersion('11.0'),
    ...SYSTEM,
    dylib('/opt/homebrew/opt/openssl@3/lib/libssl.3.dylib'),
    dylib('@rpath/libnode.dylib'),
  ]))
  assert.deepEqual(macOSProblems(facts, 'darwin-arm64'), [
    'built for x86_64, not arm64',
    'loads /opt/homebrew/opt/openssl@3/lib/libssl.3.dylib, which is not a system library',
    'loads @rpath/libnode.dylib, which is not a system library',
  ])
})

test('no minimum version, no libSystem, an executable: each is named', () => {
  const facts = readMachO(machO(ARM64, [dylib('/System/Library/Frameworks/Security.framework/Versions/A/Security')], 2))
  assert.deepEqual(macOSProblems(facts, 'darwin-arm64'), [
    'a filetype 2, which Node.js cannot load',
    'names no minimum macOS version',
    'does not load libSystem',
  ])
})

test('a universal binary and a non-Mach-O file are told apart', () => {
  const fat = Buffer.alloc(32)
  fat.writeUInt32BE(0xcafebabe, 0)
  assert.throws(() => readMachO(fat), /universal \(fat\) binary/)
  assert.throws(() => readMachO(Buffer.from('\x7fELF' + '\0'.repeat(60))), /not a 64-bit little-endian Mach-O/)
})
