//! Where the access token comes from: none, a fixed token, or a [`TokenSource`] asked before
//! each stream and each unary call, so that a long session outlives any one token. Once asked,
//! a stream keeps its token: every request of the stream (RunSSE and its appends) carries it.
//! [`Secret`] is the credential that never prints.

use std::fmt;
use std::sync::Arc;
use std::time::Duration;

use futures::future::BoxFuture;
use reqwest::header::{HeaderMap, HeaderValue, AUTHORIZATION};
use tokio::sync::OnceCell;

use crate::error::CoreError;

/// A credential. Its `Debug` and `Display` never show the value.
#[derive(Clone, PartialEq, Eq)]
pub struct Secret(String);

impl Secret {
    pub fn new(value: impl Into<String>) -> Self {
        Secret(value.into())
    }
    /// The raw value, for the one place that needs it (the authorization header).
    pub fn expose(&self) -> &str {
        &self.0
    }
}

impl fmt::Debug for Secret {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("Secret(<redacted>)")
    }
}

/// Why the client asks a [`TokenSource`] for a token.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TokenReason {
    /// A stream or call is about to start.
    Request,
    /// The server refused the last token (HTTP 401 or Connect `unauthenticated`) before the
    /// stream had produced anything: a source that caches tokens should get a fresh one.
    Unauthenticated,
}

impl TokenReason {
    /// The name JavaScript sees (`accessToken({ reason })`).
    pub fn as_str(self) -> &'static str {
        match self {
            TokenReason::Request => "request",
            TokenReason::Unauthenticated => "unauthenticated",
        }
    }
}

/// Gives access tokens on demand (the addon's `accessToken` function). `None` means "no
/// token": the request goes without `authorization`, as to a gateway that needs none.
pub trait TokenSource: Send + Sync {
    fn token(&self, reason: TokenReason) -> BoxFuture<'static, Result<Option<Secret>, CoreError>>;
}

/// What a transport authenticates with.
#[derive(Clone, Default)]
pub enum Credentials {
    /// No `authorization` header (local gateways, the embedded backend without auth).
    #[default]
    None,
    /// The same token on every request.
    Token(Secret),
    /// Asked before every stream and unary call.
    Source(Arc<dyn TokenSource>),
}

impl fmt::Debug for Credentials {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Credentials::None => "Credentials::None",
            Credentials::Token(_) => "Credentials::Token(<redacted>)",
            Credentials::Source(_) => "Credentials::Source",
        })
    }
}

/// `Bearer <token>`, marked sensitive (never in a log or `Debug` output).
pub(super) fn bearer(token: &Secret) -> Result<HeaderValue, CoreError> {
    let mut value = HeaderValue::from_str(&format!("Bearer {}", token.expose()))
        .map_err(|_| CoreError::Credentials("the access token contains characters not allowed in a header".into()))?;
    value.set_sensitive(true);
    Ok(value)
}

/// The `authorization` of one stream or call: asked for when first needed, then shared by
/// every request of the stream.
pub(super) struct StreamAuth {
    credentials: Credentials,
    reason: TokenReason,
    timeout: Duration,
    value: OnceCell<Result<Option<HeaderValue>, CoreError>>,
}

impl StreamAuth {
    pub(super) fn new(credentials: &Credentials, reason: TokenReason, timeout: Duration) -> Arc<Self> {
        Arc::new(StreamAuth { credentials: credentials.clone(), reason, timeout, value: OnceCell::new() })
    }

    /// The header value for this stream, asking the source the first time.
    async fn header(&self) -> Result<Option<HeaderValue>, CoreError> {
        self.value
            .get_or_init(|| async {
                match &self.credentials {
                    Credentials::None => Ok(None),
                    Credentials::Token(token) => bearer(token).map(Some),
                    Credentials::Source(source) => {
                        let asked = tokio::time::timeout(self.timeout, source.token(self.reason)).await;
                        match asked {
                            Ok(Ok(Some(token))) if !token.expose().is_empty() => bearer(&token).map(Some),
                            Ok(Ok(_)) => Ok(None),
                            Ok(Err(e)) => Err(e),
                            Err(_) => Err(CoreError::Credentials(format!(
                                "the accessToken function did not settle within {} ms",
                                self.timeout.as_millis()
                            ))),
                        }
                    }
                }
            })
            .await
            .clone()
    }

    /// Adds `authorization` to `headers` (when there is a token).
    pub(super) async fn apply(&self, headers: &mut HeaderMap) -> Result<(), CoreError> {
        if let Some(value) = self.header().await? {
            headers.insert(AUTHORIZATION, value);
        }
        Ok(())
    }
}
