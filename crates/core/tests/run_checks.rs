//! What the backend refuses at turn start, modelled on the real service, and what the client
//! sends instead: run requests without model details (`invalid_argument`), with a model id
//! the catalogue lacks (`not_found`), with an MCP tool schema holding `oneOf`/`anyOf`/`allOf`
//! (`resource_exhausted`); and a session's run requests, which always name a model (Auto when
//! none was chosen) and advertise normalized schemas, accepted. Both transports.

use std::sync::Arc;
use std::time::Duration;

use cursor_acp_core::acp::{ContentBlock, StopReason};
use cursor_acp_core::connect::Code;
use cursor_acp_core::host::{ExecContext, ExecRequest, Host};
use cursor_acp_core::models;
use cursor_acp_core::proto::agent::v1 as pb;
use cursor_acp_core::session::{AgentClient, ClientConfig, SessionOptions};
use cursor_acp_core::tool_schema;
use cursor_acp_core::transport::{AgentStream, Transport, TransportConfig, TransportKind};
use cursor_acp_core::CoreError;
use cursor_acp_embedded::{EmbeddedBackend, Scenario};
use futures::future::BoxFuture;
use serde_json::{json, Value};

const KINDS: [TransportKind; 2] = [TransportKind::Sse, TransportKind::H2];

/// A schema as MCP servers written with pydantic or zod advertise them.
fn union_schema() -> Value {
    json!({
        "type": "object",
        "properties": {
            "path": { "anyOf": [{ "type": "string" }, { "type": "null" }], "description": "File to read" },
            "range": { "oneOf": [
                { "type": "object", "properties": { "start": { "type": "integer" } }, "required": ["start"] },
                { "type": "object", "properties": { "line": { "type": "integer" } }, "required": ["line"] },
            ] },
        },
        "required": ["path"],
    })
}

async fn backend() -> EmbeddedBackend {
    let scenario = json!({ "steps": [{ "type": "text", "text": "ok" }, { "type": "turnEnded" }] });
    EmbeddedBackend::start(Scenario::from_json(&scenario).unwrap()).await.unwrap()
}

/// Sends `run` on a stream of its own and returns how the server ended it.
async fn raw_turn(backend: &EmbeddedBackend, kind: TransportKind, run: pb::AgentRunRequest) -> Result<(), CoreError> {
    let transport = Transport::new(TransportConfig { base_url: backend.url(), kind, ..Default::default() }).unwrap();
    let AgentStream { sender, mut receiver } = transport.open(&cursor_acp_core::new_id(), None);
    let message =
        pb::AgentClientMessage { message: Some(pb::agent_client_message::Message::RunRequest(Box::new(run))) };
    sender.send(&message).await?;
    loop {
        match tokio::time::timeout(Duration::from_secs(10), receiver.next()).await.expect("settles")? {
            Some(_) => continue,
            None => return Ok(()),
        }
    }
}

fn run_request(model: Option<&str>, tool_schema: Option<Value>) -> pb::AgentRunRequest {
    let tools = tool_schema
        .map(|schema| pb::McpToolDefinition {
            name: "fs-read".into(),
            tool_name: "read".into(),
            provider_identifier: "fs".into(),
            input_schema: Some(cursor_acp_core::tool_schema::to_proto(schema)),
            ..Default::default()
        })
        .into_iter()
        .collect();
    let details = model.map(|m| models::choose(Some(m), None).unwrap());
    pb::AgentRunRequest {
        requested_model: details.as_ref().map(models::requested),
        model_details: details,
        action: Some(pb::ConversationAction {
            action: Some(pb::conversation_action::Action::UserMessageAction(pb::UserMessageAction {
                user_message: Some(pb::UserMessage {
                    text: "hi".into(),
                    message_id: "m1".into(),
                    ..Default::default()
                }),
                request_context: Some(pb::RequestContext { tools, ..Default::default() }),
                ..Default::default()
            })),
            ..Default::default()
        }),
        ..Default::default()
    }
}

fn connect_code(err: &CoreError) -> Option<Code> {
    err.connect_error().map(|e| e.code)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_backend_refuses_what_the_real_service_refuses_at_turn_start() {
    for kind in KINDS {
        let b = backend().await;
        let err = raw_turn(&b, kind, run_request(None, None)).await.unwrap_err();
        assert_eq!(connect_code(&err), Some(Code::InvalidArgument), "{kind:?}: {err}");
        assert!(err.to_string().contains("Model details are required"), "{err}");
        assert!(!err.is_retryable());

        let err = raw_turn(&b, kind, run_request(Some("gpt-unknown"), None)).await.unwrap_err();
        assert_eq!(connect_code(&err), Some(Code::NotFound), "{kind:?}: {err}");
        assert!(!err.is_retryable());

        let err = raw_turn(&b, kind, run_request(Some("default"), Some(union_schema()))).await.unwrap_err();
        assert_eq!(connect_code(&err), Some(Code::ResourceExhausted), "{kind:?}: {err}");
        assert_eq!(err.connect_error().unwrap().cursor_error_name(), Some("ERROR_PROVIDER_ERROR"));

        let mut normalized = union_schema();
        tool_schema::normalize(&mut normalized);
        raw_turn(&b, kind, run_request(Some("embedded-fast"), Some(normalized))).await.expect("accepted");
    }
}

/// Advertises one MCP tool with the union schema, as the stdio agent's MCP servers may.
struct ToolHost;

impl Host for ToolHost {
    fn exec(&self, _: ExecRequest, _: ExecContext) -> BoxFuture<'static, Result<Option<Value>, CoreError>> {
        Box::pin(async { Ok(None) })
    }

    fn request_context(&self) -> BoxFuture<'static, Result<Option<Value>, CoreError>> {
        Box::pin(async {
            Ok(Some(
                json!({ "tools": [{ "name": "fs-read", "toolName": "read", "providerIdentifier": "fs", "inputSchema": union_schema() }] }),
            ))
        })
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_session_names_auto_and_advertises_schemas_the_backend_accepts() {
    for kind in KINDS {
        let b = backend().await;
        let mut config = ClientConfig::default();
        config.transport.base_url = b.url();
        config.transport.kind = kind;
        let client = AgentClient::new(config, Arc::new(ToolHost), None).unwrap();
        let session = client.new_session(SessionOptions::default()).unwrap();
        let turn = session.prompt(vec![ContentBlock::from("hi")]).unwrap();
        while turn.next().await.is_some() {}
        assert_eq!(turn.result().await.expect("accepted").stop_reason, StopReason::EndTurn, "{kind:?}");
        let run = &b.records()[0].messages[0].message["runRequest"];
        assert_eq!(run["modelDetails"]["modelId"], "default");
        assert_eq!(run["modelDetails"]["displayName"], "Auto");
        assert_eq!(run["requestedModel"]["modelId"], "default");
        let schema = &run["action"]["userMessageAction"]["requestContext"]["tools"][0]["inputSchema"];
        assert!(!tool_schema::has_combinators(schema), "{schema}");
        assert_eq!(schema["properties"]["path"]["type"], "string");
        assert_eq!(schema["properties"]["range"]["properties"]["line"]["type"], "integer");
    }
}
