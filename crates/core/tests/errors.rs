//! Failures a user can fix are reported at once, naming the cause and the fix: a refused
//! connection, a name that does not resolve, and `'h2'` against an HTTP/1.1-only server. (A
//! proxy in the way: `proxy_errors.rs`, which sets the environment.) The time bounds below are
//! hang guards for "not resumed", not speed measurements.

use std::sync::Arc;
use std::time::Duration;

use cursor_acp_core::acp::ContentBlock;
use cursor_acp_core::host::NoHost;
use cursor_acp_core::session::{AgentClient, ClientConfig, SessionOptions};
use cursor_acp_core::transport::TransportKind;
use cursor_acp_core::CoreError;
use cursor_acp_embedded::{EmbeddedBackend, Scenario};
use serde_json::json;
use tokio::time::Instant;

#[path = "common/closed_port.rs"]
mod closed_port;
use closed_port::ClosedPort;

/// Well under the ~7 s three resumes took.
const AT_ONCE: Duration = Duration::from_secs(3);

async fn turn_error(base_url: String, kind: TransportKind) -> (CoreError, Duration) {
    let mut config = ClientConfig::default();
    config.transport.base_url = base_url;
    config.transport.kind = kind;
    let client = AgentClient::new(config, Arc::new(NoHost), None).expect("client");
    let session = client.new_session(SessionOptions::default()).expect("session");
    let started = Instant::now();
    let turn = session.prompt_with(vec![ContentBlock::from("hi")], Default::default()).expect("turn");
    let err = tokio::time::timeout(Duration::from_secs(20), turn.result()).await.expect("settles").expect_err("fails");
    (err, started.elapsed())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_refused_connection_is_reported_at_once_with_the_fix() {
    let closed = ClosedPort::new();
    let port = closed.port();
    for kind in [TransportKind::Sse, TransportKind::H2, TransportKind::Auto] {
        let (err, took) = turn_error(format!("http://127.0.0.1:{port}"), kind).await;
        assert_eq!(err.code(), "E_NETWORK", "{kind:?}");
        let text = err.to_string();
        assert!(text.contains(&format!("127.0.0.1:{port}")) && text.contains("connection refused"), "{text}");
        assert!(text.contains("Check baseUrl"), "names the fix: {text}");
        assert!(took < AT_ONCE, "{kind:?}: {took:?}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_host_that_does_not_resolve_says_so() {
    let (err, took) = turn_error("http://no-such-host.invalid:8080".into(), TransportKind::Sse).await;
    assert!(matches!(err, CoreError::Unreachable(_)), "{err:?}");
    assert!(err.to_string().contains("does not resolve"), "{err}");
    assert!(took < Duration::from_secs(10), "{took:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn h2_against_an_http1_only_server_names_the_transport_to_use() {
    let scenario = json!({ "http1Only": true, "steps": [{ "type": "turnEnded" }] });
    let backend = EmbeddedBackend::start(Scenario::from_json(&scenario).unwrap()).await.unwrap();
    let (err, took) = turn_error(backend.url(), TransportKind::H2).await;
    assert!(matches!(err, CoreError::Http2Unsupported(_)), "{err:?}");
    let text = err.to_string();
    assert!(text.contains("does not speak HTTP/2") && text.contains("'auto'") && text.contains("'sse'"), "{text}");
    assert!(
        !text.contains("frame with invalid size") || text.contains("answered the HTTP/2 preface as HTTP/1.1"),
        "{text}"
    );
    assert!(took < AT_ONCE, "{took:?}");
    // The automatic transport, by contrast, just moves to HTTP/1.1 and the turn works.
    let mut config = ClientConfig::default();
    config.transport.base_url = backend.url();
    let client = AgentClient::new(config, Arc::new(NoHost), None).unwrap();
    let turn = client.new_session(SessionOptions::default()).unwrap().prompt(vec![ContentBlock::from("hi")]).unwrap();
    assert!(turn.result().await.is_ok());
}
