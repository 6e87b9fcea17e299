//! Turns over TLS, as against Cursor's backend: every transport reaches the embedded backend
//! through a TLS endpoint whose certificate authority the system store vouches for (here
//! `SSL_CERT_FILE`), each offering the protocol it needs by ALPN; a server the store does not
//! vouch for is refused. The store is read once per process, so this binary holds one test and
//! `tls_without_system_roots.rs` the case of a system with no certificates at all.

use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use cursor_acp_core::acp::{ContentBlock, StopReason};
use cursor_acp_core::host::{ExecContext, ExecRequest, Host};
use cursor_acp_core::session::{AgentClient, ClientConfig, SessionOptions};
use cursor_acp_core::transport::TransportKind;
use cursor_acp_core::CoreError;
use cursor_acp_embedded::{EmbeddedBackend, Scenario};
use futures::future::BoxFuture;
use rcgen::{BasicConstraints, CertificateParams, IsCa, KeyPair};
use rustls::pki_types::{CertificateDer, PrivateKeyDer, PrivatePkcs8KeyDer};
use serde_json::{json, Value};
use tokio::net::{TcpListener, TcpStream};

/// Answers nothing: the scenario asks for no tools.
struct NoTools;

impl Host for NoTools {
    fn exec(&self, _: ExecRequest, _: ExecContext) -> BoxFuture<'static, Result<Option<Value>, CoreError>> {
        Box::pin(async { Ok(None) })
    }
}

/// A certificate authority and a `localhost` certificate it signed.
struct Pki {
    ca_pem: String,
    leaf: CertificateDer<'static>,
    leaf_key: PrivateKeyDer<'static>,
}

fn pki() -> Pki {
    let ca_key = KeyPair::generate().expect("CA key");
    let mut ca_params = CertificateParams::new(Vec::<String>::new()).expect("CA params");
    ca_params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    let ca = ca_params.self_signed(&ca_key).expect("CA certificate");
    let leaf_key = KeyPair::generate().expect("leaf key");
    let leaf = CertificateParams::new(vec!["localhost".to_string()])
        .expect("leaf params")
        .signed_by(&leaf_key, &ca, &ca_key)
        .expect("leaf certificate");
    Pki {
        ca_pem: ca.pem(),
        leaf: leaf.der().clone(),
        leaf_key: PrivatePkcs8KeyDer::from(leaf_key.serialize_der()).into(),
    }
}

/// Terminates TLS in front of `backend` (which speaks HTTP/1.1 and h2c on plain TCP), offering
/// `protocols` by ALPN; records the protocol each connection agreed on, or that its handshake
/// failed.
async fn tls_front(backend: SocketAddr, pki: &Pki, alpn: Arc<Mutex<Vec<String>>>, protocols: &[&str]) -> SocketAddr {
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let mut config = rustls::ServerConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .expect("TLS versions")
        .with_no_client_auth()
        .with_single_cert(vec![pki.leaf.clone()], pki.leaf_key.clone_key())
        .expect("server certificate");
    config.alpn_protocols = protocols.iter().map(|p| p.as_bytes().to_vec()).collect();
    let acceptor = tokio_rustls::TlsAcceptor::from(Arc::new(config));
    let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
    let addr = listener.local_addr().expect("address");
    tokio::spawn(async move {
        while let Ok((tcp, _)) = listener.accept().await {
            let (acceptor, alpn) = (acceptor.clone(), alpn.clone());
            tokio::spawn(async move {
                let Ok(mut tls) = acceptor.accept(tcp).await else {
                    alpn.lock().expect("alpn lock").push("(handshake failed)".into());
                    return;
                };
                let agreed = tls.get_ref().1.alpn_protocol().map(|p| String::from_utf8_lossy(p).into_owned());
                alpn.lock().expect("alpn lock").push(agreed.unwrap_or_default());
                let Ok(mut plain) = TcpStream::connect(backend).await else { return };
                #[allow(
                    clippy::let_underscore_must_use,
                    reason = "the proxy copies until either side closes; how it ended is not what the test checks"
                )]
                let _ = tokio::io::copy_bidirectional(&mut tls, &mut plain).await;
            });
        }
    });
    addr
}

/// One turn to `base_url` on `kind`: its stop reason and the text it streamed.
async fn turn(base_url: String, kind: TransportKind) -> Result<(StopReason, String), CoreError> {
    let mut config = ClientConfig::default();
    config.transport.base_url = base_url;
    config.transport.kind = kind;
    let client = AgentClient::new(config, Arc::new(NoTools), None)?;
    let session = client.new_session(SessionOptions::default())?;
    let turn = session.prompt_with(vec![ContentBlock::from("hello")], Default::default())?;
    let mut text = String::new();
    loop {
        let batch = turn.next_batch(64).await;
        if batch.is_empty() {
            break;
        }
        for update in batch {
            let update = cursor_acp_core::translate::to_json(&update);
            if update["sessionUpdate"] == "agent_message_chunk" {
                text.push_str(update["content"]["text"].as_str().unwrap_or_default());
            }
        }
    }
    Ok((turn.result().await?.stop_reason, text))
}

#[test]
fn every_transport_runs_a_turn_over_tls_and_an_unknown_server_is_refused() {
    let trusted = pki();
    let store = tempfile::NamedTempFile::new().expect("temp file");
    std::fs::write(store.path(), &trusted.ca_pem).expect("write CA");
    // Before any client exists, and before the runtime starts threads that could read the
    // environment: the system store is this CA alone.
    std::env::set_var("SSL_CERT_FILE", store.path());
    std::env::remove_var("SSL_CERT_DIR");
    let runtime = tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build().expect("runtime");
    runtime.block_on(async {
        let scenario = json!({ "steps": [{ "type": "text", "text": "over TLS" }, { "type": "turnEnded" }] });
        let backend = EmbeddedBackend::start(Scenario::from_json(&scenario).expect("scenario")).await.expect("backend");
        let alpn = Arc::new(Mutex::new(Vec::new()));
        let front = tls_front(backend.addr(), &trusted, alpn.clone(), &["h2", "http/1.1"]).await;
        // A TLS front that speaks only HTTP/1.1, as some proxies do: the automatic transport
        // learns so from ALPN and runs the turn on RunSSE.
        let http1_front = tls_front(backend.addr(), &trusted, alpn.clone(), &["http/1.1"]).await;
        for (kind, front, protocol) in [
            (TransportKind::Sse, front, "http/1.1"),
            (TransportKind::H2, front, "h2"),
            (TransportKind::Auto, front, "h2"),
            (TransportKind::Auto, http1_front, "http/1.1"),
        ] {
            alpn.lock().expect("alpn lock").clear();
            let outcome = tokio::time::timeout(
                Duration::from_secs(20),
                turn(format!("https://localhost:{}", front.port()), kind),
            )
            .await
            .expect("the turn settles");
            assert_eq!(outcome.expect("turn over TLS"), (StopReason::EndTurn, "over TLS".to_string()), "{kind:?}");
            let agreed = alpn.lock().expect("alpn lock").clone();
            assert!(!agreed.is_empty() && agreed.iter().all(|p| p == protocol), "{kind:?} agreed on {agreed:?}");
        }

        // `'h2'` against the HTTP/1.1-only front: it refuses h2 by ALPN, and the turn fails at
        // once, saying so and what to use instead (not after rounds of resumes).
        let started = tokio::time::Instant::now();
        let outcome = tokio::time::timeout(
            Duration::from_secs(10),
            turn(format!("https://localhost:{}", http1_front.port()), TransportKind::H2),
        )
        .await
        .expect("the turn settles");
        let err = outcome.expect_err("no HTTP/2 there");
        assert!(matches!(err, CoreError::Http2Unsupported(_)), "{err:?}");
        assert!(err.to_string().contains("ALPN") && err.to_string().contains("'auto'"), "{err}");
        assert!(started.elapsed() < Duration::from_secs(5), "reported without resumes: {:?}", started.elapsed());

        // A certificate from another authority: the handshake fails, the turn fails with a
        // network error naming the certificate, and nothing hangs.
        let handshakes = Arc::new(Mutex::new(Vec::new()));
        let other_front = tls_front(backend.addr(), &pki(), handshakes.clone(), &["h2", "http/1.1"]).await;
        for kind in [TransportKind::Sse, TransportKind::H2, TransportKind::Auto] {
            let outcome = tokio::time::timeout(
                Duration::from_secs(20),
                turn(format!("https://localhost:{}", other_front.port()), kind),
            )
            .await
            .expect("the turn settles");
            let err = match outcome {
                Err(e) => e,
                Ok((stop, _)) => panic!("{kind:?}: a server of an unknown authority was trusted ({stop:?})"),
            };
            assert_eq!(err.code(), "E_NETWORK", "{kind:?}: {err}");
            assert!(err.to_string().to_lowercase().contains("certificate"), "{kind:?}: {err}");
            // Not resumed: the same server would refuse the same way. One stream, and for
            // RunSSE the run request's append beside it.
            assert!(!err.is_retryable(), "{kind:?}: {err}");
            // The server side notes the failed handshake a moment after the client gave up.
            let count = || handshakes.lock().expect("handshakes lock").len();
            let deadline = tokio::time::Instant::now() + Duration::from_secs(5);
            while count() == 0 && tokio::time::Instant::now() < deadline {
                tokio::time::sleep(Duration::from_millis(10)).await;
            }
            let attempts = count();
            assert!((1..=2).contains(&attempts), "{kind:?}: {attempts} TLS handshakes");
            handshakes.lock().expect("handshakes lock").clear();
        }
    });
}
