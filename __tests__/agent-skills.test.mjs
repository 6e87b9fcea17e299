// Agent Skills (SKILL.md with name and description front matter) from the workspace's
// `.cursor/skills/` and `.agents/skills/` and the user's: sent in the request context, listed as
// commands, and `/skill-name …` selects one for that prompt. Through the real agent.
import assert from 'node:assert/strict'
import fs from 'node:fs'
import path from 'node:path'
import test from 'node:test'

import { INIT, startAgent, tempDir } from './acp-harness.mjs'
import { within } from './helpers.mjs'

const runs = (records) => records.flatMap((r) => r.messages.map((m) => m.message.runRequest?.action?.userMessageAction)).filter(Boolean)

test('skills go to the server, are listed as commands, and /name selects one', async () => {
  const cwd = tempDir()
  const home = tempDir()
  const skill = (dir, folder, text) => {
    fs.mkdirSync(path.join(dir, folder), { recursive: true })
    fs.writeFileSync(path.join(dir, folder, 'SKILL.md'), text)
    return path.join(dir, folder, 'SKILL.md')
  }
  const deploy = skill(cwd, '.cursor/skills/deploy', '---\nname: deploy\ndescription: "Deploy the app to an environment"\n---\n\n# Deploy\nRun make deploy.\n')
  const greet = skill(home, '.agents/skills/greet', '---\nname: greet\ndescription: Greets people\ndisable-model-invocation: true\n---\nSay hi.\n')
  skill(cwd, '.agents/skills/broken', '# No front matter here\n')
  skill(home, '.cursor/skills/shouty', '---\nname: Shouty_Name\ndescription: a name the layout does not allow\n---\n')
  skill(home, '.cursor/skills/deploy-again', '---\nname: deploy\ndescription: the workspace wins this name\n---\n')
  const scenario = { steps: [{ type: 'text', text: 'ok' }, { type: 'turnEnded' }] }
  const agent = startAgent({ scenario, env: { HOME: home } })
  let records
  try {
    await agent.agent.request('initialize', INIT)
    const { sessionId } = await agent.agent.request('session/new', { cwd, mcpServers: [] })
    const prompt = (text) => within(20_000, agent.agent.request('session/prompt', { sessionId, prompt: [{ type: 'text', text }] }), text)
    assert.equal((await prompt('hello')).stopReason, 'end_turn')
    assert.equal((await prompt('/deploy to staging')).stopReason, 'end_turn')
    const lists = agent.updatesFor(sessionId).filter((u) => u.sessionUpdate === 'available_commands_update')
    const commands = lists.at(-1).availableCommands
    assert.deepEqual(commands.map((c) => c.name), ['summarize', 'plan', 'shell', 'continue', 'deploy', 'greet'])
    assert.equal(commands[4].description, 'Skill: Deploy the app to an environment')
  } finally {
    ({ records } = await agent.stop())
  }
  const [first, second] = runs(records)
  const sent = first.requestContext.agentSkills.map((s) => [s.fullPath, s.description, s.disableModelInvocation ?? false])
  assert.deepEqual(sent, [[deploy, 'Deploy the app to an environment', false], [greet, 'Greets people', true]])
  assert.match(first.requestContext.agentSkills[0].content, /Run make deploy/)
  assert.equal(first.userMessage.selectedContext?.selectedSkills, undefined, 'nothing selected for a plain prompt')
  assert.equal(second.userMessage.text, 'to staging')
  assert.deepEqual(second.userMessage.selectedContext.selectedSkills.map((s) => s.fullPath), [deploy])
  assert.match(agent.stderr(), /skipping the skill .*broken.*no front matter/)
  assert.match(agent.stderr(), /skipping the skill .*shouty.*Shouty_Name/)
})
