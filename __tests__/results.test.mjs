// What the addon makes of the JavaScript values callbacks return: read like JSON.stringify,
// with proto3 JSON's forms for BigInt and NaN, and byte arrays taken into bytes and string fields.
import { test } from 'node:test'
import assert from 'node:assert/strict'
import { setup, drain } from './helpers.mjs'

/** Runs one turn whose execs are `read`s with ids 1…n, answered by `answers[id - 1](request)`;
 *  resolves to the read results the server received, by exec id. */
async function readResults(answers) {
  const steps = answers.map((_, i) => ({ type: 'exec', id: i + 1, args: { readArgs: { path: `/f${i + 1}` } } }))
  const { backend, client, close } = await setup({ steps: [...steps, { type: 'turnEnded' }] }, {
    exec: (request) => answers[request.id - 1](request),
  })
  try {
    const turn = client.newSession().prompt('read')
    await drain(turn)
    assert.equal((await turn.result).stopReason, 'end_turn')
    const results = new Map()
    for (const m of backend.records()[0].messages) {
      const exec = m.message.execClientMessage
      if (exec?.readResult) results.set(exec.id, exec.readResult)
    }
    return results
  } finally {
    close()
  }
}

test('results are read as JSON.stringify reads them, with proto3 JSON forms for BigInt and NaN', async () => {
  const text = 'héllo 🌍 ' + 'ü'.repeat(100_000) + ' \u{10FFFF} end'
  const results = await readResults([
    (r) => ({
      success: {
        path: r.args.path,
        content: text,
        fileSize: 9007199254740993n, // 2^53 + 1: not a safe JS number, exact as a BigInt
        totalLines: 3,
        truncated: undefined, // left out
        describe() { return 'left out' }, // left out, as JSON.stringify leaves functions out
        [Symbol('tag')]: 1, // symbol keys are not JSON
      },
    }),
    // A lone surrogate is not UTF-8: it arrives replaced, as Node converts strings.
    (r) => ({ success: { path: r.args.path, content: 'a\uD800b' } }),
  ])
  const first = results.get(1).success
  assert.equal(first.content, text, 'multi-byte text arrives exactly')
  assert.equal(first.fileSize, '9007199254740993')
  assert.equal(first.totalLines, 3)
  assert.equal('truncated' in first, false)
  assert.equal(results.get(2).success.content, 'a\uFFFDb')
})

test('a large result arrives exactly, read while its memory is faulted in on another thread', async () => {
  // Over 2 Mi UTF-16 units the addon faults the destination in while V8 flattens the string:
  // a rope (as `+` and `repeat` build) of one- to four-byte characters, and a flat string.
  const rope = ('a'.repeat(1000) + 'é€🌍\n').repeat(3000)
  const flat = Buffer.from(rope).toString()
  assert.ok(rope.length > 3_000_000)
  const results = await readResults([
    (r) => ({ success: { path: r.args.path, content: rope } }),
    (r) => ({ success: { path: r.args.path, content: flat } }),
  ])
  assert.ok(results.get(1).success.content === rope, 'the rope arrives exactly')
  assert.ok(results.get(2).success.content === flat, 'the flat string arrives exactly')
})

test('byte arrays fill bytes fields as they are and string fields as UTF-8 text', async () => {
  const results = await readResults([
    (r) => ({ success: { path: r.args.path, data: Buffer.from([0, 255, 1, 2]) } }),
    (r) => ({ success: { path: r.args.path, data: new Uint8Array([9, 9, 1, 2, 3]).subarray(2) } }),
    (r) => ({ success: { path: r.args.path, data: new Uint8Array([7, 8]).buffer } }),
    (r) => ({ success: { path: r.args.path, content: Buffer.from('read with fs.readFile ✓') } }),
    (r) => ({ success: { path: r.args.path, data: Buffer.alloc(0) } }),
  ])
  assert.equal(results.get(1).success.data, Buffer.from([0, 255, 1, 2]).toString('base64'))
  assert.equal(results.get(2).success.data, Buffer.from([1, 2, 3]).toString('base64'), 'only the view, not its whole buffer')
  assert.equal(results.get(3).success.data, Buffer.from([7, 8]).toString('base64'))
  assert.equal(results.get(4).success.content, 'read with fs.readFile ✓')
  // An empty bytes field is proto3's default: the success carries no output at all.
  assert.equal(results.get(5).success.data ?? '', '')
})

test('a byte array where it cannot go becomes an error result naming the field; the turn goes on', async () => {
  const results = await readResults([
    (r) => ({ success: { path: r.args.path, content: Buffer.from([0xff, 0xfe]) } }),
    (r) => ({ success: { path: r.args.path, totalLines: Buffer.from([1]) } }),
    (r) => ({ success: { path: r.args.path, data: new Float32Array([1.5]) } }),
    (r) => ({ success: { path: r.args.path, content: [Buffer.from('x')] } }),
    () => Buffer.from('not an object'),
    (r) => ({ success: { path: r.args.path, content: 'still fine' } }),
  ])
  const error = (id) => results.get(id).error?.error ?? assert.fail(`exec ${id} got ${JSON.stringify(results.get(id))}`)
  assert.match(error(1), /`success\.content` is text, and the byte array given for it is not UTF-8/)
  assert.match(error(2), /`success\.totalLines` holds int32; a byte array fits only bytes and string fields/)
  assert.match(error(3), /only Uint8Array holds bytes.*`success\.data`/)
  assert.match(error(4), /byte arrays inside arrays are not supported.*`success\.content\.0`/)
  assert.match(error(5), /a byte array is not a result/)
  assert.equal(results.get(6).success.content, 'still fine')
})

test('a result whose getter throws, that refers to itself or nests too deep becomes an error result saying so', async () => {
  const warnings = []
  const onWarning = (w) => warnings.push(w)
  process.on('warning', onWarning)
  const circular = { path: '/f2' }
  circular.self = circular
  let deep = { path: '/f5' }
  for (let i = 0; i < 300; i++) deep = { nested: deep }
  const results = await readResults([
    (r) => ({ success: { path: r.args.path, get content() { throw new Error('boom') } } }),
    () => ({ success: circular }),
    (r) => ({ success: { path: r.args.path, get content() { throw { toString() { throw new Error('again') } } } } }),
    (r) => ({ success: { path: r.args.path, content: 'still fine' } }),
    () => ({ success: deep }),
  ])
  process.off('warning', onWarning)
  assert.match(results.get(1).error.error, /reading the result threw: Error: boom \(at `success\.content`\)/)
  assert.match(results.get(2).error.error, /a circular reference is not JSON \(at `success\.self`\)/)
  assert.match(results.get(3).error.error, /reading the result threw: \? \(at `success\.content`\)/)
  assert.equal(results.get(4).success.content, 'still fine')
  assert.match(results.get(5).error.error, /nested more than 256 deep \(at `success(\.nested)+`\)/)
  // The getter's exception was taken, not left pending for Node to report as uncaught.
  assert.deepEqual(warnings.map((w) => w.code).filter((c) => c === 'DEP0168'), [])
})

test('interaction and requestContext answers are JSON only: a byte array in one is refused', async () => {
  const { backend, client, close } = await setup({ steps: [
    { type: 'interaction', id: 1, query: { webSearchRequestQuery: { args: { searchTerm: 'x' } } } },
    { type: 'turnEnded' },
  ] }, { interaction: () => ({ approved: {}, note: Buffer.from('x') }) })
  try {
    const turn = client.newSession().prompt('search')
    await drain(turn)
    const response = backend.records()[0].messages.find((m) => m.kind === 'interactionResponse')
    assert.ok(response, 'the query is answered')
    assert.equal(JSON.stringify(response.message).includes('approved'), false, 'not approved on a bad answer')
  } finally {
    close()
  }
})
