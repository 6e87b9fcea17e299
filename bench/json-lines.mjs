// @ts-check
// An agent's stdout, read as an editor reads it: JSON lines, each handled as it completes (the
// bench's agents and the peers it compares them with).

/**
 * Calls `onMessage(message, at)` with each JSON line `stream` brings, as the lines complete (`at`:
 * performance.now() when their chunk arrived). A line that is not JSON goes to `notJson`: passed
 * over unless given (a peer's stray output); the bench's own agent must write none.
 * @param {import('node:stream').Readable} stream
 * @param {(message: any, at: number) => void} onMessage
 * @param {(line: string) => void} [notJson]
 */
export function readJsonLines(stream, onMessage, notJson = () => {}) {
  let buffered = ''
  stream.setEncoding('utf8')
  stream.on('data', (chunk) => {
    const at = performance.now()
    buffered += chunk
    let newline
    while ((newline = buffered.indexOf('\n')) >= 0) {
      const line = buffered.slice(0, newline)
      buffered = buffered.slice(newline + 1)
      if (!line.trim()) continue
      let message
      try {
        message = JSON.parse(line)
      } catch {
        notJson(line)
        continue
      }
      onMessage(message, at)
    }
  })
}
