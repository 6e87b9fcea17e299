//! What a transport is configured with ([`TransportConfig`]), and the defaults and limits it
//! applies.

use std::time::Duration;

use super::credentials::Credentials;
use crate::connect::Limits;
use crate::error::CoreError;

pub const RUN_SSE_PATH: &str = "/agent.v1.AgentService/RunSSE";
pub const RUN_PATH: &str = "/agent.v1.AgentService/Run";
pub const BIDI_APPEND_PATH: &str = "/aiserver.v1.BidiService/BidiAppend";
/// Cursor's service: where a client goes unless its `baseUrl` says otherwise. Written here
/// only; the addon exports it (`DEFAULT_BASE_URL`) for hosts that print or compare it.
pub const DEFAULT_BASE_URL: &str = "https://api2.cursor.sh";
/// What an authentication failure tells the user to do, unless the client says otherwise.
pub const DEFAULT_SIGN_IN_HINT: &str =
    "Sign in again: `npx cursor-acp-native login`, or a valid CURSOR_API_KEY or CURSOR_ACCESS_TOKEN";
/// How long an `accessToken` function may take to give a token.
pub const DEFAULT_TOKEN_TIMEOUT: Duration = Duration::from_secs(60);
/// A recent CLI build string; old ones get `ERROR_OUTDATED_CLIENT`, so it is configurable.
pub const DEFAULT_CLIENT_VERSION: &str = "cli-2026.08.11-e8db854";
/// The official client allows this many BidiAppend calls in flight.
pub const DEFAULT_MAX_APPENDS_IN_FLIGHT: usize = 16;
/// BidiAppend calls one client makes at once, across all its turns (large ones aside, see
/// `QUEUED_APPEND_MAX_BYTES`). Appends past this wait their turn, first come first served, so
/// that they reuse kept-alive connections: without a cap, N turns starting together open N new
/// connections for their first appends (N TLS handshakes against a real backend); for 1,000
/// parallel turns on loopback the cap cut the client's CPU by a quarter (bench/README.md, many).
pub const DEFAULT_MAX_APPEND_CONNECTIONS: usize = 32;
/// `Run` streams one HTTP/2 connection carries before the next stream gets a connection of its
/// own. A server caps the streams of one connection (`SETTINGS_MAX_CONCURRENT_STREAMS`), and
/// RFC 9113 §6.5.2 recommends a cap of no less than 100, so 100 fits under every cap a server is
/// likely to set (hyper's default is 200, nginx's 128).
pub const DEFAULT_H2_STREAMS_PER_CONNECTION: usize = 100;
/// HTTP/2 receive windows (`SETTINGS_INITIAL_WINDOW_SIZE` per stream, and the connection's):
/// how much a peer may send before it must wait a round trip for `WINDOW_UPDATE`. hyper's
/// defaults (2 MiB and 5 MiB on a client, 1 MiB on a server) let a 12 MiB checkpoint cross a
/// 40 ms round trip at about 40 MiB/s; 8 MiB covers the bandwidth-delay product of a
/// gigabit link at 60 ms. The turn loop reads its stream as frames arrive, so the window is
/// credit, not memory held. (hyper's adaptive window starts at 64 KiB and was slower still.)
pub const H2_STREAM_WINDOW: u32 = 8 * 1024 * 1024;
/// See [`H2_STREAM_WINDOW`]; shared by the streams of one connection.
pub const H2_CONNECTION_WINDOW: u32 = 16 * 1024 * 1024;
/// Messages smaller than this are sent uncompressed even with gzip on (gzip would grow them).
pub const MIN_COMPRESS_BYTES: usize = 1024;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum TransportKind {
    /// RunSSE + BidiAppend over HTTP/1.1 (docs/protocol.md).
    Sse,
    /// Run over HTTP/2.
    H2,
    /// Run over HTTP/2 where the server speaks it, else RunSSE + BidiAppend.
    #[default]
    Auto,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Compression {
    #[default]
    None,
    Gzip,
}

/// How BidiAppend carries the message.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum AppendEncoding {
    /// Lower-case hex in `data` (what the CLI sends; every server accepts it).
    #[default]
    Hex,
    /// Raw bytes in `data_binary` (newer servers).
    Binary,
}

/// Everything a transport needs to reach a server.
#[derive(Debug, Clone)]
pub struct TransportConfig {
    /// `https://api2.cursor.sh` or a local gateway such as `http://127.0.0.1:8080`.
    pub base_url: String,
    /// The access token, or where to get one before each stream and call.
    pub credentials: Credentials,
    /// Bound on a [`Credentials::Source`] giving a token.
    pub token_timeout: Duration,
    /// Added to authentication errors: how to sign in.
    pub sign_in_hint: String,
    /// Extra headers sent on every request (after the protocol headers; `host` and
    /// `content-length` belong to the transport and are refused).
    pub headers: Vec<(String, String)>,
    pub client_version: String,
    pub client_type: String,
    pub ghost_mode: bool,
    pub kind: TransportKind,
    pub compression: Compression,
    pub append_encoding: AppendEncoding,
    pub limits: Limits,
    pub max_appends_in_flight: usize,
    /// BidiAppend calls in flight across every stream of this transport.
    pub max_append_connections: usize,
    /// HTTP/2 `Run` streams per connection (see [`DEFAULT_H2_STREAMS_PER_CONNECTION`]).
    pub h2_streams_per_connection: usize,
    /// Base of the per-append deadline; the payload size adds 1 s per 128 KiB.
    pub append_deadline: Duration,
    pub connect_timeout: Duration,
}

impl Default for TransportConfig {
    fn default() -> Self {
        TransportConfig {
            base_url: DEFAULT_BASE_URL.into(),
            credentials: Credentials::None,
            token_timeout: DEFAULT_TOKEN_TIMEOUT,
            sign_in_hint: DEFAULT_SIGN_IN_HINT.into(),
            headers: Vec::new(),
            client_version: DEFAULT_CLIENT_VERSION.into(),
            client_type: "cli".into(),
            ghost_mode: true,
            kind: TransportKind::Auto,
            compression: Compression::None,
            append_encoding: AppendEncoding::Hex,
            limits: Limits::default(),
            max_appends_in_flight: DEFAULT_MAX_APPENDS_IN_FLIGHT,
            max_append_connections: DEFAULT_MAX_APPEND_CONNECTIONS,
            h2_streams_per_connection: DEFAULT_H2_STREAMS_PER_CONNECTION,
            append_deadline: Duration::from_secs(60),
            connect_timeout: Duration::from_secs(30),
        }
    }
}

/// What the `baseUrl` option takes.
pub const BASE_URL_TAKES: &str = "an http(s) URL";

/// `base_url` parsed, or the `baseUrl` option's one error (the options' check and
/// `Transport::new` both come here).
pub fn parse_base_url(base_url: &str) -> Result<reqwest::Url, CoreError> {
    let (got, why) = match reqwest::Url::parse(base_url) {
        Ok(url) if url.scheme() == "http" || url.scheme() == "https" => return Ok(url),
        Ok(mut url) => {
            let why = format!("the scheme is {:?}", url.scheme());
            // A password in the URL is a credential: the message shows where it was, not it.
            let has_password = url.password().is_some();
            let got = if has_password && url.set_password(Some("redacted")).is_ok() {
                url.to_string()
            } else {
                base_url.to_string()
            };
            (got, why)
        }
        Err(e) => (base_url.to_string(), e.to_string()),
    };
    Err(CoreError::invalid_option("baseUrl", BASE_URL_TAKES, &got.into(), Some(&why)))
}

impl TransportKind {
    /// What the `transport` option takes.
    pub const TAKES: &'static str = "'auto', 'sse' or 'h2'";

    /// The kind an option value names.
    pub fn from_option(value: &str) -> Option<Self> {
        match value {
            "auto" => Some(TransportKind::Auto),
            "sse" => Some(TransportKind::Sse),
            "h2" => Some(TransportKind::H2),
            _ => None,
        }
    }
}

impl Compression {
    /// What the `compression` option takes.
    pub const TAKES: &'static str = "'gzip' or 'none'";

    pub fn from_option(value: &str) -> Option<Self> {
        match value {
            "none" => Some(Compression::None),
            "gzip" => Some(Compression::Gzip),
            _ => None,
        }
    }
}

impl AppendEncoding {
    /// What the `appendEncoding` option takes.
    pub const TAKES: &'static str = "'hex' or 'binary'";

    pub fn from_option(value: &str) -> Option<Self> {
        match value {
            "hex" => Some(AppendEncoding::Hex),
            "binary" => Some(AppendEncoding::Binary),
            _ => None,
        }
    }
}

/// What `clientVersion` and `clientType` take: one header token, as the official client sends.
pub const CLIENT_STRING_TAKES: &str = "1 to 128 printable ASCII characters without spaces";

/// Whether `value` is what [`CLIENT_STRING_TAKES`] says.
pub fn is_client_string(value: &str) -> bool {
    (1..=128).contains(&value.len()) && value.bytes().all(|b| b.is_ascii_graphic())
}

/// What the `headers` option takes.
pub const HEADERS_TAKES: &str = "HTTP header names and values other than host, content-length and pseudo-headers";

/// The `headers` option checked: each name a valid header name the transport does not set,
/// each value a valid header value. The error names the header, never its value (it may be
/// a credential).
pub fn check_headers(headers: &[(String, String)]) -> Result<(), CoreError> {
    for (name, value) in headers {
        let lower = name.to_ascii_lowercase();
        let why = if lower == "host" || lower == "content-length" || lower.starts_with(':') {
            "set by the transport"
        } else if reqwest::header::HeaderName::from_bytes(lower.as_bytes()).is_err() {
            "not a header name"
        } else if reqwest::header::HeaderValue::from_str(value).is_err() {
            "its value is not a valid header value"
        } else {
            continue;
        };
        return Err(CoreError::invalid_option("headers", HEADERS_TAKES, &name.as_str().into(), Some(why)));
    }
    Ok(())
}

/// Largest message we send (the official client's append cap).
pub const MAX_OUTBOUND_MESSAGE: usize = 16 * 1024 * 1024;

pub(super) fn too_large(len: usize) -> CoreError {
    CoreError::InvalidInput(format!("message of {len} bytes exceeds the {MAX_OUTBOUND_MESSAGE}-byte limit"))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::transport::Secret;
    #[test]
    fn a_refused_base_url_never_shows_its_password() {
        let err = parse_base_url("ftp://me:hunter2@example.com/").unwrap_err().to_string();
        assert!(!err.contains("hunter2"), "{err}");
        assert!(err.contains(r#"got "ftp://me:redacted@example.com/" (the scheme is "ftp")"#), "{err}");
    }

    #[test]
    fn secret_never_prints() {
        let s = Secret::new("tok-123");
        assert_eq!(format!("{s:?}"), "Secret(<redacted>)");
        let cfg = TransportConfig { credentials: Credentials::Token(s), ..Default::default() };
        assert!(!format!("{cfg:?}").contains("tok-123"));
    }
}
