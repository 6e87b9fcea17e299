'use strict'
// Loads the native addon through the loader `napi build` generates (native.js). When no build
// loads, napi's loader blames npm's handling of optional dependencies and keeps the real reason
// (a `dlopen` failure, a missing platform package) deep in its `cause` chain, which misleads
// inside an Electron app or a VS Code extension package. This error leads with that reason.

try {
  module.exports = require('./native.js')
} catch (error) {
  module.exports = loadForThisLibc(error)
}

/**
 * napi's loader tells musl from glibc by the system's `/usr/bin/ldd` first, so a musl Node.js on
 * a glibc system (a portable build, a test rig) is offered the glibc binary, which is not
 * installed. The process itself knows which libc it runs on: the build for that one, from the
 * package folder or its platform package, else the loader's own error explained.
 */
function loadForThisLibc(error) {
  if (process.platform === 'linux') {
    const platform = platformName()
    for (const candidate of [`./cursor-acp-native.${platform}.node`, `@cursor-acp-native/binding-${platform}`]) {
      try {
        return require(candidate)
      } catch (e) {
        if (e?.code !== 'MODULE_NOT_FOUND') throw explainLoadFailure(error, e)
      }
    }
  }
  throw explainLoadFailure(error)
}

/** The errors of napi's loader, outermost first; a cycle is followed once. */
function causeChain(error) {
  const chain = []
  for (let e = error; e instanceof Error && !chain.includes(e); e = e.cause) chain.push(e)
  return chain
}

/** This machine as the platform packages are named: `linux-x64-gnu`, `darwin-arm64`, … */
function platformName() {
  const abi = process.platform === 'linux' ? (isMusl() ? '-musl' : '-gnu') : process.platform === 'win32' ? '-msvc' : ''
  return `${process.platform}-${process.arch}${abi}`
}

function isMusl() {
  try {
    return !process.report.getReport().header.glibcVersionRuntime
  } catch {
    return false
  }
}

/** `refusedBy`: the error of the one binary found and refused, when it is known. */
function explainLoadFailure(error, refusedBy) {
  // napi's loader re-makes each error from its message alone (no `code`), so they are told
  // apart by message: a module not found is an absent candidate, anything else a refusal.
  const tried = refusedBy ? [refusedBy] : causeChain(error).slice(1)
  const absent = (e) => /^Cannot find module\b/.test(e.message)
  // A binary that was found and refused (another architecture, a newer glibc, a missing symbol,
  // a damaged file), else the loader's own complaint (a platform package of another version).
  const refused = tried.find((e) => !absent(e) && /\.node\b/.test(e.message)) ?? tried.find((e) => !absent(e) && !/wasi/i.test(e.message))
  const platform = platformName()
  const message = refused
    ? `cursor-acp-native: the native addon for ${platform} did not load: ${refused.message}`
    : `cursor-acp-native: no native addon for ${platform} is installed. npm installs it as the ` +
      `optional dependency @cursor-acp-native/binding-${platform}; it is missing when optional ` +
      `dependencies were left out (--omit=optional), when node_modules was installed on another ` +
      `platform, or when a bundler (a VS Code extension package, an Electron app) did not ship it.`
  const explained = new Error(message, { cause: error })
  explained.code = 'E_ADDON_LOAD'
  return explained
}
