//! The turn loop against the embedded backend over real sockets, on both transports: a full
//! turn, what the server recorded, multi-turn checkpoints, heartbeats, cancel, resume, errors.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use base64::Engine as _;
#[path = "common/plain_config.rs"]
mod plain_config;
use cursor_acp_core::acp;
use cursor_acp_core::host::*;
use cursor_acp_core::proto::agent::v1 as pb;
use cursor_acp_core::session::*;
use cursor_acp_core::transport::*;
use cursor_acp_core::CoreError;
use cursor_acp_embedded::{EmbeddedBackend, RunRecord, Scenario};
use futures::future::BoxFuture;
use plain_config::plain_config;
use prost::Message as _;
use serde_json::{json, Value};

const KINDS: [TransportKind; 2] = [TransportKind::Sse, TransportKind::H2];

type ExecFn = dyn Fn(ExecRequest, ExecContext) -> BoxFuture<'static, Result<Option<Value>, CoreError>> + Send + Sync;

#[derive(Clone)]
struct TestHost {
    exec: Arc<ExecFn>,
    answer_interactions: bool,
    calls: Arc<AtomicUsize>,
}

impl TestHost {
    fn reading() -> Self {
        TestHost {
            exec: Arc::new(|req, ctx| {
                Box::pin(async move {
                    match req.kind.as_str() {
                        "read" => Ok(Some(
                            json!({ "success": { "path": req.args["path"], "content": "file body", "totalLines": 1 } }),
                        )),
                        "shellStream" => {
                            ctx.stdout("line 1\n".into());
                            ctx.stderr("warn\n".into());
                            Ok(Some(
                                json!({ "success": { "command": req.args["command"], "exitCode": 0, "stdout": "line 1\n" } }),
                            ))
                        }
                        _ => Ok(None),
                    }
                })
            }),
            answer_interactions: true,
            calls: Arc::default(),
        }
    }

    fn with_exec(
        f: impl Fn(ExecRequest, ExecContext) -> BoxFuture<'static, Result<Option<Value>, CoreError>> + Send + Sync + 'static,
    ) -> Self {
        TestHost { exec: Arc::new(f), answer_interactions: false, calls: Arc::default() }
    }
}

impl Host for TestHost {
    fn exec(&self, request: ExecRequest, ctx: ExecContext) -> BoxFuture<'static, Result<Option<Value>, CoreError>> {
        self.calls.fetch_add(1, Ordering::SeqCst);
        (self.exec)(request, ctx)
    }

    fn interaction(
        &self,
        query: InteractionRequest,
        _cancel: tokio_util::sync::CancellationToken,
    ) -> BoxFuture<'static, Result<Option<Value>, CoreError>> {
        let answer = self.answer_interactions;
        Box::pin(async move {
            if !answer {
                return Ok(None);
            }
            assert_eq!(query.kind, "webSearch");
            Ok(Some(json!({ "approved": {} })))
        })
    }
}

fn fast_timing() -> Timing {
    Timing {
        client_heartbeat: Duration::from_millis(100),
        exec_heartbeat: Duration::from_millis(100),
        stall: Duration::from_millis(800),
        cancel_grace: Duration::from_millis(300),
        callback: Duration::from_secs(5),
        drain: Duration::from_secs(1),
        resume_attempts: 2,
        resume_backoff: Duration::from_millis(20),
        resume_backoff_max: Duration::from_millis(100),
        retry_after_max: Duration::from_secs(5),
        queue: 64,
    }
}

async fn setup(scenario: Value, kind: TransportKind, host: TestHost, timing: Timing) -> (EmbeddedBackend, AgentClient) {
    let backend = EmbeddedBackend::start(Scenario::from_json(&scenario).unwrap()).await.unwrap();
    let config = plain_config(backend.url(), kind, timing);
    let client = AgentClient::new(config, Arc::new(host), None).unwrap();
    (backend, client)
}

/// A session over RunSSE whose turns queue at most 4 updates: a turn nobody reads fills it fast.
async fn session_with_a_queue_of_4(scenario: Value) -> (EmbeddedBackend, AgentClient, Session) {
    let mut timing = fast_timing();
    timing.queue = 4;
    let (backend, client) = setup(scenario, TransportKind::Sse, TestHost::reading(), timing).await;
    let session = client.new_session(SessionOptions::default()).unwrap();
    (backend, client, session)
}

async fn collect(turn: &Turn) -> Vec<Value> {
    let mut out = Vec::new();
    while let Some(u) = tokio::time::timeout(Duration::from_secs(10), turn.next()).await.expect("updates settle") {
        out.push(serde_json::to_value(u).unwrap());
    }
    out
}

/// Merges adjacent chunks of one message, so assertions do not depend on how the consumer's
/// timing coalesced them.
fn merged(updates: Vec<Value>) -> Vec<Value> {
    let mut out: Vec<Value> = Vec::new();
    for u in updates {
        if let Some(last) = out.last_mut() {
            if last["sessionUpdate"] == u["sessionUpdate"]
                && last["messageId"] == u["messageId"]
                && last["content"]["text"].is_string()
                && u["content"]["text"].is_string()
            {
                let joined =
                    format!("{}{}", last["content"]["text"].as_str().unwrap(), u["content"]["text"].as_str().unwrap());
                last["content"]["text"] = Value::String(joined);
                continue;
            }
        }
        out.push(u);
    }
    out
}

fn text(prompt: &str) -> Vec<acp::ContentBlock> {
    vec![acp::ContentBlock::Text(acp::TextContent::new(prompt))]
}

fn kinds(r: &RunRecord) -> Vec<String> {
    r.messages.iter().map(|m| m.kind.clone()).filter(|k| k != "clientHeartbeat").collect()
}

fn full_turn() -> Value {
    json!({ "steps": [
        { "type": "thinking", "text": "Let me " },
        { "type": "thinking", "text": "look." },
        { "type": "thinkingCompleted", "durationMs": 3 },
        { "type": "text", "text": "Reading" },
        { "type": "toolCallStarted", "callId": "c1", "toolCall": { "readToolCall": { "args": { "path": "/w/a.txt" } } } },
        { "type": "exec", "id": 1, "args": { "readArgs": { "path": "/w/a.txt", "toolCallId": "c1" } } },
        { "type": "toolCallCompleted", "callId": "c1", "toolCall": { "readToolCall": {
            "args": { "path": "/w/a.txt" }, "result": { "success": { "content": "file body" } } } } },
        { "type": "exec", "id": 2, "args": { "shellStreamArgs": { "command": "make", "workingDirectory": "/w" } } },
        { "type": "kvSet", "id": 3, "data": "remember me" },
        { "type": "kvGet", "id": 4, "blobId": "6c07a4c7de4b5e4b4f1a2b8c68c5e5b76e5bb1c3c8e0c0f5cb5a7a8e1a1d1c1b" },
        { "type": "interaction", "id": 5, "query": { "webSearchRequestQuery": { "args": { "searchTerm": "acp" } } } },
        { "type": "checkpoint", "state": { "tokenDetails": { "usedTokens": 1200, "maxTokens": 200000 } } },
        { "type": "text", "text": " done." },
        { "type": "turnEnded", "inputTokens": 10, "outputTokens": 20, "cacheReadTokens": 1 }
    ]})
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_full_turn_on_both_transports() {
    for kind in KINDS {
        let (backend, client) = setup(full_turn(), kind, TestHost::reading(), fast_timing()).await;
        let session = client.new_session(SessionOptions { cwd: Some("/w".into()), ..Default::default() }).unwrap();
        let turn = session.prompt(text("Read a.txt")).unwrap();
        let updates = merged(collect(&turn).await);
        let result = turn.result().await.unwrap();
        assert_eq!(result.stop_reason, acp::StopReason::EndTurn, "{kind:?}");
        assert_eq!(result.usage.unwrap().input_tokens, 10);

        let kinds_seen: Vec<&str> = updates.iter().map(|u| u["sessionUpdate"].as_str().unwrap()).collect();
        assert_eq!(
            kinds_seen,
            [
                "agent_thought_chunk",
                "agent_message_chunk",
                "tool_call",
                "tool_call_update",
                "usage_update",
                "agent_message_chunk"
            ],
            "{kind:?}: {updates:#?}"
        );
        // Thought deltas of one segment share an id and were coalesced or kept in order.
        assert_eq!(updates[0]["content"]["text"], "Let me look.");
        assert_ne!(updates[0]["messageId"], updates[1]["messageId"]);
        assert_eq!(updates[2]["toolCallId"], "c1");
        assert_eq!(updates[2]["kind"], "read");
        assert_eq!(updates[2]["status"], "in_progress");
        assert_eq!(updates[2]["locations"][0]["path"], "/w/a.txt");
        assert_eq!(updates[3]["status"], "completed");
        assert_eq!(updates[4], json!({ "sessionUpdate": "usage_update", "used": 1200, "size": 200000 }));
        // Text after a tool call is a new message.
        assert_ne!(updates[1]["messageId"], updates[5]["messageId"]);

        let records = backend.records();
        let r = &records[0];
        assert_eq!(r.outcome.as_deref(), Some("end"));
        let run = &r.messages[0].message["runRequest"];
        assert_eq!(run["conversationId"], session.conversation_id());
        assert_eq!(run["action"]["userMessageAction"]["userMessage"]["text"], "Read a.txt");
        assert_eq!(run["action"]["userMessageAction"]["requestContext"]["env"]["workspacePaths"][0], "/w");
        let k = kinds(r);
        assert_eq!(k[0], "runRequest");
        // read: result, then stream_close.
        let read_result =
            r.messages.iter().position(|m| m.message["execClientMessage"]["readResult"].is_object()).unwrap();
        assert_eq!(
            r.messages[read_result].message["execClientMessage"]["readResult"]["success"]["content"],
            "file body"
        );
        assert_eq!(r.messages[read_result + 1].message["execClientControlMessage"]["streamClose"]["id"], 1);
        // shell stream: start, stdout, stderr, exit, shell_result, stream_close.
        let shell: Vec<&Value> = r
            .messages
            .iter()
            .map(|m| &m.message)
            .filter(|m| m["execClientMessage"]["id"] == 2 || m["execClientControlMessage"]["streamClose"]["id"] == 2)
            .collect();
        let shape: Vec<String> = shell
            .iter()
            .map(|m| {
                if let Some(s) = m["execClientMessage"]["shellStream"].as_object() {
                    format!("stream.{}", s.keys().next().unwrap())
                } else if m["execClientMessage"]["shellResult"].is_object() {
                    "shellResult".into()
                } else {
                    "close".into()
                }
            })
            .collect();
        assert_eq!(
            shape,
            ["stream.start", "stream.stdout", "stream.stderr", "stream.exit", "shellResult", "close"],
            "{kind:?}"
        );
        assert_eq!(
            shell[3]["execClientMessage"]["shellStream"]["exit"].get("code"),
            None,
            "exit code 0 (default, omitted)"
        );
        assert_eq!(shell[4]["execClientMessage"]["shellResult"]["success"]["stdout"], "line 1\n");
        // KV: the set blob is kept, the unknown get answers without data; ids echoed.
        let kv: Vec<&Value> =
            r.messages.iter().map(|m| &m.message["kvClientMessage"]).filter(|v| v.is_object()).collect();
        assert_eq!(kv[0]["id"], 3);
        assert!(kv[0]["setBlobResult"].is_object());
        assert_eq!(kv[1]["id"], 4);
        assert!(kv[1]["getBlobResult"].get("blobData").is_none());
        let ir = r.messages.iter().find(|m| m.kind == "interactionResponse").unwrap();
        assert_eq!(
            ir.message["interactionResponse"],
            json!({ "id": 5, "webSearchRequestResponse": { "approved": {} } })
        );
        let saved = session.save();
        assert!(!saved.blobs.is_empty(), "the KV set landed in the session store");
        // Without the blobs, everything else as `save` has it.
        let without = session.save_without_blobs();
        assert!(without.blobs.is_empty());
        assert_eq!(format!("{:?}", SavedSession { blobs: Vec::new(), ..saved }), format!("{without:?}"));
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn checkpoint_is_resent_byte_for_byte_including_unknown_fields() {
    // A checkpoint frame with an unknown field 99 (prost would drop it on re-encode).
    let mut state = vec![0x2a, 0x04, 0x08, 0x05, 0x10, 0x64]; // token_details{used 5, max 100}
    state.extend_from_slice(&[0x9a, 0x06, 0x03, b'x', b'y', b'z']);
    let mut msg = vec![0x1a, state.len() as u8];
    msg.extend_from_slice(&state);
    let mut frame = vec![0, 0, 0, 0, msg.len() as u8];
    frame.extend_from_slice(&msg);
    let b64 = base64::engine::general_purpose::STANDARD.encode(&frame);
    for kind in KINDS {
        let scenario = json!({ "turns": [
            [{ "type": "rawBytes", "base64": b64 }, { "type": "text", "text": "one" }, { "type": "turnEnded" }],
            [{ "type": "text", "text": "two" }, { "type": "turnEnded" }]
        ]});
        let (backend, client) = setup(scenario, kind, TestHost::reading(), fast_timing()).await;
        let session = client.new_session(SessionOptions::default()).unwrap();
        let t1 = session.prompt(text("first")).unwrap();
        collect(&t1).await;
        t1.result().await.unwrap();
        assert_eq!(session.checkpoint().unwrap().as_ref(), &state[..]);
        let t2 = session.prompt(text("second")).unwrap();
        collect(&t2).await;
        assert_eq!(t2.result().await.unwrap().stop_reason, acp::StopReason::EndTurn);
        let records = backend.records();
        assert_eq!(records.len(), 2);
        let first = &records[0].messages[0].message["runRequest"];
        let second = &records[1].messages[0].message["runRequest"];
        assert_eq!(first["conversationId"], second["conversationId"], "stable conversation id");
        assert_ne!(records[0].request_id, records[1].request_id);
        // The raw bytes of the second run request contain the checkpoint exactly.
        if kind == TransportKind::Sse {
            let append0 = records[1].appends.iter().find(|a| a.seqno == 0).unwrap();
            assert!(append0.data.contains(&hex::encode(&state)), "checkpoint spliced verbatim");
        }
        assert_eq!(second["conversationState"]["tokenDetails"]["usedTokens"], 5);
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn heartbeats_for_the_channel_and_for_running_execs() {
    let host = TestHost::with_exec(|_req, _ctx| {
        Box::pin(async move {
            tokio::time::sleep(Duration::from_millis(450)).await;
            Ok(Some(json!({ "success": { "path": "/x", "content": "" } })))
        })
    });
    for kind in KINDS {
        let scenario = json!({ "steps": [{ "type": "exec", "id": 7, "args": { "readArgs": { "path": "/x" } } }, { "type": "turnEnded" }] });
        let (backend, client) = setup(scenario, kind, host.clone(), fast_timing()).await;
        let turn = client.new_session(SessionOptions::default()).unwrap().prompt(text("x")).unwrap();
        collect(&turn).await;
        turn.result().await.unwrap();
        let r = &backend.records()[0];
        let client_beats = r.messages.iter().filter(|m| m.kind == "clientHeartbeat").count();
        let exec_beats =
            r.messages.iter().filter(|m| m.message["execClientControlMessage"]["heartbeat"]["id"] == 7).count();
        assert!(client_beats >= 3, "{kind:?}: {client_beats} client heartbeats in ~450 ms at 100 ms");
        assert!(exec_beats >= 3, "{kind:?}: {exec_beats} exec heartbeats");
        // Heartbeats stop with the exec: none after its stream_close.
        let close =
            r.messages.iter().position(|m| m.message["execClientControlMessage"]["streamClose"]["id"] == 7).unwrap();
        assert!(!r.messages[close..].iter().any(|m| m.message["execClientControlMessage"]["heartbeat"].is_object()));
    }
}

/// What the client sent about exec `id`, in order: results, throws and stream closes.
fn exec_replies(record: &RunRecord, id: u64) -> Vec<&Value> {
    record
        .messages
        .iter()
        .map(|m| &m.message)
        .filter(|m| {
            m["execClientMessage"]["id"] == id
                || m["execClientControlMessage"]["throw"]["id"] == id
                || m["execClientControlMessage"]["streamClose"]["id"] == id
        })
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn unhandled_throwing_and_hanging_callbacks_are_answered() {
    let host = TestHost::with_exec(|req, ctx| {
        Box::pin(async move {
            match req.kind.as_str() {
                "read" => Err(CoreError::Callback("disk on fire".into())),
                "ls" => {
                    ctx.cancel.cancelled().await;
                    Ok(None)
                }
                _ => Ok(None),
            }
        })
    });
    let mut timing = fast_timing();
    timing.callback = Duration::from_millis(300);
    for kind in KINDS {
        let scenario = json!({ "steps": [
            { "type": "exec", "id": 1, "args": { "fetchArgs": { "url": "https://x" } } },
            { "type": "exec", "id": 2, "args": { "readArgs": { "path": "/etc/x" } } },
            { "type": "exec", "id": 3, "args": { "lsArgs": { "path": "/" } } },
            { "type": "turnEnded" }
        ]});
        let (backend, client) = setup(scenario, kind, host.clone(), timing.clone()).await;
        let turn = client.new_session(SessionOptions::default()).unwrap().prompt(text("x")).unwrap();
        collect(&turn).await;
        assert_eq!(turn.result().await.unwrap().stop_reason, acp::StopReason::EndTurn);
        let r = &backend.records()[0];
        let by_id = |id: u64| exec_replies(r, id);
        let fetch = by_id(1);
        assert!(fetch[0]["execClientControlMessage"]["throw"]["error"].as_str().unwrap().contains("fetch"));
        assert!(fetch[1]["execClientControlMessage"]["streamClose"].is_object());
        let read = by_id(2);
        assert_eq!(read[0]["execClientMessage"]["readResult"]["error"]["error"], "callback failed: disk on fire");
        assert_eq!(read[0]["execClientMessage"]["readResult"]["error"]["path"], "/etc/x");
        let ls = by_id(3);
        assert!(
            ls[0]["execClientMessage"]["lsResult"]["error"]["error"].as_str().unwrap().contains("did not settle"),
            "{ls:?}"
        );
        assert!(ls[1]["execClientControlMessage"]["streamClose"].is_object());
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_result_too_large_to_send_is_answered_with_its_error_branch_naming_the_sizes() {
    let over = MAX_OUTBOUND_MESSAGE + 1;
    let host = TestHost::with_exec(move |req, _ctx| {
        Box::pin(async move {
            let big = "x".repeat(over);
            Ok(Some(match req.kind.as_str() {
                "read" => json!({ "success": { "path": req.args["path"], "content": big } }),
                _ => json!({ "success": { "command": req.args["command"], "exitCode": 0, "stdout": big } }),
            }))
        })
    });
    for kind in KINDS {
        let scenario = json!({ "steps": [
            { "type": "exec", "id": 1, "args": { "readArgs": { "path": "/w/huge.txt" } } },
            { "type": "exec", "id": 2, "args": { "shellStreamArgs": { "command": "cat huge", "workingDirectory": "/w" } } },
            { "type": "turnEnded" }
        ]});
        let (backend, client) = setup(scenario, kind, host.clone(), fast_timing()).await;
        let turn = client.new_session(SessionOptions::default()).unwrap().prompt(text("x")).unwrap();
        collect(&turn).await;
        assert_eq!(turn.result().await.unwrap().stop_reason, acp::StopReason::EndTurn);
        let r = &backend.records()[0];
        let read = exec_replies(r, 1);
        let error = read[0]["execClientMessage"]["readResult"]["error"]["error"].as_str().unwrap_or_else(|| {
            panic!("{kind:?}: the server saw {read:?}");
        });
        assert!(error.contains(&format!("over the {MAX_OUTBOUND_MESSAGE}-byte limit")), "{kind:?}: {error}");
        assert!(error.contains(" bytes"), "{kind:?}: the size is named: {error}");
        assert!(read[1]["execClientControlMessage"]["streamClose"].is_object());
        let shell = exec_replies(r, 2);
        let result = shell.iter().find(|m| m["execClientMessage"]["shellResult"].is_object()).expect("a shell result");
        // This host never said its shell started, so the failure is a spawn error.
        let error = result["execClientMessage"]["shellResult"]["spawnError"]["error"].as_str().unwrap_or_else(|| {
            panic!("{kind:?}: the server saw {shell:?}");
        });
        assert!(error.contains("-byte limit"), "{kind:?}: {error}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn newer_exec_branches_reach_the_host_and_are_answered_in_the_branch_named_after_them() {
    // pi_read_args is ExecServerMessage 45 but is answered by ExecClientMessage 46
    // (pi_read_result): 45 there is hook_additional_contexts. A branch the host leaves
    // unhandled gets this client's typed "not available" answer where it has one (canvas
    // diagnostics), and is otherwise thrown and closed, as before the schema knew it.
    let host = TestHost::with_exec(|req, _ctx| {
        Box::pin(async move {
            match req.kind.as_str() {
                "piRead" => {
                    assert_eq!(req.args, json!({ "path": "a.txt", "limit": 5 }));
                    Ok(Some(json!({ "success": { "output": "line 1" } })))
                }
                _ => Ok(None),
            }
        })
    });
    for kind in KINDS {
        let scenario = json!({ "steps": [
            { "type": "exec", "id": 1, "args": { "piReadArgs": { "path": "a.txt", "limit": 5 } } },
            { "type": "exec", "id": 2, "args": { "canvasDiagnosticsArgs": { "path": "c.canvas" } } },
            { "type": "exec", "id": 3, "args": { "smartModeClassifierArgs": {} } },
            { "type": "turnEnded" }
        ]});
        let (backend, client) = setup(scenario, kind, host.clone(), fast_timing()).await;
        let turn = client.new_session(SessionOptions::default()).unwrap().prompt(text("x")).unwrap();
        collect(&turn).await;
        assert_eq!(turn.result().await.unwrap().stop_reason, acp::StopReason::EndTurn);
        let r = &backend.records()[0];
        let replies = |id: u64| exec_replies(r, id);
        let read = replies(1);
        assert_eq!(
            read[0]["execClientMessage"]["piReadResult"],
            json!({ "success": { "output": "line 1" } }),
            "{kind:?}"
        );
        assert!(read[1]["execClientControlMessage"]["streamClose"].is_object());
        let canvas = replies(2);
        assert_eq!(canvas[0]["execClientMessage"]["canvasDiagnosticsResult"]["error"]["path"], "c.canvas");
        assert!(canvas[1]["execClientControlMessage"]["streamClose"].is_object());
        let classifier = replies(3);
        assert!(classifier[0]["execClientControlMessage"]["throw"]["error"]
            .as_str()
            .unwrap()
            .contains("smartModeClassifier"));
        assert!(classifier[1]["execClientControlMessage"]["streamClose"].is_object());
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cancel_during_an_exec_and_with_a_silent_server() {
    let host = TestHost::with_exec(|_req, ctx| {
        Box::pin(async move {
            ctx.cancel.cancelled().await;
            Err(CoreError::Aborted)
        })
    });
    for kind in KINDS {
        for scenario in [
            json!({ "steps": [{ "type": "text", "text": "working" }, { "type": "exec", "id": 1, "args": { "shellStreamArgs": { "command": "sleep 100" } } }] }),
            json!({ "steps": [{ "type": "text", "text": "working" }, { "type": "stall", "ms": 60000 }] }),
        ] {
            let mut timing = fast_timing();
            timing.stall = Duration::from_secs(30);
            let (backend, client) = setup(scenario, kind, host.clone(), timing).await;
            let session = client.new_session(SessionOptions::default()).unwrap();
            let turn = session.prompt(text("go")).unwrap();
            let first = turn.next().await.unwrap();
            assert!(matches!(first, acp::SessionUpdate::AgentMessageChunk(_)));
            tokio::time::sleep(Duration::from_millis(150)).await;
            let started = Instant::now();
            session.cancel();
            let rest = collect(&turn).await;
            let result = turn.result().await.unwrap();
            assert_eq!(result.stop_reason, acp::StopReason::Cancelled, "{kind:?}");
            assert!(started.elapsed() < Duration::from_millis(1500), "bounded: {:?}", started.elapsed());
            assert!(rest
                .iter()
                .all(|u| u["sessionUpdate"] != "agent_message_chunk" || u["content"]["text"] != "working"));
            // The server gets the cancel asynchronously; give it a moment.
            let mut records = backend.records();
            for _ in 0..50 {
                if records[0].messages.iter().any(|m| m.message["conversationAction"]["cancelAction"].is_object()) {
                    break;
                }
                tokio::time::sleep(Duration::from_millis(20)).await;
                records = backend.records();
            }
            let r = &records[0];
            assert!(
                r.messages.iter().any(|m| m.message["conversationAction"]["cancelAction"].is_object()),
                "{kind:?}: cancel_action sent: {:#?}",
                r.messages.iter().map(|m| &m.kind).collect::<Vec<_>>()
            );
            // The session is free for the next prompt.
            assert!(!matches!(session.prompt(text("again")), Err(CoreError::Busy)));
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cancel_closes_open_tool_calls_and_never_reports_end_turn() {
    let scenario = json!({ "steps": [
        { "type": "toolCallStarted", "callId": "t1", "toolCall": { "shellToolCall": { "args": { "command": "sleep 9" } } } },
        { "type": "awaitClient", "kind": "conversationAction" },
        { "type": "turnEnded" }
    ]});
    let (_backend, client) = setup(scenario, TransportKind::Sse, TestHost::reading(), fast_timing()).await;
    let session = client.new_session(SessionOptions::default()).unwrap();
    let turn = session.prompt(text("go")).unwrap();
    let first = serde_json::to_value(turn.next().await.unwrap()).unwrap();
    assert_eq!(first["sessionUpdate"], "tool_call");
    assert_eq!(first["title"], "sleep 9");
    turn.cancel();
    let rest = collect(&turn).await;
    assert_eq!(
        turn.result().await.unwrap().stop_reason,
        acp::StopReason::Cancelled,
        "turn_ended after cancel is still cancelled"
    );
    let last = rest.last().unwrap();
    assert_eq!(last["toolCallId"], "t1");
    assert_eq!(last["status"], "failed");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn resume_after_a_drop_and_after_a_stall() {
    for kind in KINDS {
        for fault in [json!({ "type": "drop" }), json!({ "type": "stall", "ms": 5000 }), json!({ "type": "close" })] {
            let scenario = json!({ "turns": [
                // The pause lets "par" reach the client before the fault (an RST may discard
                // frames still in flight, as on a real network).
                [{ "type": "checkpoint", "state": { "readPaths": ["/a"] } }, { "type": "text", "text": "par" },
                 { "type": "sleep", "ms": 50 }, fault],
                [{ "type": "text", "text": "tial" }, { "type": "turnEnded" }]
            ]});
            let (backend, client) = setup(scenario, kind, TestHost::reading(), fast_timing()).await;
            let turn = client.new_session(SessionOptions::default()).unwrap().prompt(text("go")).unwrap();
            let updates = collect(&turn).await;
            assert_eq!(turn.result().await.unwrap().stop_reason, acp::StopReason::EndTurn, "{kind:?} {fault}");
            let text: String = updates.iter().filter_map(|u| u["content"]["text"].as_str()).collect();
            assert_eq!(text, "partial");
            let records = backend.records();
            assert_eq!(records.len(), 2, "{kind:?} {fault}: one resume");
            let resume = &records[1].messages[0].message["runRequest"];
            assert!(resume["action"]["resumeAction"].is_object(), "{resume}");
            assert_eq!(resume["conversationState"]["readPaths"][0], "/a", "latest checkpoint sent");
            assert_ne!(records[0].request_id, records[1].request_id);
            assert_eq!(records[0].headers["x-original-request-id"], records[1].headers["x-original-request-id"]);
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stall_is_counted_from_the_last_frame_not_the_first() {
    // The stall window is 800 ms. Frames 300 ms apart for 1.5 s keep the stream alive; the
    // silence after them is a stall, found 800 ms after the last frame, and the turn resumes.
    for kind in KINDS {
        let mut first = vec![json!({ "type": "text", "text": "a" })];
        for _ in 0..5 {
            first.push(json!({ "type": "sleep", "ms": 300 }));
            first.push(json!({ "type": "text", "text": "a" }));
        }
        first.push(json!({ "type": "stall", "ms": 5000 }));
        let scenario = json!({ "turns": [first, [{ "type": "text", "text": "b" }, { "type": "turnEnded" }]] });
        let (backend, client) = setup(scenario, kind, TestHost::reading(), fast_timing()).await;
        let started = std::time::Instant::now();
        let turn = client.new_session(SessionOptions::default()).unwrap().prompt(text("go")).unwrap();
        let updates = collect(&turn).await;
        assert_eq!(turn.result().await.unwrap().stop_reason, acp::StopReason::EndTurn, "{kind:?}");
        let took = started.elapsed();
        let text: String = updates.iter().filter_map(|u| u["content"]["text"].as_str()).collect();
        assert_eq!(text, "aaaaaab", "{kind:?}: no resume while frames came");
        assert_eq!(backend.records().len(), 2, "{kind:?}: one resume, after the silence");
        assert!(took >= Duration::from_millis(2300), "{kind:?}: the stall was found {took:?} after the start");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn resume_gives_up_after_bounded_attempts() {
    let scenario = json!({ "steps": [{ "type": "drop" }] });
    let (backend, client) = setup(scenario, TransportKind::H2, TestHost::reading(), fast_timing()).await;
    let turn = client.new_session(SessionOptions::default()).unwrap().prompt(text("go")).unwrap();
    collect(&turn).await;
    let err = turn.result().await.unwrap_err();
    assert_eq!(err.code(), "E_NETWORK", "{err}");
    assert_eq!(backend.records().len(), 3, "first attempt + 2 resumes: {err}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn errors_map_to_stop_reasons_or_coded_errors() {
    let cases = [
        (
            json!({ "type": "error", "code": "resource_exhausted", "cursorError": "ERROR_MAX_TOKENS" }),
            Ok(acp::StopReason::MaxTokens),
        ),
        (
            json!({ "type": "error", "code": "resource_exhausted", "message": "quota", "cursorError": "ERROR_RATE_LIMITED" }),
            Err("E_SERVER"),
        ),
        (json!({ "type": "error", "code": "unauthenticated", "message": "bad token" }), Err("E_AUTH")),
        (json!({ "type": "garbage" }), Err("E_PROTOCOL")),
    ];
    for (step, expected) in cases {
        let (_b, client) =
            setup(json!({ "steps": [step] }), TransportKind::Sse, TestHost::reading(), fast_timing()).await;
        let turn = client.new_session(SessionOptions::default()).unwrap().prompt(text("go")).unwrap();
        collect(&turn).await;
        match (turn.result().await, expected) {
            (Ok(r), Ok(reason)) => assert_eq!(r.stop_reason, reason),
            (Err(e), Err(code)) => assert_eq!(e.code(), code, "{e}"),
            (got, want) => panic!("got {got:?}, want {want:?}"),
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_second_prompt_while_one_runs_is_busy() {
    let (_b, client) = setup(
        json!({ "steps": [{ "type": "sleep", "ms": 300 }, { "type": "turnEnded" }] }),
        TransportKind::Sse,
        TestHost::reading(),
        fast_timing(),
    )
    .await;
    let session = client.new_session(SessionOptions::default()).unwrap();
    let turn = session.prompt(text("one")).unwrap();
    let err = session.prompt(text("two")).err().unwrap();
    assert_eq!(err.code(), "E_BUSY");
    turn.result().await.unwrap();
    assert!(session.prompt(text("three")).is_ok());
}

/// The replayed conversation as (update kind, text or tool kind), chunks of one message merged.
fn replayed(updates: Vec<acp::SessionUpdate>) -> Vec<(String, String)> {
    merged(updates.into_iter().map(|u| serde_json::to_value(u).unwrap()).collect())
        .iter()
        .map(|u| {
            let kind = u["sessionUpdate"].as_str().unwrap_or_default().to_string();
            let what = u["content"]["text"].as_str().or(u["kind"].as_str()).or(u["status"].as_str());
            (kind, what.unwrap_or_default().to_string())
        })
        .collect()
}

fn pairs(expected: &[(&str, &str)]) -> Vec<(String, String)> {
    expected.iter().map(|(k, t)| (k.to_string(), t.to_string())).collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_embedded_backend_keeps_the_conversation_in_its_checkpoints_across_a_restart() {
    // Two turns (the second with a tool call), saved; then a new client and a new backend, as
    // after a restart of both: the loaded session replays both turns, and a third turn goes on
    // from the restored checkpoint.
    let scenario = json!({ "turns": [
        [{ "type": "thinking", "text": "Easy." },
         { "type": "thinkingCompleted", "durationMs": 2 },
         { "type": "text", "text": "First " },
         { "type": "text", "text": "answer." },
         { "type": "checkpoint", "state": { "tokenDetails": { "usedTokens": 10, "maxTokens": 100 } } },
         { "type": "turnEnded" }],
        [{ "type": "toolCallStarted", "callId": "c1", "toolCall": { "readToolCall": { "args": { "path": "/w/a.txt" } } } },
         { "type": "exec", "id": 1, "args": { "readArgs": { "path": "/w/a.txt", "toolCallId": "c1" } } },
         { "type": "toolCallCompleted", "callId": "c1", "toolCall": { "readToolCall": { "args": { "path": "/w/a.txt" } } },
           "resultFromExec": 1 },
         { "type": "text", "text": "Second answer." },
         { "type": "checkpoint", "state": { "tokenDetails": { "usedTokens": 20, "maxTokens": 100 } } },
         { "type": "turnEnded" }]
    ]});
    for kind in KINDS {
        let (backend, client) = setup(scenario.clone(), kind, TestHost::reading(), fast_timing()).await;
        let session = client.new_session(SessionOptions { cwd: Some("/w".into()), ..Default::default() }).unwrap();
        for prompt in ["First question", "Second question"] {
            let t = session.prompt(text(prompt)).unwrap();
            collect(&t).await;
            assert_eq!(t.result().await.unwrap().stop_reason, acp::StopReason::EndTurn, "{kind:?}");
        }
        let saved = session.save();
        // The second turn's run request carried the first turn's checkpoint, which it extended.
        let state = pb::ConversationStateStructure::decode(saved.checkpoint.clone().unwrap()).unwrap();
        assert_eq!(state.turns.len(), 2, "{kind:?}");
        assert_eq!(state.token_details.as_ref().map(|t| t.used_tokens), Some(20), "the scenario's fields are kept");
        let records = backend.records();
        let first_turns = records[1].messages[0].message["runRequest"]["conversationState"]["turns"].clone();
        assert_eq!(first_turns.as_array().map(Vec::len), Some(1), "{kind:?}: {first_turns}");
        drop((client, backend));

        let (backend, client) = setup(scenario.clone(), kind, TestHost::reading(), fast_timing()).await;
        let loaded = client.load_session(saved).unwrap();
        let expected = [
            ("user_message_chunk", "First question"),
            ("agent_thought_chunk", "Easy."),
            ("agent_message_chunk", "First answer."),
            ("user_message_chunk", "Second question"),
            ("tool_call", "read"),
            ("tool_call_update", "completed"),
            ("agent_message_chunk", "Second answer."),
        ];
        assert_eq!(replayed(loaded.replay().await), pairs(&expected), "{kind:?}");

        // The conversation goes on from the restored checkpoint (the scenario's first turn again).
        let t = loaded.prompt(text("Third question")).unwrap();
        collect(&t).await;
        t.result().await.unwrap();
        let run = &backend.records()[0].messages[0].message["runRequest"];
        assert_eq!(run["conversationState"]["turns"].as_array().map(Vec::len), Some(2), "{kind:?}");
        let again = replayed(loaded.replay().await);
        assert_eq!(again.len(), expected.len() + 3, "{kind:?}: {again:?}");
        assert_eq!(
            again[expected.len()..],
            pairs(&[
                ("user_message_chunk", "Third question"),
                ("agent_thought_chunk", "Easy."),
                ("agent_message_chunk", "First answer.")
            ])[..],
            "{kind:?}"
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_resumed_turn_is_one_turn_in_the_conversation() {
    // The first attempt checkpoints the turn, then the connection drops; the resumed attempt's
    // checkpoint continues that turn (read back from the client), not a second one.
    let scenario = json!({ "turns": [
        [{ "type": "text", "text": "par" },
         { "type": "checkpoint", "state": {} },
         { "type": "sleep", "ms": 50 },
         { "type": "drop" }],
        [{ "type": "text", "text": "tial" },
         { "type": "checkpoint", "state": {} },
         { "type": "turnEnded" }]
    ]});
    for kind in KINDS {
        let (backend, client) = setup(scenario.clone(), kind, TestHost::reading(), fast_timing()).await;
        let session = client.new_session(SessionOptions::default()).unwrap();
        let t = session.prompt(text("go")).unwrap();
        collect(&t).await;
        assert_eq!(t.result().await.unwrap().stop_reason, acp::StopReason::EndTurn, "{kind:?}");
        let records = backend.records();
        assert_eq!(records.len(), 2, "{kind:?}: one resume");
        let looked_up =
            records[1].messages.iter().find_map(|m| m.message["kvClientMessage"]["getBlobResult"].as_object());
        assert!(looked_up.is_some_and(|r| r.contains_key("blobData")), "{kind:?}: the turn was read back");
        let state = pb::ConversationStateStructure::decode(session.checkpoint().unwrap()).unwrap();
        assert_eq!(state.turns.len(), 1, "{kind:?}");
        assert_eq!(
            replayed(session.replay().await),
            pairs(&[("user_message_chunk", "go"), ("agent_message_chunk", "par"), ("agent_message_chunk", "tial")]),
            "{kind:?}"
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn save_and_load_continue_the_conversation_on_a_new_client() {
    let scenario = json!({ "turns": [
        [{ "type": "kvSet", "id": 1, "data": "turn one blob" },
         { "type": "checkpoint", "state": { "readPaths": ["/one"] } },
         { "type": "turnEnded" }],
        [{ "type": "kvGet", "id": 2, "blobId": "5c9c3b8b2d7fcdb4a2d6f0e3f0b9c7d9e5f2f0a6b0a2f9f3d1c5f3e1a6b8c2d4" },
         { "type": "turnEnded" }]
    ]});
    let backend = EmbeddedBackend::start(Scenario::from_json(&scenario).unwrap()).await.unwrap();
    let config = || plain_config(backend.url(), TransportKind::H2, fast_timing());
    let first_client = AgentClient::new(config(), Arc::new(TestHost::reading()), None).unwrap();
    let session =
        first_client.new_session(SessionOptions { model: Some("embedded-fast".into()), ..Default::default() }).unwrap();
    let t = session.prompt(text("remember")).unwrap();
    t.result().await.unwrap();
    let saved = session.save();
    // The scenario's blob, and those the checkpoint names: the backend keeps the conversation
    // with the client, as Cursor's server does.
    assert!(saved.blobs.iter().any(|(_, data)| data.as_ref() == b"turn one blob"), "{:?}", saved.blobs);
    let state = pb::ConversationStateStructure::decode(saved.checkpoint.clone().unwrap()).unwrap();
    let named: Vec<&bytes::Bytes> = state.turns.iter().chain(&state.root_prompt_messages_json).collect();
    assert_eq!(named.len(), 2, "one turn, one root prompt message (the user's)");
    assert!(named.iter().all(|id| saved.blobs.iter().any(|(blob, _)| blob == *id)), "every entry was saved");
    assert_eq!(saved.blobs.len(), 4, "the scenario's, the turn, its user message, the root prompt's");
    drop(first_client);

    let second_client = AgentClient::new(config(), Arc::new(TestHost::reading()), None).unwrap();
    let loaded = second_client.load_session(saved.clone()).unwrap();
    assert_eq!(loaded.conversation_id(), saved.conversation_id);
    let t = loaded.prompt(text("recall")).unwrap();
    t.result().await.unwrap();
    let records = backend.records();
    let run = &records[1].messages[0].message["runRequest"];
    assert_eq!(run["conversationId"], saved.conversation_id);
    assert_eq!(run["conversationState"]["readPaths"][0], "/one");
    assert_eq!(run["modelDetails"]["modelId"], "embedded-fast");
    assert_eq!(run["requestedModel"]["modelId"], "embedded-fast");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_run_of_deltas_ends_at_the_first_frame_of_another_kind() {
    // Runs merged while read from one buffer: each ends at a frame that does not continue it
    // (thinking after text, a server notice, a tool call), and that frame is the next update.
    let scenario = json!({ "steps": [
        { "type": "textBurst", "text": "ab", "count": 300 },
        { "type": "thinking", "text": "hm" },
        { "type": "thinking", "text": "m" },
        { "type": "textBurst", "text": "cd", "count": 300 },
        { "type": "update", "update": { "textDelta": { "text": "notice", "isServerNotice": true } } },
        { "type": "text", "text": "e" },
        { "type": "toolCallStarted", "callId": "c1", "toolCall": { "readToolCall": { "args": { "path": "/w/a.txt" } } } },
        { "type": "textBurst", "text": "f", "count": 3 },
        { "type": "turnEnded" }
    ]});
    for kind in KINDS {
        let (_b, client) = setup(scenario.clone(), kind, TestHost::reading(), fast_timing()).await;
        let session = client.new_session(SessionOptions { cwd: Some("/w".into()), ..Default::default() }).unwrap();
        let turn = session.prompt(text("go")).unwrap();
        let updates = merged(collect(&turn).await);
        assert_eq!(turn.result().await.unwrap().stop_reason, acp::StopReason::EndTurn, "{kind:?}");
        let seen: Vec<(&str, &str)> = updates
            .iter()
            .map(|u| (u["sessionUpdate"].as_str().unwrap(), u["content"]["text"].as_str().unwrap_or("")))
            .collect();
        let (ab, cd) = ("ab".repeat(300), "cd".repeat(300));
        let text_of = |wanted: &str| seen.iter().filter(|(k, _)| *k == wanted).map(|(_, t)| *t).collect::<Vec<_>>();
        assert_eq!(text_of("agent_thought_chunk"), ["hmm"], "{kind:?}: {seen:?}");
        let message_texts = text_of("agent_message_chunk").concat();
        assert!(message_texts.starts_with(&format!("{ab}{cd}")), "{kind:?}: {seen:?}");
        assert!(message_texts.ends_with("efff"), "{kind:?}: {seen:?}");
        let order: Vec<&str> = seen.iter().map(|(k, _)| *k).collect();
        let thought = order.iter().position(|k| *k == "agent_thought_chunk").unwrap();
        let tool = order.iter().position(|k| *k == "tool_call").unwrap();
        assert!(thought > 0 && tool > thought && tool < order.len() - 1, "{kind:?}: {order:?}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn slow_consumers_get_coalesced_text_and_result_without_iterating_does_not_hang() {
    // Turn 2 alternates text and thinking, which never merge: more updates than the queue holds.
    let alternating: Vec<Value> = (0..40)
        .flat_map(|i| {
            [json!({ "type": "text", "text": format!("t{i}") }), json!({ "type": "thinking", "text": format!("r{i}") })]
        })
        .chain([json!({ "type": "turnEnded" })])
        .collect();
    let scenario = json!({ "turns": [[{ "type": "textBurst", "text": "ab", "count": 2000 }, { "type": "turnEnded" }], alternating] });
    let mut timing = fast_timing();
    timing.queue = 16;
    let (_b, client) = setup(scenario, TransportKind::Sse, TestHost::reading(), timing).await;
    let session = client.new_session(SessionOptions::default()).unwrap();
    let turn = session.prompt(text("go")).unwrap();
    tokio::time::sleep(Duration::from_millis(300)).await; // let the queue fill
    let updates = collect(&turn).await;
    let all: String = updates.iter().map(|u| u["content"]["text"].as_str().unwrap()).collect();
    assert_eq!(all.len(), 4000, "no text lost");
    assert!(updates.len() < 2000, "adjacent chunks were merged ({} updates)", updates.len());
    assert_eq!(turn.result().await.unwrap().stop_reason, acp::StopReason::EndTurn);

    // Nobody iterates: the result still resolves (updates are discarded, and counted).
    let turn = session.prompt(text("again")).unwrap();
    let result = tokio::time::timeout(Duration::from_secs(10), turn.result()).await.expect("no deadlock");
    assert_eq!(result.unwrap().stop_reason, acp::StopReason::EndTurn);
    assert!(turn.dropped_updates() > 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn conversation_actions_and_prewarm_reach_the_server() {
    let scenario = json!({ "turns": [
        [{ "type": "awaitClient", "kind": "conversationAction" }, { "type": "turnEnded" }],
        [{ "type": "turnEnded" }],
        [{ "type": "turnEnded" }]
    ]});
    let (backend, client) = setup(scenario, TransportKind::Sse, TestHost::reading(), fast_timing()).await;
    let session =
        client.new_session(SessionOptions { model: Some("embedded-thinking".into()), ..Default::default() }).unwrap();
    let turn = session.prompt(text("work")).unwrap();
    tokio::time::sleep(Duration::from_millis(100)).await;
    session.send_action(&json!({ "cancelSubagentAction": { "subagentId": "sub-1" } })).await.unwrap();
    assert_eq!(turn.result().await.unwrap().stop_reason, acp::StopReason::EndTurn);
    let t = session.action(&json!({ "summarizeAction": {} })).unwrap();
    t.result().await.unwrap();
    session.prewarm().await.unwrap();
    let bad = session.action(&json!({ "noSuchAction": {} })).err().unwrap();
    assert_eq!(bad.code(), "E_INVALID");
    tokio::time::sleep(Duration::from_millis(100)).await;
    let records = backend.records();
    assert!(records[0]
        .messages
        .iter()
        .any(|m| m.message["conversationAction"]["cancelSubagentAction"]["subagentId"] == "sub-1"));
    assert!(records[1].messages[0].message["runRequest"]["action"]["summarizeAction"].is_object());
    assert_eq!(records.len(), 2, "a prewarm is not among the turns' records");
    let prewarms = backend.prewarms();
    let prewarm =
        prewarms.iter().flat_map(|r| &r.messages).find(|m| m.kind == "prewarmRequest").expect("prewarm recorded");
    assert_eq!(prewarms[0].turn_index, None, "a prewarm plays no turn");
    assert_eq!(prewarm.message["prewarmRequest"]["requestedModel"]["modelId"], "embedded-thinking");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_dropped_turn_never_blocks_the_session() {
    let scenario = json!({ "turns": [
        [{ "type": "textBurst", "text": "zz", "count": 500 }, { "type": "turnEnded" }],
        [{ "type": "turnEnded" }]
    ]});
    let (_b, _client, session) = session_with_a_queue_of_4(scenario).await;
    let turn = session.prompt(text("go")).unwrap();
    let _first = turn.next().await; // iterate a little, then walk away
    drop(turn);
    let started = Instant::now();
    let next = loop {
        match session.prompt(text("next")) {
            Ok(t) => break t,
            Err(e) if e.code() == "E_BUSY" && started.elapsed() < Duration::from_secs(5) => {
                tokio::time::sleep(Duration::from_millis(20)).await
            }
            Err(e) => panic!("the session stayed busy: {e}"),
        }
    };
    assert_eq!(next.result().await.unwrap().stop_reason, acp::StopReason::EndTurn);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ended_waits_for_the_turn_without_discarding_updates_or_holding_the_turn() {
    let scenario = json!({ "turns": [
        [{ "type": "text", "text": "a" }, { "type": "sleep", "ms": 300 }, { "type": "text", "text": "b" }, { "type": "turnEnded" }],
        [{ "type": "textBurst", "text": "zz", "count": 500 }, { "type": "turnEnded" }]
    ]});
    let (_b, _client, session) = session_with_a_queue_of_4(scenario).await;

    // Pending while the turn runs; resolved after; every update still readable afterwards.
    let turn = session.prompt(text("go")).unwrap();
    let ended = turn.ended();
    tokio::pin!(ended);
    assert!(tokio::time::timeout(Duration::from_millis(100), &mut ended).await.is_err(), "resolved mid-turn");
    tokio::time::timeout(Duration::from_secs(10), &mut ended).await.expect("resolves when the turn ends");
    let streamed: String = collect(&turn).await.iter().filter_map(|u| u["content"]["text"].as_str()).collect();
    assert_eq!(streamed, "ab");
    assert_eq!(turn.dropped_updates(), 0);

    // A watcher does not hold the turn: with every handle gone, the turn stops waiting for a
    // reader (its queue of 4 is full) and ends.
    let turn = session.prompt(text("next")).unwrap();
    let ended = turn.ended();
    let _first = turn.next().await;
    drop(turn);
    tokio::time::timeout(Duration::from_secs(10), ended).await.expect("the abandoned turn ends");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn on_end_hooks_run_once_after_the_result_even_for_an_abandoned_turn() {
    let scenario = json!({ "turns": [
        [{ "type": "text", "text": "a" }, { "type": "sleep", "ms": 300 }, { "type": "turnEnded" }],
        [{ "type": "textBurst", "text": "zz", "count": 500 }, { "type": "turnEnded" }]
    ]});
    let (_b, _client, session) = session_with_a_queue_of_4(scenario).await;

    let turn = session.prompt(text("go")).unwrap();
    let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel();
    let calls = Arc::new(AtomicUsize::new(0));
    let (hook_tx, hook_calls) = (tx.clone(), calls.clone());
    turn.on_end(Box::new(move || {
        hook_calls.fetch_add(1, Ordering::SeqCst);
        #[allow(
            clippy::let_underscore_must_use,
            reason = "the test may have stopped listening; the count is asserted instead"
        )]
        let _ = hook_tx.send(());
    }));
    assert!(tokio::time::timeout(Duration::from_millis(100), rx.recv()).await.is_err(), "ran mid-turn");
    tokio::time::timeout(Duration::from_secs(10), rx.recv()).await.expect("runs when the turn ends");
    // The result is out by then, and the updates are all still readable.
    let result = tokio::time::timeout(Duration::from_millis(50), turn.result()).await.expect("result ready");
    assert_eq!(result.unwrap().stop_reason, acp::StopReason::EndTurn);
    assert_eq!(collect(&turn).await.len(), 1);

    // Registered after the end: runs at once, on the caller's thread.
    let late = calls.clone();
    turn.on_end(Box::new(move || {
        late.fetch_add(1, Ordering::SeqCst);
    }));
    assert_eq!(calls.load(Ordering::SeqCst), 2, "each hook ran exactly once");

    // Every handle gone mid-turn: the turn still ends, and its hook still runs.
    let turn = session.prompt(text("next")).unwrap();
    let abandoned = tx.clone();
    turn.on_end(Box::new(move || {
        #[allow(clippy::let_underscore_must_use, reason = "the hook may run after the test stopped listening")]
        let _ = abandoned.send(());
    }));
    let _first = turn.next().await;
    drop(turn);
    tokio::time::timeout(Duration::from_secs(10), rx.recv()).await.expect("the abandoned turn's hook runs");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn result_with_settles_at_the_end_without_a_reader_holding_the_turn() {
    // More updates than the queue holds (4), none mergeable: nobody reads, so the turn must not
    // wait for a reader.
    let mut steps: Vec<Value> =
        (0..20).map(|i| json!({ "type": if i % 2 == 0 { "thinking" } else { "text" }, "text": "x" })).collect();
    steps.push(json!({ "type": "turnEnded" }));
    let scenario = json!({ "steps": steps });
    let (_b, _client, session) = session_with_a_queue_of_4(scenario).await;
    let turn = session.prompt(text("go")).unwrap();
    let (tx, rx) = tokio::sync::oneshot::channel();
    turn.result_with(Box::new(move |outcome| {
        #[allow(
            clippy::let_underscore_must_use,
            reason = "the test waits on the receiver with a timeout; a late send has nobody to reach"
        )]
        let _ = tx.send(outcome);
    }));
    let outcome = tokio::time::timeout(Duration::from_secs(10), rx).await.expect("settles").unwrap();
    assert_eq!(outcome.unwrap().stop_reason, acp::StopReason::EndTurn);
    assert!(turn.dropped_updates() > 0, "unread updates were dropped, not waited for");
    // Asked again after the end: answered at once.
    let (tx, mut rx) = tokio::sync::oneshot::channel();
    turn.result_with(Box::new(move |outcome| {
        #[allow(
            clippy::let_underscore_must_use,
            reason = "the test waits on the receiver with a timeout; a late send has nobody to reach"
        )]
        let _ = tx.send(outcome);
    }));
    assert_eq!(rx.try_recv().expect("at once").unwrap().stop_reason, acp::StopReason::EndTurn);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_default_transport_runs_turns_on_h2_or_on_http1_as_the_server_allows() {
    assert_eq!(TransportConfig::default().kind, TransportKind::Auto);
    for (http1_only, used) in [(false, "h2"), (true, "sse")] {
        let mut scenario = full_turn();
        scenario["http1Only"] = json!(http1_only);
        let (backend, client) = setup(scenario, TransportKind::Auto, TestHost::reading(), fast_timing()).await;
        let session = client.new_session(SessionOptions { cwd: Some("/w".into()), ..Default::default() }).unwrap();
        for prompt in ["Read a.txt", "And again"] {
            let turn = session.prompt(text(prompt)).unwrap();
            let updates = merged(collect(&turn).await);
            assert_eq!(turn.result().await.unwrap().stop_reason, acp::StopReason::EndTurn, "{used}");
            // The user sees the turn once: no update of an abandoned attempt, no resume notice.
            // (The second turn's usage is unchanged, so it brings no usage_update.)
            let kinds_seen: Vec<&str> = updates
                .iter()
                .map(|u| u["sessionUpdate"].as_str().unwrap())
                .filter(|&kind| kind != "usage_update")
                .collect();
            assert_eq!(
                kinds_seen,
                ["agent_thought_chunk", "agent_message_chunk", "tool_call", "tool_call_update", "agent_message_chunk"],
                "{used}: {updates:#?}"
            );
        }
        // One stream per turn reached the server, each with the turn's own message, on the
        // transport it speaks.
        let records = backend.records();
        assert_eq!(records.iter().map(|r| r.transport.as_str()).collect::<Vec<_>>(), [used, used]);
        for (r, prompt) in records.iter().zip(["Read a.txt", "And again"]) {
            assert_eq!(kinds(r)[0], "runRequest");
            let message = &r.messages[0].message["runRequest"]["action"]["userMessageAction"]["userMessage"];
            assert_eq!(message["text"], prompt, "{used}");
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn turns_started_together_all_move_to_http1_when_the_server_speaks_only_that() {
    // Every turn opens its h2 stream before any of them learns that h2 is refused; each must
    // still start over on HTTP/1.1, once, and end normally.
    let scenario = json!({ "http1Only": true, "steps": [{ "type": "text", "text": "hi" }, { "type": "turnEnded" }] });
    let (backend, client) = setup(scenario, TransportKind::Auto, TestHost::reading(), fast_timing()).await;
    let turns = (0..20).map(|i| {
        let session = client.new_session(SessionOptions::default()).unwrap();
        async move {
            let turn = session.prompt(text(&format!("turn {i}"))).unwrap();
            let updates = merged(collect(&turn).await);
            (turn.result().await.unwrap().stop_reason, updates)
        }
    });
    for (stop, updates) in futures::future::join_all(turns).await {
        assert_eq!(stop, acp::StopReason::EndTurn);
        assert_eq!(updates.len(), 1, "{updates:#?}");
        assert_eq!(updates[0]["content"]["text"], "hi");
    }
    let records = backend.records();
    assert_eq!(records.len(), 20, "one stream per turn reached the server");
    assert!(records.iter().all(|r| r.transport == "sse"));
    assert_eq!(client.active_transport(), TransportKind::Sse);
}
