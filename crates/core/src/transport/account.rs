//! The account's HTTP calls: an API key exchanged for tokens, a login's refresh, one poll of a
//! browser sign-in. They go through the same stack as turns (the reqwest client of an HTTP/1.1
//! transport: the system's proxy settings, the platform's certificate verifier, the connect
//! timeout) and carry the same client headers, so a machine that can run turns can sign in, and
//! a failure to connect is diagnosed the same way (`diagnosis.rs`).
//!
//! The shapes are those of Cursor's service (and of the embedded backend's `auth.rs`):
//!
//! * `POST /auth/exchange_user_api_key`, `Authorization: Bearer <API key>`, body `{}` →
//!   `{accessToken, refreshToken}`; 401/403 when the key is refused.
//! * `POST /oauth/token`, `{grant_type: "refresh_token", client_id, refresh_token}` →
//!   `{access_token, refresh_token?}` (camelCase accepted too); 400/401/403 or
//!   `shouldLogout: true` when the login is over.
//! * `GET /auth/poll?uuid&verifier` → 404 while the sign-in is pending, then
//!   `{accessToken, refreshToken}`.
//!
//! Secrets (the API key, tokens, the verifier) never reach an error or a log: requests carry
//! them in sensitive headers or in bodies, and a failed request's URL loses its query before
//! reqwest's error is turned into a message.

use std::time::Duration;

use reqwest::header::{HeaderMap, HeaderValue, AUTHORIZATION, CONTENT_TYPE};

use super::clients::http_client;
use super::config::{TransportConfig, TransportKind};
use super::credentials::bearer;
use super::credentials::Secret;
use super::headers::protocol_headers;
use super::request::read_capped;
use crate::connect::{Code, ConnectError};
use crate::error::CoreError;

/// How long one account call may take, connection included (what the official client allows).
pub const ACCOUNT_CALL_TIMEOUT: Duration = Duration::from_secs(30);
pub const EXCHANGE_API_KEY_PATH: &str = "/auth/exchange_user_api_key";
pub const REFRESH_PATH: &str = "/oauth/token";
pub const POLL_PATH: &str = "/auth/poll";
/// Largest answer read: a token pair is about 1 KiB.
const MAX_ANSWER_BYTES: usize = 64 * 1024;

/// The tokens an account call gives. `Debug` never shows them.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AccountTokens {
    pub access_token: Secret,
    /// Absent when a refresh keeps the refresh token it was given.
    pub refresh_token: Option<Secret>,
}

/// One poll of a browser sign-in.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum LoginPoll {
    /// The user has not signed in yet (the service answered 404): poll again later.
    Pending,
    /// Signed in: the login's tokens.
    SignedIn(AccountTokens),
}

/// The account calls to one backend, with one HTTP/1.1 client reused across calls (a sign-in
/// polls up to 150 times).
#[derive(Clone)]
pub struct Account {
    client: reqwest::Client,
    base: reqwest::Url,
    headers: HeaderMap,
    timeout: Duration,
}

impl std::fmt::Debug for Account {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Account").field("base", &super::diagnosis::origin(&self.base)).finish()
    }
}

/// The token fields of an answer, in either spelling (the refresh grant answers in snake case).
#[derive(Default)]
struct TokenAnswer {
    access_token: Option<serde_json::Value>,
    refresh_token: Option<serde_json::Value>,
    should_logout: Option<serde_json::Value>,
}

impl TokenAnswer {
    fn parse(body: &[u8]) -> TokenAnswer {
        // A body that is not JSON reads as one without tokens, which each call reports.
        serde_json::from_slice::<serde_json::Value>(body)
            .ok()
            .map(|v| TokenAnswer {
                access_token: v.get("accessToken").or_else(|| v.get("access_token")).cloned(),
                refresh_token: v.get("refreshToken").or_else(|| v.get("refresh_token")).cloned(),
                should_logout: v.get("shouldLogout").cloned(),
            })
            .unwrap_or_default()
    }

    fn access(&self) -> Option<Secret> {
        non_empty(self.access_token.as_ref())
    }

    fn refresh(&self) -> Option<Secret> {
        non_empty(self.refresh_token.as_ref())
    }
}

fn non_empty(value: Option<&serde_json::Value>) -> Option<Secret> {
    value.and_then(serde_json::Value::as_str).filter(|s| !s.is_empty()).map(Secret::new)
}

/// An error the service answered with: its status, and a message of ours (never the body, which
/// could echo what was sent).
fn refused(code: Code, status: u16, message: String) -> ConnectError {
    let mut err = ConnectError::new(code, message);
    err.http_status = Some(status);
    err
}

impl Account {
    /// The account calls to `config.base_url`, with `config`'s client headers (client version
    /// and type, privacy mode, extra headers) and connect timeout. Credentials in `config` are
    /// not used: each call carries its own.
    pub fn new(config: &TransportConfig) -> Result<Account, CoreError> {
        let base = reqwest::Url::parse(&config.base_url)
            .map_err(|e| CoreError::InvalidInput(format!("baseUrl {:?} is not a URL: {e}", config.base_url)))?;
        if base.scheme() != "http" && base.scheme() != "https" {
            return Err(CoreError::InvalidInput(format!("baseUrl must be http(s), got {:?}", base.scheme())));
        }
        let client = http_client(config, TransportKind::Sse, &base)?;
        let mut headers = protocol_headers(config)?;
        // These are plain JSON calls, not Connect ones.
        headers.remove("connect-protocol-version");
        Ok(Account { client, base, headers, timeout: ACCOUNT_CALL_TIMEOUT })
    }

    /// The same calls with another time limit per call (tests).
    pub fn with_timeout(mut self, timeout: Duration) -> Account {
        self.timeout = timeout;
        self
    }

    /// Exchanges an API key for an access token (and a refresh token). A refused key is
    /// `E_AUTH`; another failing status `E_SERVER`; an answer without a token `E_PROTOCOL`.
    pub async fn exchange_api_key(&self, api_key: &Secret) -> Result<AccountTokens, CoreError> {
        if api_key.expose().trim().is_empty() {
            return Err(CoreError::InvalidInput("the API key is empty".into()));
        }
        let authorization = bearer(api_key)
            .map_err(|_| CoreError::InvalidInput("the API key contains characters not allowed in a header".into()))?;
        let (status, body) =
            self.send(reqwest::Method::POST, EXCHANGE_API_KEY_PATH, Some(authorization), b"{}").await?;
        match status {
            401 | 403 => {
                return Err(CoreError::Auth(refused(
                    Code::Unauthenticated,
                    status,
                    format!("the API key was refused (HTTP {status}): check CURSOR_API_KEY"),
                )))
            }
            200..=299 => {}
            _ => {
                return Err(CoreError::Server(refused(
                    Code::from_http_status(status),
                    status,
                    format!("the API key exchange failed with HTTP {status}"),
                )))
            }
        }
        let answer = TokenAnswer::parse(&body);
        let access_token = answer
            .access()
            .ok_or_else(|| CoreError::Protocol("the API key exchange answered without an accessToken".into()))?;
        Ok(AccountTokens { access_token, refresh_token: answer.refresh() })
    }

    /// Renews a login's access token with its refresh token (the refresh-token grant of
    /// `client_id`). A login that is over (400/401/403, or `shouldLogout`) is `E_AUTH`.
    pub async fn refresh(&self, refresh_token: &Secret, client_id: &str) -> Result<AccountTokens, CoreError> {
        if refresh_token.expose().is_empty() {
            return Err(CoreError::InvalidInput("the refresh token is empty".into()));
        }
        let grant = serde_json::json!({
            "grant_type": "refresh_token",
            "client_id": client_id,
            "refresh_token": refresh_token.expose(),
        });
        let (status, body) = self.send(reqwest::Method::POST, REFRESH_PATH, None, grant.to_string().as_bytes()).await?;
        let answer = TokenAnswer::parse(&body);
        if matches!(status, 400 | 401 | 403) || answer.should_logout == Some(serde_json::Value::Bool(true)) {
            return Err(CoreError::Auth(refused(
                Code::Unauthenticated,
                status,
                "the Cursor login has expired or was revoked".into(),
            )));
        }
        if !(200..=299).contains(&status) {
            return Err(CoreError::Server(refused(
                Code::from_http_status(status),
                status,
                format!("refreshing the Cursor login failed with HTTP {status}"),
            )));
        }
        let access_token = answer
            .access()
            .ok_or_else(|| CoreError::Protocol("the login refresh answered without an access token".into()))?;
        Ok(AccountTokens { access_token, refresh_token: answer.refresh() })
    }

    /// One poll of the sign-in `uuid` started with `verifier`: [`LoginPoll::Pending`] while
    /// the service answers 404. Any other failing status is `E_SERVER` with that status; a
    /// success without both tokens `E_PROTOCOL`.
    pub async fn poll_login(&self, uuid: &str, verifier: &Secret) -> Result<LoginPoll, CoreError> {
        if uuid.is_empty() || verifier.expose().is_empty() {
            return Err(CoreError::InvalidInput("a sign-in poll needs its uuid and verifier".into()));
        }
        let mut url = self.url(POLL_PATH)?;
        url.query_pairs_mut().append_pair("uuid", uuid).append_pair("verifier", verifier.expose());
        let (status, body) = self.send_to(reqwest::Method::GET, url, None, None).await?;
        match status {
            404 => return Ok(LoginPoll::Pending),
            200..=299 => {}
            _ => {
                return Err(CoreError::Server(refused(
                    Code::from_http_status(status),
                    status,
                    format!("the sign-in service answered HTTP {status}"),
                )))
            }
        }
        let answer = TokenAnswer::parse(&body);
        match (answer.access(), answer.refresh()) {
            (Some(access_token), Some(refresh_token)) => {
                Ok(LoginPoll::SignedIn(AccountTokens { access_token, refresh_token: Some(refresh_token) }))
            }
            _ => Err(CoreError::Protocol("the sign-in service answered without tokens".into())),
        }
    }

    fn url(&self, path: &str) -> Result<reqwest::Url, CoreError> {
        self.base
            .join(path)
            .map_err(|e| CoreError::InvalidInput(format!("{path:?} does not make a URL with baseUrl: {e}")))
    }

    async fn send(
        &self,
        method: reqwest::Method,
        path: &str,
        authorization: Option<HeaderValue>,
        json: &[u8],
    ) -> Result<(u16, Vec<u8>), CoreError> {
        let url = self.url(path)?;
        self.send_to(method, url, authorization, Some(json.to_vec())).await
    }

    /// Sends one request and reads its status and (capped) body, within the call's time limit.
    async fn send_to(
        &self,
        method: reqwest::Method,
        url: reqwest::Url,
        authorization: Option<HeaderValue>,
        json: Option<Vec<u8>>,
    ) -> Result<(u16, Vec<u8>), CoreError> {
        let mut request = reqwest::Request::new(method, url);
        *request.timeout_mut() = Some(self.timeout);
        let headers = request.headers_mut();
        *headers = self.headers.clone();
        if let Some(authorization) = authorization {
            headers.insert(AUTHORIZATION, authorization);
        }
        if let Some(json) = json {
            headers.insert(CONTENT_TYPE, HeaderValue::from_static("application/json"));
            *request.body_mut() = Some(reqwest::Body::from(json));
        }
        let call = async {
            let response = self.client.execute(request).await.map_err(without_query)?;
            let status = response.status().as_u16();
            Ok::<_, CoreError>((status, read_capped(response, MAX_ANSWER_BYTES).await))
        };
        // reqwest's own timeout covers the request; this one also covers reading the body.
        match tokio::time::timeout(self.timeout, call).await {
            Ok(outcome) => outcome,
            Err(_) => Err(CoreError::Timeout(format!(
                "no answer from {} within {} s",
                super::diagnosis::origin(&self.base),
                self.timeout.as_secs_f32()
            ))),
        }
    }
}

/// reqwest's error as a [`CoreError`], its URL without the query (a poll's holds the verifier)
/// so that no message can show it. Connection failures keep their diagnosis, which needs only
/// the origin.
fn without_query(mut e: reqwest::Error) -> CoreError {
    if let Some(url) = e.url_mut() {
        url.set_query(None);
    }
    CoreError::from(e)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn token_answers_are_read_in_either_spelling_and_never_print() {
        let camel = TokenAnswer::parse(br#"{"accessToken":"a.b.c","refreshToken":"r"}"#);
        assert_eq!(camel.access(), Some(Secret::new("a.b.c")));
        assert_eq!(camel.refresh(), Some(Secret::new("r")));
        let snake = TokenAnswer::parse(br#"{"access_token":"x","refresh_token":"","shouldLogout":false}"#);
        assert_eq!(snake.access(), Some(Secret::new("x")));
        assert_eq!(snake.refresh(), None, "an empty refresh token is none");
        assert_eq!(TokenAnswer::parse(b"<html>").access(), None);
        assert_eq!(TokenAnswer::parse(br#"{"accessToken":7}"#).access(), None);
        let tokens = AccountTokens { access_token: Secret::new("tok-1"), refresh_token: Some(Secret::new("ref-1")) };
        let shown = format!("{:?}", LoginPoll::SignedIn(tokens));
        assert!(!shown.contains("tok-1") && !shown.contains("ref-1"), "{shown}");
    }

    #[test]
    fn a_base_url_that_is_not_http_is_refused() {
        for base_url in ["ftp://x", "not a url"] {
            let config = TransportConfig { base_url: base_url.into(), ..Default::default() };
            assert!(matches!(Account::new(&config), Err(CoreError::InvalidInput(_))), "{base_url}");
        }
    }
}
