// Logging for the stdio agent: stderr only (stdout carries nothing but ACP JSON lines), one line
// per entry, with a level filter. Values that look like credentials are never passed in.
const LEVELS = { error: 0, warn: 1, info: 2, debug: 3 }

export function parseLevel(value) {
  if (value === undefined || value === null || value === '') return 'warn'
  if (!(value in LEVELS)) throw new Error(`--log-level must be one of ${Object.keys(LEVELS).join(', ')}, got ${JSON.stringify(value)}`)
  return value
}

export function createLogger(level = 'warn', stream = process.stderr) {
  const max = LEVELS[level]
  const write = (name) => (...parts) => {
    if (LEVELS[name] > max) return
    const text = parts.map((p) => (p instanceof Error ? (p.code ? `${p.code}: ${p.message}` : p.message) : typeof p === 'string' ? p : JSON.stringify(p))).join(' ')
    stream.write(`[cursor-acp-native] ${name}: ${text.replace(/\n/g, '\\n')}\n`)
  }
  return { error: write('error'), warn: write('warn'), info: write('info'), debug: write('debug'), level }
}
