//! The account's calls (API-key exchange, login refresh, sign-in poll) against the embedded
//! backend's sign-in service, over real sockets: what succeeds, what is refused and with which
//! code, a poll's "not yet", a server that cannot be reached or never answers, the headers sent;
//! and that no secret ever appears in an error.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use cursor_acp_core::transport::{Account, AccountTokens, LoginPoll, Secret, TransportConfig};
use cursor_acp_core::CoreError;
use cursor_acp_embedded::{AuthOptions, BackendOptions, EmbeddedBackend, Scenario};
use serde_json::json;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpListener;

#[path = "common/closed_port.rs"]
mod closed_port;
use closed_port::ClosedPort;

async fn backend(options: AuthOptions) -> EmbeddedBackend {
    let scenario = json!({ "steps": [{ "type": "turnEnded" }] });
    let options = BackendOptions { auth: Some(options), ..Default::default() };
    EmbeddedBackend::start_with(Scenario::from_json(&scenario).unwrap(), 0, options).await.unwrap()
}

fn account(base_url: &str) -> Account {
    Account::new(&TransportConfig { base_url: base_url.into(), ..Default::default() }).unwrap()
}

/// The claims of a JWT-shaped token.
fn claims(token: &Secret) -> serde_json::Value {
    use base64::Engine as _;
    let payload = token.expose().split('.').nth(1).unwrap();
    serde_json::from_slice(&base64::engine::general_purpose::URL_SAFE_NO_PAD.decode(payload).unwrap()).unwrap()
}

/// Neither the message nor the `Debug` of `err` holds any of `secrets`.
fn assert_no_secret(err: &CoreError, secrets: &[&str]) {
    let shown = format!("{err} {err:?}");
    for secret in secrets {
        assert!(!shown.contains(secret), "{secret:?} appears in {shown}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_api_key_is_exchanged_and_a_refused_one_is_e_auth() {
    let backend = backend(AuthOptions { api_keys: Some(vec!["key_good".into()]), ..Default::default() }).await;
    let account = account(&backend.url());
    let tokens = account.exchange_api_key(&Secret::new("key_good")).await.unwrap();
    assert_eq!(claims(&tokens.access_token)["type"], "access");
    assert_eq!(claims(tokens.refresh_token.as_ref().unwrap())["type"], "refresh");

    let err = account.exchange_api_key(&Secret::new("key_wrong_secret")).await.unwrap_err();
    assert_eq!(err.code(), "E_AUTH", "{err}");
    assert_eq!(err.connect_error().and_then(|e| e.http_status), Some(401));
    assert!(err.to_string().contains("the API key was refused (HTTP 401)"), "{err}");
    assert_no_secret(&err, &["key_wrong_secret"]);

    let err = account.exchange_api_key(&Secret::new("")).await.unwrap_err();
    assert_eq!(err.code(), "E_INVALID", "{err}");
    let err = account.exchange_api_key(&Secret::new("key\nwith-newline")).await.unwrap_err();
    assert_eq!(err.code(), "E_INVALID", "{err}");
    assert_no_secret(&err, &["with-newline"]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_login_is_refreshed_and_one_that_is_over_is_e_auth() {
    let backend = backend(AuthOptions::default()).await;
    let account = account(&backend.url());
    let AccountTokens { access_token, refresh_token } = account.exchange_api_key(&Secret::new("key_1")).await.unwrap();
    let refresh_token = refresh_token.unwrap();
    let renewed = account.refresh(&refresh_token, "client-1").await.unwrap();
    assert_eq!(claims(&renewed.access_token)["type"], "access");
    assert_ne!(renewed.access_token, access_token, "a new access token");
    assert_eq!(renewed.refresh_token.as_ref(), Some(&refresh_token), "the service keeps the refresh token");

    // An access token is no refresh token: the service says to sign in again.
    let err = account.refresh(&access_token, "client-1").await.unwrap_err();
    assert_eq!(err.code(), "E_AUTH", "{err}");
    assert!(err.to_string().contains("expired or was revoked"), "{err}");
    assert_no_secret(&err, &[access_token.expose()]);
    assert_eq!(account.refresh(&Secret::new(""), "c").await.unwrap_err().code(), "E_INVALID");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_poll_is_pending_until_signed_in_and_a_failing_service_is_e_server() {
    let backend = backend(AuthOptions { poll_statuses: vec![503], ..Default::default() }).await;
    let account = account(&backend.url());
    let verifier = Secret::new("verifier-that-stays-secret");
    let err = account.poll_login("u-1", &verifier).await.unwrap_err();
    assert_eq!(err.code(), "E_SERVER", "{err}");
    assert_eq!(err.connect_error().and_then(|e| e.http_status), Some(503));
    assert!(err.to_string().contains("the sign-in service answered HTTP 503"), "{err}");
    assert_no_secret(&err, &[verifier.expose()]);
    assert_eq!(account.poll_login("u-1", &verifier).await.unwrap(), LoginPoll::Pending);

    // The user signs in on the page, for this verifier's challenge.
    use base64::Engine as _;
    use sha2::Digest as _;
    let challenge =
        base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(sha2::Sha256::digest(verifier.expose().as_bytes()));
    let page = reqwest::Client::new()
        .get(format!("{}/loginDeepControl?uuid=u-1&challenge={challenge}", backend.url()))
        .send()
        .await
        .unwrap();
    assert_eq!(page.status(), 200);
    let LoginPoll::SignedIn(tokens) = account.poll_login("u-1", &verifier).await.unwrap() else {
        panic!("signed in by now");
    };
    assert_eq!(claims(&tokens.access_token)["sub"], "embedded|user_login");
    assert!(tokens.refresh_token.is_some());
    assert_eq!(account.poll_login("", &verifier).await.unwrap_err().code(), "E_INVALID");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_unreachable_service_is_e_network_naming_the_cause_without_a_secret() {
    let closed_port = ClosedPort::new();
    let closed = closed_port.port();
    let account = account(&format!("http://127.0.0.1:{closed}"));
    let verifier = Secret::new("verifier-xyz-secret");
    let errors = [
        account.poll_login("u-2", &verifier).await.unwrap_err(),
        account.exchange_api_key(&Secret::new("key-xyz-secret")).await.unwrap_err(),
        account.refresh(&Secret::new("refresh-xyz-secret"), "c").await.unwrap_err(),
    ];
    for err in &errors {
        assert_eq!(err.code(), "E_NETWORK", "{err}");
        let text = err.to_string();
        assert!(text.contains(&format!("cannot connect to http://127.0.0.1:{closed}")), "{text}");
        assert!(text.contains("connection refused") && text.contains("Check baseUrl"), "{text}");
        assert_no_secret(err, &["xyz-secret", "verifier", "u-2"]);
    }

    // A host name that does not resolve.
    let err = self::account("http://no-such-host.invalid:9").poll_login("u-3", &verifier).await.unwrap_err();
    assert_eq!(err.code(), "E_NETWORK", "{err}");
    assert!(err.to_string().contains("no-such-host.invalid"), "{err}");
    assert_no_secret(&err, &["xyz-secret"]);
}

/// A one-request server: records each request's head and answers `reply`, or never answers.
async fn scripted_server(reply: Option<&'static str>) -> (String, Arc<Mutex<Vec<String>>>) {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}", listener.local_addr().unwrap());
    let seen = Arc::new(Mutex::new(Vec::new()));
    let log = seen.clone();
    tokio::spawn(async move {
        while let Ok((mut socket, _)) = listener.accept().await {
            let log = log.clone();
            tokio::spawn(async move {
                let mut request = Vec::new();
                let mut buf = [0u8; 4096];
                // Up to the end of the head, and the small body after it.
                while !String::from_utf8_lossy(&request).contains("\r\n\r\n") {
                    match socket.read(&mut buf).await {
                        Ok(0) | Err(_) => return,
                        Ok(n) => request.extend_from_slice(&buf[..n]),
                    }
                }
                log.lock().unwrap().push(String::from_utf8_lossy(&request).into_owned());
                match reply {
                    Some(reply) => {
                        #[allow(
                            clippy::let_underscore_must_use,
                            reason = "a client that hung up needs no reply; the test asserts on what it received"
                        )]
                        let _ = socket.write_all(reply.as_bytes()).await;
                    }
                    None => tokio::time::sleep(Duration::from_secs(30)).await,
                }
            });
        }
    });
    (url, seen)
}

fn http(status: &str, body: &str) -> &'static str {
    let text = format!(
        "HTTP/1.1 {status}\r\ncontent-type: application/json\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{body}",
        body.len()
    );
    Box::leak(text.into_boxed_str())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn calls_carry_the_client_headers_and_odd_answers_are_coded_errors() {
    let (url, seen) = scripted_server(Some(http("200 OK", r#"{"accessToken":"","refreshToken":"r"}"#))).await;
    let config = TransportConfig {
        base_url: url.clone(),
        client_version: "cli-2099.01.01-test".into(),
        headers: vec![("x-gateway".into(), "team-a".into())],
        ..Default::default()
    };
    let account = Account::new(&config).unwrap();
    let err = account.exchange_api_key(&Secret::new("key_h")).await.unwrap_err();
    assert_eq!(err.code(), "E_PROTOCOL", "{err}");
    let head = seen.lock().unwrap()[0].to_ascii_lowercase();
    assert!(head.starts_with("post /auth/exchange_user_api_key http/1.1\r\n"), "{head}");
    let headers: HashMap<&str, &str> = head.lines().skip(1).filter_map(|l| l.split_once(": ")).collect();
    assert_eq!(headers["x-cursor-client-version"], "cli-2099.01.01-test");
    assert_eq!(headers["x-cursor-client-type"], "cli");
    assert_eq!(headers["x-gateway"], "team-a");
    assert_eq!(headers["authorization"], "bearer key_h");
    assert_eq!(headers["content-type"], "application/json");
    assert!(!headers.contains_key("connect-protocol-version"), "not a Connect call");
    assert!(head.ends_with("{}"), "the exchange's body is {{}}: {head}");

    // A refresh answered with a server error, and one answered `shouldLogout`.
    let (url, seen) = scripted_server(Some(http("502 Bad Gateway", "{}"))).await;
    let err = self::account(&url).refresh(&Secret::new("ref_1"), "client-9").await.unwrap_err();
    assert_eq!((err.code(), err.connect_error().and_then(|e| e.http_status)), ("E_SERVER", Some(502)), "{err}");
    let head = seen.lock().unwrap()[0].clone();
    assert!(head.starts_with("POST /oauth/token HTTP/1.1"), "{head}");
    let body: serde_json::Value = serde_json::from_str(head.split("\r\n\r\n").nth(1).unwrap()).unwrap();
    assert_eq!(body, json!({ "grant_type": "refresh_token", "client_id": "client-9", "refresh_token": "ref_1" }));
    let (url, _) = scripted_server(Some(http("200 OK", r#"{"shouldLogout":true}"#))).await;
    let err = self::account(&url).refresh(&Secret::new("ref_2"), "c").await.unwrap_err();
    assert_eq!(err.code(), "E_AUTH", "{err}");
    // Not JSON at all.
    let (url, _) = scripted_server(Some(http("200 OK", "<html>hello</html>"))).await;
    let err = self::account(&url).poll_login("u", &Secret::new("v")).await.unwrap_err();
    assert_eq!(err.code(), "E_PROTOCOL", "{err}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_service_that_never_answers_is_e_timeout_within_the_call_limit() {
    let (url, seen) = scripted_server(None).await;
    let account = self::account(&url).with_timeout(Duration::from_millis(300));
    let started = std::time::Instant::now();
    let verifier = Secret::new("slow-verifier-secret");
    let err = account.poll_login("u-9", &verifier).await.unwrap_err();
    assert_eq!(err.code(), "E_TIMEOUT", "{err}");
    assert!(started.elapsed() < Duration::from_secs(5), "{:?}", started.elapsed());
    assert_no_secret(&err, &[verifier.expose()]);
    assert!(seen.lock().unwrap()[0].starts_with("GET /auth/poll?uuid=u-9&verifier=slow-verifier-secret HTTP/1.1"));
}
