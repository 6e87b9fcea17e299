//! The answers to the newer exec branches through the embedded backend on both transports:
//! each request reaches the host with its real fields, and the server records the typed answer
//! (the built-in tools' for the `pi_*` family, `mini_swe_agent_bash` and `git_diff_request`,
//! this client's own defaults for prechecks, canvas diagnostics, conversation search and
//! agent-store conflicts). Also what every answer carries (the local execution time, hook
//! contexts when accepted) and when a streaming shell's `start` goes out.

mod common;

use std::sync::{Arc, Mutex};
use std::time::Duration;

#[path = "common/plain_config.rs"]
mod plain_config;
use cursor_acp_core::acp;
use cursor_acp_core::host::{ExecContext, ExecEvent, ExecRequest, Host};
use cursor_acp_core::session::{AgentClient, SessionOptions, Timing};
use cursor_acp_core::tools::LocalTools;
use cursor_acp_core::transport::TransportKind;
use cursor_acp_core::CoreError;
use cursor_acp_embedded::{EmbeddedBackend, RunRecord, Scenario};
use futures::future::BoxFuture;
use plain_config::plain_config;
use serde_json::{json, Value};

const KINDS: [TransportKind; 2] = [TransportKind::Sse, TransportKind::H2];

type ExecFn = dyn Fn(ExecRequest, ExecContext) -> BoxFuture<'static, Result<Option<Value>, CoreError>> + Send + Sync;

/// A host that records every request it is given, then answers through `answer`.
#[derive(Clone)]
struct Recording {
    seen: Arc<Mutex<Vec<ExecRequest>>>,
    answer: Arc<ExecFn>,
}

impl Recording {
    fn new(
        answer: impl Fn(ExecRequest, ExecContext) -> BoxFuture<'static, Result<Option<Value>, CoreError>>
            + Send
            + Sync
            + 'static,
    ) -> Self {
        Recording { seen: Arc::default(), answer: Arc::new(answer) }
    }

    /// The built-in tools, as the stdio agent and `tools:` hosts use them.
    fn tools(tools: LocalTools) -> Self {
        Recording::new(move |req, ctx| {
            let tools = tools.clone();
            Box::pin(async move { tools.run(&req, &ctx).await })
        })
    }

    fn seen(&self, kind: &str) -> ExecRequest {
        let seen = self.seen.lock().unwrap();
        seen.iter().find(|r| r.kind == kind).cloned().unwrap_or_else(|| panic!("no {kind} request among {seen:?}"))
    }
}

impl Host for Recording {
    fn exec(&self, request: ExecRequest, ctx: ExecContext) -> BoxFuture<'static, Result<Option<Value>, CoreError>> {
        self.seen.lock().unwrap().push(request.clone());
        (self.answer)(request, ctx)
    }
}

fn timing() -> Timing {
    Timing {
        exec_heartbeat: Duration::from_millis(100),
        callback: Duration::from_secs(10),
        drain: Duration::from_secs(2),
        ..Timing::default()
    }
}

/// Plays `steps` (then `turnEnded`) on `kind` with `host`; what the server recorded.
async fn play(steps: Vec<Value>, kind: TransportKind, host: Recording) -> RunRecord {
    let mut steps = steps;
    steps.push(json!({ "type": "turnEnded" }));
    let backend = EmbeddedBackend::start(Scenario::from_json(&json!({ "steps": steps })).unwrap()).await.unwrap();
    let config = plain_config(backend.url(), kind, timing());
    let client = AgentClient::new(config, Arc::new(host), None).unwrap();
    let session = client.new_session(SessionOptions::default()).unwrap();
    let turn = session.prompt(vec![acp::ContentBlock::Text(acp::TextContent::new("go"))]).unwrap();
    while tokio::time::timeout(Duration::from_secs(20), turn.next()).await.expect("updates settle").is_some() {}
    assert_eq!(turn.result().await.unwrap().stop_reason, acp::StopReason::EndTurn, "{kind:?}");
    backend.records().remove(0)
}

/// What the client sent about exec `id`, in order (stream events, result, throw, close).
fn replies(record: &RunRecord, id: u64) -> Vec<Value> {
    record
        .messages
        .iter()
        .map(|m| m.message.clone())
        .filter(|m| {
            m["execClientMessage"]["id"] == id
                || m["execClientControlMessage"]["throw"]["id"] == id
                || m["execClientControlMessage"]["streamClose"]["id"] == id
        })
        .collect()
}

/// The one typed answer to exec `id`: its `ExecClientMessage`, checked to be followed by
/// `stream_close` and to say how long the client worked on it.
fn answer(record: &RunRecord, id: u64) -> Value {
    let all = replies(record, id);
    assert_eq!(all.len(), 2, "exec {id}: {all:#?}");
    assert_eq!(all[1]["execClientControlMessage"]["streamClose"]["id"], id);
    let exec = all[0]["execClientMessage"].clone();
    assert!(exec["localExecutionTimeMs"].as_i64().is_some_and(|ms| ms >= 0), "exec {id}: {exec}");
    exec
}

fn exec(id: u32, args: Value) -> Value {
    json!({ "type": "exec", "id": id, "args": args })
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_pi_family_mini_swe_bash_and_git_diff_are_answered_by_the_built_in_tools() {
    let f = common::Fixture::new();
    let root = f.root();
    f.file("notes.txt", "alpha\nbeta\n");
    std::process::Command::new("git").args(["init", "-q"]).current_dir(&root).status().unwrap();
    for kind in KINDS {
        let host = Recording::tools(f.tools.clone());
        let steps = vec![
            exec(1, json!({ "piReadArgs": { "path": "notes.txt", "offset": 2, "limit": 1 } })),
            exec(2, json!({ "piWriteArgs": { "path": "out/w.txt", "content": "written" } })),
            exec(
                3,
                json!({ "piEditArgs": { "path": "notes.txt", "edits": [{ "oldText": "beta", "newText": "gamma" }] } }),
            ),
            exec(4, json!({ "piGrepArgs": { "pattern": "gam", "ignoreCase": true, "limit": 5 } })),
            exec(5, json!({ "piFindArgs": { "pattern": "*.txt", "path": "out" } })),
            exec(6, json!({ "piLsArgs": { "path": "out" } })),
            exec(7, json!({ "piBashArgs": { "command": "echo from-bash", "timeout": 5 } })),
            exec(8, json!({ "miniSweAgentBashArgs": { "command": "echo swe", "timeout": 5000 } })),
            exec(9, json!({ "gitDiffRequest": { "targetPaths": ["notes.txt"], "maxUntrackedFiles": 5 } })),
        ];
        let r = play(steps, kind, host.clone()).await;
        // The requests reached the host with their fields.
        assert_eq!(host.seen("piRead").args, json!({ "path": "notes.txt", "offset": 2, "limit": 1 }));
        assert_eq!(host.seen("piEdit").args["edits"][0], json!({ "oldText": "beta", "newText": "gamma" }));
        assert_eq!(host.seen("piGrep").args, json!({ "pattern": "gam", "ignoreCase": true, "limit": 5 }));
        assert_eq!(host.seen("piBash").args, json!({ "command": "echo from-bash", "timeout": 5.0 }));
        assert_eq!(host.seen("miniSweAgentBash").args["timeout"], 5000);
        assert_eq!(host.seen("gitDiffRequest").args["targetPaths"], json!(["notes.txt"]));
        // The server got the typed answers, each in the branch named after its request.
        assert_eq!(
            answer(&r, 1)["piReadResult"]["success"]["output"],
            "beta\n\n[1 more lines in file. Use offset=3 to continue]"
        );
        assert_eq!(answer(&r, 2)["piWriteResult"]["success"]["output"], "Successfully wrote 7 bytes to out/w.txt");
        assert_eq!(answer(&r, 3)["piEditResult"]["success"]["firstChangedLine"], 2);
        assert_eq!(answer(&r, 4)["piGrepResult"]["success"]["output"], "notes.txt:2: gamma");
        assert_eq!(answer(&r, 5)["piFindResult"]["success"]["output"], "w.txt");
        assert_eq!(answer(&r, 6)["piLsResult"]["success"]["output"], "w.txt");
        assert_eq!(answer(&r, 7)["piBashResult"]["success"]["output"], "from-bash\n");
        assert_eq!(answer(&r, 8)["miniSweAgentBashResult"]["success"]["stdout"], "swe\n");
        let diff = answer(&r, 9);
        let file = &diff["gitDiffResponse"]["diff"]["diffs"][0];
        assert_eq!((file["from"].as_str(), file["to"].as_str()), (Some("/dev/null"), Some("notes.txt")), "{diff}");
        assert_eq!(file["chunks"][0]["lines"], json!(["+alpha", "+gamma"]));
        // Put back for the other transport.
        f.file("notes.txt", "alpha\nbeta\n");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn prechecks_canvas_search_and_agent_store_get_this_clients_typed_defaults() {
    for kind in KINDS {
        let host = Recording::new(|_, _| Box::pin(async { Ok(None) }));
        let steps = vec![
            exec(
                1,
                json!({ "shellAllowlistPrecheckArgs": { "command": "rm -rf build", "workingDirectory": "/w",
                "parsingResult": { "executableCommands": [{ "name": "rm", "fullText": "rm -rf build" }] }, "toolCallId": "t1" } }),
            ),
            exec(
                2,
                json!({ "mcpAllowlistPrecheckArgs": { "providerIdentifier": "github", "toolName": "create_issue" } }),
            ),
            exec(3, json!({ "webFetchAllowlistPrecheckArgs": { "url": "https://docs.rs" } })),
            exec(4, json!({ "canvasDiagnosticsArgs": { "path": "board.canvas", "toolCallId": "t4" } })),
            exec(5, json!({ "conversationSearchArgs": { "query": "flaky test", "limit": 3 } })),
            exec(
                6,
                json!({ "agentStoreConflictArgs": { "cursor": { "journalEpoch": "e", "seq": "7" }, "advance": true } }),
            ),
        ];
        let r = play(steps, kind, host.clone()).await;
        let shell = host.seen("shellAllowlistPrecheck");
        assert_eq!(shell.args["parsingResult"]["executableCommands"][0]["name"], "rm");
        assert_eq!(host.seen("mcpAllowlistPrecheck").args["toolName"], "create_issue");
        assert_eq!(host.seen("agentStoreConflict").args["cursor"]["seq"], "7");
        for (id, branch) in [
            (1, "shellAllowlistPrecheckResult"),
            (2, "mcpAllowlistPrecheckResult"),
            (3, "webFetchAllowlistPrecheckResult"),
        ] {
            // `allowlisted: false` is proto3's default: the result is there, empty.
            assert_eq!(answer(&r, id)[branch], json!({}), "{kind:?} {branch}");
        }
        assert_eq!(answer(&r, 4)["canvasDiagnosticsResult"]["error"]["path"], "board.canvas");
        assert!(answer(&r, 5)["conversationSearchResult"]["error"]["error"]
            .as_str()
            .unwrap()
            .contains("not available"));
        assert!(answer(&r, 6)["agentStoreConflictResult"]["error"]["error"].is_string());
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_hosts_answer_wins_over_the_default_and_hook_contexts_go_only_where_accepted() {
    let host = Recording::new(|req, ctx| {
        Box::pin(async move {
            #[allow(
                clippy::let_underscore_must_use,
                reason = "the exec may be over already; the test asserts on what reached the server"
            )]
            let _ =
                ctx.events.send(ExecEvent::HookContext { hook_event_name: "afterShell".into(), content: "ok".into() });
            Ok((req.kind == "shellAllowlistPrecheck").then(|| json!({ "allowlisted": true })))
        })
    });
    for kind in KINDS {
        let steps = vec![
            json!({ "type": "send", "message": { "execServerMessage": {
                "id": 1, "execId": "x1", "acceptHookAdditionalContexts": true,
                "shellAllowlistPrecheckArgs": { "command": "ls" } } } }),
            json!({ "type": "awaitExec", "id": 1 }),
            exec(2, json!({ "webFetchAllowlistPrecheckArgs": { "url": "https://x" } })),
        ];
        let r = play(steps, kind, host.clone()).await;
        let first = answer(&r, 1);
        assert_eq!(first["shellAllowlistPrecheckResult"], json!({ "allowlisted": true }));
        assert_eq!(first["hookAdditionalContexts"], json!([{ "hookEventName": "afterShell", "content": "ok" }]));
        let second = answer(&r, 2);
        assert!(second.get("hookAdditionalContexts").is_none(), "not accepted, not sent: {second}");
    }
}

/// The streaming shell's events, as `start`, `stdout`, `exit`, `rejected`, … then `result`/`close`.
fn shell_events(record: &RunRecord, id: u64) -> Vec<String> {
    replies(record, id)
        .iter()
        .map(|m| {
            if let Some(event) = m["execClientMessage"]["shellStream"].as_object() {
                event.keys().next().unwrap().clone()
            } else if let Some(result) = m["execClientMessage"]["shellResult"].as_object() {
                format!(
                    "result.{}",
                    result.keys().find(|k| !["pid", "isBackground", "terminalsFolder"].contains(&k.as_str())).unwrap()
                )
            } else {
                "close".into()
            }
        })
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_streaming_shell_is_started_only_when_its_process_is() {
    let f = common::Fixture::new();
    let tools = f.tools.clone();
    let host = Recording::new(move |req, ctx| {
        let tools = tools.clone();
        Box::pin(async move {
            match req.args["command"].as_str().unwrap_or_default() {
                // A permission prompt the user answers "Reject" after a while.
                "rm -rf /" => {
                    tokio::time::sleep(Duration::from_millis(500)).await;
                    Ok(Some(json!({ "rejected": { "command": "rm -rf /", "reason": "User rejected" } })))
                }
                "sudo x" => Ok(Some(json!({ "permissionDenied": { "command": "sudo x", "error": "not allowed" } }))),
                "broken" => Err(CoreError::Callback("the prompt failed".into())),
                "host-started" => {
                    ctx.started();
                    tokio::time::sleep(Duration::from_millis(50)).await;
                    Err(CoreError::Callback("died after it started".into()))
                }
                _ => tools.run(&req, &ctx).await,
            }
        })
    });
    for kind in KINDS {
        let steps = vec![
            exec(1, json!({ "shellStreamArgs": { "command": "rm -rf /" } })),
            exec(2, json!({ "shellStreamArgs": { "command": "sudo x" } })),
            exec(3, json!({ "shellStreamArgs": { "command": "echo built-in; exit 4" } })),
            exec(4, json!({ "shellStreamArgs": { "command": "cd", "workingDirectory": "/nowhere-at-all" } })),
            exec(5, json!({ "shellStreamArgs": { "command": "broken" } })),
            exec(6, json!({ "shellStreamArgs": { "command": "host-started" } })),
            exec(7, json!({ "shellStreamArgs": { "command": "sleep 30", "isBackground": true } })),
        ];
        let r = play(steps, kind, host.clone()).await;
        assert_eq!(shell_events(&r, 1), ["rejected", "result.rejected", "close"], "{kind:?}: no start, no exit");
        assert_eq!(shell_events(&r, 2), ["permissionDenied", "result.permissionDenied", "close"]);
        assert_eq!(shell_events(&r, 3), ["start", "stdout", "exit", "result.failure", "close"]);
        let exit = &replies(&r, 3)[2]["execClientMessage"]["shellStream"]["exit"];
        assert_eq!(exit["code"], 4);
        assert!(exit["localExecutionTimeMs"].is_number(), "{exit}");
        assert_eq!(shell_events(&r, 4), ["rejected", "result.rejected", "close"], "outside the workspace");
        assert_eq!(shell_events(&r, 5), ["result.spawnError", "close"], "a failed host never started it");
        assert_eq!(shell_events(&r, 6), ["start", "exit", "result.failure", "close"]);
        assert_eq!(shell_events(&r, 7), ["start", "backgrounded", "result.success", "close"]);
        let backgrounded = &replies(&r, 7)[1]["execClientMessage"]["shellStream"]["backgrounded"];
        assert_eq!(backgrounded["command"], "sleep 30");
        assert!(backgrounded["pid"].is_number(), "{backgrounded}");
    }
    f.tools.close();
}
