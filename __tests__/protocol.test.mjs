// The newer protocol from JavaScript, through the real addon and the embedded backend on both
// transports: a streaming shell a host rejects is never reported started, `ctx.started()` and
// hook contexts, the built-in tools and defaults answering the 2026 exec branches, a user
// message sent into a running turn, subscription notifications and prompt extras.
import { test } from 'node:test'
import assert from 'node:assert/strict'
import fs from 'node:fs'
import path from 'node:path'
import { TRANSPORTS, drain, setup } from './helpers.mjs'
import { tempDir } from './tmp.mjs'

/** What the client sent about exec `id`: stream events by name, results by branch, then close. */
function shellEvents(record, id) {
  const out = []
  for (const { message } of record.messages) {
    const exec = message.execClientMessage
    if (exec?.id === id && exec.shellStream) out.push(Object.keys(exec.shellStream)[0])
    else if (exec?.id === id && exec.shellResult) out.push(`result.${Object.keys(exec.shellResult).find((k) => k !== 'pid')}`)
    else if (message.execClientControlMessage?.streamClose?.id === id) out.push('close')
  }
  return out
}

const answerTo = (record, id) => record.messages.map((m) => m.message.execClientMessage).find((m) => m?.id === id && !m.shellStream)

for (const transport of TRANSPORTS) {
  test(`a shell the host rejects after a prompt is never started (${transport})`, async () => {
    const steps = [
      { type: 'exec', id: 1, args: { shellStreamArgs: { command: 'rm -rf /', toolCallId: 't1' } } },
      { type: 'exec', id: 2, args: { shellStreamArgs: { command: 'make' }, acceptHookAdditionalContexts: true } },
      { type: 'turnEnded' },
    ]
    const seen = []
    const { backend, client, close } = await setup({ steps }, {
      async exec(req, ctx) {
        seen.push(req)
        if (req.args.command === 'rm -rf /') {
          await new Promise((r) => setTimeout(r, 500)) // the user thinks, then rejects
          return { rejected: { command: req.args.command, reason: 'User rejected' } }
        }
        ctx.started()
        ctx.stdout('building\n')
        ctx.hookContext('afterShellExecution', 'lint clean')
        return { success: { command: req.args.command, exitCode: 0, stdout: 'building\n' } }
      },
    }, transport)
    try {
      await drain(client.newSession().prompt('go'))
      const record = backend.records()[0]
      assert.deepEqual(shellEvents(record, 1), ['rejected', 'result.rejected', 'close'])
      assert.deepEqual(shellEvents(record, 2), ['start', 'stdout', 'exit', 'result.success', 'close'])
      assert.equal(seen[0].acceptHookAdditionalContexts, false)
      assert.equal(seen[1].acceptHookAdditionalContexts, true)
      const answer = answerTo(record, 2)
      assert.deepEqual(answer.hookAdditionalContexts, [{ hookEventName: 'afterShellExecution', content: 'lint clean' }])
      assert.equal(typeof answer.localExecutionTimeMs, 'number')
      assert.ok(answerTo(record, 1).localExecutionTimeMs >= 400, 'the time the host took')
    } finally {
      await close()
    }
  })

  test(`the built-in tools and the defaults answer the 2026 exec branches (${transport})`, async () => {
    const dir = tempDir('acp-protocol-')
    fs.writeFileSync(path.join(dir, 'a.txt'), 'one\ntwo\n')
    const steps = [
      { type: 'exec', id: 1, args: { piReadArgs: { path: 'a.txt', offset: 2 } } },
      { type: 'exec', id: 2, args: { piEditArgs: { path: 'a.txt', edits: [{ oldText: 'two', newText: 'TWO' }] } } },
      { type: 'exec', id: 3, args: { piLsArgs: {} } },
      { type: 'exec', id: 4, args: { shellAllowlistPrecheckArgs: { command: 'ls' } } },
      { type: 'exec', id: 5, args: { canvasDiagnosticsArgs: { path: 'x.canvas' } } },
      { type: 'exec', id: 6, args: { computerUseArgs: {} } },
      { type: 'turnEnded' },
    ]
    const { backend, client, close } = await setup({ steps }, { tools: { roots: [dir] } }, transport)
    try {
      await drain(client.newSession({ cwd: dir }).prompt('go'))
      const record = backend.records()[0]
      assert.equal(answerTo(record, 1).piReadResult.success.output, 'two\n')
      assert.equal(answerTo(record, 2).piEditResult.success.output, 'Successfully replaced text in a.txt.')
      assert.equal(fs.readFileSync(path.join(dir, 'a.txt'), 'utf8'), 'one\nTWO\n')
      assert.equal(answerTo(record, 3).piLsResult.success.output, 'a.txt')
      assert.deepEqual(answerTo(record, 4).shellAllowlistPrecheckResult, {}, 'not allowlisted')
      assert.equal(answerTo(record, 5).canvasDiagnosticsResult.error.path, 'x.canvas')
      const thrown = record.messages.find((m) => m.message.execClientControlMessage?.throw?.id === 6)
      assert.match(thrown.message.execClientControlMessage.throw.error, /computerUse/, 'a kind with no answer is thrown')
    } finally {
      await close()
    }
  })

  test(`a user message sent into the running turn shows once delivered (${transport})`, async () => {
    const steps = [
      { type: 'text', text: 'Working.' },
      { type: 'injectionState', states: [{ queued: {} }, { delivered: { step: 1 } }] },
      { type: 'turnEnded' },
    ]
    const { backend, client, close } = await setup({ turns: [steps, [{ type: 'turnEnded' }], [{ type: 'turnEnded' }]] }, {}, transport)
    try {
      const session = client.newSession()
      await assert.rejects(session.injectUserMessage('too early'), { code: 'E_CLOSED' })
      const turn = session.prompt('fix it', { userMessage: { hookAdditionalContexts: [{ hookEventName: 'beforeSubmitPrompt', content: 'on main' }] } })
      let id
      for (let i = 0; i < 200 && !id; i++) {
        id = await session.injectUserMessage('and the docs').catch((e) => {
          if (e.code !== 'E_CLOSED') throw e
          return new Promise((r) => setTimeout(r, 10))
        })
      }
      const updates = await drain(turn)
      const user = updates.filter((u) => u.sessionUpdate === 'user_message_chunk')
      assert.deepEqual(user.map((u) => u.content.text), ['and the docs'])
      await drain(session.notifySubscription(['CI failed on main']))
      const records = backend.records()
      const run = records[0].messages[0].message.runRequest
      assert.equal(run.action.userMessageAction.userMessage.hookAdditionalContexts[0].content, 'on main')
      const injected = records[0].messages.find((m) => m.message.conversationAction?.injectContextAction).message.conversationAction.injectContextAction
      assert.equal(injected.injectionId, id)
      assert.equal(injected.expectedRunId, run.runId)
      assert.notEqual(run.runId, records[0].requestId)
      const notified = records[1].messages[0].message.runRequest.action.subscriptionNotificationAction
      assert.equal(notified.notifications[0].text, 'CI failed on main')
      assert.ok(notified.requestContext, 'the request context is filled in')
    } finally {
      await close()
    }
  })
}
