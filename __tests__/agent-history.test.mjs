// The conversation outlives the agent with --embedded: the embedded backend keeps it in its
// checkpoints as Cursor's server does (turns and root prompt as blob ids, the blobs stored with
// the agent over KV), so a new agent process on the same cache replays it on session/load.
import assert from 'node:assert/strict'
import fs from 'node:fs'
import path from 'node:path'
import test from 'node:test'

import { INIT, startAgent, tempDir } from './acp-harness.mjs'
import { within } from './helpers.mjs'

/** A turn per prompt: its own answer, the second also reading a file. */
function scenario(cwd) {
  const file = path.join(cwd, 'notes.txt')
  return { turns: [
    [
      { type: 'thinking', text: 'A greeting.' },
      { type: 'thinkingCompleted', durationMs: 3 },
      { type: 'text', text: 'Hello, ' },
      { type: 'text', text: 'how can I help?' },
      { type: 'checkpoint', state: { tokenDetails: { usedTokens: 100, maxTokens: 200000 } } },
      { type: 'turnEnded' },
    ],
    [
      { type: 'toolCallStarted', callId: 'read-notes', toolCall: { readToolCall: { args: { path: file } } } },
      { type: 'exec', id: 1, args: { readArgs: { path: file, toolCallId: 'read-notes' } } },
      { type: 'toolCallCompleted', callId: 'read-notes', toolCall: { readToolCall: { args: { path: file } } }, resultFromExec: 1 },
      { type: 'text', text: 'Your notes say: buy milk.' },
      { type: 'checkpoint', state: { tokenDetails: { usedTokens: 200, maxTokens: 200000 } } },
      { type: 'turnEnded' },
    ],
  ] }
}

/** Resolves once `predicate()` holds, or fails naming `what` after `ms`. */
async function until(predicate, ms, what) {
  const deadline = Date.now() + ms
  while (!predicate()) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`)
    await new Promise((resolve) => setTimeout(resolve, 10))
  }
}

/** Each message of the updates once, as [kind, its text]; a card as [kind, its title or status]. */
function thread(updates) {
  const out = []
  let last
  for (const u of updates) {
    if (u.sessionUpdate.endsWith('_chunk')) {
      if (last && last.kind === u.sessionUpdate && last.id === u.messageId) {
        out[out.length - 1][1] += u.content.text
        continue
      }
      last = { kind: u.sessionUpdate, id: u.messageId }
      out.push([u.sessionUpdate, u.content.text])
    } else if (u.sessionUpdate === 'tool_call' || u.sessionUpdate === 'tool_call_update') {
      last = undefined
      out.push([u.sessionUpdate, u.sessionUpdate === 'tool_call' ? u.kind : u.status])
    }
  }
  return out
}

test('session/load in a new agent replays the conversation the embedded backend checkpointed', async () => {
  const cacheDir = tempDir('acp-cache-')
  const cwd = tempDir()
  fs.writeFileSync(path.join(cwd, 'notes.txt'), 'buy milk\n')
  const prompts = ['Hi there', 'What do my notes say?']
  const first = startAgent({ scenario: scenario(cwd), cacheDir })
  let sessionId
  try {
    await first.agent.request('initialize', INIT)
    ;({ sessionId } = await first.agent.request('session/new', { cwd, mcpServers: [] }))
    for (const text of prompts) {
      const r = await within(20_000, first.agent.request('session/prompt', { sessionId, prompt: [{ type: 'text', text }] }), text)
      assert.equal(r.stopReason, 'end_turn')
    }
    // Killed outright, as a crash or a closed editor may end it: what it saved is what it had
    // when the second prompt was answered.
    const exited = new Promise((resolve) => first.child.once('exit', (_code, signal) => resolve(signal)))
    first.child.kill('SIGKILL')
    assert.equal(await within(5000, exited, 'the agent to die'), 'SIGKILL')
  } finally {
    await first.stop()
  }

  const second = startAgent({ scenario: scenario(cwd), cacheDir })
  try {
    await second.agent.request('initialize', INIT)
    await within(20_000, second.agent.request('session/load', { sessionId, cwd, mcpServers: [] }), 'session/load')
    // The replay is sent before the load's response; the wait only lets the last
    // notifications be read.
    const wanted = [
      ['user_message_chunk', 'Hi there'],
      ['agent_thought_chunk', 'A greeting.'],
      ['agent_message_chunk', 'Hello, how can I help?'],
      ['user_message_chunk', 'What do my notes say?'],
      ['tool_call', 'read'],
      ['tool_call_update', 'completed'],
      ['agent_message_chunk', 'Your notes say: buy milk.'],
    ]
    await until(() => thread(second.updatesFor(sessionId)).length >= wanted.length, 5000, 'the replayed conversation')
    assert.deepEqual(thread(second.updatesFor(sessionId)), wanted)

    // The loaded session goes on from that checkpoint: the next turn is the conversation's third.
    const replayed = second.updatesFor(sessionId).length
    const r = await within(20_000, second.agent.request('session/prompt', { sessionId, prompt: [{ type: 'text', text: 'Thanks' }] }), 'third prompt')
    assert.equal(r.stopReason, 'end_turn')
    const { records } = await second.stop()
    const run = records.map((rec) => rec.messages[0]?.message.runRequest).find(Boolean)
    assert.equal(run?.conversationState?.turns?.length, 2, 'the third run request carries both earlier turns')
    assert.ok(second.updatesFor(sessionId).length > replayed)
  } finally {
    await second.stop()
  }
})
