// Deep values cross between the core and JavaScript at any legal depth: an `ls` tree 100 folders
// deep through LocalTools.run and back through an exec callback, and a server's tool call whose
// result nests past 128 levels, read with for await and nextBatch (its card lists the whole
// tree; its rawOutput is compacted).
import { test } from 'node:test'
import assert from 'node:assert/strict'
import fs from 'node:fs'
import path from 'node:path'
import { addon, setup, drain, TRANSPORTS } from './helpers.mjs'
import { tempDir } from './tmp.mjs'

/** Folders below the path an ls lists (the core's LS_MAX_DEPTH). */
const LS_MAX_DEPTH = 64

/** A workspace with a chain of `levels` folders and a file at its bottom. */
function deepWorkspace(levels) {
  const root = tempDir('acp-deep-')
  const bottom = path.join(root, ...Array(levels).fill('d'))
  fs.mkdirSync(bottom, { recursive: true })
  fs.writeFileSync(path.join(bottom, 'leaf.txt'), 'x')
  return root
}

/** How many folders deep an `LsDirectoryTreeNode` goes, and its deepest node. */
function treeDepth(node) {
  let depth = 0
  while (node.childrenDirs?.length) {
    node = node.childrenDirs[0]
    depth++
  }
  return { depth, deepest: node }
}

/** An `ls` result in proto3 JSON whose tree is `levels` folders deep (past 128 JSON levels). */
function lsResult(levels) {
  let node = { absPath: `/w/${'d/'.repeat(levels)}`, childrenFiles: [{ name: 'leaf.txt' }], childrenWereProcessed: true, numFiles: 1 }
  for (let i = levels - 1; i >= 0; i--) node = { absPath: `/w/${'d/'.repeat(i)}`, childrenDirs: [node], childrenWereProcessed: true, numFiles: 1 }
  return { success: { directoryTreeRoot: node } }
}

/**
 * A settled ls card: its listing goes down to the leaf, `levels` folders deep, and its
 * `rawOutput` is the result compacted (editors show it as a JSON block), not the whole tree.
 */
function assertListedToTheBottom(update, levels) {
  const listing = update.content?.[0]?.content?.text ?? ''
  assert.ok(listing.includes(`\n${'  '.repeat(levels)}leaf.txt`), listing.slice(-300))
  assert.ok(JSON.stringify(update.rawOutput).length < 1000, 'rawOutput is compacted')
}

test('LocalTools.run lists a workspace 100 folders deep down to its depth cap, without a depth error', async () => {
  const root = deepWorkspace(100)
  const tools = new addon.LocalTools({ roots: [root] })
  try {
    const result = await tools.run({ kind: 'ls', args: { path: root } })
    const { depth, deepest } = treeDepth(result.success.directoryTreeRoot)
    assert.equal(depth, LS_MAX_DEPTH)
    assert.ok(!deepest.childrenWereProcessed, 'the folder at the cap is marked as not listed')
  } finally {
    tools.close()
  }
})

for (const transport of TRANSPORTS) {
  test(`${transport}: a deep ls result goes from LocalTools through the exec callback to the server`, async () => {
    const root = deepWorkspace(100)
    const tools = new addon.LocalTools({ roots: [root] })
    const scenario = { steps: [{ type: 'exec', id: 1, args: { lsArgs: { path: root } } }, { type: 'turnEnded' }] }
    const { backend, client, close } = await setup(scenario, { exec: (request, ctx) => tools.run(request, ctx) }, transport)
    try {
      const turn = client.newSession({ cwd: root }).prompt('list it')
      await drain(turn)
      assert.equal((await turn.result).stopReason, 'end_turn')
      const reply = backend.records()[0].messages.map((m) => m.message.execClientMessage).find((m) => m?.id === 1)
      assert.ok(reply.lsResult.success, JSON.stringify(reply).slice(0, 300))
      assert.equal(treeDepth(reply.lsResult.success.directoryTreeRoot).depth, LS_MAX_DEPTH)
    } finally {
      close()
      tools.close()
    }
  })

  test(`${transport}: a tool call whose result nests past 128 levels reaches for await and nextBatch`, async () => {
    // 90 folders: under the 100 nested messages protobuf decoders accept, 180+ JSON levels.
    const levels = 90
    const toolCall = { lsToolCall: { args: { path: '/w' }, result: lsResult(levels) } }
    const steps = [
      { type: 'toolCallStarted', callId: 'c1', toolCall: { lsToolCall: { args: { path: '/w' } } } },
      { type: 'toolCallCompleted', callId: 'c1', toolCall },
      { type: 'toolCallCompleted', callId: 'c2', toolCall },
      { type: 'turnEnded' },
    ]
    const { client, close } = await setup({ steps }, {}, transport)
    try {
      const iterated = client.newSession().prompt('go')
      const updates = await drain(iterated)
      assert.equal((await iterated.result).stopReason, 'end_turn')
      const done = updates.filter((u) => u.sessionUpdate === 'tool_call_update' && u.rawOutput)
      assert.equal(done.length, 2)
      assertListedToTheBottom(done[0], levels)

      const batched = client.newSession().prompt('go')
      const all = []
      for (let batch; (batch = await batched.nextBatch(64)).length;) all.push(...batch)
      assert.equal((await batched.result).stopReason, 'end_turn')
      assertListedToTheBottom(all.findLast((u) => u.rawOutput), levels)
    } finally {
      close()
    }
  })
}

test('a callback result nested deeper than any message is a clear error result, not a crash', async () => {
  let deep = { leaf: true }
  for (let i = 0; i < 300; i++) deep = { nested: deep }
  const scenario = { steps: [{ type: 'exec', id: 1, args: { readArgs: { path: '/w/a' } } }, { type: 'turnEnded' }] }
  const { backend, client, close } = await setup(scenario, { exec: () => ({ success: { path: '/w/a', content: 'x', extra: deep } }) })
  try {
    const turn = client.newSession().prompt('go')
    await drain(turn)
    assert.equal((await turn.result).stopReason, 'end_turn')
    const reply = backend.records()[0].messages.map((m) => m.message.execClientMessage).find((m) => m?.id === 1)
    assert.match(reply.readResult.error.error, /nested more than 256 deep/)
  } finally {
    close()
  }
})
