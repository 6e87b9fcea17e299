//! The client's built-in tools run by the core, behind the host's permission policy, through
//! the real codec and transport against the embedded backend: what the server receives for
//! each exec, the cards the client sees, and what the host is asked (and not asked).

mod common;

use std::sync::{Arc, Mutex};
use std::time::Duration;

use cursor_acp_core::acp::{ContentBlock, SessionUpdate, TextContent, ToolCallStatus};
use cursor_acp_core::host::{ExecContext, ExecRequest, Host, McpCall, PastConversation, Permission, PermissionRequest};
use cursor_acp_core::session::{AgentClient, ClientOptions, SessionOptions};
use cursor_acp_core::{CancellationToken, CoreError};
use cursor_acp_embedded::{EmbeddedBackend, Scenario};
use futures::future::BoxFuture;
use serde_json::{json, Value};

use common::Fixture;

/// A host with a permission policy (refuses what touches `refused.txt`, allows the rest, and
/// allows prechecks for `npm` only), saved conversations and an MCP client; it records every
/// question and call, and answers no exec itself.
#[derive(Default)]
struct Policy {
    asked: Mutex<Vec<PermissionRequest>>,
    execs: Mutex<Vec<String>>,
    mcp_calls: Mutex<Vec<McpCall>>,
}

impl Host for Policy {
    fn exec(&self, request: ExecRequest, _: ExecContext) -> BoxFuture<'static, Result<Option<Value>, CoreError>> {
        self.execs.lock().unwrap().push(request.kind);
        Box::pin(async { Ok(None) })
    }

    fn permission(
        &self,
        request: PermissionRequest,
        _: CancellationToken,
    ) -> BoxFuture<'static, Result<Permission, CoreError>> {
        let answer = if !request.may_ask {
            if request.programs == ["npm"] {
                Permission::Allow
            } else {
                Permission::Reject(None)
            }
        } else if request.paths.iter().any(|p| p.ends_with("refused.txt")) {
            Permission::Reject(None)
        } else {
            Permission::Allow
        };
        self.asked.lock().unwrap().push(request);
        Box::pin(async move { Ok(answer) })
    }

    fn mcp(&self, call: McpCall, _: CancellationToken) -> BoxFuture<'static, Result<Option<Value>, CoreError>> {
        self.mcp_calls.lock().unwrap().push(call);
        Box::pin(async {
            Ok(Some(json!({ "success": { "content": [{ "text": { "text": "42" } }], "isError": false } })))
        })
    }

    fn request_context(&self) -> BoxFuture<'static, Result<Option<Value>, CoreError>> {
        Box::pin(async {
            Ok(Some(json!({ "tools": [{ "name": "calc-add", "providerIdentifier": "calc", "toolName": "add" }] })))
        })
    }

    fn past_conversations(&self) -> BoxFuture<'static, Result<Option<Vec<PastConversation>>, CoreError>> {
        let past = |id: &str, title: &str, at: i64| PastConversation {
            conversation_id: id.into(),
            title: title.into(),
            updated_at_ms: Some(at),
        };
        Box::pin(async move {
            Ok(Some(vec![
                past("old", "Fix the parser bug", 1),
                past("new", "Fix the login bug", 2),
                past("other", "Write docs", 3),
            ]))
        })
    }
}

struct Ran {
    /// The exec results the server received, by exec id.
    results: Vec<(u64, Value)>,
    updates: Vec<SessionUpdate>,
}

impl Ran {
    fn result(&self, id: u64) -> &Value {
        &self.results.iter().find(|(i, _)| *i == id).unwrap_or_else(|| panic!("no answer to exec {id}")).1
    }
}

async fn run(steps: Value, tools: &Fixture, host: Arc<Policy>) -> Ran {
    let mut steps = steps.as_array().unwrap().clone();
    steps.push(json!({ "type": "turnEnded" }));
    let backend = EmbeddedBackend::start(Scenario::from_json(&json!({ "steps": steps })).unwrap()).await.unwrap();
    let options = ClientOptions { base_url: Some(backend.url()), ..Default::default() };
    let client = AgentClient::new(options.into_config().unwrap(), host, None).unwrap().with_tools(tools.tools.clone());
    let root = tools.root().display().to_string();
    let session = client
        .new_session(SessionOptions { cwd: Some(root), conversation_id: Some("this".into()), ..Default::default() })
        .unwrap();
    let turn = session.prompt(vec![ContentBlock::Text(TextContent::new("go"))]).unwrap();
    let mut updates = Vec::new();
    while let Some(update) = tokio::time::timeout(Duration::from_secs(20), turn.next()).await.unwrap() {
        updates.push(update);
    }
    turn.result().await.unwrap();
    let results = backend.records()[0]
        .messages
        .iter()
        .map(|m| m.message["execClientMessage"].clone())
        .filter(|e| e.is_object() && e.get("streamClose").is_none() && e.get("heartbeat").is_none())
        .filter_map(|e| {
            let id = e["id"].as_u64()?;
            let result =
                e.as_object()?.iter().find(|(k, _)| k.ends_with("Result") || k.ends_with("Response"))?.1.clone();
            Some((id, result))
        })
        .collect();
    Ran { results, updates }
}

/// The (id, status) of every card update the client saw, in order.
fn card_events(updates: &[SessionUpdate]) -> Vec<(String, Option<ToolCallStatus>)> {
    updates
        .iter()
        .filter_map(|u| match u {
            SessionUpdate::ToolCall(c) => Some((c.tool_call_id.to_string(), Some(c.status))),
            SessionUpdate::ToolCallUpdate(u) => Some((u.tool_call_id.to_string(), u.fields.status)),
            _ => None,
        })
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn writes_run_when_the_policy_allows_and_are_refused_on_a_card_when_it_does_not() {
    let tools = Fixture::new();
    tools.file("refused.txt", "old\n");
    let host = Arc::new(Policy::default());
    let ran = run(
        json!([
            { "type": "exec", "id": 1, "execId": "e1", "args": { "writeArgs": { "path": "refused.txt", "fileText": "new\n" } } },
            { "type": "exec", "id": 2, "execId": "e2", "args": { "writeArgs": { "path": "made.txt", "fileText": "a\nb\n" } } },
            { "type": "exec", "id": 3, "execId": "e3", "args": { "deleteArgs": { "path": "../outside.txt" } } },
        ]),
        &tools,
        host.clone(),
    )
    .await;

    assert_eq!(ran.result(1)["rejected"]["reason"], "User rejected");
    assert_eq!(std::fs::read_to_string(tools.root().join("refused.txt")).unwrap(), "old\n", "nothing written");
    assert_eq!(ran.result(2)["success"]["linesCreated"], 2);
    assert_eq!(std::fs::read_to_string(tools.root().join("made.txt")).unwrap(), "a\nb\n");
    let outside = ran.result(3)["rejected"]["reason"].as_str().unwrap();
    assert!(outside.contains("outside the workspace"), "{outside}");

    // Two questions (the path outside the workspace is refused without one), each about a card
    // the client was told of first, with the diff of the file as it was.
    let asked = host.asked.lock().unwrap().clone();
    assert_eq!(asked.len(), 2, "{asked:?}");
    assert!(asked.iter().all(|q| q.kind == "edit" && q.may_ask));
    let root = tools.root().display().to_string();
    assert_eq!(asked[0].paths, [format!("{root}/refused.txt")]);
    assert_eq!(asked[0].tool_call["content"][0]["oldText"], "old\n");
    assert_eq!(asked[0].tool_call["content"][0]["newText"], "new\n");
    let events = card_events(&ran.updates);
    for question in &asked {
        let id = question.tool_call["toolCallId"].as_str().unwrap();
        let at = events.iter().position(|(i, s)| i == id && *s == Some(ToolCallStatus::Pending));
        assert!(at.is_some(), "the card {id} was announced: {events:?}");
    }
    // The refused write's card failed, the allowed one completed.
    let ended = |id: &str| events.iter().rev().find(|(i, s)| i == id && s.is_some()).and_then(|(_, s)| *s);
    assert_eq!(ended(asked[0].tool_call["toolCallId"].as_str().unwrap()), Some(ToolCallStatus::Failed));
    assert_eq!(ended(asked[1].tool_call["toolCallId"].as_str().unwrap()), Some(ToolCallStatus::Completed));
    assert_eq!(host.execs.lock().unwrap().len(), 3, "the host's exec callback was offered each exec once");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn reads_run_at_once_and_prechecks_ask_the_policy_without_a_question() {
    let tools = Fixture::new();
    tools.file("a.txt", "one\ntwo\n");
    let host = Arc::new(Policy::default());
    let npm = json!({ "command": "npm test", "parsingResult": { "executableCommands": [{ "name": "npm" }] } });
    let rm = json!({ "command": "rm -rf /", "parsingResult": { "executableCommands": [{ "name": "rm" }] } });
    let unparsed = json!({ "command": "npm test", "parsingResult": { "parsingFailed": true } });
    let ran = run(
        json!([
            { "type": "exec", "id": 1, "args": { "readArgs": { "path": "a.txt" } } },
            { "type": "exec", "id": 2, "args": { "lsArgs": { "path": "." } } },
            { "type": "exec", "id": 3, "args": { "shellAllowlistPrecheckArgs": npm } },
            { "type": "exec", "id": 4, "args": { "shellAllowlistPrecheckArgs": rm } },
            { "type": "exec", "id": 5, "args": { "shellAllowlistPrecheckArgs": unparsed } },
        ]),
        &tools,
        host.clone(),
    )
    .await;
    assert_eq!(ran.result(1)["success"]["content"], "one\ntwo\n");
    assert!(ran.result(2)["success"].is_object());
    assert_eq!(ran.result(3)["allowlisted"], true);
    assert_eq!(ran.result(4).get("allowlisted"), None, "false is proto3's default, left out");
    assert_eq!(ran.result(5).get("allowlisted"), None, "an unparsed command is never allowlisted");
    let asked = host.asked.lock().unwrap().clone();
    assert_eq!(asked.len(), 2, "reads ask nothing; the unparsed command is not asked about: {asked:?}");
    assert!(asked.iter().all(|q| !q.may_ask && q.kind == "execute"));
    assert_eq!(asked[1].programs, ["rm"]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn mcp_calls_resolve_against_the_request_context_and_conversation_search_finds_titles() {
    let tools = Fixture::new();
    let host = Arc::new(Policy::default());
    let ran = run(
        json!([
            { "type": "exec", "id": 1, "args": { "mcpArgs": { "name": "calc-add", "args": { "a": 1 } } } },
            { "type": "exec", "id": 2, "args": { "mcpArgs": { "providerIdentifier": "nope", "toolName": "add" } } },
            { "type": "exec", "id": 3, "args": { "mcpArgs": { "providerIdentifier": "calc", "toolName": "sub" } } },
            { "type": "exec", "id": 4, "args": { "conversationSearchArgs": { "query": "fix BUG" } } },
        ]),
        &tools,
        host.clone(),
    )
    .await;
    assert_eq!(ran.result(1)["success"]["content"][0]["text"]["text"], "42");
    assert_eq!(ran.result(2)["serverNotFound"]["availableServers"], json!(["calc"]));
    assert_eq!(ran.result(3)["toolNotFound"]["availableTools"], json!(["add"]));
    let calls = host.mcp_calls.lock().unwrap().clone();
    // Struct numbers are doubles on the wire.
    assert_eq!(calls, [McpCall::Tool { server: "calc".into(), tool: "add".into(), args: json!({ "a": 1.0 }) }]);
    let asked = host.asked.lock().unwrap().clone();
    assert_eq!(asked.len(), 1, "only the call that exists is asked about");
    assert_eq!(asked[0].mcp, Some(("calc".into(), "add".into())));

    let hits = ran.result(4)["success"]["hits"].as_array().unwrap();
    let titles: Vec<&str> = hits.iter().map(|h| h["title"].as_str().unwrap()).collect();
    assert_eq!(titles, ["Fix the login bug", "Fix the parser bug"], "every word, newest first");
    assert_eq!(hits[0]["updatedAtMs"], "2");
}

/// The text a card update shows, if any.
fn shown_text(update: &SessionUpdate) -> Option<(String, String)> {
    let SessionUpdate::ToolCallUpdate(u) = update else { return None };
    let content = serde_json::to_value(u.fields.content.as_ref()?).ok()?;
    Some((u.tool_call_id.to_string(), content[0]["content"]["text"].as_str()?.to_string()))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_running_shell_shows_its_output_on_its_card_before_it_ends() {
    let tools = Fixture::new();
    let host = Arc::new(Policy::default());
    // Output, then a pause long enough for the card to show it, then more.
    let command = "echo first; sleep 1; echo second";
    let ran = run(
        json!([
            { "type": "toolCallStarted", "callId": "sh", "toolCall": { "shellToolCall": { "args": { "command": command } } } },
            { "type": "exec", "id": 1, "args": { "shellArgs": { "command": command, "toolCallId": "sh" } }, "wait": true },
            // An exec without its tool call: the core's own card shows it too.
            { "type": "exec", "id": 2, "execId": "own", "args": { "shellArgs": { "command": "echo alone" } }, "wait": true },
        ]),
        &tools,
        host,
    )
    .await;
    assert_eq!(ran.result(1)["success"]["stdout"], "first\nsecond\n");
    let shown: Vec<(String, String)> = ran.updates.iter().filter_map(shown_text).collect();
    let on_card = |id: &str| shown.iter().filter(|(i, _)| i == id).map(|(_, t)| t.clone()).collect::<Vec<_>>();
    let sh = on_card("sh");
    assert!(
        sh.iter().any(|t| t.contains("first") && !t.contains("second")),
        "the first line was on the card while the command ran: {sh:?}"
    );
    assert!(sh.iter().any(|t| t.contains("first\nsecond")), "then all of it: {sh:?}");
    let own = ran
        .updates
        .iter()
        .find_map(|u| match u {
            SessionUpdate::ToolCall(c) if c.title.contains("echo alone") => Some(c.tool_call_id.to_string()),
            _ => None,
        })
        .expect("the own card");
    assert!(on_card(&own).iter().any(|t| t.contains("alone")), "{shown:?}");
}
