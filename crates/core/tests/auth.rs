//! Tokens that last, against the embedded backend with auth required (as Cursor's service):
//! a token source asked before every stream, a refused token asked for again once and the
//! stream started again unseen, a second refusal an `E_AUTH` that says how to sign in, appends
//! carrying their stream's token, and the model list over a unary call. Both transports.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use cursor_acp_core::acp::{self, ContentBlock};
use cursor_acp_core::host::NoHost;
use cursor_acp_core::session::{AgentClient, ClientConfig, SessionOptions, Timing};
use cursor_acp_core::transport::{Credentials, Secret, TokenReason, TokenSource, TransportKind};
use cursor_acp_core::CoreError;
use cursor_acp_embedded::{AuthOptions, BackendOptions, EmbeddedBackend, Scenario};
use futures::future::BoxFuture;
use serde_json::json;

const KINDS: [TransportKind; 2] = [TransportKind::Sse, TransportKind::H2];

async fn backend(options: AuthOptions) -> EmbeddedBackend {
    let scenario = json!({ "steps": [{ "type": "text", "text": "hi" }, { "type": "turnEnded" }] });
    let options = BackendOptions { auth: Some(options), ..Default::default() };
    EmbeddedBackend::start_with(Scenario::from_json(&scenario).unwrap(), 0, options).await.unwrap()
}

/// A fresh access token from the backend at `url`, by API key.
async fn exchange(url: &str) -> String {
    #[allow(
        clippy::let_underscore_must_use,
        reason = "another test of this binary may have installed the provider first"
    )]
    let _ = rustls::crypto::ring::default_provider().install_default();
    let response = reqwest::Client::new()
        .post(format!("{url}/auth/exchange_user_api_key"))
        .header("authorization", "Bearer key_test")
        .body("{}")
        .send()
        .await
        .expect("exchange");
    let answer: serde_json::Value = serde_json::from_slice(&response.bytes().await.unwrap()).unwrap();
    answer["accessToken"].as_str().unwrap().to_string()
}

async fn fresh_token(backend: &EmbeddedBackend) -> String {
    exchange(&backend.url()).await
}

/// Gives `stale` until told it was refused, then fresh tokens; notes every reason it was asked
/// with. `always_stale` never gives a good one.
struct Source {
    url: String,
    stale: String,
    always_stale: bool,
    asked: Mutex<Vec<TokenReason>>,
}

impl TokenSource for Source {
    fn token(&self, reason: TokenReason) -> BoxFuture<'static, Result<Option<Secret>, CoreError>> {
        let refused_before = {
            let mut asked = self.asked.lock().unwrap();
            asked.push(reason);
            asked.contains(&TokenReason::Unauthenticated)
        };
        let (url, stale, give_stale) = (self.url.clone(), self.stale.clone(), self.always_stale || !refused_before);
        Box::pin(async move {
            if give_stale {
                return Ok(Some(Secret::new(stale)));
            }
            Ok(Some(Secret::new(exchange(&url).await)))
        })
    }
}

fn client(backend: &EmbeddedBackend, kind: TransportKind, credentials: Credentials) -> AgentClient {
    let mut config = ClientConfig {
        timing: Timing { resume_backoff: Duration::from_millis(10), ..Timing::default() },
        ..ClientConfig::default()
    };
    config.transport.base_url = backend.url();
    config.transport.kind = kind;
    config.transport.credentials = credentials;
    AgentClient::new(config, Arc::new(NoHost), None).unwrap()
}

async fn run_turn(client: &AgentClient) -> Result<acp::StopReason, CoreError> {
    let session = client.new_session(SessionOptions::default()).unwrap();
    let turn = session.prompt(vec![ContentBlock::from("go")]).unwrap();
    while tokio::time::timeout(Duration::from_secs(10), turn.next()).await.expect("updates settle").is_some() {}
    tokio::time::timeout(Duration::from_secs(10), turn.result()).await.expect("settles").map(|r| r.stop_reason)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_expired_token_then_a_fresh_one_ends_the_turn_normally() {
    for kind in KINDS {
        let short = backend(AuthOptions { required: true, access_token_ttl_ms: 1, ..Default::default() }).await;
        let stale = fresh_token(&short).await;
        // The stale token is signed by `short`; the one the turn retries with comes from a
        // backend whose tokens last, and which refuses tokens it did not issue.
        let lasting = backend(AuthOptions { required: true, ..Default::default() }).await;
        let source = Arc::new(Source { url: lasting.url(), stale, always_stale: false, asked: Mutex::default() });
        let client = client(&lasting, kind, Credentials::Source(source.clone()));
        assert_eq!(run_turn(&client).await.unwrap(), acp::StopReason::EndTurn, "{kind:?}");
        assert_eq!(*source.asked.lock().unwrap(), [TokenReason::Request, TokenReason::Unauthenticated], "{kind:?}");
        let records = lasting.records();
        assert_eq!(records.len(), 2, "{kind:?}: the refused stream and the one that ran");
        assert!(records[0].outcome.as_deref().unwrap().starts_with("refused"), "{:?}", records[0].outcome);
        assert_eq!(records[1].outcome.as_deref(), Some("end"));
        // The turn's first message went out again on the new stream: a user message, not a resume.
        assert!(records[1].messages[0].message["runRequest"]["action"]["userMessageAction"].is_object());
        assert_eq!(records[0].headers["x-original-request-id"], records[1].headers["x-original-request-id"]);
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_second_refusal_is_e_auth_saying_how_to_sign_in() {
    for kind in KINDS {
        let backend = backend(AuthOptions { required: true, ..Default::default() }).await;
        let source = Arc::new(Source {
            url: backend.url(),
            stale: "not.a-real.token".into(),
            always_stale: true,
            asked: Mutex::default(),
        });
        let client = client(&backend, kind, Credentials::Source(source.clone()));
        let err = run_turn(&client).await.unwrap_err();
        assert_eq!(err.code(), "E_AUTH", "{kind:?}");
        assert!(err.to_string().contains("cursor-acp-native login"), "{err}");
        assert!(!err.to_string().contains("not.a-real.token"), "the token never appears: {err}");
        assert_eq!(source.asked.lock().unwrap().len(), 2, "{kind:?}: asked once more, then given up");
        assert_eq!(backend.records().len(), 2, "{kind:?}: no resumes after that");
    }
}

/// A fresh token every time (so each stream's differs); notes the reasons it was asked with.
struct Counting {
    url: String,
    asked: Mutex<Vec<TokenReason>>,
}

impl TokenSource for Counting {
    fn token(&self, reason: TokenReason) -> BoxFuture<'static, Result<Option<Secret>, CoreError>> {
        self.asked.lock().unwrap().push(reason);
        let url = self.url.clone();
        Box::pin(async move { Ok(Some(Secret::new(exchange(&url).await))) })
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn each_stream_asks_once_and_its_appends_carry_its_token() {
    let backend = backend(AuthOptions { required: true, ..Default::default() }).await;
    let client = client(
        &backend,
        TransportKind::Sse,
        Credentials::Source(Arc::new(Counting { url: backend.url(), asked: Mutex::default() })),
    );
    for _ in 0..2 {
        assert_eq!(run_turn(&client).await.unwrap(), acp::StopReason::EndTurn);
    }
    let records = backend.records();
    assert_eq!(records.len(), 2);
    let tokens: Vec<&String> = records.iter().map(|r| &r.headers["authorization"]).collect();
    assert_ne!(tokens[0], tokens[1], "a token asked for per stream");
    for record in &records {
        assert!(!record.appends.is_empty());
        assert!(record.appends.iter().all(|a| a.headers["authorization"] == record.headers["authorization"]));
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_model_list_is_a_unary_call_with_the_same_token_rules() {
    let models = json!([{ "modelId": "m-fast", "displayName": "Fast" }, { "modelId": "m-deep", "displayName": "Deep", "maxMode": true }]);
    for kind in KINDS {
        let scenario = json!({ "steps": [{ "type": "turnEnded" }] });
        let options = BackendOptions {
            auth: Some(AuthOptions { required: true, ..Default::default() }),
            models: Some(models.as_array().unwrap().clone()),
        };
        let backend = EmbeddedBackend::start_with(Scenario::from_json(&scenario).unwrap(), 0, options).await.unwrap();
        let source = Arc::new(Source {
            url: backend.url(),
            stale: "stale.x.y".into(),
            always_stale: false,
            asked: Mutex::default(),
        });
        let client = client(&backend, kind, Credentials::Source(source.clone()));
        let list = client.usable_models().await.unwrap();
        assert_eq!(list.iter().map(|m| m.display_name.as_str()).collect::<Vec<_>>(), ["Fast", "Deep"], "{kind:?}");
        assert_eq!(list[1].max_mode, Some(true));
        assert_eq!(*source.asked.lock().unwrap(), [TokenReason::Request, TokenReason::Unauthenticated]);
        // Without any token: E_AUTH with the hint.
        let anonymous = client_without_token(&backend, kind);
        let err = anonymous.usable_models().await.unwrap_err();
        assert_eq!(err.code(), "E_AUTH");
        assert!(err.to_string().contains("login"), "{err}");
    }
}

fn client_without_token(backend: &EmbeddedBackend, kind: TransportKind) -> AgentClient {
    client(backend, kind, Credentials::None)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_token_refused_during_a_stream_is_renewed_and_the_turn_resumed() {
    for kind in KINDS {
        let scenario = json!({ "turns": [
            [{ "type": "text", "text": "part one" }, { "type": "error", "code": "unauthenticated", "message": "token expired" }],
            [{ "type": "text", "text": "part two" }, { "type": "turnEnded" }],
        ]});
        let options =
            BackendOptions { auth: Some(AuthOptions { required: true, ..Default::default() }), ..Default::default() };
        let backend = EmbeddedBackend::start_with(Scenario::from_json(&scenario).unwrap(), 0, options).await.unwrap();
        let source = Arc::new(Counting { url: backend.url(), asked: Mutex::default() });
        let client = client(&backend, kind, Credentials::Source(source.clone()));
        assert_eq!(run_turn(&client).await.unwrap(), acp::StopReason::EndTurn, "{kind:?}");
        assert_eq!(*source.asked.lock().unwrap(), [TokenReason::Request, TokenReason::Unauthenticated]);
        let records = backend.records();
        assert_eq!(records.len(), 2, "{kind:?}");
        let resumed = &records[1].messages[0].message["runRequest"]["action"];
        assert!(resumed["resumeAction"].is_object(), "a resume, not the user message again: {resumed}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_server_refusing_every_stream_after_a_frame_ends_the_turn_with_e_auth() {
    for kind in KINDS {
        // Every stream brings a frame, then refuses the token: renewing and resuming is bounded
        // by the resume attempts, never a loop.
        let scenario = json!({ "steps": [
            { "type": "text", "text": "part" },
            { "type": "error", "code": "unauthenticated", "message": "token expired" },
        ]});
        let options =
            BackendOptions { auth: Some(AuthOptions { required: true, ..Default::default() }), ..Default::default() };
        let backend = EmbeddedBackend::start_with(Scenario::from_json(&scenario).unwrap(), 0, options).await.unwrap();
        let source = Arc::new(Counting { url: backend.url(), asked: Mutex::default() });
        let client = client(&backend, kind, Credentials::Source(source.clone()));
        let err = run_turn(&client).await.expect_err("refused every time");
        assert_eq!(err.code(), "E_AUTH", "{kind:?}: {err}");
        let streams = backend.records().len();
        let attempts = Timing::default().resume_attempts as usize;
        assert_eq!(streams, attempts + 1, "{kind:?}: the first stream and one per resume");
    }
}
