// @ts-check
// The scripted turn `--embedded` plays when no --scenario is given: thinking, a text answer, an
// ls and a shell command run locally (the shell behind a permission prompt), usage, end of turn.
// It repeats for every prompt. No account and no network are involved. The backend fills its
// checkpoint with the conversation so far, so session/load replays the thread after a restart.
// A harmless command the platform's default shell has: cmd.exe (the tools' shell on Windows) has
// no `uname`, and the demo's shell call ended failed there; its `ver` names the system instead.
const DEMO_COMMAND = process.platform === 'win32'
  ? 'echo "hello from cursor-acp-native" && ver'
  : 'echo "hello from cursor-acp-native" && uname -s'

/** @type {import('../index.js').Scenario} */
export const DEMO_SCENARIO = {
  // A person answers the permission prompt: give them time.
  waitTimeoutMs: 600_000,
  record: false,
  steps: [
    { type: 'thinking', text: 'The user wants a look at this workspace. ' },
    { type: 'thinking', text: 'I will list it, then run a harmless command.' },
    { type: 'thinkingCompleted', durationMs: 420 },
    { type: 'text', text: 'Let me look at the workspace first.\n' },
    { type: 'toolCallStarted', callId: 'demo-ls', toolCall: { lsToolCall: { args: { path: '' } } } },
    { type: 'exec', id: 1, args: { lsArgs: { path: '', toolCallId: 'demo-ls' } } },
    // The server reports each tool with the result the agent answered its exec with.
    { type: 'toolCallCompleted', callId: 'demo-ls', toolCall: { lsToolCall: { args: { path: '' } } }, resultFromExec: 1 },
    { type: 'toolCallStarted', callId: 'demo-shell', toolCall: { shellToolCall: { args: { command: DEMO_COMMAND } } } },
    { type: 'exec', id: 2, args: { shellStreamArgs: { command: DEMO_COMMAND, workingDirectory: '', toolCallId: 'demo-shell' } } },
    { type: 'toolCallCompleted', callId: 'demo-shell', toolCall: { shellToolCall: { args: { command: DEMO_COMMAND } } }, resultFromExec: 2 },
    { type: 'text', text: 'Done: I listed the workspace and ran a command on your machine, ' },
    { type: 'text', text: 'after you allowed it. This turn was played by the embedded backend.' },
    { type: 'checkpoint', state: { tokenDetails: { usedTokens: 1830, maxTokens: 200000 } } },
    { type: 'turnEnded', inputTokens: 1200, outputTokens: 630 },
  ],
}
