// The stdio agent asks for the account's models once per process: later sessions reuse the list
// until it is old, the answer failed, or the sign-in changed.
import { test } from 'node:test'
import assert from 'node:assert/strict'

import { ModelCache } from '../cli/model-cache.mjs'

const MODELS = [{ modelId: 'm1', displayName: 'Model one' }]

function counting(answers) {
  const fetch = () => {
    fetch.calls++
    const next = answers.shift() ?? MODELS
    return next instanceof Error ? Promise.reject(next) : Promise.resolve(next)
  }
  fetch.calls = 0
  return fetch
}

test('sessions opened together and within the time share one answer', async () => {
  let now = 0
  const cache = new ModelCache({ ttlMs: 1000, now: () => now })
  const fetch = counting([])
  const [a, b] = await Promise.all([cache.get(fetch), cache.get(fetch)])
  now = 999
  const c = await cache.get(fetch)
  assert.equal(fetch.calls, 1)
  assert.deepEqual([a, b, c], [MODELS, MODELS, MODELS])
  now = 1000
  await cache.get(fetch)
  assert.equal(fetch.calls, 2, 'asked again once the list is old')
})

test('a failed answer is not kept, and a new sign-in asks again', async () => {
  const cache = new ModelCache()
  const fetch = counting([new Error('unavailable')])
  await assert.rejects(cache.get(fetch), /unavailable/)
  await new Promise((r) => setImmediate(r))
  assert.deepEqual(await cache.get(fetch), MODELS, 'the next session asks again')
  assert.equal(fetch.calls, 2)
  await cache.get(fetch)
  assert.equal(fetch.calls, 2)
  cache.clear()
  await cache.get(fetch)
  assert.equal(fetch.calls, 3, 'cleared when the sign-in changes')
})
