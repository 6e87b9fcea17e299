// A minimal VS Code extension on cursor-acp-native: "Cursor agent: Run a turn" asks for a prompt,
// runs it through the addon and shows the ACP session/update stream in an output channel. The
// backend's tool requests are answered by the addon's built-in tools, confined to the workspace;
// shells, writes and deletes ask first. Without a `cursorAcpNative.baseUrl` setting it plays a
// scripted turn from the embedded backend, so it works without an account.
const os = require('node:os')
const vscode = require('vscode')
const { AgentClient, LocalTools } = require('cursor-acp-native')
const { startEmbeddedBackend } = require('cursor-acp-native/testing')

const TOKEN_KEY = 'cursorAcpNative.accessToken'
const ASK_FIRST = new Set(['shell', 'shellStream', 'backgroundShellSpawn', 'write', 'delete'])

// The embedded backend's turn: some text, a listing of the workspace and a shell command.
const DEMO_SCENARIO = {
  steps: [
    { type: 'text', text: 'Looking at your workspace. ' },
    { type: 'toolCallStarted', callId: 'ls', toolCall: { lsToolCall: { args: { path: '' } } } },
    { type: 'exec', id: 1, args: { lsArgs: { path: '', toolCallId: 'ls' } } },
    { type: 'toolCallCompleted', callId: 'ls', toolCall: { lsToolCall: { args: { path: '' }, result: { success: {} } } } },
    { type: 'exec', id: 2, args: { shellStreamArgs: { command: 'echo hello from the extension', workingDirectory: '' } } },
    { type: 'text', text: 'Done.' },
    { type: 'turnEnded', inputTokens: 12, outputTokens: 5 },
  ],
}

function activate(context) {
  const output = vscode.window.createOutputChannel('Cursor agent')
  context.subscriptions.push(
    output,
    vscode.commands.registerCommand('cursorAcpNative.runTurn', () => runTurn(context, output)),
    vscode.commands.registerCommand('cursorAcpNative.setAccessToken', async () => {
      const token = await vscode.window.showInputBox({ prompt: 'Cursor access token', password: true })
      if (token) await context.secrets.store(TOKEN_KEY, token)
    }),
  )
}

async function runTurn(context, output) {
  const text = await vscode.window.showInputBox({ prompt: 'Prompt', value: 'What is in this workspace?' })
  if (!text) return undefined
  const cwd = vscode.workspace.workspaceFolders?.[0]?.uri.fsPath ?? os.homedir()
  const configured = vscode.workspace.getConfiguration('cursorAcpNative').get('baseUrl')
  const backend = configured ? null : await startEmbeddedBackend({ scenario: DEMO_SCENARIO })
  const tools = new LocalTools({ roots: [cwd] })
  try {
    const client = new AgentClient({
      baseUrl: configured || backend.url,
      accessToken: configured ? await context.secrets.get(TOKEN_KEY) : undefined,
      async exec(request, ctx) {
        if (ASK_FIRST.has(request.kind) && !(await allowed(request))) {
          const reason = 'denied by the user'
          return 'command' in request.args ? { rejected: { command: request.args.command, reason } } : { rejected: { path: request.args.path, reason } }
        }
        return tools.run(request, ctx)
      },
    })
    const session = client.newSession({ cwd })
    output.show(true)
    output.appendLine(`> ${text}`)
    return await vscode.window.withProgress(
      { location: vscode.ProgressLocation.Notification, title: 'Cursor agent', cancellable: true },
      async (_progress, token) => {
        const turn = session.prompt([{ type: 'text', text }])
        token.onCancellationRequested(() => turn.cancel())
        for await (const update of turn) output.appendLine(describe(update))
        const { stopReason } = await turn.result
        output.appendLine(`stop reason: ${stopReason}`)
        return stopReason
      },
    )
  } catch (e) {
    vscode.window.showErrorMessage(`Cursor agent: ${e.message}${e.code ? ` (${e.code})` : ''}`)
    return undefined
  } finally {
    tools.close()
    backend?.close()
  }
}

async function allowed(request) {
  const what = request.args.command ?? `${request.kind} ${request.args.path}`
  return (await vscode.window.showWarningMessage(`The agent wants to run: ${what}`, { modal: true }, 'Allow')) === 'Allow'
}

function describe(update) {
  switch (update.sessionUpdate) {
    case 'agent_message_chunk':
    case 'agent_thought_chunk':
      return `${update.sessionUpdate}: ${update.content.type === 'text' ? update.content.text : update.content.type}`
    case 'tool_call':
      return `tool_call ${update.toolCallId}: ${update.title} (${update.status})`
    case 'tool_call_update':
      return `tool_call_update ${update.toolCallId}: ${update.status ?? ''}`
    default:
      return update.sessionUpdate
  }
}

function deactivate() {}

module.exports = { activate, deactivate }
