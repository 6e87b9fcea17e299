#!/usr/bin/env node
// The product's main job, offline: a scripted Cursor agent turn from the embedded backend,
// streamed through the native client as ACP session/update objects and printed as they arrive.
// The exec requests are answered for real: a file read and a shell command run on this machine.
import { createRequire } from 'node:module'
import { readFile } from 'node:fs/promises'
import { spawn } from 'node:child_process'
import { fileURLToPath } from 'node:url'

const require = createRequire(import.meta.url)
const { AgentClient } = require('../index.js')
const { startEmbeddedBackend } = require('../testing.js')
const root = fileURLToPath(new URL('..', import.meta.url))
const readme = `${root}README.md`

const words = (text) => text.split(/(?<= )/).flatMap((w) => [{ type: 'text', text: w }, { type: 'sleep', ms: 25 }])

const scenario = { heartbeatMs: 1000, steps: [
  { type: 'thinking', text: 'The user wants a summary of the project. ' },
  { type: 'thinking', text: 'I will read the README, then check the Node version.' },
  { type: 'thinkingCompleted', durationMs: 420 },
  ...words('Let me look at the README first. '),
  { type: 'toolCallStarted', callId: 'call-read', toolCall: { readToolCall: { args: { path: readme } } } },
  { type: 'exec', id: 1, args: { readArgs: { path: readme, toolCallId: 'call-read', limit: 3 } } },
  { type: 'toolCallCompleted', callId: 'call-read', toolCall: { readToolCall: { args: { path: readme }, result: { success: { totalLines: 3 } } } } },
  { type: 'toolCallStarted', callId: 'call-shell', toolCall: { shellToolCall: { args: { command: 'node --version' } } } },
  { type: 'exec', id: 2, args: { shellStreamArgs: { command: 'node --version', workingDirectory: root, toolCallId: 'call-shell' } } },
  { type: 'toolCallCompleted', callId: 'call-shell', toolCall: { shellToolCall: { args: { command: 'node --version' }, result: { success: { exitCode: 0 } } } } },
  { type: 'kvSet', id: 3, data: '{"role":"assistant","content":"summary"}' },
  { type: 'checkpoint', state: { tokenDetails: { usedTokens: 5321, maxTokens: 200000 } } },
  ...words('This package is a native Node.js client of Cursor\'s agent protocol that speaks ACP. '),
  ...words('Both tools ran locally and their results went back on the same stream.'),
  { type: 'turnEnded', inputTokens: 5100, outputTokens: 221 },
] }

function runShell(command, cwd, ctx) {
  return new Promise((resolve) => {
    const child = spawn(command, { cwd, shell: true })
    let stdout = ''
    child.stdout.on('data', (d) => { stdout += d; ctx.stdout(String(d)) })
    child.stderr.on('data', (d) => ctx.stderr(String(d)))
    ctx.signal.addEventListener('abort', () => child.kill())
    child.on('close', (code) => resolve({ success: { command, workingDirectory: cwd, exitCode: code ?? 1, stdout } }))
  })
}

const tty = process.stdout.isTTY
const dim = (s) => (tty ? `\x1b[2m${s}\x1b[0m` : s)
const bold = (s) => (tty ? `\x1b[1m${s}\x1b[0m` : s)

const backend = await startEmbeddedBackend({ scenario })
const client = new AgentClient({
  baseUrl: backend.url,
  async exec(request, ctx) {
    if (request.kind === 'read') {
      const lines = (await readFile(request.args.path, 'utf8')).split('\n')
      const content = lines.slice(0, request.args.limit ?? lines.length).join('\n')
      console.log(dim(`  ↳ read locally: ${content.split('\n')[0]}`))
      return { success: { path: request.args.path, content, totalLines: lines.length } }
    }
    if (request.kind === 'shellStream') {
      const result = await runShell(request.args.command, request.args.workingDirectory, ctx)
      console.log(dim(`  ↳ ran locally: ${request.args.command} → ${result.success.stdout.trim()}`))
      return result
    }
    return undefined // anything else: the client answers throw + close
  },
})

console.log(dim(`embedded backend at ${backend.url} (RunSSE + BidiAppend)`))
const session = client.newSession({ cwd: root, model: 'default' })
const turn = session.prompt([{ type: 'text', text: 'Summarize this project.' }])
let lastKind = ''
for await (const update of turn) {
  const kind = update.sessionUpdate
  if (kind !== lastKind && lastKind.endsWith('_chunk')) process.stdout.write('\n')
  if (kind === 'agent_thought_chunk') process.stdout.write(dim(kind === lastKind ? update.content.text : `thinking: ${update.content.text}`))
  else if (kind === 'agent_message_chunk') process.stdout.write(update.content.text)
  else if (kind === 'tool_call') console.log(bold(`▶ ${update.title}`) + dim(` [${update.kind}, ${update.status}]`))
  else if (kind === 'tool_call_update') console.log(bold(`■ ${update.toolCallId}`) + dim(` ${update.status}`))
  else if (kind === 'usage_update') console.log(dim(`context: ${update.used} / ${update.size} tokens`))
  else console.log(dim(JSON.stringify(update)))
  lastKind = kind
}
process.stdout.write('\n')
const result = await turn.result
console.log(bold(`stopReason: ${result.stopReason}`), dim(JSON.stringify(result.usage)))
const sent = backend.records()[0].messages.map((m) => m.kind).filter((k) => k !== 'clientHeartbeat')
console.log(dim(`the backend received: ${sent.join(', ')}`))
backend.close()
