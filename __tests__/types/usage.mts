// Type-level test (ESM consumer): compiled by `tsc --noEmit` in types.test.mjs.
import { startEmbeddedBackend } from '../../testing.js'
import { AgentClient, type agent, type CodedError, type ExecRequest, type ExecResult, type PromptResult, type SessionUpdate } from '../../index.js'

const backend = await startEmbeddedBackend({ scenario: { steps: [{ type: 'exec', id: 1, args: { readArgs: { path: '/a' } } }, { type: 'turnEnded' }] } })
const client = new AgentClient({
  baseUrl: backend.url,
  transport: 'h2',
  async exec(request: ExecRequest, ctx): Promise<ExecResult | undefined> {
    if (request.kind === 'read') {
      const path: string | undefined = request.args.path // narrowed to agent.ReadArgs
      return { success: { path, content: 'x', totalLines: 1 } }
    }
    if (request.kind === 'shellStream') {
      ctx.stdout(request.args.command ?? '')
      ctx.signal.addEventListener('abort', () => {})
      return { success: { exitCode: 0 } }
    }
    return undefined
  },
  interaction: (query) => (query.kind === 'webSearch' ? { approved: {} } : { rejected: { reason: query.kind } }),
  requestContext: () => ({ rules: [{ fullPath: '/r.mdc', content: 'be brief' }] }),
})
const session = client.newSession({ cwd: '/w', mode: 'plan' })
const turn = session.prompt([{ type: 'text', text: 'hi' }, { type: 'resource_link', uri: 'file:///w/a.ts', name: 'a.ts' }])
for await (const update of turn) {
  const u: SessionUpdate = update
  if (u.sessionUpdate === 'agent_message_chunk' && u.content.type === 'text') console.log(u.content.text)
  if (u.sessionUpdate === 'tool_call') console.log(u.toolCallId, u.status)
}
const result: PromptResult = await turn.result
const stop: 'end_turn' | 'max_tokens' | 'max_turn_requests' | 'refusal' | 'cancelled' = result.stopReason
console.log(stop, result.usage?.totalTokens)
try { await session.injectContext('x') } catch (e) { console.log((e as CodedError).code) }
const saved = session.save()
client.loadSession(saved).close()
const records = backend.records()
console.log(records[0]?.messages[0]?.message.runRequest?.conversationId)
backend.close()

// Built-in tools: delegate from the exec callback, or let the `tools` option answer.
import { LocalTools, type GlobToolResult } from '../../index.js'
const tools = new LocalTools({ roots: ['/w'], shellTimeoutMs: 60_000, env: { CI: '1' } })
const delegating = new AgentClient({
  exec: (request, ctx) => (request.kind === 'delete' ? { rejected: { path: request.args.path, reason: 'no' } } : tools.run(request, ctx)),
  tools: { roots: ['/w'] },
})
void delegating
const found: GlobToolResult = await tools.glob({ globPattern: '*.ts' })
if (found.success) console.log(found.success.files?.length)
tools.close()

// Byte arrays in exec results: bytes fields as they are, string fields as UTF-8.
import { readFile } from 'node:fs/promises'
import type { ExecAnswer, WithByteArrays } from '../../index.js'
const binary = new AgentClient({
  async exec(request): Promise<ExecAnswer | undefined> {
    if (request.kind !== 'read') return undefined
    const file = await readFile(request.args.path ?? '')
    const answer: WithByteArrays<agent.ReadResult> = file.includes(0)
      ? { success: { data: file } }
      : { success: { content: file, totalLines: 1 } }
    return answer
  },
})
void binary
