// @ts-check
// Logging for the stdio agent: stderr only (stdout carries nothing but ACP JSON lines), one line
// per entry, with a level filter. Values that look like credentials are never passed in.
const LEVELS = { error: 0, warn: 1, info: 2, debug: 3 }

/** @typedef {keyof typeof LEVELS} Level */
/** @typedef {(...parts: unknown[]) => void} LogFunction */
/** @typedef {{ error: LogFunction, warn: LogFunction, info: LogFunction, debug: LogFunction, level: Level }} Logger */

/**
 * `--log-level` (or `CURSOR_ACP_LOG`): warn when unset.
 * @param {string | null | undefined} value
 * @returns {Level}
 */
export function parseLevel(value) {
  if (value === undefined || value === null || value === '') return 'warn'
  if (!(value in LEVELS)) throw new Error(`--log-level must be one of ${Object.keys(LEVELS).join(', ')}, got ${JSON.stringify(value)}`)
  return /** @type {Level} */ (value)
}

/**
 * @param {Level} [level]
 * @param {{ write(text: string): unknown }} [stream]
 * @returns {Logger}
 */
export function createLogger(level = 'warn', stream = process.stderr) {
  const max = LEVELS[level]
  /** @param {Level} name @returns {LogFunction} */
  const write = (name) => (...parts) => {
    if (LEVELS[name] > max) return
    const text = parts.map(describe).join(' ')
    stream.write(`[cursor-acp-native] ${name}: ${text.replace(/\n/g, '\\n')}\n`)
  }
  return { error: write('error'), warn: write('warn'), info: write('info'), debug: write('debug'), level }
}

/** @param {unknown} part */
function describe(part) {
  if (part instanceof Error) {
    const code = /** @type {{ code?: unknown }} */ (part).code
    return code ? `${code}: ${part.message}` : part.message
  }
  return typeof part === 'string' ? part : JSON.stringify(part)
}
