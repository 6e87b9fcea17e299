//! HTTPS_PROXY / HTTP_PROXY / NO_PROXY are honoured (and loopback is never proxied). This file
//! is its own test binary because it sets process environment variables.

use std::io::{Read, Write};
use std::net::TcpListener;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use cursor_acp_core::proto::agent::v1 as pb;
use cursor_acp_core::transport::*;

/// A "proxy" that records the request line of every connection and answers 503.
fn fake_proxy() -> (String, Arc<Mutex<Vec<String>>>) {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let url = format!("http://{}", listener.local_addr().unwrap());
    let seen = Arc::new(Mutex::new(Vec::new()));
    let log = seen.clone();
    std::thread::spawn(move || {
        for stream in listener.incoming().take(16) {
            let Ok(mut stream) = stream else { continue };
            let log = log.clone();
            std::thread::spawn(move || {
                stream.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
                let mut buf = [0u8; 4096];
                let n = stream.read(&mut buf).unwrap_or(0);
                let head = String::from_utf8_lossy(&buf[..n]).to_string();
                log.lock().unwrap().push(head.lines().next().unwrap_or_default().to_string());
                #[allow(
                    clippy::let_underscore_must_use,
                    reason = "the client may hang up first; the test asserts on the request line logged above"
                )]
                let _ = stream
                    .write_all(b"HTTP/1.1 503 Service Unavailable\r\ncontent-length: 0\r\nconnection: close\r\n\r\n");
                std::thread::sleep(Duration::from_millis(200));
            });
        }
    });
    (url, seen)
}

fn heartbeat() -> pb::AgentClientMessage {
    pb::AgentClientMessage { message: Some(pb::agent_client_message::Message::ClientHeartbeat(pb::ClientHeartbeat {})) }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn proxy_environment_is_honoured() {
    let (proxy_url, proxy) = fake_proxy();
    // SAFETY: this test binary has a single test; nothing else reads the environment meanwhile.
    unsafe {
        std::env::set_var("HTTP_PROXY", &proxy_url);
        std::env::set_var("HTTPS_PROXY", &proxy_url);
        std::env::set_var("NO_PROXY", "direct.invalid");
    }
    // A non-loopback host goes through the proxy.
    let via_proxy = |kind| {
        Transport::new(TransportConfig {
            base_url: "http://agent.example.invalid:8080".into(),
            kind,
            ..Default::default()
        })
        .unwrap()
    };
    let open_one = |t: &Transport| {
        let AgentStream { sender, mut receiver } = t.open("via-proxy", None);
        async move {
            #[allow(
                clippy::let_underscore_must_use,
                reason = "the turn may have failed already; the test asserts on the receiver"
            )]
            let _ = sender.send(&heartbeat()).await;
            tokio::time::timeout(Duration::from_secs(10), receiver.next()).await.unwrap().unwrap_err()
        }
    };
    let err = open_one(&via_proxy(TransportKind::Sse)).await;
    let lines = proxy.lock().unwrap().clone();
    assert!(
        !lines.is_empty() && lines.iter().all(|l| l.starts_with("POST http://agent.example.invalid:8080/")),
        "the proxy saw {lines:?}"
    );
    // The proxy answered 503 (or cut the connection after answering one of the two requests).
    assert!(["E_SERVER", "E_NETWORK"].contains(&err.code()), "{err}");

    // The automatic transport tries h2c through a proxy, which an HTTP/1.1 proxy refuses, and
    // goes on over HTTP/1.1 through the same proxy. (A proxy of its own: the last one may still
    // be getting an append of the stream above.)
    let (proxy_url, proxy) = fake_proxy();
    // SAFETY: as above.
    unsafe { std::env::set_var("HTTP_PROXY", &proxy_url) };
    let t = via_proxy(TransportKind::Auto);
    let err = open_one(&t).await;
    assert!(matches!(err, cursor_acp_core::CoreError::NoHttp2(_)), "{err:?}");
    assert_eq!(*proxy.lock().unwrap(), ["PRI * HTTP/2.0"]);
    let err = open_one(&t).await;
    assert!(["E_SERVER", "E_NETWORK"].contains(&err.code()), "{err}");
    let lines = proxy.lock().unwrap()[1..].to_vec();
    assert!(
        !lines.is_empty() && lines.iter().all(|l| l.starts_with("POST http://agent.example.invalid:8080/")),
        "the proxy saw {lines:?}"
    );

    // NO_PROXY hosts are reached directly (here: a name that does not resolve).
    let t = Transport::new(TransportConfig { base_url: "http://direct.invalid:8080".into(), ..Default::default() })
        .unwrap();
    let AgentStream { sender, mut receiver } = t.open("direct", None);
    #[allow(
        clippy::let_underscore_must_use,
        reason = "the turn may have failed already; the test asserts on the receiver"
    )]
    let _ = sender.send(&heartbeat()).await;
    let err = tokio::time::timeout(Duration::from_secs(10), receiver.next()).await.unwrap().unwrap_err();
    assert_eq!(err.code(), "E_NETWORK", "{err}");
    assert!(
        !proxy.lock().unwrap().iter().any(|l| l.contains("direct.invalid")),
        "NO_PROXY host went through the proxy"
    );
}
