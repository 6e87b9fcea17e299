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
    /// The server ended the call with a Connect error.
    #[error("server error {0}")]
    Server(ConnectError),
    /// Could not reach the server, or the connection broke.
    #[error("network error: {0}")]
    Network(String),
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
    /// Stable code for JavaScript consumers.
    pub fn code(&self) -> &'static str {
        match self {
            CoreError::Auth(_) => "E_AUTH",
            CoreError::Server(_) => "E_SERVER",
            CoreError::Network(_) | CoreError::Untrusted(_) | CoreError::NoHttp2(_) | CoreError::StreamClosed => {
                "E_NETWORK"
            }
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

    /// Whether a resume attempt may fix this (docs/protocol.md, "Resume").
    pub fn is_retryable(&self) -> bool {
        match self {
            CoreError::Network(_) | CoreError::StreamClosed | CoreError::Timeout(_) => true,
            CoreError::Server(e) => {
                matches!(e.code, Code::Unavailable | Code::Internal | Code::Unknown)
                    && e.cursor_details().and_then(|d| d.details).and_then(|d| d.is_retryable) != Some(false)
            }
            _ => false,
        }
    }
}

impl From<reqwest::Error> for CoreError {
    fn from(e: reqwest::Error) -> Self {
        // reqwest's Display carries the URL but never headers, so no token can leak here.
        if e.is_timeout() {
            CoreError::Timeout(error_chain(&e))
        } else if rejected_certificate(&e) {
            CoreError::Untrusted(error_chain(&e))
        } else {
            CoreError::Network(error_chain(&e))
        }
    }
}

/// Whether TLS failed on the certificates (theirs unverifiable, or ours wanted): the same
/// server will fail the same way, so a resume would only delay the error.
fn rejected_certificate(e: &(dyn std::error::Error + 'static)) -> bool {
    let mut source = Some(e);
    while let Some(err) = source {
        if let Some(tls) = unwrapped(err).downcast_ref::<rustls::Error>() {
            return matches!(
                tls,
                rustls::Error::InvalidCertificate(_)
                    | rustls::Error::NoCertificatesPresented
                    | rustls::Error::AlertReceived(
                        rustls::AlertDescription::BadCertificate
                            | rustls::AlertDescription::CertificateRequired
                            | rustls::AlertDescription::UnknownCA
                    )
            );
        }
        source = err.source();
    }
    false
}

/// The error inside `io::Error`s that carry one, whose `source` skips it: tokio-rustls reports
/// rustls' errors that way, and hyper-rustls wraps that in one more.
fn unwrapped<'a>(mut err: &'a (dyn std::error::Error + 'static)) -> &'a (dyn std::error::Error + 'static) {
    while let Some(inner) = err.downcast_ref::<std::io::Error>().and_then(|io| io.get_ref()) {
        err = inner;
    }
    err
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
