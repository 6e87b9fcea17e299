//! Both transports against the embedded backend over real loopback sockets: a scripted turn end
//! to end, what the backend recorded (seqnos, hex payloads, headers), gzip both ways, and every
//! fault giving a typed error within a bounded time.

use std::time::{Duration, Instant};

use cursor_acp_core::connect::{Code, FrameError};
use cursor_acp_core::proto::agent::v1 as pb;
use cursor_acp_core::transport::*;
use cursor_acp_core::CoreError;
use cursor_acp_embedded::{EmbeddedBackend, Scenario};
use prost::Message;
use serde_json::json;

#[path = "common/closed_port.rs"]
mod closed_port;
use closed_port::ClosedPort;

const KINDS: [TransportKind; 2] = [TransportKind::Sse, TransportKind::H2];
/// Every test's stream must settle well within this.
const BOUND: Duration = Duration::from_secs(10);

async fn backend(scenario: serde_json::Value) -> EmbeddedBackend {
    EmbeddedBackend::start(Scenario::from_json(&scenario).expect("valid scenario")).await.expect("backend starts")
}

fn transport(b: &EmbeddedBackend, kind: TransportKind, tweak: impl FnOnce(&mut TransportConfig)) -> Transport {
    let mut config = TransportConfig { base_url: b.url(), kind, ..Default::default() };
    tweak(&mut config);
    Transport::new(config).expect("transport")
}

/// An access token from the backend's API-key login (plain HTTP/1.1 on a socket).
async fn issued_token(b: &EmbeddedBackend, key: &str) -> String {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let mut socket = tokio::net::TcpStream::connect(b.addr()).await.unwrap();
    let request = format!(
        "POST /auth/exchange_user_api_key HTTP/1.1\r\nhost: x\r\nauthorization: Bearer {key}\r\n\
         content-length: 0\r\nconnection: close\r\n\r\n"
    );
    socket.write_all(request.as_bytes()).await.unwrap();
    let mut response = String::new();
    socket.read_to_string(&mut response).await.unwrap();
    let body = response.split("\r\n\r\n").nth(1).expect("a body");
    let json: serde_json::Value = serde_json::from_str(body).expect("JSON");
    json["accessToken"].as_str().expect("a token").to_string()
}

/// How a record shows a request carrying `token`, one the embedded backend issued: its kind and
/// serial number (the JWT's `jti`), never the token.
fn recorded_as(token: &str) -> String {
    use base64::Engine as _;
    let payload = token.split('.').nth(1).expect("a JWT");
    let payload = base64::engine::general_purpose::URL_SAFE_NO_PAD.decode(payload).expect("base64url");
    let payload: serde_json::Value = serde_json::from_slice(&payload).expect("JSON");
    format!("Bearer <redacted: access token {} issued by this backend>", payload["jti"])
}

/// A transport of `kind` with default settings, for a server other than the embedded backend.
fn transport_at(base_url: &str, kind: TransportKind) -> Transport {
    Transport::new(TransportConfig { base_url: base_url.to_string(), kind, ..Default::default() }).expect("transport")
}

/// The URL of a local port that refuses connections, and the port, held for as long as the URL
/// is used.
fn unreachable_url() -> (String, ClosedPort) {
    let closed = ClosedPort::new();
    (format!("http://127.0.0.1:{}", closed.port()), closed)
}

fn client(m: pb::agent_client_message::Message) -> pb::AgentClientMessage {
    pb::AgentClientMessage { message: Some(m) }
}

/// A run request as a client sends it (with Auto as the model, which the server requires).
fn run_request(text: &str) -> pb::AgentClientMessage {
    client(pb::agent_client_message::Message::RunRequest(Box::new(pb::AgentRunRequest {
        conversation_id: Some("conv-1".into()),
        model_details: Some(cursor_acp_core::models::auto()),
        requested_model: Some(cursor_acp_core::models::requested(&cursor_acp_core::models::auto())),
        action: Some(pb::ConversationAction {
            action: Some(pb::conversation_action::Action::UserMessageAction(pb::UserMessageAction {
                user_message: Some(pb::UserMessage {
                    text: text.into(),
                    message_id: "m1".into(),
                    ..Default::default()
                }),
                ..Default::default()
            })),
            ..Default::default()
        }),
        ..Default::default()
    })))
}

fn heartbeat() -> pb::AgentClientMessage {
    client(pb::agent_client_message::Message::ClientHeartbeat(pb::ClientHeartbeat {}))
}

fn stream_close(id: u32) -> pb::AgentClientMessage {
    client(pb::agent_client_message::Message::ExecClientControlMessage(pb::ExecClientControlMessage {
        message: Some(pb::exec_client_control_message::Message::StreamClose(pb::ExecClientStreamClose { id })),
    }))
}

/// What a minimal client saw of one turn.
#[derive(Debug, Default)]
struct Seen {
    text: String,
    thinking: String,
    turn_ended: bool,
    checkpoints: Vec<bytes::Bytes>,
    sent: Vec<pb::AgentClientMessage>,
}

/// A minimal client: answers every server request with a canned reply and collects output.
async fn drive(t: &Transport, first: pb::AgentClientMessage) -> Result<Seen, CoreError> {
    use pb::agent_server_message::Message as S;
    let request_id = uuid_like();
    let AgentStream { sender, mut receiver } = t.open(&request_id, None);
    let mut seen = Seen::default();
    let send = |m: pb::AgentClientMessage, seen: &mut Seen| {
        seen.sent.push(m.clone());
        let sender = sender.clone();
        async move { sender.send(&m).await }
    };
    send(first, &mut seen).await?;
    while let Some(frame) = tokio::time::timeout(BOUND, receiver.next()).await.expect("stream settles")? {
        match frame.message.message {
            Some(S::InteractionUpdate(u)) => match u.message {
                Some(pb::interaction_update::Message::TextDelta(d)) => seen.text.push_str(&d.text),
                Some(pb::interaction_update::Message::ThinkingDelta(d)) => seen.thinking.push_str(&d.text),
                Some(pb::interaction_update::Message::TurnEnded(_)) => seen.turn_ended = true,
                _ => {}
            },
            Some(S::ExecServerMessage(e)) => {
                let result = match e.message {
                    Some(pb::exec_server_message::Message::ReadArgs(a)) => {
                        pb::exec_client_message::Message::ReadResult(pb::ReadResult {
                            result: Some(pb::read_result::Result::Success(pb::ReadSuccess {
                                path: a.path,
                                total_lines: 1,
                                output: Some(pb::read_success::Output::Content("file body".into())),
                                ..Default::default()
                            })),
                        })
                    }
                    other => panic!("unexpected exec {other:?}"),
                };
                let reply =
                    pb::ExecClientMessage { id: e.id, exec_id: e.exec_id, message: Some(result), ..Default::default() };
                send(client(pb::agent_client_message::Message::ExecClientMessage(Box::new(reply))), &mut seen).await?;
                send(stream_close(e.id), &mut seen).await?;
            }
            Some(S::KvServerMessage(k)) => {
                let message = match k.message {
                    Some(pb::kv_server_message::Message::GetBlobArgs(_)) => {
                        pb::kv_client_message::Message::GetBlobResult(pb::GetBlobResult {
                            blob_data: Some(b"blob".to_vec().into()),
                            ..Default::default()
                        })
                    }
                    _ => pb::kv_client_message::Message::SetBlobResult(pb::SetBlobResult { error: None }),
                };
                let reply = pb::KvClientMessage { id: k.id, message: Some(message) };
                send(client(pb::agent_client_message::Message::KvClientMessage(reply)), &mut seen).await?;
            }
            Some(S::InteractionQuery(q)) => {
                let reply = pb::InteractionResponse {
                    id: q.id,
                    result: Some(pb::interaction_response::Result::WebSearchRequestResponse(
                        pb::WebSearchRequestResponse {
                            result: Some(pb::web_search_request_response::Result::Approved(Default::default())),
                        },
                    )),
                };
                send(client(pb::agent_client_message::Message::InteractionResponse(reply)), &mut seen).await?;
            }
            Some(S::ConversationCheckpointUpdate(_)) => {
                // The raw frame is kept: field 3 of the server message is the checkpoint.
                seen.checkpoints.push(frame.raw.clone());
            }
            _ => {}
        }
    }
    sender.flush().await?;
    Ok(seen)
}

fn uuid_like() -> String {
    use std::sync::atomic::{AtomicU64, Ordering};
    static N: AtomicU64 = AtomicU64::new(0);
    format!("00000000-0000-4000-8000-{:012x}", N.fetch_add(1, Ordering::SeqCst) + std::process::id() as u64 * 1000)
}

fn full_turn() -> serde_json::Value {
    json!({ "steps": [
        { "type": "thinking", "text": "let me look" },
        { "type": "thinkingCompleted", "durationMs": 5 },
        { "type": "text", "text": "Hello" },
        { "type": "exec", "id": 1, "args": { "readArgs": { "path": "/w/a.txt", "toolCallId": "tc1" } } },
        { "type": "kvSet", "id": 2, "data": "stored" },
        { "type": "kvGet", "id": 3, "blobId": "00ff" },
        { "type": "interaction", "id": 4, "query": { "webSearchRequestQuery": { "args": { "searchTerm": "rust" } } } },
        { "type": "checkpoint", "state": { "tokenDetails": { "usedTokens": 10, "maxTokens": 100 } } },
        { "type": "text", "text": ", world" },
        { "type": "turnEnded", "inputTokens": 3, "outputTokens": 4 }
    ]})
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn scripted_turn_end_to_end_on_both_transports() {
    for kind in KINDS {
        let b = backend(full_turn()).await;
        let token = issued_token(&b, "key-abc").await;
        let t = transport(&b, kind, |c| c.credentials = Credentials::Token(Secret::new(token.clone())));
        let seen = drive(&t, run_request("hi")).await.unwrap_or_else(|e| panic!("{kind:?}: {e}"));
        assert_eq!(seen.text, "Hello, world", "{kind:?}");
        assert_eq!(seen.thinking, "let me look");
        assert!(seen.turn_ended);
        assert_eq!(seen.checkpoints.len(), 1);
        let cp = pb::AgentServerMessage::decode(seen.checkpoints[0].clone()).unwrap();
        let Some(pb::agent_server_message::Message::ConversationCheckpointUpdate(state)) = cp.message else {
            panic!("{kind:?}: not a checkpoint")
        };
        assert_eq!(state.token_details.as_ref().unwrap().used_tokens, 10);
        // The conversation, as blob ids: one turn; the user's message and the assistant's.
        assert_eq!((state.turns.len(), state.root_prompt_messages_json.len()), (1, 2), "{kind:?}");

        let records = b.records();
        assert_eq!(records.len(), 1, "{records:?}");
        let r = &records[0];
        assert_eq!(r.outcome.as_deref(), Some("end"));
        assert_eq!(r.transport, if kind == TransportKind::Sse { "sse" } else { "h2" });
        // The server got exactly what we sent, in order: the answers to the scenario's requests,
        // then those to the six KV sets that store the conversation before the checkpoint (the
        // user's message, the thinking and text steps, the turn, two root prompt messages), with
        // ids of the backend's own above the scenario's.
        let kinds: Vec<&str> = r.messages.iter().map(|m| m.kind.as_str()).collect();
        assert_eq!(
            kinds,
            [
                "runRequest",
                "execClientMessage",
                "execClientControlMessage",
                "kvClientMessage",
                "kvClientMessage",
                "interactionResponse",
                "kvClientMessage",
                "kvClientMessage",
                "kvClientMessage",
                "kvClientMessage",
                "kvClientMessage",
                "kvClientMessage"
            ],
            "{kind:?}"
        );
        let stored: Vec<&serde_json::Value> = r.messages[6..].iter().map(|m| &m.message["kvClientMessage"]).collect();
        assert_eq!(stored.iter().map(|k| k["id"].as_u64().unwrap()).collect::<Vec<_>>(), [4, 5, 6, 7, 8, 9]);
        assert!(stored.iter().all(|k| k["setBlobResult"].is_object()), "{stored:?}");
        assert_eq!(r.messages[0].message["runRequest"]["action"]["userMessageAction"]["userMessage"]["text"], "hi");
        assert_eq!(r.messages[1].message["execClientMessage"]["readResult"]["success"]["content"], "file body");
        assert_eq!(r.messages[1].message["execClientMessage"]["execId"], "exec-1");
        assert_eq!(r.messages[4].message["kvClientMessage"]["id"], 3);
        // The headers of docs/protocol.md, "Headers".
        let h = &r.headers;
        // The exact token was sent (the backend knows it issued it), and is never recorded.
        assert_eq!(h["authorization"], recorded_as(&token));
        assert!(!serde_json::to_string(&b.records()).unwrap().contains(&token), "no token in any record");
        assert_eq!(h["x-request-id"], r.request_id);
        assert_eq!(h["x-cursor-client-version"], DEFAULT_CLIENT_VERSION);
        assert_eq!(h["x-cursor-client-type"], "cli");
        assert_eq!(h["x-ghost-mode"], "true");
        assert_eq!(h["connect-protocol-version"], "1");
        assert_eq!(h["connect-accept-encoding"], "gzip");
        assert_eq!(h["content-type"], "application/connect+proto");
        match kind {
            TransportKind::Sse => {
                assert_eq!(h["x-cursor-streaming"], "true");
                // seqno 0.. on one counter, one append per message, hex of exactly the bytes sent.
                let mut appends = r.appends.clone();
                appends.sort_by_key(|a| a.seqno);
                assert_eq!(
                    appends.iter().map(|a| a.seqno).collect::<Vec<_>>(),
                    (0..seen.sent.len() as i64).collect::<Vec<_>>()
                );
                for (a, sent) in appends.iter().zip(&seen.sent) {
                    assert_eq!(a.data, hex::encode(sent.encode_to_vec()));
                    assert!(a.data.chars().all(|c| c.is_ascii_digit() || ('a'..='f').contains(&c)), "lower-case hex");
                    assert!(!a.data_binary);
                    assert_eq!(a.headers["content-type"], "application/proto");
                    assert_eq!(a.headers["accept-encoding"], "gzip");
                    assert_eq!(a.headers["x-cursor-streaming"], "true");
                    assert_eq!(a.headers["x-request-id"], r.request_id);
                    assert_eq!(a.headers["authorization"], recorded_as(&token));
                }
                assert_eq!(
                    r.messages.iter().map(|m| m.seqno.unwrap()).collect::<Vec<_>>(),
                    (0..12).collect::<Vec<_>>()
                );
            }
            TransportKind::H2 | TransportKind::Auto => {
                assert_eq!(h["te"], "trailers");
                assert!(!h.contains_key("x-cursor-streaming"));
                assert!(r.appends.is_empty());
            }
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn no_token_means_no_authorization_header_and_caller_headers_pass_through() {
    for kind in KINDS {
        let b = backend(json!({ "steps": [{ "type": "turnEnded" }] })).await;
        let t = transport(&b, kind, |c| {
            c.headers = vec![("X-Extra".into(), "1".into())];
            c.client_version = "cli-test".into();
            c.ghost_mode = false;
        });
        drive(&t, run_request("x")).await.unwrap();
        let h = &b.records()[0].headers;
        assert!(!h.contains_key("authorization"));
        assert_eq!(h["x-extra"], "1");
        assert_eq!(h["x-cursor-client-version"], "cli-test");
        assert_eq!(h["x-ghost-mode"], "false");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn gzip_both_ways() {
    for kind in KINDS {
        let scenario = json!({ "gzipResponses": true, "steps": [
            { "type": "text", "text": "compressed hello" },
            { "type": "awaitClient", "kind": "clientHeartbeat" },
            { "type": "turnEnded" }
        ]});
        let b = backend(scenario).await;
        let t = transport(&b, kind, |c| c.compression = Compression::Gzip);
        let AgentStream { sender, mut receiver } = t.open("gz-1", None);
        // Big enough to be compressed (≥ MIN_COMPRESS_BYTES).
        sender.send(&run_request(&"x".repeat(4000))).await.unwrap();
        sender.send(&heartbeat()).await.unwrap();
        let mut text = String::new();
        while let Some(f) = tokio::time::timeout(BOUND, receiver.next()).await.unwrap().unwrap() {
            if let Some(pb::agent_server_message::Message::InteractionUpdate(pb::InteractionUpdate {
                message: Some(pb::interaction_update::Message::TextDelta(d)),
            })) = f.message.message
            {
                text.push_str(&d.text);
            }
        }
        assert_eq!(text, "compressed hello");
        assert_eq!(receiver.response_headers()["connect-content-encoding"], "gzip", "{kind:?}: server compressed");
        let r = &b.records()[0];
        assert_eq!(r.headers["connect-content-encoding"], "gzip");
        assert_eq!(
            r.messages[0].message["runRequest"]["action"]["userMessageAction"]["userMessage"]["text"]
                .as_str()
                .unwrap()
                .len(),
            4000
        );
        match kind {
            TransportKind::Sse => {
                assert!(!r.request_id_compressed, "the stream's 38-byte BidiRequestId stays uncompressed");
                let first = r.appends.iter().find(|a| a.seqno == 0).unwrap();
                assert_eq!(first.content_encoding.as_deref(), Some("gzip"));
                let hb = r.appends.iter().find(|a| a.seqno == 1).unwrap();
                assert_eq!(hb.content_encoding, None, "tiny appends stay uncompressed");
            }
            TransportKind::H2 | TransportKind::Auto => {
                assert!(r.messages[0].compressed);
                assert!(!r.messages[1].compressed);
            }
        }
    }
}

/// A message sent in pieces, one of them large (as an exec result moving a file's content in),
/// arrives whole on both transports, compressed or not.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_message_in_pieces_arrives_whole_on_both_transports() {
    let text: String = (0..300_000).map(|i| char::from(b'a' + (i % 26) as u8)).collect();
    let encoded = bytes::Bytes::from(run_request(&text).encode_to_vec());
    let (head, rest) = encoded.split_at(12);
    let (middle, tail) = rest.split_at(rest.len() - 20);
    for kind in KINDS {
        for compression in [Compression::None, Compression::Gzip] {
            let b = backend(
                json!({ "steps": [{ "type": "awaitClient", "kind": "clientHeartbeat" }, { "type": "turnEnded" }] }),
            )
            .await;
            let t = transport(&b, kind, |c| c.compression = compression);
            let AgentStream { sender, mut receiver } = t.open("pieces-1", None);
            let mut pieces = cursor_acp_core::wire::Pieces::default();
            for part in [head, middle, tail] {
                pieces.push(encoded.slice_ref(part));
            }
            sender.send_encoded(pieces).await.unwrap();
            sender.send(&heartbeat()).await.unwrap();
            while tokio::time::timeout(BOUND, receiver.next()).await.unwrap().unwrap().is_some() {}
            let r = &b.records()[0];
            let got =
                r.messages[0].message["runRequest"]["action"]["userMessageAction"]["userMessage"]["text"].as_str();
            assert!(got == Some(text.as_str()), "{kind:?} {compression:?}: the text arrived whole");
            let compressed = match kind {
                TransportKind::Sse => r.appends.iter().find(|a| a.seqno == 0).unwrap().content_encoding.is_some(),
                TransportKind::H2 | TransportKind::Auto => r.messages[0].compressed,
            };
            assert_eq!(compressed, compression == Compression::Gzip, "{kind:?} {compression:?}");
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn binary_append_mode_uses_data_binary() {
    let b = backend(json!({ "steps": [{ "type": "text", "text": "ok" }, { "type": "turnEnded" }] })).await;
    let t = transport(&b, TransportKind::Sse, |c| c.append_encoding = AppendEncoding::Binary);
    let seen = drive(&t, run_request("bin")).await.unwrap();
    assert_eq!(seen.text, "ok");
    let r = &b.records()[0];
    assert!(r.appends[0].data_binary);
    assert!(r.appends[0].data.is_empty());
    assert_eq!(r.messages[0].kind, "runRequest");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn event_stream_content_type_is_still_parsed_as_envelopes() {
    let b = backend(
        json!({ "responseContentType": "text/event-stream", "steps": [{ "type": "text", "text": "sse label" }] }),
    )
    .await;
    let seen = drive(&transport(&b, TransportKind::Sse, |_| {}), run_request("x")).await.unwrap();
    assert_eq!(seen.text, "sse label");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn seqnos_are_unique_and_gapless_under_concurrent_senders() {
    let b = backend(json!({ "steps": [{ "type": "sleep", "ms": 300 }] })).await;
    let t = transport(&b, TransportKind::Sse, |_| {});
    let AgentStream { sender, mut receiver } = t.open("concurrent", None);
    sender.send(&run_request("go")).await.unwrap();
    let tasks: Vec<_> = (0..4)
        .map(|_| {
            let s = sender.clone();
            tokio::spawn(async move {
                for _ in 0..25 {
                    s.send(&heartbeat()).await.unwrap();
                }
            })
        })
        .collect();
    for task in tasks {
        task.await.unwrap();
    }
    sender.flush().await.unwrap();
    assert_eq!(sender.next_seqno().await, Some(101));
    while tokio::time::timeout(BOUND, receiver.next()).await.unwrap().unwrap().is_some() {}
    let r = &b.records()[0];
    let mut seqnos: Vec<i64> = r.appends.iter().map(|a| a.seqno).collect();
    seqnos.sort_unstable();
    assert_eq!(seqnos, (0..101).collect::<Vec<_>>());
    assert_eq!(r.messages.len(), 101, "every append delivered in seqno order");
    assert_eq!(r.messages[0].kind, "runRequest");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn at_most_16_appends_in_flight_and_append_zero_does_not_wait_for_runsse() {
    // Every append is held 300 ms by the server, and (like Cursor's) the backend sends nothing
    // until the run request (append 0) has been delivered.
    let b = backend(json!({
        "appendFault": { "delayMs": 300 },
        "steps": [{ "type": "text", "text": "started" }]
    }))
    .await;
    let t = transport(&b, TransportKind::Sse, |_| {});
    let AgentStream { sender, mut receiver } = t.open("inflight", None);
    let started = Instant::now();
    sender.send(&run_request("go")).await.unwrap();
    for _ in 0..15 {
        sender.send(&heartbeat()).await.unwrap();
    }
    let sixteen = started.elapsed();
    sender.send(&heartbeat()).await.unwrap(); // the 17th waits for a permit
    let seventeen = started.elapsed();
    assert!(sixteen < Duration::from_millis(250), "16 appends went out at once ({sixteen:?})");
    assert!(seventeen >= Duration::from_millis(250), "the 17th waited for a free slot ({seventeen:?})");
    let first = tokio::time::timeout(BOUND, receiver.next()).await.unwrap().unwrap().unwrap();
    assert!(matches!(first.message.message, Some(pb::agent_server_message::Message::InteractionUpdate(_))));
    sender.flush().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn appends_of_all_streams_share_a_few_kept_alive_connections() {
    // 4 streams × 5 appends, each held 100 ms by the server, through at most 2 connections:
    // ten rounds, so the last append is acknowledged no sooner than 1 s after the first left.
    let b = backend(json!({
        "appendFault": { "delayMs": 100 },
        "steps": [{ "type": "sleep", "ms": 50 }, { "type": "turnEnded" }]
    }))
    .await;
    let t = transport(&b, TransportKind::Sse, |c| c.max_append_connections = 2);
    let started = Instant::now();
    let streams: Vec<_> = (0..4).map(|i| t.open(&format!("shared-{i}"), None)).collect();
    for AgentStream { sender, .. } in &streams {
        sender.send(&run_request("go")).await.unwrap();
        for _ in 0..4 {
            sender.send(&heartbeat()).await.unwrap();
        }
    }
    for AgentStream { sender, .. } in &streams {
        tokio::time::timeout(BOUND, sender.flush()).await.unwrap().unwrap();
    }
    let all_acknowledged = started.elapsed();
    assert!(all_acknowledged >= Duration::from_millis(950), "two appends at a time ({all_acknowledged:?})");
    for AgentStream { mut receiver, .. } in streams {
        while tokio::time::timeout(BOUND, receiver.next()).await.unwrap().unwrap().is_some() {}
    }
    for r in b.records() {
        assert_eq!(r.messages.len(), 5, "every append of {} delivered", r.request_id);
    }
    // One connection per stream, and the appends' connections reused: 20 appends, 2 at a time.
    // (A few more than 2 may open when an append starts just before a finished one's
    // connection is back in the pool.)
    let connections = b.connections_accepted();
    assert!(connections < 4 + 10, "{connections} connections for 4 streams and 20 appends");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_large_append_does_not_hold_up_small_ones() {
    // One shared connection, every append held 300 ms. Stream A sends a 512 KiB message (1 MiB
    // of hex); stream B's heartbeat must not wait behind it.
    let b = backend(json!({
        "appendFault": { "delayMs": 300 },
        "steps": [{ "type": "turnEnded" }]
    }))
    .await;
    let t = transport(&b, TransportKind::Sse, |c| c.max_append_connections = 1);
    let a = t.open("large", None);
    let small = t.open("small", None);
    a.sender.send(&run_request(&"x".repeat(512 * 1024))).await.unwrap();
    let started = Instant::now();
    small.sender.send(&run_request("go")).await.unwrap();
    small.sender.flush().await.unwrap();
    let waited = started.elapsed();
    assert!(waited < Duration::from_millis(550), "the small append waited {waited:?}");
    a.sender.flush().await.unwrap();
}

#[test]
fn zero_append_connections_is_refused() {
    let config = TransportConfig { max_append_connections: 0, ..Default::default() };
    let err = Transport::new(config).expect_err("refused");
    assert!(err.to_string().contains("maxAppendConnections"), "{err}");
}

async fn expect_error(kind: TransportKind, scenario: serde_json::Value) -> CoreError {
    let b = backend(scenario).await;
    let t = transport(&b, kind, |c| c.limits = cursor_acp_core::connect::Limits::uniform(1 << 20));
    let started = Instant::now();
    let err = drive(&t, run_request("x")).await.expect_err("the fault must surface as an error");
    assert!(started.elapsed() < BOUND);
    err
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_fault_is_a_typed_error_on_both_transports() {
    for kind in KINDS {
        let text_then = |step: serde_json::Value| json!({ "steps": [{ "type": "text", "text": "partial" }, step] });

        let e = expect_error(kind, text_then(json!({ "type": "drop" }))).await;
        assert!(matches!(e, CoreError::Network(_) | CoreError::StreamClosed), "{kind:?} drop: {e:?}");
        assert_eq!(e.code(), "E_NETWORK");

        let e = expect_error(kind, text_then(json!({ "type": "close" }))).await;
        assert!(matches!(e, CoreError::StreamClosed), "{kind:?} close: {e:?}");

        let e = expect_error(kind, text_then(json!({ "type": "garbage" }))).await;
        assert!(matches!(&e, CoreError::Protocol(m) if m.contains("AgentServerMessage")), "{kind:?} garbage: {e:?}");
        assert_eq!(e.code(), "E_PROTOCOL");

        let e = expect_error(kind, text_then(json!({ "type": "oversize", "length": 2_000_000 }))).await;
        assert!(matches!(e, CoreError::Frame(FrameError::FrameTooLarge { len: 2_000_000, .. })), "{kind:?}: {e:?}");

        let gzip_bomb = json!({ "gzipResponses": true, "steps": [{ "type": "text", "text": "partial" },
            { "type": "gzipBomb", "decompressedBytes": 8_000_000 }] });
        let e = expect_error(kind, gzip_bomb).await;
        assert!(matches!(e, CoreError::Frame(FrameError::DecompressedTooLarge { .. })), "{kind:?}: {e:?}");

        let e = expect_error(kind, text_then(json!({ "type": "reservedFlag" }))).await;
        assert!(matches!(e, CoreError::Frame(FrameError::ReservedFlags { flags: 0x04 })), "{kind:?}: {e:?}");

        let e = expect_error(
            kind,
            text_then(json!({ "type": "error", "code": "resource_exhausted", "message": "limit",
                "cursorError": "ERROR_RATE_LIMITED", "title": "Slow down", "isRetryable": true })),
        )
        .await;
        let CoreError::Server(ce) = &e else { panic!("{kind:?}: {e:?}") };
        assert_eq!(ce.code, Code::ResourceExhausted);
        assert_eq!(ce.cursor_error_name(), Some("ERROR_RATE_LIMITED"));
        assert_eq!(ce.cursor_details().unwrap().details.unwrap().title, "Slow down");
        assert_eq!(e.code(), "E_SERVER");

        let e = expect_error(
            kind,
            text_then(json!({ "type": "error", "code": "unauthenticated", "message": "bad token" })),
        )
        .await;
        assert!(matches!(e, CoreError::Auth(_)), "{kind:?}: {e:?}");
        assert_eq!(e.code(), "E_AUTH");

        let e = expect_error(kind, json!({ "steps": [{ "type": "httpError", "status": 429 }] })).await;
        let CoreError::Server(ce) = &e else { panic!("{kind:?}: {e:?}") };
        assert_eq!((ce.code, ce.http_status), (Code::Unavailable, Some(429)));

        let e = expect_error(kind, json!({ "steps": [{ "type": "httpError", "status": 401, "body": "nope" }] })).await;
        assert!(matches!(&e, CoreError::Auth(ce) if ce.message.contains("401")), "{kind:?}: {e:?}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn stall_delivers_nothing_until_it_ends() {
    for kind in KINDS {
        let b = backend(json!({ "heartbeatMs": 50, "steps": [
            { "type": "heartbeat" }, { "type": "stall", "ms": 600 }, { "type": "text", "text": "after" }
        ]}))
        .await;
        let t = transport(&b, kind, |_| {});
        let AgentStream { sender, mut receiver } = t.open("stall", None);
        sender.send(&run_request("x")).await.unwrap();
        receiver.next().await.unwrap().unwrap(); // the explicit heartbeat
                                                 // During the stall not even heartbeats arrive.
        let quiet = tokio::time::timeout(Duration::from_millis(400), receiver.next()).await;
        assert!(quiet.is_err(), "{kind:?}: a stalled server sends nothing");
        let mut got_text = false;
        while let Some(f) = tokio::time::timeout(BOUND, receiver.next()).await.unwrap().unwrap() {
            if let Some(pb::agent_server_message::Message::InteractionUpdate(pb::InteractionUpdate {
                message: Some(pb::interaction_update::Message::TextDelta(_)),
            })) = f.message.message
            {
                got_text = true;
            }
        }
        assert!(got_text);
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn failed_append_fails_the_stream_and_is_not_retried() {
    let b =
        backend(json!({ "appendFault": { "seqno": 1, "status": 503 }, "steps": [{ "type": "sleep", "ms": 5000 }] }))
            .await;
    let t = transport(&b, TransportKind::Sse, |_| {});
    let AgentStream { sender, mut receiver } = t.open("append-fail", None);
    sender.send(&run_request("x")).await.unwrap();
    sender.send(&heartbeat()).await.unwrap();
    let err = tokio::time::timeout(BOUND, receiver.next()).await.unwrap().unwrap_err();
    assert!(matches!(&err, CoreError::Server(ce) if ce.http_status == Some(503)), "{err:?}");
    // Later sends report the same failure instead of appending.
    assert!(sender.send(&heartbeat()).await.is_err());
    // Appends go out side by side: the run request's (seqno 0), which makes the stream a turn
    // in the server's records, may land after the failed one was answered.
    let deadline = Instant::now() + BOUND;
    let appends = loop {
        let appends = b.records().first().map(|r| r.appends.clone()).unwrap_or_default();
        if appends.iter().any(|a| a.seqno == 0) {
            break appends;
        }
        assert!(Instant::now() < deadline, "the run request's append reached the server");
        tokio::time::sleep(Duration::from_millis(5)).await;
    };
    assert_eq!(appends.iter().filter(|a| a.seqno == 1).count(), 1, "never retried");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn append_deadline_is_enforced() {
    let b =
        backend(json!({ "appendFault": { "seqno": 0, "delayMs": 3000 }, "steps": [{ "type": "sleep", "ms": 5000 }] }))
            .await;
    let t = transport(&b, TransportKind::Sse, |c| c.append_deadline = Duration::from_millis(200));
    let AgentStream { sender, mut receiver } = t.open("deadline", None);
    let started = Instant::now();
    sender.send(&run_request("x")).await.unwrap();
    let err = tokio::time::timeout(BOUND, receiver.next()).await.unwrap().unwrap_err();
    assert!(matches!(&err, CoreError::Timeout(m) if m.contains("seqno 0")), "{err:?}");
    assert_eq!(err.code(), "E_TIMEOUT");
    assert!(started.elapsed() < Duration::from_millis(2000));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn unreachable_server_is_a_network_error() {
    let (url, _closed) = unreachable_url();
    for kind in KINDS {
        let err = stream_error(&transport_at(&url, kind)).await;
        assert_eq!(err.code(), "E_NETWORK", "{kind:?}: {err:?}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_token_never_appears_in_errors() {
    let b = backend(json!({ "steps": [{ "type": "httpError", "status": 500 }] })).await;
    for kind in KINDS {
        let t = transport(&b, kind, |c| c.credentials = Credentials::Token(Secret::new("sekret-token-value")));
        let err = drive(&t, run_request("x")).await.unwrap_err();
        assert!(!format!("{err} {err:?}").contains("sekret-token-value"));
        assert!(!format!("{t:?}").contains("sekret-token-value"));
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn server_waits_are_bounded_when_the_client_never_answers() {
    let b = backend(json!({ "waitTimeoutMs": 200, "steps": [
        { "type": "exec", "id": 9, "args": { "readArgs": { "path": "/x" } } }
    ]}))
    .await;
    let t = transport(&b, TransportKind::H2, |_| {});
    let AgentStream { sender, mut receiver } = t.open("silent-client", None);
    sender.send(&run_request("x")).await.unwrap();
    let first = receiver.next().await.unwrap().unwrap();
    assert!(matches!(first.message.message, Some(pb::agent_server_message::Message::ExecServerMessage(_))));
    let err = tokio::time::timeout(BOUND, receiver.next()).await.unwrap().unwrap_err();
    assert!(matches!(&err, CoreError::Server(ce) if ce.code == Code::DeadlineExceeded), "{err:?}");
}

#[test]
fn bad_scenarios_are_rejected_with_the_step_named() {
    let cases = [
        (json!({ "steps": [{ "type": "nope" }] }), "unknown variant"),
        (json!({ "steps": [{ "type": "exec", "id": 1, "args": { "readArgz": {} } }] }), "turn 0 step 0"),
        (json!({ "steps": [{ "type": "text", "text": "a" }, { "type": "httpError", "status": 500 }] }), "first step"),
        (json!({ "steps": [{ "type": "error", "code": "internal", "cursorError": "ERROR_NOPE" }] }), "ERROR_NOPE"),
        (json!({ "turns": [] }), "no turns"),
    ];
    for (scenario, needle) in cases {
        let err = Scenario::from_json(&scenario).unwrap_err().to_string();
        assert!(err.contains(needle), "{scenario} → {err}");
    }
}

/// A BidiAppend body as a client would send it, for tests that post appends by hand.
fn append_body(data: String, request_id: &str, seqno: i64) -> Vec<u8> {
    use cursor_acp_core::proto::aiserver::v1::{BidiAppendRequest, BidiRequestId};
    BidiAppendRequest {
        data,
        request_id: Some(BidiRequestId { request_id: request_id.into() }),
        append_seqno: seqno,
        ..Default::default()
    }
    .encode_to_vec()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn embedded_backend_delivers_appends_in_seqno_order_and_refuses_repeats() {
    let b = backend(json!({ "steps": [{ "type": "turnEnded" }] })).await;
    let url = format!("{}{BIDI_APPEND_PATH}", b.url());
    #[allow(
        clippy::let_underscore_must_use,
        reason = "another test of this binary may have installed the provider first"
    )]
    let _ = rustls::crypto::ring::default_provider().install_default();
    let http = reqwest::Client::new();
    let post = |msg: pb::AgentClientMessage, seqno: i64| {
        let body = append_body(hex::encode(msg.encode_to_vec()), "ordered", seqno);
        let request = http.post(&url).header("content-type", "application/proto").body(body);
        async move { request.send().await.expect("the server answers").status().as_u16() }
    };
    // 2 and 1 wait for 0; 0 releases all three; 3 is in order and goes straight through.
    assert_eq!(post(heartbeat(), 2).await, 200);
    assert_eq!(post(stream_close(7), 1).await, 200);
    // A stream is listed once its first message is delivered: had 2 or 1 gone ahead, it would be.
    assert!(b.records().is_empty(), "nothing delivered before seqno 0");
    assert_eq!(post(run_request("go"), 0).await, 200);
    assert_eq!(post(heartbeat(), 3).await, 200);
    for seqno in [1, 3] {
        assert_eq!(post(heartbeat(), seqno).await, 400, "seqno {seqno} again");
    }
    let delivered: Vec<_> = b.records()[0].messages.iter().map(|m| (m.seqno, m.kind.clone())).collect();
    let expected = [(0, "runRequest"), (1, "execClientControlMessage"), (2, "clientHeartbeat"), (3, "clientHeartbeat")];
    assert_eq!(delivered, expected.map(|(n, k)| (Some(n), k.to_string())));
}

/// What the embedded backend answers to BidiAppend bodies a client should never send: a clear
/// `invalid_argument` naming the problem, over HTTP, and the server stays up.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn embedded_backend_refuses_bad_appends_with_clear_errors() {
    let b = backend(json!({ "steps": [{ "type": "turnEnded" }] })).await;
    let url = format!("{}{BIDI_APPEND_PATH}", b.url());
    #[allow(
        clippy::let_underscore_must_use,
        reason = "another test of this binary may have installed the provider first"
    )]
    let _ = rustls::crypto::ring::default_provider().install_default();
    let http = reqwest::Client::new();
    let post = |body: reqwest::Body| {
        let request = http.post(&url).header("content-type", "application/proto").body(body);
        async move {
            let response = request.send().await.expect("the server answers");
            let status = response.status().as_u16();
            let body = response.bytes().await.expect("a body");
            let error: serde_json::Value = serde_json::from_slice(&body).expect("a Connect error body");
            (status, error["code"].as_str().unwrap_or_default().to_string(), error["message"].to_string())
        }
    };
    let heartbeat_hex = hex::encode(heartbeat().encode_to_vec());
    // An exec reply whose read content is not UTF-8 (the server checks replies without
    // building them; it must still refuse this one).
    let reply = pb::AgentClientMessage {
        message: Some(pb::agent_client_message::Message::ExecClientMessage(Box::new(pb::ExecClientMessage {
            id: 1,
            exec_id: String::new(),
            message: Some(pb::exec_client_message::Message::ReadResult(pb::ReadResult {
                result: Some(pb::read_result::Result::Success(pb::ReadSuccess {
                    output: Some(pb::read_success::Output::Content("abc".into())),
                    ..Default::default()
                })),
            })),
            ..Default::default()
        }))),
    };
    let mut bad_reply = reply.encode_to_vec();
    let at = bad_reply.windows(3).position(|w| w == b"abc").expect("the content is in the reply");
    bad_reply[at] = 0xff;
    let cases: Vec<(reqwest::Body, &str)> = vec![
        (vec![0xff, 0xff, 0xff].into(), "not a BidiAppendRequest"),
        (append_body("zz".into(), "r-1", 0).into(), "not hex"),
        (append_body("abc".into(), "r-1", 0).into(), "not hex"),
        (append_body(hex::encode([0x0a, 0x05]), "r-1", 0).into(), "not an AgentClientMessage"),
        (append_body(hex::encode(&bad_reply), "r-1", 0).into(), "not UTF-8 encoded"),
        (append_body(heartbeat_hex.clone(), "", 0).into(), "request_id is empty"),
    ];
    for (body, needle) in cases {
        let (status, code, message) = post(body).await;
        assert_eq!((status, code.as_str()), (400, "invalid_argument"), "{needle}: {message}");
        assert!(message.contains(needle), "expected {needle:?} in {message}");
    }
    // Declared too long: refused from the length alone, before any of the body is sent.
    {
        use tokio::io::{AsyncReadExt, AsyncWriteExt};
        let host = b.url().trim_start_matches("http://").to_string();
        let mut socket = tokio::net::TcpStream::connect(&host).await.unwrap();
        let head = format!(
            "POST {BIDI_APPEND_PATH} HTTP/1.1\r\nhost: {host}\r\ncontent-type: application/proto\r\ncontent-length: {}\r\n\r\n",
            33 * 1024 * 1024
        );
        socket.write_all(head.as_bytes()).await.unwrap();
        let mut response = Vec::new();
        tokio::time::timeout(BOUND, socket.read_to_end(&mut response)).await.unwrap().unwrap();
        let response = String::from_utf8_lossy(&response);
        assert!(response.starts_with("HTTP/1.1 400"), "{response}");
        assert!(response.contains("invalid_argument") && response.contains("exceeds"), "{response}");
    }
    // Too long without a declared length (chunked): refused once the limit is passed. The server
    // stops reading there, so the client sees the 400 or, when it is still writing, a reset.
    // Valid as far as it goes (an unknown varint field, again and again), so that only its size
    // refuses it: zeros are field 0, which the reader refuses at the first byte, as prost does.
    let over_limit = [0x48u8, 0x00].repeat((32 * 1024 * 1024 + 2048) / 2);
    let chunked = reqwest::Body::wrap_stream(futures::stream::iter(
        over_limit.chunks(1 << 20).map(|c| Ok::<_, std::io::Error>(c.to_vec())).collect::<Vec<_>>(),
    ));
    match http.post(&url).body(chunked).send().await {
        Ok(response) => {
            assert_eq!(response.status().as_u16(), 400);
            let body = response.bytes().await.unwrap_or_default();
            assert!(String::from_utf8_lossy(&body).contains("exceeds"), "{body:?}");
        }
        Err(e) => assert!(e.is_request() || e.is_body(), "{e:?}"),
    }
    // A good append is still accepted afterwards, and its seqno cannot be replayed.
    let ok = http.post(&url).body(append_body(heartbeat_hex.clone(), "r-2", 0)).send().await.unwrap();
    assert_eq!(ok.status().as_u16(), 200);
    let (status, _, message) = post(append_body(heartbeat_hex, "r-2", 0).into()).await;
    assert_eq!(status, 400);
    assert!(message.contains("duplicate append_seqno 0"), "{message}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn h2_streams_past_a_connections_cap_get_a_connection_of_their_own() {
    // The server lets one connection carry 3 streams; every turn stays open (the exec waits
    // for its stream_close). Streams 4 to 8 must not wait for earlier turns to end.
    let b = backend(json!({
        "h2MaxConcurrentStreams": 3,
        "steps": [
            { "type": "text", "text": "hi" },
            { "type": "exec", "id": 1, "args": { "readArgs": { "path": "/a" } } },
            { "type": "turnEnded" }
        ]
    }))
    .await;
    let t = transport(&b, TransportKind::H2, |c| c.h2_streams_per_connection = 3);
    let first_update = |mut stream: AgentStream| async move {
        stream.sender.send(&run_request("go")).await.unwrap();
        let frame = tokio::time::timeout(Duration::from_secs(3), stream.receiver.next()).await;
        let frame = frame.expect("the stream's first update arrives while the other turns run").unwrap().unwrap();
        assert!(matches!(frame.message.message, Some(pb::agent_server_message::Message::InteractionUpdate(_))));
        stream
    };
    let streams = futures::future::join_all((0..8).map(|i| first_update(t.open(&format!("capped-{i}"), None)))).await;
    assert_eq!(b.connections_accepted(), 3, "8 streams, 3 per connection");

    // Finished streams give their places back: the next ones reuse the connections.
    drop(streams);
    tokio::time::sleep(Duration::from_millis(100)).await;
    futures::future::join_all((0..8).map(|i| first_update(t.open(&format!("again-{i}"), None)))).await;
    assert_eq!(b.connections_accepted(), 3, "no new connection while the old ones have room");
}

/// What a peer offers in its first SETTINGS and connection WINDOW_UPDATE, read from the raw
/// frames that follow the preface: (window per stream, window of the connection).
async fn advertised_windows(io: &mut (impl tokio::io::AsyncRead + Unpin)) -> (u32, u32) {
    use tokio::io::AsyncReadExt;
    const DEFAULT_WINDOW: u32 = 65_535;
    let (mut stream_window, mut connection_window) = (None, None);
    while stream_window.is_none() || connection_window.is_none() {
        let mut header = [0u8; 9];
        io.read_exact(&mut header).await.expect("a frame header");
        let len = u32::from_be_bytes([0, header[0], header[1], header[2]]) as usize;
        let (kind, flags) = (header[3], header[4]);
        let stream = u32::from_be_bytes([header[5], header[6], header[7], header[8]]) & 0x7fff_ffff;
        let mut payload = vec![0; len];
        io.read_exact(&mut payload).await.expect("a frame payload");
        match kind {
            // SETTINGS, not its ACK: 6-byte entries; 0x4 is SETTINGS_INITIAL_WINDOW_SIZE.
            0x4 if flags & 0x1 == 0 => {
                let initial = payload.chunks(6).find(|entry| entry[..2] == [0, 4]);
                stream_window = Some(initial.map_or(DEFAULT_WINDOW, |e| u32::from_be_bytes([e[2], e[3], e[4], e[5]])));
            }
            // WINDOW_UPDATE of the connection (stream 0): an increment over the initial window.
            0x8 if stream == 0 => {
                let increment = u32::from_be_bytes(payload[..4].try_into().unwrap()) & 0x7fff_ffff;
                connection_window = Some(DEFAULT_WINDOW + increment);
            }
            _ => {}
        }
    }
    (stream_window.unwrap(), connection_window.unwrap())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn h2_client_and_embedded_server_offer_windows_for_large_messages() {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    const PREFACE: &[u8; 24] = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n";
    let expected = (H2_STREAM_WINDOW, H2_CONNECTION_WINDOW);

    // The client, against a socket that only reads what its connection preface offers.
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let config = TransportConfig {
        base_url: format!("http://{}", listener.local_addr().unwrap()),
        kind: TransportKind::H2,
        ..Default::default()
    };
    let t = Transport::new(config).expect("transport");
    let AgentStream { sender, receiver: _receiver } = t.open("windows", None);
    let sending = tokio::spawn(async move { sender.send(&run_request("x")).await });
    let (mut socket, _) = tokio::time::timeout(BOUND, listener.accept()).await.unwrap().unwrap();
    let mut preface = [0u8; 24];
    socket.read_exact(&mut preface).await.unwrap();
    assert_eq!(&preface, PREFACE);
    assert_eq!(tokio::time::timeout(BOUND, advertised_windows(&mut socket)).await.unwrap(), expected, "client");
    sending.abort();

    // The embedded backend, to a raw h2c client.
    let b = backend(json!({ "steps": [{ "type": "turnEnded" }] })).await;
    let mut socket =
        tokio::net::TcpStream::connect(b.url().trim_start_matches("http://").trim_end_matches('/')).await.unwrap();
    socket.write_all(PREFACE).await.unwrap();
    socket.write_all(&[0, 0, 0, 0x4, 0, 0, 0, 0, 0]).await.unwrap(); // empty SETTINGS
    assert_eq!(tokio::time::timeout(BOUND, advertised_windows(&mut socket)).await.unwrap(), expected, "server");
}

/// A turn that says hello and ends.
fn hello() -> serde_json::Value {
    json!({ "steps": [{ "type": "text", "text": "hello" }, { "type": "turnEnded" }] })
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn auto_transport_runs_on_h2_where_the_server_speaks_it() {
    let b = backend(hello()).await;
    let t = transport(&b, TransportKind::Auto, |_| {});
    assert_eq!(t.active_kind(), TransportKind::H2);
    for _ in 0..2 {
        let seen = drive(&t, run_request("go")).await.expect("turn");
        assert_eq!((seen.text.as_str(), seen.turn_ended), ("hello", true));
    }
    assert_eq!(t.active_kind(), TransportKind::H2);
    let records = b.records();
    assert_eq!(records.iter().map(|r| r.transport.as_str()).collect::<Vec<_>>(), ["h2", "h2"]);
    assert_eq!(b.connections_accepted(), 1, "both turns on one HTTP/2 connection");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn auto_transport_moves_to_http1_for_good_when_the_server_speaks_only_that() {
    let b = backend(json!({ "http1Only": true, "steps": hello()["steps"] })).await;
    let t = transport(&b, TransportKind::Auto, |_| {});
    let AgentStream { sender, mut receiver } = t.open(&uuid_like(), None);
    #[allow(
        clippy::let_underscore_must_use,
        reason = "the send may fail as the stream does; the test asserts on the receiver's error"
    )]
    let _ = sender.send(&run_request("go")).await;
    let err = tokio::time::timeout(BOUND, receiver.next()).await.expect("settles").expect_err("h2 is refused");
    assert!(matches!(err, CoreError::NoHttp2(_)), "{err:?}");
    assert_eq!(err.code(), "E_NETWORK");
    // Both halves of the stream say so: the turn loop may learn it from either.
    let err = sender.send(&heartbeat()).await.expect_err("the send side failed too");
    assert!(matches!(err, CoreError::NoHttp2(_)), "{err:?}");
    assert_eq!(t.active_kind(), TransportKind::Sse);
    assert!(b.records().is_empty(), "nothing of the refused stream reached the server");

    // Every later stream is RunSSE + BidiAppend, without trying h2 again.
    let connections = b.connections_accepted();
    for _ in 0..2 {
        let seen = drive(&t, run_request("go")).await.expect("turn over HTTP/1.1");
        assert_eq!((seen.text.as_str(), seen.turn_ended), ("hello", true));
    }
    let records = b.records();
    assert_eq!(records.iter().map(|r| r.transport.as_str()).collect::<Vec<_>>(), ["sse", "sse"]);
    assert!(records.iter().all(|r| r.messages[0].kind == "runRequest"), "{records:?}");
    assert!(b.connections_accepted() > connections);
}

/// The error a stream of `t` ends with: opened, sent a run request, read until it fails.
async fn stream_error(t: &Transport) -> CoreError {
    let AgentStream { sender, mut receiver } = t.open(&uuid_like(), None);
    #[allow(
        clippy::let_underscore_must_use,
        reason = "the send may fail as the stream does; the test asserts on the receiver's error"
    )]
    let _ = sender.send(&run_request("go")).await;
    tokio::time::timeout(BOUND, receiver.next()).await.expect("settles").expect_err("the stream fails")
}

/// A plain-TCP server that reads what a client sends and then does `reply` to the socket.
async fn raw_server(reply: &'static [u8]) -> String {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}", listener.local_addr().unwrap());
    tokio::spawn(async move {
        while let Ok((mut socket, _)) = listener.accept().await {
            tokio::spawn(async move {
                let mut buf = [0u8; 4096];
                #[allow(
                    clippy::let_underscore_must_use,
                    reason = "the client may hang up first; the test asserts on the client's error"
                )]
                let _ = socket.read(&mut buf).await;
                #[allow(
                    clippy::let_underscore_must_use,
                    reason = "the client may hang up first; the test asserts on the client's error"
                )]
                let _ = socket.write_all(reply).await;
            });
        }
    });
    url
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn auto_transport_reads_an_http1_answer_or_a_hang_up_to_the_h2_preface_as_no_h2() {
    // What servers and proxies that speak only HTTP/1.1 do with "PRI * HTTP/2.0": answer with
    // an HTTP/1.1 error (node, nginx) or hang up.
    let refusals: [&[u8]; 3] = [
        b"HTTP/1.1 400 Bad Request\r\nconnection: close\r\ncontent-length: 0\r\n\r\n",
        b"HTTP/1.1 505 HTTP Version Not Supported\r\ncontent-length: 0\r\n\r\n",
        b"",
    ];
    for reply in refusals {
        let url = raw_server(reply).await;
        let t = transport_at(&url, TransportKind::Auto);
        let err = stream_error(&t).await;
        let reply = String::from_utf8_lossy(reply);
        assert!(matches!(err, CoreError::NoHttp2(_)), "{reply:?}: {err:?}");
        assert_eq!(t.active_kind(), TransportKind::Sse, "{reply:?}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn auto_transport_stays_on_h2_when_the_server_is_down() {
    // A port nobody listens on: the connection is refused, which says nothing about HTTP/2.
    let (url, _closed) = unreachable_url();
    let t = transport_at(&url, TransportKind::Auto);
    let err = stream_error(&t).await;
    // Reported as what it is, with the fix, and not resumed: it cannot succeed by itself.
    assert!(matches!(err, CoreError::Unreachable(_)), "{err:?}");
    assert!(err.to_string().contains("connection refused") && err.to_string().contains("Check baseUrl"), "{err}");
    assert!(!err.is_retryable());
    assert_eq!(t.active_kind(), TransportKind::H2);
}

/// A server that speaks HTTP/1.1 and h2c but knows none of the protocol's paths: every request
/// gets 404. Records each request's version and path.
async fn not_found_server() -> (String, std::sync::Arc<std::sync::Mutex<Vec<String>>>) {
    use hyper_util::rt::{TokioExecutor, TokioIo};
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}", listener.local_addr().unwrap());
    let seen = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
    let log = seen.clone();
    tokio::spawn(async move {
        while let Ok((socket, _)) = listener.accept().await {
            let log = log.clone();
            tokio::spawn(async move {
                let service = hyper::service::service_fn(move |req: http::Request<hyper::body::Incoming>| {
                    log.lock().unwrap().push(format!("{:?} {}", req.version(), req.uri().path()));
                    async {
                        let body = http_body_util::Full::new(bytes::Bytes::from_static(b"404 page not found"));
                        Ok::<_, std::convert::Infallible>(http::Response::builder().status(404).body(body).unwrap())
                    }
                });
                let builder = hyper_util::server::conn::auto::Builder::new(TokioExecutor::new());
                #[allow(
                    clippy::let_underscore_must_use,
                    reason = "a connection the client drops ends with an error the test does not check"
                )]
                let _ = builder.serve_connection(TokioIo::new(socket), service).await;
            });
        }
    });
    (url, seen)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn auto_transport_moves_to_runsse_when_an_h2_server_has_no_run() {
    // A gateway written for RunSSE alone may still speak HTTP/2 (Go does over TLS by itself).
    let (url, seen) = not_found_server().await;
    let t = transport_at(&url, TransportKind::Auto);
    let err = stream_error(&t).await;
    assert!(matches!(err, CoreError::NoHttp2(_)), "{err:?}");
    assert!(err.to_string().contains("no Run endpoint"), "{err}");
    assert_eq!(t.active_kind(), TransportKind::Sse);
    assert_eq!(*seen.lock().unwrap(), ["HTTP/2.0 /agent.v1.AgentService/Run"]);

    // The next stream is RunSSE + BidiAppend; its 404 is this server's answer, and stays an error.
    let err = stream_error(&t).await;
    assert!(matches!(err, CoreError::Server(_)), "{err:?}");
    assert_eq!(err.connect_error().and_then(|e| e.http_status), Some(404));
    // The append's 404 may fail the stream before the stream request is logged.
    let run_sse = "HTTP/1.1 /agent.v1.AgentService/RunSSE".to_string();
    let deadline = tokio::time::Instant::now() + Duration::from_secs(5);
    while !seen.lock().unwrap().contains(&run_sse) && tokio::time::Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    let seen = seen.lock().unwrap().clone();
    assert!(seen.contains(&run_sse), "{seen:?}");
    let http1 = ["HTTP/1.1 /agent.v1.AgentService/RunSSE", "HTTP/1.1 /aiserver.v1.BidiService/BidiAppend"];
    assert!(seen[1..].iter().all(|r| http1.contains(&r.as_str())), "{seen:?}");

    // On `transport: 'h2'` the same 404 is an error, not a reason to change transports.
    let (url, _) = not_found_server().await;
    let t = transport_at(&url, TransportKind::H2);
    let err = stream_error(&t).await;
    assert!(matches!(err, CoreError::Server(_)), "{err:?}");
    assert_eq!(t.active_kind(), TransportKind::H2);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn auto_transport_moves_to_runsse_when_run_ends_at_once_as_unimplemented() {
    // A Connect server answers a streaming method it lacks with 200 and an end-of-stream error.
    let b = backend(json!({ "turns": [
        [{ "type": "error", "code": "unimplemented", "message": "agent.v1.AgentService.Run is not implemented" }],
        hello()["steps"]
    ] }))
    .await;
    let t = transport(&b, TransportKind::Auto, |_| {});
    let err = stream_error(&t).await;
    assert!(matches!(err, CoreError::NoHttp2(_)), "{err:?}");
    assert_eq!(t.active_kind(), TransportKind::Sse);
    let seen = drive(&t, run_request("go")).await.expect("turn over RunSSE");
    assert_eq!((seen.text.as_str(), seen.turn_ended), ("hello", true));
    assert_eq!(b.records().iter().map(|r| r.transport.as_str()).collect::<Vec<_>>(), ["h2", "sse"]);

    // `unimplemented` after the stream has carried a message is the agent's error, not the
    // transport's: it stays an error, and the transport stays on h2.
    let b = backend(json!({ "steps": [
        { "type": "text", "text": "hi" },
        { "type": "error", "code": "unimplemented", "message": "no such tool" }
    ] }))
    .await;
    let t = transport(&b, TransportKind::Auto, |_| {});
    let err = drive(&t, run_request("go")).await.expect_err("the agent's error");
    assert!(matches!(err, CoreError::Server(_)), "{err:?}");
    assert_eq!(t.active_kind(), TransportKind::H2);
}
