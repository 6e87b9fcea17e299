//! A system with no certificate store at all (a slim container without `ca-certificates`):
//! a client of a plain `http` URL (the embedded backend, a local gateway) still works, and an
//! `https` one is refused when it is made, saying why. The store is read once per process, so
//! this binary holds only this test.

use std::sync::Arc;

use cursor_acp_core::acp::{ContentBlock, StopReason};
use cursor_acp_core::host::{ExecContext, ExecRequest, Host};
use cursor_acp_core::session::{AgentClient, ClientConfig};
use cursor_acp_core::CoreError;
use cursor_acp_embedded::{EmbeddedBackend, Scenario};
use futures::future::BoxFuture;
use serde_json::{json, Value};

struct NoTools;

impl Host for NoTools {
    fn exec(&self, _: ExecRequest, _: ExecContext) -> BoxFuture<'static, Result<Option<Value>, CoreError>> {
        Box::pin(async { Ok(None) })
    }
}

fn client(base_url: String) -> Result<AgentClient, CoreError> {
    let mut config = ClientConfig::default();
    config.transport.base_url = base_url;
    AgentClient::new(config, Arc::new(NoTools), None)
}

#[test]
fn without_system_certificates_http_works_and_https_says_why_it_cannot() {
    let empty = tempfile::tempdir().expect("temp dir");
    let no_certs = empty.path().join("none.pem");
    std::fs::write(&no_certs, "").expect("write empty store");
    std::env::set_var("SSL_CERT_FILE", &no_certs);
    std::env::set_var("SSL_CERT_DIR", empty.path());
    let runtime = tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build().expect("runtime");
    runtime.block_on(async {
        let scenario = json!({ "steps": [{ "type": "text", "text": "no TLS needed" }, { "type": "turnEnded" }] });
        let backend = EmbeddedBackend::start(Scenario::from_json(&scenario).expect("scenario")).await.expect("backend");
        let session =
            client(backend.url()).expect("an http client needs no certificates").new_session(Default::default());
        let turn =
            session.expect("session").prompt_with(vec![ContentBlock::from("hi")], Default::default()).expect("turn");
        while !turn.next_batch(64).await.is_empty() {}
        assert_eq!(turn.result().await.expect("turn result").stop_reason, StopReason::EndTurn);

        let err = match client("https://localhost:9".into()) {
            Err(e) => e,
            Ok(_) => panic!("an https client was made with nothing to verify servers against"),
        };
        assert!(matches!(err, CoreError::InvalidInput(_)), "{err:?}");
        assert!(err.to_string().contains("cannot verify TLS servers"), "{err}");
    });
}
