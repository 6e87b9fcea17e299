//! The embedded backend's stand-in for Cursor's sign-in service, so that logins, API keys and
//! token refresh can be exercised offline:
//!
//! * `GET /loginDeepControl?challenge&uuid&…` — the web page a user signs in on (cursor.com's,
//!   served here): approves the login `uuid` for `challenge`.
//! * `GET /auth/poll?uuid&verifier` — 404 while the login is pending (and for the first
//!   `pendingPolls` polls, after the statuses of `pollStatuses`), then
//!   `{accessToken, refreshToken}` once approved and base64url(SHA-256(verifier)) = challenge.
//! * `POST /auth/exchange_user_api_key` with `Authorization: Bearer <API key>` and `{}`.
//! * `POST /oauth/token` with `{grant_type: "refresh_token", client_id, refresh_token}` —
//!   `{access_token, refresh_token}`.
//!
//! Tokens are JWT-shaped (`header.payload.signature`, the payload carrying `sub`, `exp`, `iat`
//! and `type`), signed with a key of this backend's own, and short-lived as configured, so a
//! test can make them expire mid-session. When auth is required, every agent RPC (RunSSE, Run,
//! BidiAppend, GetUsableModels) needs a valid access token, as on the real service: a missing,
//! unknown or expired one is HTTP 401 with a Connect `unauthenticated` error.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Mutex;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use base64::Engine as _;
use serde::Deserialize;
use sha2::{Digest, Sha256};

use super::cursor_error::build_error;
use cursor_acp_core::connect::{Code, ConnectError};

pub(super) const LOGIN_PAGE_PATH: &str = "/loginDeepControl";
pub(super) const POLL_PATH: &str = "/auth/poll";
pub(super) const EXCHANGE_API_KEY_PATH: &str = "/auth/exchange_user_api_key";
pub(super) const REFRESH_PATH: &str = "/oauth/token";

/// How the backend authenticates (`startEmbeddedBackend({ auth })`).
#[derive(Debug, Clone, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct AuthOptions {
    /// Agent RPCs need a valid access token (default true once `auth` is given).
    #[serde(default = "yes")]
    pub required: bool,
    /// Lifetime of access tokens (default one hour).
    #[serde(default = "hour_ms")]
    pub access_token_ttl_ms: u64,
    /// Lifetime of refresh tokens (default 30 days).
    #[serde(default = "month_ms")]
    pub refresh_token_ttl_ms: u64,
    /// Polls of each login answered 404 (pending) before it can complete.
    #[serde(default)]
    pub pending_polls: u32,
    /// HTTP statuses answered to the first polls of each login, before `pendingPolls`
    /// (404 = pending; anything else an error).
    #[serde(default)]
    pub poll_statuses: Vec<u16>,
    /// Approve every login without the sign-in page.
    #[serde(default)]
    pub auto_approve: bool,
    /// The API keys `exchange_user_api_key` accepts (default: any non-empty key).
    #[serde(default)]
    pub api_keys: Option<Vec<String>>,
}

fn yes() -> bool {
    true
}
fn hour_ms() -> u64 {
    3_600_000
}
fn month_ms() -> u64 {
    30 * 24 * 3_600_000
}

impl Default for AuthOptions {
    fn default() -> Self {
        AuthOptions {
            required: false,
            access_token_ttl_ms: hour_ms(),
            refresh_token_ttl_ms: month_ms(),
            pending_polls: 0,
            poll_statuses: Vec::new(),
            auto_approve: false,
            api_keys: None,
        }
    }
}

/// What an auth endpoint answers: a status and a JSON body.
pub(super) struct Answer {
    pub status: u16,
    pub body: serde_json::Value,
}

fn answer(status: u16, body: serde_json::Value) -> Answer {
    Answer { status, body }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kind {
    Access,
    Refresh,
}

impl Kind {
    fn as_str(self) -> &'static str {
        match self {
            Kind::Access => "access",
            Kind::Refresh => "refresh",
        }
    }
}

/// A login started by a client: how often it polled, and the challenge once approved.
#[derive(Default)]
struct Login {
    polls: usize,
    approved: Option<String>,
}

/// Why a token is refused.
#[derive(Debug, PartialEq, Eq)]
pub(super) enum Refusal {
    Missing,
    Unknown,
    Expired,
}

impl Refusal {
    /// The error an agent RPC is refused with.
    pub(super) fn error(&self) -> ConnectError {
        let (message, cursor_error) = match self {
            Refusal::Missing => ("Not authenticated: no access token", "ERROR_NOT_LOGGED_IN"),
            Refusal::Unknown => ("Not authenticated: invalid token", "ERROR_NOT_LOGGED_IN"),
            Refusal::Expired => ("Not authenticated: token expired", "ERROR_AUTH_TOKEN_EXPIRED"),
        };
        let mut err =
            build_error("unauthenticated", message.into(), Some(cursor_error.into()), None, None, Some(false))
                .unwrap_or_else(|_| ConnectError::new(Code::Unauthenticated, message));
        err.http_status = Some(401);
        err
    }
}

pub(super) struct Auth {
    pub(super) options: AuthOptions,
    key: [u8; 32],
    logins: Mutex<HashMap<String, Login>>,
    issued: AtomicU64,
    /// How far this service's clock is ahead of the system's, in milliseconds: a test moves it
    /// ([`Auth::advance_clock`]) to make tokens expire without waiting for them to.
    clock_ahead_ms: AtomicU64,
}

/// base64url(SHA-256(text)), the challenge of a verifier.
pub(super) fn challenge_of(verifier: &str) -> String {
    URL_SAFE_NO_PAD.encode(Sha256::digest(verifier.as_bytes()))
}

impl Auth {
    pub(super) fn new(options: AuthOptions) -> Self {
        Auth {
            options,
            key: rand::random(),
            logins: Mutex::default(),
            issued: AtomicU64::new(0),
            clock_ahead_ms: AtomicU64::new(0),
        }
    }

    /// The service's time: the system's, plus what tests moved it ahead by. Tokens are issued
    /// and checked by it, so an advance expires them as the time passing would.
    fn now(&self) -> Duration {
        let system = SystemTime::now().duration_since(UNIX_EPOCH).unwrap_or_default();
        system + Duration::from_millis(self.clock_ahead_ms.load(Ordering::Relaxed))
    }

    /// Moves the service's clock `by` ahead of where it was.
    pub(super) fn advance_clock(&self, by: Duration) {
        let ms = u64::try_from(by.as_millis()).unwrap_or(u64::MAX);
        self.clock_ahead_ms.fetch_add(ms, Ordering::Relaxed);
    }

    fn sign(&self, signed_part: &str) -> String {
        let mut h = Sha256::new();
        h.update(self.key);
        h.update(signed_part.as_bytes());
        URL_SAFE_NO_PAD.encode(h.finalize())
    }

    /// A new JWT-shaped token for `subject`.
    fn issue(&self, subject: &str, kind: Kind) -> String {
        let ttl = match kind {
            Kind::Access => self.options.access_token_ttl_ms,
            Kind::Refresh => self.options.refresh_token_ttl_ms,
        };
        let issued_at = self.now();
        let exp = (issued_at + Duration::from_millis(ttl)).as_secs_f64();
        let header = URL_SAFE_NO_PAD.encode(br#"{"alg":"HS256","typ":"JWT"}"#);
        let payload = serde_json::json!({
            "sub": subject,
            "iss": "cursor-acp-native embedded backend",
            "type": kind.as_str(),
            "iat": issued_at.as_secs(),
            // Fractional: a test's token may live for less than a second.
            "exp": exp,
            "jti": self.issued.fetch_add(1, Ordering::Relaxed),
        });
        let payload = URL_SAFE_NO_PAD.encode(payload.to_string());
        let signed_part = format!("{header}.{payload}");
        let signature = self.sign(&signed_part);
        format!("{signed_part}.{signature}")
    }

    /// The claims of a token this backend signed (of any kind, expired or not).
    fn signed_claims(&self, token: &str) -> Option<serde_json::Value> {
        let (signed_part, signature) = token.rsplit_once('.')?;
        if self.sign(signed_part) != signature {
            return None;
        }
        let payload = URL_SAFE_NO_PAD.decode(signed_part.split('.').nth(1)?).ok()?;
        serde_json::from_slice(&payload).ok()
    }

    /// The subject of a token of `kind` this backend issued and that has not expired.
    fn verify(&self, token: &str, kind: Kind) -> Result<String, Refusal> {
        let claims = self.signed_claims(token).ok_or(Refusal::Unknown)?;
        if claims["type"] != kind.as_str() {
            return Err(Refusal::Unknown);
        }
        let exp = claims["exp"].as_f64().ok_or(Refusal::Unknown)?;
        if self.now().as_secs_f64() >= exp {
            return Err(Refusal::Expired);
        }
        Ok(claims["sub"].as_str().unwrap_or_default().to_string())
    }

    /// `access token 3` for a token this backend signed (of any kind, expired or not): its kind
    /// and serial number, which say which token a record's request carried without holding it.
    pub(super) fn describe_issued(&self, token: &str) -> Option<String> {
        let claims = self.signed_claims(token)?;
        Some(format!("{} token {}", claims["type"].as_str()?, claims["jti"].as_u64()?))
    }

    fn pair(&self, subject: &str) -> (String, String) {
        (self.issue(subject, Kind::Access), self.issue(subject, Kind::Refresh))
    }

    /// An agent RPC's `authorization` header checked (always accepted unless auth is required).
    pub(super) fn check(&self, authorization: Option<&str>) -> Result<(), Refusal> {
        if !self.options.required {
            return Ok(());
        }
        let token = authorization.and_then(|v| v.strip_prefix("Bearer ")).map(str::trim).filter(|t| !t.is_empty());
        self.verify(token.ok_or(Refusal::Missing)?, Kind::Access).map(drop)
    }

    /// `GET /loginDeepControl`: the user signed in on the web page.
    pub(super) fn approve(&self, query: &HashMap<String, String>) -> Answer {
        let (Some(uuid), Some(challenge)) = (query.get("uuid"), query.get("challenge")) else {
            return answer(400, serde_json::json!({ "error": "uuid and challenge are required" }));
        };
        self.logins.lock().expect("logins lock").entry(uuid.clone()).or_default().approved = Some(challenge.clone());
        answer(200, serde_json::json!({ "signedIn": true, "message": "Signed in. You can close this page." }))
    }

    /// `GET /auth/poll`.
    pub(super) fn poll(&self, query: &HashMap<String, String>) -> Answer {
        let (Some(uuid), Some(verifier)) = (query.get("uuid"), query.get("verifier")) else {
            return answer(400, serde_json::json!({ "error": "uuid and verifier are required" }));
        };
        let mut logins = self.logins.lock().expect("logins lock");
        let login = logins.entry(uuid.clone()).or_default();
        let poll = login.polls;
        login.polls += 1;
        let scripted = self.options.poll_statuses.len();
        if let Some(&status) = self.options.poll_statuses.get(poll) {
            return answer(
                status,
                serde_json::json!({ "error": format!("embedded backend: poll {poll} answers {status}") }),
            );
        }
        if poll < scripted + self.options.pending_polls as usize {
            return answer(404, serde_json::json!({ "error": "pending" }));
        }
        let approved = match &login.approved {
            Some(challenge) => Some(challenge.clone()),
            None if self.options.auto_approve => Some(challenge_of(verifier)),
            None => None,
        };
        match approved {
            Some(challenge) if challenge == challenge_of(verifier) => {
                logins.remove(uuid);
                let (access, refresh) = self.pair("embedded|user_login");
                answer(200, serde_json::json!({ "accessToken": access, "refreshToken": refresh }))
            }
            // Not signed in yet, or not by this client: still pending as far as it can tell.
            _ => answer(404, serde_json::json!({ "error": "pending" })),
        }
    }

    /// `POST /auth/exchange_user_api_key`.
    pub(super) fn exchange(&self, authorization: Option<&str>) -> Answer {
        let key = authorization.and_then(|v| v.strip_prefix("Bearer ")).map(str::trim).filter(|k| !k.is_empty());
        let Some(key) = key else {
            return answer(401, serde_json::json!({ "error": "missing API key" }));
        };
        if self.options.api_keys.as_ref().is_some_and(|keys| !keys.iter().any(|k| k == key)) {
            return answer(401, serde_json::json!({ "error": "Invalid User API Key" }));
        }
        // The subject names the key by a digest, so a test can tell which key was exchanged
        // without the key ever being sent as a token.
        let digest = hex::encode(Sha256::digest(key.as_bytes()));
        let (access, refresh) = self.pair(&format!("apikey|{}", &digest[..16]));
        answer(200, serde_json::json!({ "accessToken": access, "refreshToken": refresh }))
    }

    /// `POST /oauth/token` (a refresh-token grant).
    pub(super) fn refresh(&self, body: &[u8]) -> Answer {
        #[derive(Deserialize)]
        struct Grant {
            grant_type: String,
            #[serde(default)]
            refresh_token: String,
        }
        let Ok(grant) = serde_json::from_slice::<Grant>(body) else {
            return answer(400, serde_json::json!({ "error": "invalid_request" }));
        };
        if grant.grant_type != "refresh_token" {
            return answer(400, serde_json::json!({ "error": "unsupported_grant_type" }));
        }
        match self.verify(&grant.refresh_token, Kind::Refresh) {
            Ok(subject) => {
                let access = self.issue(&subject, Kind::Access);
                answer(
                    200,
                    serde_json::json!({ "access_token": access, "refresh_token": grant.refresh_token, "token_type": "Bearer" }),
                )
            }
            Err(_) => answer(401, serde_json::json!({ "error": "invalid_grant", "shouldLogout": true })),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn query(pairs: &[(&str, &str)]) -> HashMap<String, String> {
        pairs.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect()
    }

    #[test]
    fn a_login_polls_pending_until_approved_then_gets_tokens_that_work_and_refresh() {
        let auth =
            Auth::new(AuthOptions { required: true, pending_polls: 1, poll_statuses: vec![503], ..Default::default() });
        let verifier = "v-123";
        let poll = query(&[("uuid", "u-1"), ("verifier", verifier)]);
        assert_eq!(auth.poll(&poll).status, 503, "scripted");
        assert_eq!(auth.poll(&poll).status, 404, "pending by count");
        assert_eq!(auth.poll(&poll).status, 404, "not approved yet");
        auth.approve(&query(&[("uuid", "u-1"), ("challenge", "someone-else")]));
        assert_eq!(auth.poll(&poll).status, 404, "approved for another verifier");
        auth.approve(&query(&[("uuid", "u-1"), ("challenge", &challenge_of(verifier))]));
        let done = auth.poll(&poll);
        assert_eq!(done.status, 200);
        let access = done.body["accessToken"].as_str().unwrap();
        let refresh = done.body["refreshToken"].as_str().unwrap();
        assert_eq!(access.split('.').count(), 3, "JWT-shaped");
        assert!(auth.check(Some(&format!("Bearer {access}"))).is_ok());
        assert_eq!(
            auth.check(Some(&format!("Bearer {refresh}"))),
            Err(Refusal::Unknown),
            "a refresh token is no access token"
        );
        assert_eq!(auth.check(None), Err(Refusal::Missing));
        assert_eq!(auth.check(Some("Bearer x.y.z")), Err(Refusal::Unknown));
        let body = serde_json::json!({ "grant_type": "refresh_token", "client_id": "c", "refresh_token": refresh });
        let renewed = auth.refresh(body.to_string().as_bytes());
        assert_eq!(renewed.status, 200);
        assert!(auth.check(Some(&format!("Bearer {}", renewed.body["access_token"].as_str().unwrap()))).is_ok());
        let bad = serde_json::json!({ "grant_type": "refresh_token", "refresh_token": access });
        assert_eq!(auth.refresh(bad.to_string().as_bytes()).status, 401);
    }

    #[test]
    fn tokens_expire_when_the_clock_passes_their_lifetime() {
        let auth = Auth::new(AuthOptions { required: true, access_token_ttl_ms: 60_000, ..Default::default() });
        let access = auth.exchange(Some("Bearer key_1")).body["accessToken"].as_str().unwrap().to_string();
        let bearer = format!("Bearer {access}");
        auth.advance_clock(Duration::from_millis(59_000));
        assert!(auth.check(Some(&bearer)).is_ok(), "a second of its minute is left");
        auth.advance_clock(Duration::from_millis(1_500));
        assert_eq!(auth.check(Some(&bearer)), Err(Refusal::Expired));
        assert_eq!(Refusal::Expired.error().http_status, Some(401));
        // A token issued after the advance lives its full lifetime from the service's time.
        let fresh = auth.exchange(Some("Bearer key_1")).body["accessToken"].as_str().unwrap().to_string();
        assert!(auth.check(Some(&format!("Bearer {fresh}"))).is_ok());
    }
}
