// The package's typings, written by hand as index.js is: the client API, from the typings
// `napi build` generates (native.d.ts). The testing helpers are typed in testing.d.ts; their
// types (options, scenarios, records) stay nameable from here.
export {
  Account,
  AgentClient,
  ExecContext,
  LocalTools,
  accessList,
  makePrivate,
  newConversationId,
  PromptTurn,
  RecordFile,
  Session,
  checkClientOptions,
  DEFAULT_BASE_URL,
  describeExec,
  describeExecResult,
  describeInteraction,
  forgetProcessGroup,
  ownCredentialVariables,
  prepareTls,
  setLogLevel,
  watchProcessGroup,
} from './native'
export type * from './native'
