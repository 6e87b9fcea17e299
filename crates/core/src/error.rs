//! The core's one error type, with a stable code for JavaScript (`err.code`).
//!
//! Messages never contain credentials: the transport never formats headers or request bodies
//! into errors, and server-supplied messages are passed through as the server wrote them.

use crate::connect::{Code, ConnectError, FrameError};

#[derive(Debug, Clone, thiserror::Error)]
pub enum CoreError {
    /// The server rejected our credentials (`unauthenticated`, HTTP 401).
    #[error("authentication failed: {0}")]
    Auth(ConnectError),
    /// No usable credentials: the `accessToken` function failed or gave none where one is
    /// needed. The message says how to sign in.
    #[error("authentication failed: {0}")]
    Credentials(String),
    /// The server ended the call with a Connect error.
    #[error("server error {0}")]
    Server(ConnectError),
    /// Could not reach the server, or the connection broke.
    #[error("network error: {0}")]
    Network(String),
    /// No connection could be made at all (refused, no such host, a proxy that would not
    /// connect): the message names the cause and the fix. Retrying at once would only delay it.
    #[error("network error: {0}")]
    Unreachable(String),
    /// The transport is `'h2'` and the server, or a proxy in front of it, does not speak HTTP/2.
    #[error("network error: {0}")]
    Http2Unsupported(String),
    /// The server's TLS certificate was not accepted: retrying cannot help.
    #[error("network error: {0}")]
    Untrusted(String),
    /// An automatic transport found that the server does not offer `Run` over HTTP/2 (nothing
    /// of the stream reached an agent); its next streams use RunSSE over HTTP/1.1.
    #[error("network error: the server does not offer Run over HTTP/2: {0}")]
    NoHttp2(String),
    /// The response body ended without the Connect end-of-stream frame.
    #[error("network error: the server closed the stream before its end-of-stream frame")]
    StreamClosed,
    /// Bytes on the wire violated the Connect framing rules.
    #[error("protocol error: {0}")]
    Frame(#[from] FrameError),
    /// A frame decoded but its payload was not the expected message.
    #[error("protocol error: {0}")]
    Protocol(String),
    /// A deadline passed (append deadline, stall, callback timeout).
    #[error("timed out: {0}")]
    Timeout(String),
    /// A host callback failed.
    #[error("callback failed: {0}")]
    Callback(String),
    /// The caller passed something unusable (bad URL, bad header, bad scenario).
    #[error("invalid input: {0}")]
    InvalidInput(String),
    /// The stream or session is closed.
    #[error("closed: {0}")]
    Closed(String),
    /// A turn is already running on this session.
    #[error("a turn is already running on this session; wait for it or cancel it first")]
    Busy,
    /// The operation was cancelled by the caller.
    #[error("aborted")]
    Aborted,
}

impl CoreError {
    /// The one message of an option that is not what it must be, whoever gave it (a
    /// constructor's options, `CURSOR_ACP_CLIENT_OPTIONS`, a command-line flag): its name, what
    /// it takes and what it got as JSON, and why that does not do when there is more to say.
    pub fn invalid_option(name: &str, takes: &str, got: &serde_json::Value, why: Option<&str>) -> Self {
        match why {
            Some(why) => CoreError::InvalidInput(format!("{name} must be {takes}, got {got} ({why})")),
            None => CoreError::InvalidInput(format!("{name} must be {takes}, got {got}")),
        }
    }

    /// Stable code for JavaScript consumers.
    pub fn code(&self) -> &'static str {
        match self {
            CoreError::Auth(_) | CoreError::Credentials(_) => "E_AUTH",
            CoreError::Server(_) => "E_SERVER",
            CoreError::Network(_)
            | CoreError::Unreachable(_)
            | CoreError::Http2Unsupported(_)
            | CoreError::Untrusted(_)
            | CoreError::NoHttp2(_)
            | CoreError::StreamClosed => "E_NETWORK",
            CoreError::Frame(_) | CoreError::Protocol(_) => "E_PROTOCOL",
            CoreError::Timeout(_) => "E_TIMEOUT",
            CoreError::Callback(_) => "E_CALLBACK",
            CoreError::InvalidInput(_) => "E_INVALID",
            CoreError::Closed(_) => "E_CLOSED",
            CoreError::Busy => "E_BUSY",
            CoreError::Aborted => "ABORT_ERR",
        }
    }

    /// Classifies a Connect error: authentication failures get their own kind.
    pub fn from_connect(err: ConnectError) -> Self {
        let msg = err.message.to_ascii_lowercase();
        let auth_words = ["unauthorized", "unauthenticated", "authentication failed", "invalid token", "token expired"];
        if err.code == Code::Unauthenticated
            || err.http_status == Some(401)
            || (err.code != Code::Unknown && auth_words.iter().any(|w| msg.contains(w)))
        {
            CoreError::Auth(err)
        } else {
            CoreError::Server(err)
        }
    }

    /// The Connect error behind this error, when there is one.
    pub fn connect_error(&self) -> Option<&ConnectError> {
        match self {
            CoreError::Auth(e) | CoreError::Server(e) => Some(e),
            _ => None,
        }
    }

    /// Whether a resume attempt may fix this (docs/protocol.md, "Resume"). What cannot recover
    /// is not retried: credentials, a request the server refuses as it is (invalid argument,
    /// permission denied, not found, failed precondition, an HTTP 4xx other than 408 and 429),
    /// a server that cannot be reached or does not speak the protocol asked for.
    pub fn is_retryable(&self) -> bool {
        match self {
            CoreError::Network(_) | CoreError::StreamClosed | CoreError::Timeout(_) => true,
            CoreError::Server(e) => {
                let refused_as_sent =
                    matches!(e.http_status, Some(400..=499) if !matches!(e.http_status, Some(408 | 429)));
                // A server that says when to come back (a rate limit) is worth waiting for.
                let retryable_code = matches!(e.code, Code::Unavailable | Code::Internal | Code::Unknown)
                    || (e.code == Code::ResourceExhausted && e.retry_delay().is_some());
                retryable_code
                    && !refused_as_sent
                    && e.cursor_details().and_then(|d| d.details).and_then(|d| d.is_retryable) != Some(false)
            }
            _ => false,
        }
    }

    /// How long the server asked the client to wait before trying again, if it said.
    pub fn retry_delay(&self) -> Option<std::time::Duration> {
        self.connect_error().and_then(ConnectError::retry_delay)
    }

    /// This error, for an authentication failure with `hint` (how to sign in) added to its
    /// message; any other error as it is.
    pub fn with_sign_in_hint(self, hint: &str) -> Self {
        if hint.is_empty() {
            return self;
        }
        match self {
            CoreError::Auth(mut e) => {
                e.message = format!("{}. {hint}", e.message.trim_end_matches('.'));
                CoreError::Auth(e)
            }
            CoreError::Credentials(message) => {
                CoreError::Credentials(format!("{}. {hint}", message.trim_end_matches('.')))
            }
            other => other,
        }
    }
}

/// `a: b: c` from an error and its sources, for messages that say what actually failed.
pub fn error_chain(e: &dyn std::error::Error) -> String {
    let mut out = e.to_string();
    let mut source = e.source();
    while let Some(s) = source {
        let text = s.to_string();
        if !out.contains(&text) {
            out.push_str(": ");
            out.push_str(&text);
        }
        source = s.source();
    }
    out
}
