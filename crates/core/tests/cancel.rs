//! Cancel as a user sees it, against the embedded backend over real sockets: the backend
//! answers `cancel_action` as Cursor's server does (an abort for the exec still running, then
//! the end of the stream), so the turn resolves long before the client's own bound; and once
//! cancelled, nothing the server still sends about the turn reaches the client — no text, no
//! card flipped to `completed`.

use std::sync::Arc;
use std::time::{Duration, Instant};

#[path = "common/plain_config.rs"]
mod plain_config;
use cursor_acp_core::acp;
use cursor_acp_core::host::*;
use cursor_acp_core::session::*;
use cursor_acp_core::transport::*;
use cursor_acp_core::CoreError;
use cursor_acp_embedded::{EmbeddedBackend, Scenario};
use futures::future::BoxFuture;
use plain_config::plain_config;
use serde_json::{json, Value};

/// Execs wait until they are aborted (by the server or by cancel), then answer "aborted".
struct WaitingHost;

impl Host for WaitingHost {
    fn exec(&self, _request: ExecRequest, ctx: ExecContext) -> BoxFuture<'static, Result<Option<Value>, CoreError>> {
        Box::pin(async move {
            ctx.cancel.cancelled().await;
            Ok(Some(json!({ "failure": { "aborted": true, "exitCode": 130 } })))
        })
    }
}

async fn session(scenario: Value, kind: TransportKind, cancel_grace: Duration) -> (EmbeddedBackend, Session) {
    let backend = EmbeddedBackend::start(Scenario::from_json(&scenario).unwrap()).await.unwrap();
    let timing = Timing { cancel_grace, ..Timing::default() };
    let config = plain_config(backend.url(), kind, timing);
    let client = AgentClient::new(config, Arc::new(WaitingHost), None).unwrap();
    let session = client.new_session(SessionOptions::default()).unwrap();
    (backend, session)
}

async fn rest(turn: &Turn) -> Vec<Value> {
    let mut out = Vec::new();
    while let Some(u) = tokio::time::timeout(Duration::from_secs(10), turn.next()).await.expect("updates end") {
        out.push(serde_json::to_value(u).unwrap());
    }
    out
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_backend_aborts_the_running_exec_and_ends_the_stream_on_cancel() {
    for kind in [TransportKind::Sse, TransportKind::H2] {
        let scenario = json!({ "steps": [
            { "type": "toolCallStarted", "callId": "sh", "toolCall": { "shellToolCall": { "args": { "command": "sleep 60" } } } },
            { "type": "exec", "id": 1, "args": { "shellStreamArgs": { "command": "sleep 60", "toolCallId": "sh" } } },
            // The model at work after the tool: the cancel may come during the exec or here.
            { "type": "sleep", "ms": 30000 },
            { "type": "text", "text": "never sent" },
            { "type": "turnEnded" }
        ]});
        // A grace far longer than the test allows: only the server ending the stream resolves it.
        let (backend, session) = session(scenario, kind, Duration::from_secs(20)).await;
        let turn = session.prompt(cursor_acp_core::prompt::parse_content(&json!("go")).unwrap()).unwrap();
        let first = serde_json::to_value(turn.next().await.unwrap()).unwrap();
        assert_eq!(first["sessionUpdate"], "tool_call");
        tokio::time::sleep(Duration::from_millis(100)).await;
        let started = Instant::now();
        turn.cancel();
        let rest = rest(&turn).await;
        assert_eq!(turn.result().await.unwrap().stop_reason, acp::StopReason::Cancelled);
        assert!(started.elapsed() < Duration::from_secs(2), "{kind:?}: cancel took {:?}", started.elapsed());
        assert!(rest.iter().all(|u| u["sessionUpdate"] != "agent_message_chunk"), "{rest:#?}");
        let card = rest.iter().rfind(|u| u["toolCallId"] == "sh").unwrap();
        assert_eq!(card["status"], "failed");
        assert_eq!(card["content"][0]["content"]["text"], "Cancelled by the user.");
        let mut records = backend.records();
        for _ in 0..100 {
            if records[0].outcome.is_some() {
                break;
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
            records = backend.records();
        }
        assert_eq!(records[0].outcome.as_deref(), Some("cancelled"), "{kind:?}");
        // The exec's answer reached the server before the stream ended.
        assert!(records[0].messages.iter().any(|m| m.message["execClientControlMessage"]["streamClose"]["id"] == 1));
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn after_cancel_no_card_turns_completed_and_no_text_arrives() {
    // A server that goes on after the cancel (it takes the cancel itself, then plays on).
    let scenario = json!({ "steps": [
        { "type": "toolCallStarted", "callId": "sh", "toolCall": { "shellToolCall": { "args": { "command": "make" } } } },
        { "type": "text", "text": "building" },
        { "type": "awaitClient", "kind": "conversationAction" },
        { "type": "toolCallCompleted", "callId": "sh", "toolCall": { "shellToolCall": { "args": { "command": "make" }, "result": { "success": { "exitCode": 0 } } } } },
        { "type": "text", "text": " and more text" },
        { "type": "toolCallStarted", "callId": "next", "toolCall": { "lsToolCall": { "args": { "path": "/" } } } },
        { "type": "turnEnded" }
    ]});
    let (_backend, session) = session(scenario, TransportKind::Sse, Duration::from_secs(2)).await;
    let turn = session.prompt(cursor_acp_core::prompt::parse_content(&json!("go")).unwrap()).unwrap();
    assert_eq!(serde_json::to_value(turn.next().await.unwrap()).unwrap()["sessionUpdate"], "tool_call");
    assert_eq!(serde_json::to_value(turn.next().await.unwrap()).unwrap()["sessionUpdate"], "agent_message_chunk");
    turn.cancel();
    let rest = rest(&turn).await;
    assert_eq!(turn.result().await.unwrap().stop_reason, acp::StopReason::Cancelled);
    assert_eq!(
        rest,
        [json!({ "sessionUpdate": "tool_call_update", "toolCallId": "sh", "status": "failed",
                 "content": [{ "type": "content", "content": { "type": "text", "text": "Cancelled by the user." } }] })],
        "the card ends failed at once, and nothing after it"
    );
}
