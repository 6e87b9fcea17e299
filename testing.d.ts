// `cursor-acp-native/testing` (testing.js): the embedded backend, and the bench namespace of
// builds made with it.
import type { bench as nativeBench } from './native'

export { EmbeddedBackend, startEmbeddedBackend } from './native'
export type { EmbeddedAuthOptions, EmbeddedBackendOptions, RunRecord, Scenario, ScenarioStep, UsableModel } from './native'
/** Measurement helpers for the benchmarks: `undefined` unless the addon was built with `--features bench`. */
export declare const bench: typeof nativeBench | undefined
