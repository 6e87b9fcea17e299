// @ts-check
// The account's models, asked for once per process rather than once per session: an editor opens
// a session per thread, and each would otherwise wait for `GetUsableModels` before it can answer
// `session/new`. Kept for a while (the list changes rarely), dropped when the answer failed or the
// sign-in changed.

/** @typedef {import('../index.js').UsableModel} UsableModel */

/** How long the list is reused. */
export const MODELS_TTL_MS = 10 * 60_000

export class ModelCache {
  /**
   * @param {object} [o]
   * @param {number} [o.ttlMs]
   * @param {() => number} [o.now]
   */
  constructor({ ttlMs = MODELS_TTL_MS, now = Date.now } = {}) {
    this.ttlMs = ttlMs
    this.now = now
    /** @type {{ at: number, models: Promise<UsableModel[]> } | undefined} */
    this.entry = undefined
  }

  /**
   * The cached list, or `fetch()`'s (shared by everyone asking meanwhile).
   * @param {() => Promise<UsableModel[]>} fetch
   * @returns {Promise<UsableModel[]>}
   */
  get(fetch) {
    if (this.entry && this.now() - this.entry.at < this.ttlMs) return this.entry.models
    const models = fetch()
    const entry = { at: this.now(), models }
    this.entry = entry
    // A failed answer is not kept: the next session asks again.
    models.catch(() => {
      if (this.entry === entry) this.entry = undefined
    })
    return models
  }

  /** Forgets the list (the sign-in changed: another account may have other models). */
  clear() {
    this.entry = undefined
  }
}
