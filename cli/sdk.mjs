// @ts-check
// The ACP SDK, loaded once, when the connection needs it (cli/stdio.mjs), and after the first
// `session/new` where that comes at once: loading it (zod builds every schema at import) takes
// longer than Node's own start-up, and a session needs none of it to be made.
//
// The modules a session is made with import `RequestError` from here rather than from the SDK,
// so that importing them loads nothing more. It is the SDK's own class, bound when the SDK is
// loaded; it is thrown from requests the SDK has dispatched, so always after. The one path
// that runs before (`session/new` answered early, cli/agent.mjs) checks what it takes first and
// leaves the request to the SDK should anything still fail.

/** @typedef {typeof import('@agentclientprotocol/sdk')} Sdk */

// Unbound until loadSdk() has run (see above).
export let RequestError = /** @type {Sdk['RequestError']} */ (/** @type {unknown} */ (undefined))

/** @type {Promise<Sdk> | undefined} */
let loading

/** @returns {Promise<Sdk>} */
export function loadSdk() {
  loading ??= import('@agentclientprotocol/sdk').then((sdk) => {
    RequestError = sdk.RequestError
    return sdk
  })
  return loading
}
