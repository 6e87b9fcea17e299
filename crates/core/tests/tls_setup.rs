//! The TLS setup made ahead, on a thread of its own (`prepare_tls_in_background`, the addon's
//! `prepareTls()`): started once per process, and clients made while it runs, or after, use
//! the store it read. The setup is per process, so this binary holds only this test.

use std::sync::Arc;

use cursor_acp_core::host::{ExecContext, ExecRequest, Host};
use cursor_acp_core::session::{AgentClient, ClientConfig};
use cursor_acp_core::transport::prepare_tls_in_background;
use cursor_acp_core::CoreError;
use futures::future::BoxFuture;
use serde_json::Value;

struct NoTools;

impl Host for NoTools {
    fn exec(&self, _: ExecRequest, _: ExecContext) -> BoxFuture<'static, Result<Option<Value>, CoreError>> {
        Box::pin(async { Ok(None) })
    }
}

fn client(base_url: &str) -> Result<AgentClient, CoreError> {
    let mut config = ClientConfig::default();
    config.transport.base_url = base_url.into();
    AgentClient::new(config, Arc::new(NoTools), None)
}

#[test]
fn the_tls_setup_starts_once_on_its_own_thread_and_clients_use_it() {
    // A store of one certificate authority, whatever the machine has: an `https` client can
    // only be made once the store was read.
    let store = tempfile::tempdir().expect("temp dir");
    let ca_key = rcgen::KeyPair::generate().expect("CA key");
    let mut ca = rcgen::CertificateParams::new(Vec::<String>::new()).expect("CA params");
    ca.is_ca = rcgen::IsCa::Ca(rcgen::BasicConstraints::Unconstrained);
    let ca_file = store.path().join("ca.pem");
    std::fs::write(&ca_file, ca.self_signed(&ca_key).expect("CA certificate").pem()).expect("write store");
    std::env::set_var("SSL_CERT_FILE", &ca_file);
    std::env::set_var("SSL_CERT_DIR", store.path());

    let setup = prepare_tls_in_background().expect("the first call starts the setup");
    assert_eq!(setup.thread().name(), Some("acp-tls-setup"));
    assert!(prepare_tls_in_background().is_none(), "a second call starts nothing");
    // Made while the setup may still run: each waits for that one rather than making its own.
    let made: Vec<_> = (0..4)
        .map(|i| {
            std::thread::spawn(move || {
                let url = if i % 2 == 0 { "https://localhost:9" } else { "http://127.0.0.1:9" };
                client(url).map(drop).map_err(|e| e.to_string())
            })
        })
        .collect();
    for made in made {
        made.join().expect("no panic").expect("a client is made");
    }
    setup.join().expect("the setup thread did not panic");
    client("https://localhost:9").expect("an https client after the setup");
    assert!(prepare_tls_in_background().is_none(), "still nothing to start");
}
