// The session's card API for hosts (openCard, settleCard, cardAnnounced), through the addon's
// JavaScript API against the embedded backend: a host's card goes out in the turn's own
// stream under an id unique in the session, ends once, fails if the turn ends first, and bad
// input is a clear E_INVALID, never a hang.
import assert from 'node:assert/strict'
import test from 'node:test'

import { drain, setup, within } from './helpers.mjs'

const card = { title: 'Run the linter', kind: 'execute' }
const cardsOf = (updates, id) => updates.filter((u) => u.toolCallId === id).map((u) => u.sessionUpdate === 'tool_call' ? 'tool_call' : u.status ?? 'update')

test("a host's card is announced in the turn's stream, settled once, and unique across turns", async () => {
  // Each turn runs long enough for the host to open and settle its cards.
  const { client, close } = await setup({ steps: [{ type: 'text', text: 'working' }, { type: 'sleep', ms: 300 }, { type: 'turnEnded' }] })
  try {
    const session = client.newSession()
    assert.equal(await session.openCard('lint', card), null, 'no turn runs: nothing opens')
    assert.equal(await session.cardAnnounced('lint', 10), null)

    const first = session.prompt('go')
    const read = drain(first)
    const id = await within(5000, session.openCard('lint', { status: 'pending', ...card }), 'openCard')
    assert.equal(id, 'lint')
    assert.equal(await session.cardAnnounced('lint', 10), 'lint', 'announced: at once')
    assert.equal(await session.openCard('lint', card), 'lint', 'opened again: the same card')
    session.settleCard('lint', { status: 'completed', content: [{ type: 'content', content: { type: 'text', text: 'no findings' } }] })
    session.settleCard('lint', { status: 'failed' })
    assert.equal(await within(5000, session.openCard('left-open', card), 'openCard'), 'left-open')
    const updates = await read
    assert.deepEqual(cardsOf(updates, 'lint'), ['tool_call', 'completed'], 'ended once; the later failure never went out')
    assert.deepEqual(cardsOf(updates, 'left-open'), ['tool_call', 'failed'], 'a card the host left open fails with its turn')
    assert.equal(await session.cardAnnounced('lint', 10), null, 'the turn is over')

    const second = session.prompt('again')
    const again = drain(second)
    assert.equal(await within(5000, session.openCard('lint', card), 'openCard'), 'lint~2', 'a new card: a new id')
    session.settleCard('lint', { status: 'completed' })
    assert.deepEqual(cardsOf(await again, 'lint~2'), ['tool_call', 'completed'])
    assert.deepEqual(session.save().cardIds.sort(), ['left-open', 'lint', 'lint~2'])
  } finally {
    close()
  }
})

test('bad cards and outcomes are E_INVALID', async () => {
  const { client, close } = await setup({ steps: [{ type: 'turnEnded' }] })
  try {
    const session = client.newSession()
    const invalid = (e) => e.code === 'E_INVALID'
    assert.throws(() => session.openCard('x', 42), invalid)
    assert.throws(() => session.openCard('x', { kind: 'not-a-kind' }), (e) => invalid(e) && /tool_call/.test(e.message))
    assert.throws(() => session.settleCard('x', 'done'), invalid)
    assert.throws(() => session.settleCard('x', { status: 'finished' }), (e) => invalid(e) && /`status` cannot be "finished"/.test(e.message))
    assert.throws(() => client.loadSession({ conversationId: 'c', cardIds: 'lint' }), (e) => invalid(e) && /cardIds/.test(e.message))
  } finally {
    close()
  }
})
