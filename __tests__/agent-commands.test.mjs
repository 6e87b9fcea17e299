// Custom slash commands from `.cursor/commands/*.md` (the workspace up to its git root, then
// the user's `~/.cursor/commands/`), through the real agent against the embedded backend.
import assert from 'node:assert/strict'
import fs from 'node:fs'
import path from 'node:path'
import test from 'node:test'

import { INIT, startAgent, tempDir } from './acp-harness.mjs'
import { within } from './helpers.mjs'

const sentTexts = (records) =>
  records.flatMap((r) => r.messages.map((m) => m.message.runRequest?.action?.userMessageAction?.userMessage?.text)).filter((t) => t !== undefined)

/** The names in the latest `available_commands_update` of a session. */
const listed = (agent, sessionId) => {
  const lists = agent.updatesFor(sessionId).filter((u) => u.sessionUpdate === 'available_commands_update')
  return lists.at(-1)?.availableCommands.map((c) => c.name) ?? []
}

async function until(predicate, what, ms = 10_000) {
  const deadline = Date.now() + ms
  while (!predicate()) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`)
    await new Promise((resolve) => setTimeout(resolve, 10))
  }
}

test('commands from the workspace up to its git root and from the user are listed and sent with their arguments', async () => {
  const outside = tempDir()
  const repo = path.join(outside, 'repo')
  const cwd = path.join(repo, 'packages', 'app')
  const home = tempDir()
  fs.mkdirSync(path.join(repo, '.git'), { recursive: true })
  const write = (dir, name, text) => {
    fs.mkdirSync(path.join(dir, '.cursor', 'commands'), { recursive: true })
    fs.writeFileSync(path.join(dir, '.cursor', 'commands', name), text)
  }
  write(cwd, 'review.md', '# Review the code\nReview $ARGUMENTS carefully.\n')
  write(repo, 'release.md', 'Prepare the release notes.\n')
  write(repo, 'review.md', 'the repository root loses to the nearer folder\n')
  write(outside, 'outside.md', 'above the git root: not this workspace\n')
  write(home, 'hello.md', 'Say hello.\n')
  write(home, 'bad name!.md', 'a name that is not a word\n')
  write(home, 'empty.md', '   \n')
  write(home, 'summarize.md', 'a built-in name is never taken\n')
  write(home, 'plan.md', 'nor this one\n')
  const scenario = { steps: [{ type: 'text', text: 'ok' }, { type: 'turnEnded' }] }
  const agent = startAgent({ scenario, env: { HOME: home } })
  let records
  try {
    await agent.agent.request('initialize', INIT)
    const { sessionId } = await agent.agent.request('session/new', { cwd, mcpServers: [] })
    await until(() => listed(agent, sessionId).length > 0, 'the command list')
    assert.deepEqual(listed(agent, sessionId), ['summarize', 'plan', 'shell', 'continue', 'review', 'release', 'hello'])
    const review = agent.updatesFor(sessionId).find((u) => u.sessionUpdate === 'available_commands_update').availableCommands[4]
    assert.equal(review.description, 'Review the code')
    const prompt = (text) => within(20_000, agent.agent.request('session/prompt', { sessionId, prompt: [{ type: 'text', text }] }), text)
    assert.equal((await prompt('/review src/main.rs')).stopReason, 'end_turn')
    assert.equal((await prompt('/release')).stopReason, 'end_turn')
    assert.equal((await prompt('/hello and be brief')).stopReason, 'end_turn')
    // A command file added while the session is open is offered at once.
    write(cwd, 'fresh.md', 'Something new.\n')
    await until(() => listed(agent, sessionId).includes('fresh'), 'the new command in the list')
    assert.equal((await prompt('/fresh')).stopReason, 'end_turn')
    // Not a command: sent as it is.
    assert.equal((await prompt('/unknown thing')).stopReason, 'end_turn')
  } finally {
    ({ records } = await agent.stop())
  }
  assert.deepEqual(sentTexts(records), [
    '# Review the code\nReview src/main.rs carefully.\n',
    'Prepare the release notes.\n',
    'Say hello.\n\nand be brief',
    'Something new.\n',
    '/unknown thing',
  ])
  assert.match(agent.stderr(), /skipping the command .*bad name!\.md/)
  assert.match(agent.stderr(), /skipping the command .*empty\.md: it is empty/)
})

test('the built-in commands start the conversation actions their names say', async () => {
  const scenario = { steps: [{ type: 'text', text: 'ok' }, { type: 'turnEnded' }] }
  const agent = startAgent({ scenario })
  let records
  try {
    await agent.agent.request('initialize', INIT)
    const { sessionId } = await agent.agent.request('session/new', { cwd: tempDir(), mcpServers: [] })
    for (const text of ['/plan add a cache', '/shell npm test', '/continue', '/summarize', '/plan']) {
      const answer = await within(20_000, agent.agent.request('session/prompt', { sessionId, prompt: [{ type: 'text', text }] }), text)
      assert.equal(answer.stopReason, 'end_turn', text)
    }
  } finally {
    ({ records } = await agent.stop())
  }
  const actions = records.flatMap((r) => r.messages.map((m) => m.message.runRequest?.action)).filter(Boolean)
  assert.equal(actions.length, 5)
  assert.equal(actions[0].startPlanAction.userMessage.text, 'add a cache')
  assert.equal(actions[1].shellCommandAction.shellCommand.command, 'npm test')
  assert.ok(actions[2].goalContinuationAction, JSON.stringify(actions[2]))
  assert.ok(actions[3].summarizeAction, JSON.stringify(actions[3]))
  // Without what to plan, /plan is a prompt as typed.
  assert.equal(actions[4].userMessageAction.userMessage.text, '/plan')
})
