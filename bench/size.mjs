// What a user downloads (issue 43): the addon this host built (`npm run bench` builds it in
// release mode), unpacked and gzipped (level 9, as a registry's tarball compresses at best), and
// the two tarballs `npm pack` makes for npm (scripts/pack.mjs): this host's platform package,
// which holds the addon, and the root package (loader, typings, CLI), both packed and unpacked.
// On Linux with binutils, the addon's largest ELF sections too, and what `strip --strip-all`
// would still take off: where the bytes are, for what a build setting could change. And which of
// the optional parts (docs/building.md's features) the addon carries, read from the export names
// napi-rs registers: the run's addon is built with `bench` (and the embedded backend) for the
// scenarios, which a release leaves out, so a figure says what it is of.
// Prints one JSON line. `node bench/size.mjs [path/to/cursor-acp-native.<platform>.node]`.
import { spawnSync } from 'node:child_process'
import fs from 'node:fs'
import os from 'node:os'
import path from 'node:path'
import zlib from 'node:zlib'

import { hostPlatform, packPackages, root } from '../scripts/pack.mjs'

const binary = path.resolve(process.argv[2] ?? path.join(root, `cursor-acp-native.${hostPlatform()}.node`))
const bytes = fs.readFileSync(binary)
const tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'acp-size-'))

/** The sizes of a tarball and of what it holds, from `tar -tzv` (bytes, the fifth column). */
function tarball(file) {
  const listing = spawnSync('tar', ['-tzvf', file], { encoding: 'utf8' })
  const unpacked = listing.status === 0 ? listing.stdout.split('\n').filter(Boolean).reduce((sum, line) => sum + Number(line.trim().split(/\s+/)[2]), 0) : undefined
  return { packedBytes: fs.statSync(file).size, unpackedBytes: unpacked }
}

/**
 * The ELF sections over 64 KiB of the file, largest first, from readelf; null without binutils
 * or on other formats. Sections that take no room in the file (.bss) are left out.
 */
function sections() {
  const r = spawnSync('readelf', ['-S', '-W', binary], { encoding: 'utf8' })
  if (r.status !== 0) return null
  const out = []
  for (const line of r.stdout.split('\n')) {
    const m = /^\s*\[\s*\d+\]\s+(\S+)\s+(\S+)\s+[0-9a-f]+\s+[0-9a-f]+\s+([0-9a-f]+)/.exec(line)
    if (m && m[2] !== 'NOBITS' && parseInt(m[3], 16) >= 64 * 1024) out.push({ name: m[1], bytes: parseInt(m[3], 16) })
  }
  return out.sort((a, b) => b.bytes - a.bytes)
}

/** The optional parts the addon carries, by the names of the exports each registers. */
function features() {
  const has = (name) => bytes.includes(Buffer.from(`${name}\0`))
  return { embedded: has('startEmbeddedBackend'), bench: has('decodeTextFrames') }
}

/** Bytes `strip --strip-all` takes off a copy (0: the build stripped everything already). */
function stripHeadroom() {
  const copy = path.join(tmp, 'stripped.node')
  const r = spawnSync('strip', ['--strip-all', '-o', copy, binary], { encoding: 'utf8' })
  return r.status === 0 ? bytes.length - fs.statSync(copy).size : null
}

/** @param {string} file */
function inRepository(file) {
  const relative = path.relative(root, file)
  return !relative.startsWith('..') && !path.isAbsolute(relative)
}

try {
  const packs = packPackages(path.join(tmp, 'pack'), [binary])
  const platform = Object.values(packs.platforms)[0]
  process.stdout.write(`${JSON.stringify({
    // A build elsewhere (`--download`) by its name: a path out of the repository says nothing.
    binary: inRepository(binary) ? path.relative(root, binary) : path.basename(binary),
    addon: { bytes: bytes.length, gzipBytes: zlib.gzipSync(bytes, { level: 9 }).length, features: features() },
    platformPackage: { name: platform.manifest.name, files: platform.files, ...tarball(platform.tarball) },
    rootPackage: { files: packs.rootFiles.length, ...tarball(packs.root) },
    sections: process.platform === 'linux' ? sections() : null,
    stripHeadroomBytes: process.platform === 'linux' ? stripHeadroom() : null,
  })}\n`)
} finally {
  fs.rmSync(tmp, { recursive: true, force: true })
}
