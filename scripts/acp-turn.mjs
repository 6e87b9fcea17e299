#!/usr/bin/env node
// Plays the demo turn of `cursor-acp-native --embedded` through an ACP client, as an editor
// would, and checks what came back: the stop reason, the permission prompt for the shell, both
// tool calls completed and the closing text; and, from what the embedded backend recorded
// (`--record`), that the agent listed the directory and really ran the shell (its output and exit
// went back to the backend). It only needs
// `@agentclientprotocol/sdk` where it is run from, so it works next to an installed package as
// well as in the checkout.
//
//   node scripts/acp-turn.mjs [--cwd <dir>] -- <agent command> [args…]
//
// The agent command is whatever starts the agent: `node …/bin/cursor-acp-native.mjs`, or the same
// node under qemu for another architecture (`--embedded --record <file>` are appended). Exits 0
// when the turn is as expected and prints one line of JSON describing it.
import fs from 'node:fs'
import os from 'node:os'
import path from 'node:path'
import { spawn } from 'node:child_process'
import { Readable, Writable } from 'node:stream'
import { fileURLToPath } from 'node:url'
import { client, ndJsonStream } from '@agentclientprotocol/sdk'

/**
 * Starts the agent with `--embedded --record`, plays one prompt and returns what an editor would
 * have seen and what the embedded backend received.
 * @param {{ command: string, args: string[], cwd: string, env?: object, timeoutMs?: number }} o
 */
export async function playDemoTurn({ command, args, cwd, env = process.env, timeoutMs = 120_000 }) {
  const recordDir = fs.mkdtempSync(path.join(os.tmpdir(), 'acp-turn-'))
  const recordFile = path.join(recordDir, 'records.json')
  const child = spawn(command, [...args, '--embedded', '--record', recordFile], { stdio: ['pipe', 'pipe', 'pipe'], env })
  let stderr = ''
  child.stderr.on('data', (chunk) => { stderr += chunk })
  const exited = new Promise((resolve) => child.on('close', (code, signal) => resolve({ code, signal })))
  const spawnFailed = new Promise((_, reject) => child.on('error', reject))

  const updates = []
  const permissions = []
  const connection = client({ name: 'acp-turn-check' })
    .onNotification('session/update', ({ params }) => { updates.push(params.update) })
    .onRequest('session/request_permission', ({ params }) => {
      permissions.push({ kind: params.toolCall.kind, title: params.toolCall.title })
      return { outcome: { outcome: 'selected', optionId: 'allow-once' } }
    })
    .connect(ndJsonStream(Writable.toWeb(child.stdin), Readable.toWeb(child.stdout)))

  let timer
  const timeout = new Promise((_, reject) => {
    timer = setTimeout(() => reject(new Error(`no answer within ${timeoutMs} ms`)), timeoutMs)
  })
  const conversation = (async () => {
    const agent = connection.agent
    const init = await agent.request('initialize', {
      protocolVersion: 1,
      clientCapabilities: {},
      clientInfo: { name: 'acp-turn-check', version: '1.0.0' },
    })
    const session = await agent.request('session/new', { cwd, mcpServers: [] })
    const response = await agent.request('session/prompt', {
      sessionId: session.sessionId,
      prompt: [{ type: 'text', text: 'What is in this directory?' }],
    })
    return { agentInfo: init.agentInfo, stopReason: response.stopReason }
  })()
  let outcome
  try {
    outcome = await Promise.race([conversation, timeout, spawnFailed])
  } catch (e) {
    e.message += `\nagent stderr:\n${stderr}`
    throw e
  } finally {
    clearTimeout(timer)
    connection.close()
    child.stdin.end()
    const kill = setTimeout(() => child.kill('SIGKILL'), 10_000)
    outcome = { ...outcome, exit: await exited }
    clearTimeout(kill)
  }
  // The agent writes the record as it exits.
  let records = null
  try {
    records = JSON.parse(fs.readFileSync(recordFile, 'utf8'))
  } catch {}
  fs.rmSync(recordDir, { recursive: true, force: true })
  return { ...outcome, updates, permissions, records, stderr }
}

/** The exec results the client sent the embedded backend, by exec id. */
function execResults(records) {
  const byId = new Map()
  for (const stream of records ?? []) {
    for (const { message } of stream.messages) {
      const exec = message.execClientMessage
      if (exec) byId.set(exec.id, [...(byId.get(exec.id) ?? []), exec])
    }
  }
  return byId
}

/** What is wrong with a played demo turn (an empty list when nothing is). */
export function demoTurnProblems({ stopReason, updates, permissions, records, exit }) {
  const problems = []
  if (exit?.code !== 0) problems.push(`the agent exited with ${JSON.stringify(exit)} after stdin closed`)
  const results = execResults(records)
  if (!results.get(1)?.some((r) => r.lsResult?.success)) problems.push('the backend got no successful ls result')
  const shell = results.get(2) ?? []
  const stdout = shell.map((r) => r.shellStream?.stdout?.data ?? '').join('')
  // (Windows' cmd keeps echo's quotes and ends lines with CRLF.)
  if (!stdout.includes('hello from cursor-acp-native')) problems.push(`the backend got shell output ${JSON.stringify(stdout)}`)
  if (!shell.some((r) => r.shellStream?.exit)) problems.push('the backend got no shell exit')
  if (stopReason !== 'end_turn') problems.push(`stop reason ${stopReason}, expected end_turn`)
  const calls = new Map()
  for (const u of updates) {
    if (u.sessionUpdate !== 'tool_call' && u.sessionUpdate !== 'tool_call_update') continue
    const call = calls.get(u.toolCallId) ?? { text: '' }
    if (u.status) call.status = u.status
    for (const c of u.content ?? []) if (c.type === 'content' && c.content?.type === 'text') call.text += c.content.text
    calls.set(u.toolCallId, call)
  }
  if (calls.size !== 2) problems.push(`${calls.size} tool calls, expected 2 (ls and a shell)`)
  for (const [id, call] of calls) if (call.status !== 'completed') problems.push(`tool call ${id} ended ${call.status}`)
  if (permissions.length !== 1 || permissions[0].kind !== 'execute') {
    problems.push(`permission prompts ${JSON.stringify(permissions)}, expected one for the shell`)
  }
  const text = updates.filter((u) => u.sessionUpdate === 'agent_message_chunk').map((u) => u.content.text).join('')
  if (!text.includes('played by the embedded backend')) problems.push(`unexpected answer text: ${JSON.stringify(text)}`)
  return problems
}

if (process.argv[1] === fileURLToPath(import.meta.url)) {
  const argv = process.argv.slice(2)
  const dash = argv.indexOf('--')
  if (dash < 0 || dash === argv.length - 1) {
    process.stderr.write('usage: acp-turn.mjs [--cwd <dir>] -- <agent command> [args…]\n')
    process.exit(2)
  }
  const options = argv.slice(0, dash)
  const cwdIndex = options.indexOf('--cwd')
  const cwd = cwdIndex >= 0 ? options[cwdIndex + 1] : process.cwd()
  const [command, ...args] = argv.slice(dash + 1)
  const started = Date.now()
  try {
    const turn = await playDemoTurn({ command, args, cwd })
    const problems = demoTurnProblems(turn)
    const summary = {
      agent: `${turn.agentInfo?.name} ${turn.agentInfo?.version}`,
      stopReason: turn.stopReason,
      updates: turn.updates.length,
      shellOutput: [...execResults(turn.records).get(2) ?? []].map((r) => r.shellStream?.stdout?.data ?? '').join(''),
      permissions: turn.permissions.map((p) => p.title),
      ms: Date.now() - started,
      problems,
    }
    process.stdout.write(`${JSON.stringify(summary)}\n`)
    if (problems.length) {
      process.stderr.write(turn.stderr)
      process.exit(1)
    }
  } catch (e) {
    process.stderr.write(`acp-turn: ${e.stack ?? e}\n`)
    process.exit(1)
  }
}
