// Must NOT compile: proves the exec types have teeth (types.test.mjs expects these errors).
import { AgentClient, type ExecResult, type agent } from '../../index.js'

const read: agent.ExecResultByKind['read'] = { success: 'done' } // a branch holds a message, not a string
new AgentClient({
  exec(request): ExecResult | undefined {
    return { sucess: {} } // misspelt branch
  },
})
const both: agent.ReadResult = { success: {}, error: {} } // a oneof holds one member
console.log(read, both)
