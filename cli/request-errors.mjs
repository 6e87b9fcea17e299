// @ts-check
// The addon's coded errors as JSON-RPC errors: `E_AUTH` becomes auth_required (-32000, which
// makes editors offer the auth methods), `E_INVALID` invalid params (-32602), anything else an
// internal error (-32603); the code, message and Cursor's error details ride along in `data`.
import { RequestError } from './acp.mjs'

/**
 * @param {unknown} e
 * @returns {import('@agentclientprotocol/sdk').RequestError}
 */
export function toRequestError(e) {
  if (e instanceof RequestError) return e
  const coded = /** @type {Partial<import('../index.js').CodedError> | undefined} */ (e)
  /** @type {{ code: string, message: string, cursorError?: string, connectCode?: string }} */
  const data = { code: coded?.code ?? 'E_INTERNAL', message: coded?.message ?? String(e) }
  if (coded?.cursorError) data.cursorError = coded.cursorError
  if (coded?.connectCode) data.connectCode = coded.connectCode
  if (coded?.code === 'E_AUTH') return RequestError.authRequired(data, data.message)
  if (coded?.code === 'E_INVALID') return RequestError.invalidParams(data, data.message)
  return RequestError.internalError(data, data.message)
}

/** How much of a value the client sent an error repeats back. */
const ECHO_LIMIT = 80

/**
 * A value the client sent, as an error message repeats it: JSON, cut to `ECHO_LIMIT`
 * characters. An error never sends back megabytes the client sent (nor keeps them).
 * @param {unknown} value
 */
export function echo(value) {
  const text = JSON.stringify(value) ?? String(value)
  return text.length > ECHO_LIMIT ? `${text.slice(0, ECHO_LIMIT)}… (${text.length} characters)` : text
}
