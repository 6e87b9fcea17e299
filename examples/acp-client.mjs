#!/usr/bin/env node
// @ts-check
// The product as an editor uses it, offline: a scripted ACP client (standing in for Zed) launches
// the `cursor-acp-native` stdio agent against its embedded backend, opens a session in this
// repository, sends a prompt, prints every session/update as it arrives, and answers the
// permission prompt the shell command raises ("allow once"). The ls and the shell command run
// for real on this machine.
import { spawn } from 'node:child_process'
import { Readable, Writable } from 'node:stream'
import { fileURLToPath } from 'node:url'
import { client, ndJsonStream } from '@agentclientprotocol/sdk'

const root = fileURLToPath(new URL('..', import.meta.url))
const cli = fileURLToPath(new URL('../bin/cursor-acp-native.mjs', import.meta.url))

const agentProcess = spawn(process.execPath, [cli, '--embedded'], { stdio: ['pipe', 'pipe', 'inherit'] })
const stream = ndJsonStream(Writable.toWeb(agentProcess.stdin), Readable.toWeb(agentProcess.stdout))

/** @param {string} s */
const out = (s) => process.stdout.write(s)
/** @type {string | null} */
let lastKind = null
/** @param {import('@agentclientprotocol/sdk').ContentBlock} block */
const textOf = (block) => (block.type === 'text' ? block.text : `[${block.type}]`)
/** @param {import('@agentclientprotocol/sdk').SessionUpdate} update */
function show(update) {
  const kind = update.sessionUpdate
  if (kind !== lastKind && (kind.endsWith('_chunk') || lastKind?.endsWith('_chunk'))) out('\n')
  lastKind = kind
  switch (kind) {
    case 'agent_thought_chunk': return out(`\x1b[2m${textOf(update.content)}\x1b[0m`)
    case 'agent_message_chunk': return out(textOf(update.content))
    case 'tool_call': return out(`  ▸ [${update.kind}] ${update.title} (${update.status})\n`)
    case 'tool_call_update': return update.status && out(`  ▸ ${update.toolCallId}: ${update.status}\n`)
    case 'usage_update': return out(`  ◦ context: ${update.used} / ${update.size} tokens\n`)
    case 'available_commands_update': return out(`  ◦ commands: ${update.availableCommands.map((c) => `/${c.name}`).join(' ')}\n`)
    default: return out(`  ◦ ${kind}\n`)
  }
}

const app = client({ name: 'scripted-editor' })
  .onNotification('session/update', ({ params }) => { show(params.update) })
  .onRequest('session/request_permission', ({ params }) => {
    out(`\n  ? permission: [${params.toolCall.kind}] ${params.toolCall.title}\n    options: ${params.options.map((o) => o.name).join(' / ')} → Allow\n`)
    return { outcome: { outcome: 'selected', optionId: 'allow-once' } }
  })

const connection = app.connect(stream)
const agent = connection.agent
const init = await agent.request('initialize', { protocolVersion: 1, clientCapabilities: {}, clientInfo: { name: 'scripted-editor', version: '1.0.0' } })
out(`agent: ${init.agentInfo?.title} ${init.agentInfo?.version}\n`)
const session = await agent.request('session/new', { cwd: root, mcpServers: [] })
out(`session ${session.sessionId} in ${root} (mode ${session.modes?.currentModeId})\n\n> What is in this repository?\n`)
const response = await agent.request('session/prompt', { sessionId: session.sessionId, prompt: [{ type: 'text', text: 'What is in this repository?' }] })
out(`\n\nstop reason: ${response.stopReason}\n`)
await agent.request('session/close', { sessionId: session.sessionId })
connection.close()
agentProcess.stdin.end()
