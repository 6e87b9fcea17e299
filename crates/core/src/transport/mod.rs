//! The two transports of the agent stream, behind one interface: send `AgentClientMessage`s,
//! receive `AgentServerMessage`s.
//!
//! * [`TransportKind::Sse`]: `RunSSE` (server stream over HTTP/1.1, body = one `BidiRequestId`
//!   envelope) plus one unary `BidiAppend` per outbound message, `append_seqno` from 0 on one
//!   counter, at most 16 in flight, each with a deadline, never retried.
//! * [`TransportKind::H2`]: `Run`, one bidirectional HTTP/2 Connect stream (h2c for `http://`),
//!   spread over as many connections as the streams in flight need (see [`H2Connections`]).
//! * [`TransportKind::Auto`]: `Run` over HTTP/2 while the server speaks it, as the official
//!   client does; RunSSE + BidiAppend for good once it shows it does not (see [`AutoConnections`]).
//!
//! Headers follow docs/protocol.md. The token lives in [`Secret`] and is only ever written
//! into the `authorization` header; no error, log or `Debug` output contains it. It is asked
//! for before each stream and each unary call ([`Credentials`]), so it may change during a
//! session.
//!
//! Files: `config` (what a transport is made with, [`Secret`]), `credentials` (where tokens
//! come from), `headers`, `request` (starting requests, error responses), `sse` (the RunSSE
//! sender and its append body), `h2` (the `Run` sender), `auto` (the fallback from `Run` to
//! RunSSE, and `Run` under `'h2'`), `sender` and `receiver` (the two halves of a stream),
//! `failure` (the error they share), `clients` (TLS, reqwest clients, HTTP/2 connections),
//! `unary` (Connect unary calls), `account` (the account's JSON calls: API-key exchange, login
//! refresh and sign-in polls, on the same clients), `diagnosis` (messages that name the cause and
//! the fix). This file opens streams of the configured kind.

use std::fmt;
use std::sync::Arc;

use tokio::sync::{watch, Semaphore};

use crate::connect;
use crate::error::CoreError;
use crate::proto::aiserver::v1::BidiRequestId;

mod account;
mod auto;
mod clients;
mod config;
mod credentials;
pub(crate) mod diagnosis;
mod failure;
mod h2;
mod headers;
mod receiver;
mod request;
mod sender;
mod sse;
mod unary;

pub use account::{
    Account, AccountTokens, LoginPoll, ACCOUNT_CALL_TIMEOUT, EXCHANGE_API_KEY_PATH, POLL_PATH, REFRESH_PATH,
};
use auto::{AutoConnections, Fallback, RunCheck};
use clients::{http_client, H2Connections};
pub use clients::{prepare_tls_in_background, web_client};
pub use config::{
    check_headers, is_client_string, parse_base_url, AppendEncoding, Compression, TransportConfig, TransportKind,
    BASE_URL_TAKES, BIDI_APPEND_PATH, CLIENT_STRING_TAKES, DEFAULT_BASE_URL, DEFAULT_CLIENT_VERSION,
    DEFAULT_H2_STREAMS_PER_CONNECTION, DEFAULT_MAX_APPENDS_IN_FLIGHT, DEFAULT_MAX_APPEND_CONNECTIONS,
    DEFAULT_SIGN_IN_HINT, DEFAULT_TOKEN_TIMEOUT, H2_CONNECTION_WINDOW, H2_STREAM_WINDOW, HEADERS_TAKES,
    MAX_OUTBOUND_MESSAGE, MIN_COMPRESS_BYTES, RUN_PATH, RUN_SSE_PATH,
};
use credentials::StreamAuth;
pub use credentials::{Credentials, Secret, TokenReason, TokenSource};
use failure::FailureSlot;
use headers::{protocol_headers, RequestHeaders, RequestIds};
pub use receiver::{AgentReceiver, ServerFrame};
use request::{post, spawn_request};
pub use sender::AgentSender;

/// The reqwest client that a RunSSE transport with default settings uses for `base_url`: what
/// the bench crate's transport floor measures alone. Not part of the client's API.
#[doc(hidden)]
pub fn default_sse_client(base_url: &str) -> Result<reqwest::Client, CoreError> {
    let url = config::parse_base_url(base_url)?;
    let config = TransportConfig { base_url: base_url.to_string(), kind: TransportKind::Sse, ..Default::default() };
    http_client(&config, TransportKind::Sse, &url)
}

/// Both halves of one agent stream.
pub struct AgentStream {
    pub sender: AgentSender,
    pub receiver: AgentReceiver,
}

/// A configured client. Cheap to clone (every session of a client holds one); reuses
/// connections across streams.
#[derive(Clone)]
pub struct Transport {
    inner: Arc<TransportInner>,
}

/// Built once per client and shared, so that a session's transport is a reference count rather
/// than its own copy of these URLs and header maps (about 4 KiB).
struct TransportInner {
    config: Arc<TransportConfig>,
    /// Endpoint URLs, parsed once: with many turns, parsing one for every request showed in
    /// profiles.
    run_sse_url: reqwest::Url,
    run_url: reqwest::Url,
    append_url: reqwest::Url,
    connections: Connections,
    /// Every header a request of each kind carries except the request ids, built once: with
    /// many turns, building them per request (names parsed, maps merged) showed in profiles.
    headers: RequestHeaders,
    /// Shared by every SSE sender of this transport (see [`DEFAULT_MAX_APPEND_CONNECTIONS`]).
    append_connections: Arc<Semaphore>,
}

/// What a transport's requests go through.
enum Connections {
    /// RunSSE and BidiAppend: one reqwest client and its pool of HTTP/1.1 connections.
    Http1(reqwest::Client),
    /// Run: streams spread over HTTP/2 connections.
    H2(Arc<H2Connections>),
    /// Either of those, as the server allows.
    Auto(AutoConnections),
}

impl fmt::Debug for Transport {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Transport")
            .field("base", &self.inner.config.base_url)
            .field("kind", &self.inner.config.kind)
            .finish()
    }
}

impl Transport {
    pub fn new(config: TransportConfig) -> Result<Self, CoreError> {
        let url = config::parse_base_url(&config.base_url)?;
        if config.max_appends_in_flight == 0 {
            return Err(CoreError::InvalidInput("maxAppendsInFlight must be at least 1".into()));
        }
        if config.max_append_connections == 0 {
            return Err(CoreError::InvalidInput("maxAppendConnections must be at least 1".into()));
        }
        if config.h2_streams_per_connection == 0 {
            return Err(CoreError::InvalidInput("h2StreamsPerConnection must be at least 1".into()));
        }
        if let Credentials::Token(token) = &config.credentials {
            credentials::bearer(token).map_err(|_| {
                CoreError::InvalidInput("accessToken contains characters not allowed in a header".into())
            })?;
        }
        let config = Arc::new(config);
        let client = http_client(&config, config.kind, &url)?;
        let connections = match config.kind {
            TransportKind::Sse => Connections::Http1(client),
            TransportKind::H2 => Connections::H2(Arc::new(H2Connections::new(config.clone(), url.clone(), client))),
            TransportKind::Auto => Connections::Auto(AutoConnections {
                h2: Arc::new(H2Connections::new(config.clone(), url.clone(), client)),
                http1: http_client(&config, TransportKind::Sse, &url)?,
                switch: Arc::default(),
            }),
        };
        let headers = RequestHeaders::new(protocol_headers(&config)?, config.compression);
        let base = config.base_url.trim_end_matches('/');
        let endpoint = |path: &str| {
            reqwest::Url::parse(&format!("{base}{path}"))
                .map_err(|e| CoreError::InvalidInput(format!("baseUrl {:?} is not a URL: {e}", config.base_url)))
        };
        let (run_sse_url, run_url, append_url) =
            (endpoint(RUN_SSE_PATH)?, endpoint(RUN_PATH)?, endpoint(BIDI_APPEND_PATH)?);
        let append_connections = Arc::new(Semaphore::new(config.max_append_connections));
        let inner =
            TransportInner { config, run_sse_url, run_url, append_url, connections, headers, append_connections };
        Ok(Transport { inner: Arc::new(inner) })
    }

    pub fn config(&self) -> &TransportConfig {
        &self.inner.config
    }

    /// The transport the next stream will use: [`TransportKind::Sse`] or [`TransportKind::H2`]
    /// (an automatic transport says which one it has settled on so far).
    pub fn active_kind(&self) -> TransportKind {
        match &self.inner.connections {
            Connections::Http1(_) => TransportKind::Sse,
            Connections::H2(_) => TransportKind::H2,
            Connections::Auto(auto) if auto.switch.is_on() => TransportKind::Sse,
            Connections::Auto(_) => TransportKind::H2,
        }
    }

    /// Opens one agent stream. `request_id` is also the `x-request-id` header (and, for SSE, the
    /// `BidiRequestId`); `original_request_id`, when set, stays stable across resume attempts.
    /// Must be called inside a tokio runtime: the request starts at once, in the background,
    /// with the token the credentials give for a new stream.
    pub fn open(&self, request_id: &str, original_request_id: Option<&str>) -> AgentStream {
        self.open_with(request_id, original_request_id, TokenReason::Request)
    }

    /// [`open`](Self::open), telling a token source why it is asked (after a refusal, it should
    /// not give the cached token again).
    pub fn open_with(&self, request_id: &str, original_request_id: Option<&str>, reason: TokenReason) -> AgentStream {
        let ids = RequestIds::new(request_id, original_request_id);
        let auth = self.stream_auth(reason);
        let (fail_tx, fail_rx) = watch::channel(None);
        let fail_tx = Arc::new(fail_tx);
        match &self.inner.connections {
            Connections::Http1(client) => self.open_sse(client, request_id, &ids, auth, fail_tx, fail_rx),
            Connections::H2(connections) => self.open_h2(connections, &ids, auth, fail_tx, fail_rx, None),
            Connections::Auto(auto) if auto.switch.is_on() => {
                self.open_sse(&auto.http1, request_id, &ids, auth, fail_tx, fail_rx)
            }
            Connections::Auto(auto) => {
                let fallback = Fallback { switch: auto.switch.clone(), h2c: self.h2c() };
                self.open_h2(&auto.h2, &ids, auth, fail_tx, fail_rx, Some(fallback))
            }
        }
    }

    /// The `authorization` of one new stream or call.
    fn stream_auth(&self, reason: TokenReason) -> Arc<StreamAuth> {
        StreamAuth::new(&self.inner.config.credentials, reason, self.inner.config.token_timeout)
    }

    /// Whether `Run` goes over h2c by prior knowledge (a plain `http` URL).
    fn h2c(&self) -> bool {
        self.inner.run_url.scheme() == "http"
    }

    fn open_sse(
        &self,
        client: &reqwest::Client,
        request_id: &str,
        ids: &RequestIds,
        auth: Arc<StreamAuth>,
        fail_tx: FailureSlot,
        fail_rx: watch::Receiver<Option<CoreError>>,
    ) -> AgentStream {
        let gzip = self.inner.config.compression == Compression::Gzip;
        let body =
            connect::encode_message(&BidiRequestId { request_id: request_id.to_string() }, gzip, MIN_COMPRESS_BYTES);
        let stream_request =
            post(self.inner.run_sse_url.clone(), ids.apply(&self.inner.headers.sse_stream), reqwest::Body::from(body));
        let response = spawn_request(client, stream_request, auth.clone());
        let sender = sse::SseSender::new(
            client.clone(),
            self.inner.append_url.clone(),
            ids.apply(&self.inner.headers.sse_append),
            request_id.to_string(),
            self.inner.config.clone(),
            self.inner.append_connections.clone(),
            fail_tx,
            auth,
        );
        AgentStream {
            sender: AgentSender::sse(sender),
            receiver: AgentReceiver::new(response, self.inner.config.limits, fail_rx, None, RunCheck::Settled),
        }
    }

    fn open_h2(
        &self,
        connections: &H2Connections,
        ids: &RequestIds,
        auth: Arc<StreamAuth>,
        fail_tx: FailureSlot,
        fail_rx: watch::Receiver<Option<CoreError>>,
        fallback: Option<Fallback>,
    ) -> AgentStream {
        let gzip = self.inner.config.compression == Compression::Gzip;
        let (sender, body) = h2::H2Sender::new(gzip, fail_tx.clone());
        let request = post(self.inner.run_url.clone(), ids.apply(&self.inner.headers.h2_run), body);
        let (client, slot) = connections.checkout();
        let (response, run_check) = match fallback {
            None => (
                auto::spawn_h2_only_request(&client, request, auth, self.inner.config.clone(), fail_tx),
                RunCheck::Settled,
            ),
            Some(fallback) => {
                let run_check = RunCheck::UntilFirstMessage(fallback.switch.clone());
                (auto::spawn_run_request(&client, request, auth, fallback, fail_tx), run_check)
            }
        };
        AgentStream {
            sender: AgentSender::h2(sender),
            receiver: AgentReceiver::new(response, self.inner.config.limits, fail_rx, Some(slot), run_check),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn transport_owned_headers_are_refused() {
        let cfg = TransportConfig { headers: vec![("Host".into(), "evil".into())], ..Default::default() };
        assert!(matches!(Transport::new(cfg), Err(CoreError::InvalidInput(_))));
        let cfg = TransportConfig { base_url: "ftp://x".into(), ..Default::default() };
        assert!(matches!(Transport::new(cfg), Err(CoreError::InvalidInput(_))));
    }
}
