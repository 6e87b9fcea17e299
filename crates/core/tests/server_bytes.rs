//! What a server's bytes decide, however they arrive: the same frames in one write or in
//! several give the same outcome, and frames the server had no right to send are refused.
//! Real bytes through the real transports against the embedded backend, on both transports.

use std::sync::Arc;
use std::time::Duration;

use base64::Engine as _;
use cursor_acp_core::acp;
use cursor_acp_core::connect::{self, Code, ConnectError, ErrorDetail, CURSOR_ERROR_DETAILS};
use cursor_acp_core::host::{ExecContext, ExecRequest, Host};
use cursor_acp_core::proto::agent::v1 as pb;
use cursor_acp_core::proto::aiserver::v1 as ai;
use cursor_acp_core::session::{AgentClient, ClientConfig, SessionOptions, Timing, Turn};
use cursor_acp_core::transport::{Compression, TransportConfig, TransportKind};
use cursor_acp_core::CoreError;
use cursor_acp_embedded::{EmbeddedBackend, Scenario};
use futures::future::BoxFuture;
use prost::Message as _;
use serde_json::{json, Value};

const KINDS: [TransportKind; 2] = [TransportKind::Sse, TransportKind::H2];

struct NoExec;

impl Host for NoExec {
    fn exec(&self, _: ExecRequest, _: ExecContext) -> BoxFuture<'static, Result<Option<Value>, CoreError>> {
        Box::pin(async { Ok(None) })
    }
}

fn timing() -> Timing {
    Timing {
        stall: Duration::from_secs(5),
        resume_attempts: 2,
        resume_backoff: Duration::from_millis(10),
        resume_backoff_max: Duration::from_millis(20),
        ..Timing::default()
    }
}

async fn client(scenario: Value, kind: TransportKind, compression: Compression) -> (EmbeddedBackend, AgentClient) {
    let backend = EmbeddedBackend::start(Scenario::from_json(&scenario).unwrap()).await.unwrap();
    let config = ClientConfig {
        transport: TransportConfig { base_url: backend.url(), kind, compression, ..Default::default() },
        timing: timing(),
        ..Default::default()
    };
    (backend, AgentClient::new(config, Arc::new(NoExec), None).unwrap())
}

fn text_frame(text: &str) -> Vec<u8> {
    let update = pb::InteractionUpdate {
        message: Some(pb::interaction_update::Message::TextDelta(pb::TextDeltaUpdate {
            text: text.into(),
            is_server_notice: false,
        })),
    };
    let message = pb::AgentServerMessage {
        message: Some(pb::agent_server_message::Message::InteractionUpdate(update)),
        ..Default::default()
    };
    connect::encode_frame(0, &message.encode_to_vec()).to_vec()
}

fn end_with(code: Code, cursor_error: Option<ai::error_details::Error>) -> Vec<u8> {
    let mut err = ConnectError::new(code, "from the test server");
    if let Some(e) = cursor_error {
        let details = ai::ErrorDetails { error: e as i32, ..Default::default() };
        err.details.push(ErrorDetail {
            type_name: CURSOR_ERROR_DETAILS.into(),
            value: details.encode_to_vec().into(),
            debug: None,
        });
    }
    connect::encode_end_stream(Some(&err)).to_vec()
}

/// Field 1 as a varint with an unterminated continuation: not an `AgentServerMessage`.
fn garbage_frame() -> Vec<u8> {
    connect::encode_frame(0, &[0x08, 0xff, 0xff, 0xff]).to_vec()
}

fn raw(bytes: &[u8]) -> Value {
    json!({ "type": "rawBytes", "base64": base64::engine::general_purpose::STANDARD.encode(bytes) })
}

fn text(prompt: &str) -> Vec<acp::ContentBlock> {
    vec![acp::ContentBlock::Text(acp::TextContent::new(prompt))]
}

async fn texts(turn: &Turn) -> String {
    let mut out = String::new();
    while let Some(u) = tokio::time::timeout(Duration::from_secs(10), turn.next()).await.expect("updates settle") {
        if let Some(t) = serde_json::to_value(u).unwrap()["content"]["text"].as_str() {
            out.push_str(t);
        }
    }
    out
}

/// The outcome a turn should have.
#[derive(Debug, Clone, Copy)]
enum Expected {
    Stop(acp::StopReason),
    Code(&'static str),
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_error_in_the_same_read_as_the_frame_before_it_decides_the_turn() {
    use ai::error_details::Error as E;
    // (An unauthenticated end after a frame is a token that expired during the stream: renewed
    // and resumed, see tests/auth.rs.)
    let cases: [(&str, Vec<u8>, Expected); 3] = [
        ("permission denied", end_with(Code::PermissionDenied, None), Expected::Code("E_SERVER")),
        (
            "max tokens",
            end_with(Code::ResourceExhausted, Some(E::MaxTokens)),
            Expected::Stop(acp::StopReason::MaxTokens),
        ),
        ("bad protobuf", garbage_frame(), Expected::Code("E_PROTOCOL")),
    ];
    for kind in KINDS {
        for (name, tail, expected) in &cases {
            for split in [false, true] {
                let head = text_frame("partial");
                let steps = if split {
                    vec![raw(&head), json!({ "type": "sleep", "ms": 50 }), raw(tail)]
                } else {
                    vec![raw(&[head, tail.clone()].concat())]
                };
                let (backend, client) = client(json!({ "steps": steps }), kind, Compression::None).await;
                let turn = client.new_session(SessionOptions::default()).unwrap().prompt(text("go")).unwrap();
                let what = format!("{kind:?}, {name}, {}", if split { "two writes" } else { "one write" });
                assert_eq!(texts(&turn).await, "partial", "{what}: the frame before the error is delivered");
                match (turn.result().await, expected) {
                    (Ok(r), Expected::Stop(reason)) => assert_eq!(r.stop_reason, *reason, "{what}"),
                    (Err(e), Expected::Code(code)) => assert_eq!(e.code(), *code, "{what}: {e}"),
                    (got, want) => panic!("{what}: got {got:?}, want {want:?}"),
                }
                assert_eq!(backend.records().len(), 1, "{what}: not resumed");
            }
        }
    }
}

fn gzip_text_frame(text: &str) -> Vec<u8> {
    let plain = text_frame(text);
    connect::encode_frame(connect::FLAG_COMPRESSED, &connect::gzip(&plain[connect::HEADER_LEN..])).to_vec()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_compressed_frame_on_a_stream_that_agreed_on_no_compression_is_a_protocol_error() {
    for kind in KINDS {
        // The client offers gzip (`connect-accept-encoding`); without `gzipResponses` the backend
        // names no `connect-content-encoding`, so a compressed frame is one nobody agreed to.
        for (gzip_agreed, compression) in
            [(false, Compression::None), (false, Compression::Gzip), (true, Compression::None)]
        {
            let steps = [raw(&text_frame("plain ")), raw(&gzip_text_frame("packed")), json!({ "type": "turnEnded" })];
            let scenario = json!({ "gzipResponses": gzip_agreed, "steps": steps });
            let (backend, client) = client(scenario, kind, compression).await;
            let turn = client.new_session(SessionOptions::default()).unwrap().prompt(text("go")).unwrap();
            let what = format!("{kind:?}, gzip agreed: {gzip_agreed}, client compression {compression:?}");
            let delivered = texts(&turn).await;
            match turn.result().await {
                Ok(r) if gzip_agreed => {
                    assert_eq!(delivered, "plain packed", "{what}");
                    assert_eq!(r.stop_reason, acp::StopReason::EndTurn, "{what}");
                }
                Err(e) if !gzip_agreed => {
                    assert_eq!(delivered, "plain ", "{what}");
                    assert_eq!(e.code(), "E_PROTOCOL", "{what}: {e}");
                    assert!(e.to_string().contains("agreed on no compression"), "{what}: {e}");
                    assert_eq!(backend.records().len(), 1, "{what}: not resumed");
                }
                other => panic!("{what}: {other:?}"),
            }
        }
    }
}
