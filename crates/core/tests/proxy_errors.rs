//! A proxy in the way is named in the error, with the fix, and never with its credentials:
//! one that refuses connections, one that will not open a tunnel, one that does not pass
//! HTTP/2 under `'h2'`. Its own test binary: it sets the proxy environment.

use std::io::{Read, Write};
use std::net::TcpListener;
use std::sync::Arc;
use std::time::Duration;

use cursor_acp_core::acp::ContentBlock;
use cursor_acp_core::host::NoHost;
use cursor_acp_core::session::{AgentClient, ClientConfig, SessionOptions};
use cursor_acp_core::transport::TransportKind;
use cursor_acp_core::CoreError;

#[path = "common/closed_port.rs"]
mod closed_port;
use closed_port::ClosedPort;

/// A "proxy" answering every connection with `reply` after reading its first request.
fn answering_proxy(reply: &'static [u8]) -> u16 {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    std::thread::spawn(move || {
        for stream in listener.incoming().take(32) {
            let Ok(mut stream) = stream else { continue };
            std::thread::spawn(move || {
                stream.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
                let mut buf = [0u8; 4096];
                #[allow(
                    clippy::let_underscore_must_use,
                    reason = "the client may hang up first; the test asserts on the client's error"
                )]
                let _ = stream.read(&mut buf);
                #[allow(
                    clippy::let_underscore_must_use,
                    reason = "the client may hang up first; the test asserts on the client's error"
                )]
                let _ = stream.write_all(reply);
                std::thread::sleep(Duration::from_millis(200));
            });
        }
    });
    port
}

async fn turn_error(base_url: &str, kind: TransportKind) -> CoreError {
    let mut config = ClientConfig::default();
    config.transport.base_url = base_url.into();
    config.transport.kind = kind;
    let client = AgentClient::new(config, Arc::new(NoHost), None).expect("client");
    let session = client.new_session(SessionOptions::default()).expect("session");
    let turn = session.prompt_with(vec![ContentBlock::from("hi")], Default::default()).expect("turn");
    tokio::time::timeout(Duration::from_secs(5), turn.result()).await.expect("settles at once").expect_err("fails")
}

fn set_proxy(name: &str, value: &str) {
    // SAFETY: this test binary has a single test, which sets the environment only between
    // clients; nothing else reads it meanwhile.
    unsafe { std::env::set_var(name, value) };
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_proxy_in_the_way_is_named_with_the_fix() {
    // Nothing listens on the proxy's port.
    let closed_port = ClosedPort::new();
    let closed = closed_port.port();
    set_proxy("HTTPS_PROXY", &format!("http://user:hunter2@127.0.0.1:{closed}"));
    let err = turn_error("https://agent.example.invalid", TransportKind::Sse).await;
    let text = err.to_string();
    assert!(matches!(err, CoreError::Unreachable(_)), "{err:?}");
    assert!(text.contains(&format!("the proxy http://127.0.0.1:{closed} (HTTPS_PROXY)")), "{text}");
    assert!(text.contains("connection refused") && text.contains("NO_PROXY"), "{text}");
    assert!(!text.contains("hunter2") && !text.contains("user:"), "no proxy credentials: {text}");

    // A proxy that refuses the tunnel.
    let denying = answering_proxy(b"HTTP/1.1 403 Forbidden\r\ncontent-length: 0\r\n\r\n");
    set_proxy("HTTPS_PROXY", &format!("http://127.0.0.1:{denying}"));
    let err = turn_error("https://agent.example.invalid", TransportKind::Sse).await;
    let text = err.to_string();
    assert!(text.contains("would not open a tunnel") && text.contains("(HTTPS_PROXY)"), "{text}");

    // A plain HTTP/1.1 forward proxy under 'h2': it answers the preface in HTTP/1.1.
    let http1 = answering_proxy(b"HTTP/1.1 400 Bad Request\r\ncontent-length: 0\r\nconnection: close\r\n\r\n");
    set_proxy("HTTP_PROXY", &format!("http://127.0.0.1:{http1}"));
    let err = turn_error("http://agent.example.invalid:8080", TransportKind::H2).await;
    let text = err.to_string();
    assert!(matches!(err, CoreError::Http2Unsupported(_)), "{err:?}");
    assert!(text.contains(&format!("the proxy http://127.0.0.1:{http1} (HTTP_PROXY)")), "{text}");
    assert!(text.contains("'auto'") && text.contains("NO_PROXY"), "{text}");
}
