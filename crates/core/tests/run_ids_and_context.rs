//! The newer protocol through the embedded backend on both transports: the run id (made per
//! turn, kept across resume, never the request id, named by injections), a user message sent
//! into a running turn and shown once delivered, subscription notifications and other actions
//! given the request context, and the host's newer `UserMessage` / `RequestContext` fields and
//! large context parts carried to the server.

use std::sync::Arc;
use std::time::Duration;

#[path = "common/plain_config.rs"]
mod plain_config;
use cursor_acp_core::acp;
use cursor_acp_core::host::{ExecContext, ExecRequest, Host};
use cursor_acp_core::session::{AgentClient, PromptExtras, Session, SessionOptions, Timing, Turn};
use cursor_acp_core::transport::TransportKind;
use cursor_acp_core::{CancellationToken, CoreError};
use cursor_acp_embedded::{EmbeddedBackend, Scenario};
use futures::future::BoxFuture;
use plain_config::plain_config;
use serde_json::{json, Value};

const KINDS: [TransportKind; 2] = [TransportKind::Sse, TransportKind::H2];

/// Supplies a request context with the 2026 fields (auto-run permissions, denylists, env).
struct ContextHost;

impl Host for ContextHost {
    fn exec(&self, _: ExecRequest, _: ExecContext) -> BoxFuture<'static, Result<Option<Value>, CoreError>> {
        Box::pin(async { Ok(None) })
    }

    fn request_context(&self) -> BoxFuture<'static, Result<Option<Value>, CoreError>> {
        Box::pin(async {
            Ok(Some(json!({
                "userPermissionsAutoRun": {},
                "adminCommandDenylist": ["rm -rf /"],
                "searchConversationsEnabled": true,
                "sendMessageEnabled": false,
                "disabledTeamRules": ["r1"],
                "env": { "devDelayNextSmartModeClassifierToken": "t", "mountedAgentStores": [{}] }
            })))
        })
    }
}

async fn client(scenario: Value, kind: TransportKind) -> (EmbeddedBackend, AgentClient) {
    let backend = EmbeddedBackend::start(Scenario::from_json(&scenario).unwrap()).await.unwrap();
    let config = plain_config(
        backend.url(),
        kind,
        Timing {
            resume_backoff: Duration::from_millis(10),
            resume_backoff_max: Duration::from_millis(20),
            callback: Duration::from_secs(5),
            ..Timing::default()
        },
    );
    (backend, AgentClient::new(config, Arc::new(ContextHost), None).unwrap())
}

fn text(t: &str) -> Vec<acp::ContentBlock> {
    vec![acp::ContentBlock::Text(acp::TextContent::new(t))]
}

async fn updates(turn: &Turn) -> Vec<Value> {
    let mut out = Vec::new();
    while let Some(u) = tokio::time::timeout(Duration::from_secs(20), turn.next()).await.expect("updates settle") {
        out.push(serde_json::to_value(u).unwrap());
    }
    out
}

/// Waits until the turn's stream is open (an injection needs a running turn).
async fn running(session: &Session) {
    for _ in 0..200 {
        if session.inject_context("probe", "test").await.is_ok() {
            return;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    panic!("the turn never started");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_turn_has_one_run_id_across_resume_attempts_and_injections_name_it() {
    for kind in KINDS {
        let scenario = json!({ "turns": [
            [{ "type": "awaitClient", "kind": "conversationAction" }, { "type": "drop" }],
            [{ "type": "turnEnded" }],
        ]});
        let (backend, client) = client(scenario, kind).await;
        let session = client.new_session(SessionOptions::default()).unwrap();
        let turn = session.prompt(text("go")).unwrap();
        running(&session).await;
        updates(&turn).await;
        assert_eq!(turn.result().await.unwrap().stop_reason, acp::StopReason::EndTurn, "{kind:?}");
        let records = backend.records();
        assert_eq!(records.len(), 2, "the first stream dropped, the turn resumed");
        let run_id = |i: usize| {
            records[i].messages[0].message["runRequest"]["runId"]
                .as_str()
                .unwrap_or_else(|| panic!("{:#?}", records[i].messages))
                .to_string()
        };
        assert_eq!(run_id(0), run_id(1), "one run id for the turn");
        assert_ne!(run_id(0), records[0].request_id, "the run id is not the request id");
        assert!(records[1].messages[0].message["runRequest"]["action"]["resumeAction"].is_object());
        let injection = records[0]
            .messages
            .iter()
            .find_map(|m| m.message["conversationAction"]["injectContextAction"].as_object().cloned())
            .expect("the probe injection");
        assert_eq!(injection["expectedRunId"], run_id(0));
        // The next turn has a run id of its own.
        let next = session.prompt(text("again")).unwrap();
        updates(&next).await;
        let again = backend.records();
        let third = again[2].messages[0].message["runRequest"]["runId"].as_str().unwrap().to_string();
        assert_ne!(third, run_id(0));
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_user_message_sent_into_the_turn_is_shown_once_delivered() {
    for kind in KINDS {
        let scenario = json!({ "steps": [
            { "type": "text", "text": "Working on it." },
            { "type": "injectionState", "states": [{ "queued": {} }, { "delivered": { "step": 2 } }] },
            { "type": "text", "text": "Docs updated too." },
            { "type": "turnEnded" }
        ]});
        let (backend, client) = client(scenario, kind).await;
        let session = client.new_session(SessionOptions::default()).unwrap();
        let turn = session.prompt(text("fix the bug")).unwrap();
        // No turn yet: nothing to send into.
        let id = loop {
            match session.inject_user_message("also update the docs").await {
                Ok(id) => break id,
                Err(e) if e.code() == "E_CLOSED" => tokio::time::sleep(Duration::from_millis(10)).await,
                Err(e) => panic!("{e}"),
            }
        };
        let seen = updates(&turn).await;
        let user: Vec<&Value> = seen.iter().filter(|u| u["sessionUpdate"] == "user_message_chunk").collect();
        assert_eq!(user.len(), 1, "{kind:?}: {seen:#?}");
        assert_eq!(user[0]["content"]["text"], "also update the docs");
        let record = &backend.records()[0];
        let sent = record
            .messages
            .iter()
            .find_map(|m| m.message["conversationAction"]["injectContextAction"].as_object().cloned())
            .unwrap();
        assert_eq!(sent["injectionId"], id);
        assert_eq!(sent["userContext"]["userMessage"]["text"], "also update the docs");
        assert_eq!(sent["userContext"]["requestContext"]["adminCommandDenylist"], json!(["rm -rf /"]));
        assert_eq!(sent["expectedRunId"], record.messages[0].message["runRequest"]["runId"]);
        let empty = session.inject_user_message("  ").await.err().unwrap();
        assert_eq!(empty.code(), "E_INVALID");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn actions_get_the_request_context_and_prompts_carry_the_hosts_newer_fields() {
    for kind in KINDS {
        let scenario = json!({ "steps": [{ "type": "turnEnded" }] });
        let (backend, client) = client(scenario, kind).await;
        let session = client.new_session(SessionOptions::default()).unwrap();
        let notify = session
            .action(
                &json!({ "subscriptionNotificationAction": { "notifications": [{ "text": "CI failed on main" }] } }),
            )
            .unwrap();
        updates(&notify).await;
        let extras = PromptExtras {
            user_message: Some(json!({
                "hookAdditionalContexts": [{ "hookEventName": "beforeSubmitPrompt", "content": "branch: main" }],
                "customModeIntent": {},
                "projectDetails": {},
                "text": "ignored: the content wins? no, the host's fields win"
            })),
            request_context_parts: Some(json!({ "rulesBlobId": "AQID", "rulesByteLength": 3, "dynamicContext": {} })),
        };
        let turn = session.prompt_with_extras(text("hello"), extras, CancellationToken::new()).unwrap();
        updates(&turn).await;
        let records = backend.records();
        let notified = &records[0].messages[0].message["runRequest"]["action"]["subscriptionNotificationAction"];
        assert_eq!(notified["notifications"][0]["text"], "CI failed on main");
        assert_eq!(notified["requestContext"]["searchConversationsEnabled"], true, "{kind:?}: {notified}");
        let action = &records[1].messages[0].message["runRequest"]["action"];
        let message = &action["userMessageAction"]["userMessage"];
        assert_eq!(message["hookAdditionalContexts"][0]["content"], "branch: main");
        assert!(message["customModeIntent"].is_object() && message["projectDetails"].is_object(), "{message}");
        assert_eq!(message["text"], "ignored: the content wins? no, the host's fields win");
        assert_eq!(action["requestContextParts"]["rulesByteLength"], 3);
        let context = &action["userMessageAction"]["requestContext"];
        assert!(context["userPermissionsAutoRun"].is_object());
        assert_eq!(context["disabledTeamRules"], json!(["r1"]));
        assert_eq!(context["env"]["devDelayNextSmartModeClassifierToken"], "t");
        assert_eq!(context["env"]["mountedAgentStores"].as_array().map(Vec::len), Some(1));
        let bad = session.prompt_with_extras(
            text("x"),
            PromptExtras { user_message: Some(json!({ "nope": 1 })), ..Default::default() },
            CancellationToken::new(),
        );
        assert_eq!(bad.err().unwrap().code(), "E_INVALID");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_newer_checkpoint_fields_come_back_byte_for_byte() {
    let scenario = json!({ "turns": [
        [{ "type": "checkpoint", "state": {
            "goalState": {}, "isRootProjectConversation": true, "subagentStateRefs": { "a": "AQI=" } } },
         { "type": "turnEnded" }],
        [{ "type": "turnEnded" }]
    ]});
    let (backend, client) = client(scenario, TransportKind::Sse).await;
    let session = client.new_session(SessionOptions::default()).unwrap();
    updates(&session.prompt(text("one")).unwrap()).await;
    updates(&session.prompt(text("two")).unwrap()).await;
    let state = &backend.records()[1].messages[0].message["runRequest"]["conversationState"];
    assert_eq!(state["isRootProjectConversation"], true);
    assert_eq!(state["subagentStateRefs"]["a"], "AQI=");
    assert!(state["goalState"].is_object(), "{state}");
}
