// Must NOT compile: proves the exec types have teeth (types.test.mjs expects these errors).
import { AgentClient, type ExecResult, type agent } from '../../index.js'

const read: agent.ExecResultByKind['read'] = { success: 'done' } // a branch holds a message, not a string
new AgentClient({
  exec(request): ExecResult | undefined {
    return { sucess: {} } // misspelt branch
  },
})
const both: agent.ReadResult = { success: {}, error: {} } // a oneof holds one member
const bytes: agent.ReadResult = { success: { data: new Uint8Array(1) } } // byte arrays only with WithByteArrays
console.log(read, both, bytes)
