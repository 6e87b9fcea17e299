'use strict'
// `cursor-acp-native/testing`: the embedded backend (a loopback server of Cursor's agent
// protocol, driven by scenarios) for demos and for a host's own tests, and the `bench`
// namespace when the addon was built with it. Not part of the client API.
const native = require('./load-native.js')

if (typeof native.startEmbeddedBackend !== 'function') {
  const error = new Error(
    'cursor-acp-native/testing: this build of the addon has no embedded backend (it was built ' +
      'without the cargo feature `embedded`; `npm run build:debug` in a clone includes it)',
  )
  error.code = 'E_NO_EMBEDDED_BACKEND'
  throw error
}

exports.EmbeddedBackend = native.EmbeddedBackend
exports.startEmbeddedBackend = native.startEmbeddedBackend
// Present only in builds with the cargo feature `bench` (the benchmarks' own builds).
exports.bench = native.bench
