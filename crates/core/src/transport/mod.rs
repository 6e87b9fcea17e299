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
//! Headers follow client-behaviour §2.4. The token lives in [`Secret`] and is only ever written
//! into the `authorization` header; no error, log or `Debug` output contains it.

use std::fmt;
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use futures::{Stream, StreamExt};
use prost::Message as _;
use reqwest::header::{HeaderMap, HeaderName, HeaderValue};
use tokio::sync::{mpsc, watch, Mutex, Semaphore};
use tokio::task::JoinHandle;

use crate::connect::{self, ConnectError, Frame, FrameDecoder, Limits};
use crate::error::{error_chain, CoreError};
use crate::proto::agent::v1::{AgentClientMessage, AgentServerMessage};
use crate::proto::aiserver::v1::{BidiAppendRequest, BidiRequestId};
use crate::wire::Pieces;

mod clients;
use clients::{http_client, H2Connections, StreamSlot};

pub const RUN_SSE_PATH: &str = "/agent.v1.AgentService/RunSSE";
pub const RUN_PATH: &str = "/agent.v1.AgentService/Run";
pub const BIDI_APPEND_PATH: &str = "/aiserver.v1.BidiService/BidiAppend";
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

#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum TransportKind {
    /// RunSSE + BidiAppend over HTTP/1.1 (the seed protocol).
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
    pub access_token: Option<Secret>,
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
            base_url: "https://api2.cursor.sh".into(),
            access_token: None,
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

/// The reqwest client that a RunSSE transport with default settings uses for `base_url`: what
/// [`crate::bench::floor_turns`] measures alone.
pub(crate) fn default_sse_client(base_url: &str) -> Result<reqwest::Client, CoreError> {
    let url = reqwest::Url::parse(base_url)
        .map_err(|e| CoreError::InvalidInput(format!("baseUrl {base_url:?} is not a URL: {e}")))?;
    let config = TransportConfig { base_url: base_url.to_string(), kind: TransportKind::Sse, ..Default::default() };
    http_client(&config, TransportKind::Sse, &url)
}

/// A decoded server message together with the exact bytes it arrived as (the turn loop keeps
/// checkpoints as raw bytes; re-encoding through prost would drop unknown fields).
///
/// The message is boxed because the turn loop hands frames along by value several times each
/// (merging runs of deltas): when the message was 1 KiB inline, those moves were half of the
/// client's time on a stream of small deltas. Its large oneof branches are boxed as well
/// (build.rs), so the box itself is small (168 bytes).
#[derive(Debug, Clone)]
pub struct ServerFrame {
    pub message: Box<AgentServerMessage>,
    pub raw: Bytes,
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

/// The automatic transport's connections: `Run` over HTTP/2 until a stream shows that the
/// server does not offer it, then RunSSE + BidiAppend over HTTP/1.1 for the client's lifetime.
///
/// What shows it:
/// * on `https`, the server picking HTTP/1.1 by ALPN (we offer both);
/// * on a plain `http` URL, where h2c goes by prior knowledge, the connection failing after it
///   was made and before any response, as a server or proxy that speaks only HTTP/1.1 does on
///   reading the HTTP/2 preface (answering 400, 505, or closing);
/// * a server that speaks HTTP/2 but has no `Run`, as a gateway written for RunSSE alone may
///   (Go serves h2 over TLS by itself): HTTP 404, 405 or 501, or Connect `unimplemented`, as
///   the response or as the end of the stream before any message.
///
/// A server that is down fails to connect and changes nothing. The stream that finds out fails
/// with [`CoreError::NoHttp2`]; nothing of it reached an agent, so the turn loop starts it
/// again on HTTP/1.1.
struct AutoConnections {
    h2: Arc<H2Connections>,
    http1: reqwest::Client,
    on_http1: Arc<AtomicBool>,
}

impl AutoConnections {
    /// Whether a stream has shown that the server does not offer `Run` over HTTP/2.
    fn moved_to_http1(&self) -> bool {
        self.on_http1.load(Ordering::Relaxed)
    }
}

/// Moves an automatic transport to HTTP/1.1 for good (`on_http1` is its
/// [`AutoConnections::on_http1`]); returns the error for the stream that showed why.
fn move_to_http1(on_http1: &AtomicBool, why: String) -> CoreError {
    on_http1.store(true, Ordering::Relaxed);
    CoreError::NoHttp2(why)
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
        let url = reqwest::Url::parse(&config.base_url)
            .map_err(|e| CoreError::InvalidInput(format!("baseUrl {:?} is not a URL: {e}", config.base_url)))?;
        if url.scheme() != "http" && url.scheme() != "https" {
            return Err(CoreError::InvalidInput(format!("baseUrl must be http(s), got {:?}", url.scheme())));
        }
        if config.max_appends_in_flight == 0 {
            return Err(CoreError::InvalidInput("maxAppendsInFlight must be at least 1".into()));
        }
        if config.max_append_connections == 0 {
            return Err(CoreError::InvalidInput("maxAppendConnections must be at least 1".into()));
        }
        if config.h2_streams_per_connection == 0 {
            return Err(CoreError::InvalidInput("h2StreamsPerConnection must be at least 1".into()));
        }
        let config = Arc::new(config);
        let client = http_client(&config, config.kind, &url)?;
        let connections = match config.kind {
            TransportKind::Sse => Connections::Http1(client),
            TransportKind::H2 => Connections::H2(Arc::new(H2Connections::new(config.clone(), url.clone(), client))),
            TransportKind::Auto => Connections::Auto(AutoConnections {
                h2: Arc::new(H2Connections::new(config.clone(), url.clone(), client)),
                http1: http_client(&config, TransportKind::Sse, &url)?,
                on_http1: Arc::default(),
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
            Connections::Auto(auto) if auto.moved_to_http1() => TransportKind::Sse,
            Connections::Auto(_) => TransportKind::H2,
        }
    }

    /// Opens one agent stream. `request_id` is also the `x-request-id` header (and, for SSE, the
    /// `BidiRequestId`); `original_request_id`, when set, stays stable across resume attempts.
    /// Must be called inside a tokio runtime: the request starts at once, in the background.
    pub fn open(&self, request_id: &str, original_request_id: Option<&str>) -> AgentStream {
        let ids = RequestIds::new(request_id, original_request_id);
        let (fail_tx, fail_rx) = watch::channel(None);
        let fail_tx = Arc::new(fail_tx);
        match &self.inner.connections {
            Connections::Http1(client) => self.open_sse(client, request_id, &ids, fail_tx, fail_rx),
            Connections::H2(connections) => self.open_h2(connections, &ids, fail_tx, fail_rx, None),
            Connections::Auto(auto) if auto.moved_to_http1() => {
                self.open_sse(&auto.http1, request_id, &ids, fail_tx, fail_rx)
            }
            Connections::Auto(auto) => {
                let fallback = Fallback { on_http1: auto.on_http1.clone(), h2c: self.inner.run_url.scheme() == "http" };
                self.open_h2(&auto.h2, &ids, fail_tx, fail_rx, Some(fallback))
            }
        }
    }

    fn open_sse(
        &self,
        client: &reqwest::Client,
        request_id: &str,
        ids: &RequestIds,
        fail_tx: Arc<watch::Sender<Option<CoreError>>>,
        fail_rx: watch::Receiver<Option<CoreError>>,
    ) -> AgentStream {
        let gzip = self.inner.config.compression == Compression::Gzip;
        let body = connect::encode_message(&BidiRequestId { request_id: request_id.to_string() }, gzip, 0);
        let stream_request =
            post(self.inner.run_sse_url.clone(), ids.apply(&self.inner.headers.sse_stream), reqwest::Body::from(body));
        let response = spawn_request(client, stream_request);
        let sender = SseSender {
            client: client.clone(),
            url: self.inner.append_url.clone(),
            headers: ids.apply(&self.inner.headers.sse_append),
            request_id: request_id.to_string(),
            config: self.inner.config.clone(),
            next_seqno: Mutex::new(0),
            in_flight: Arc::new(Semaphore::new(self.inner.config.max_appends_in_flight)),
            connections: self.inner.append_connections.clone(),
            failure: fail_tx,
        };
        AgentStream {
            sender: AgentSender { inner: Arc::new(SenderInner::Sse(sender)) },
            receiver: AgentReceiver::new(response, self.inner.config.limits, fail_rx),
        }
    }

    fn open_h2(
        &self,
        connections: &H2Connections,
        ids: &RequestIds,
        fail_tx: Arc<watch::Sender<Option<CoreError>>>,
        fail_rx: watch::Receiver<Option<CoreError>>,
        fallback: Option<Fallback>,
    ) -> AgentStream {
        let gzip = self.inner.config.compression == Compression::Gzip;
        // One item per frame, in the buffers `connect::encode_frame_pieces` made of it.
        let (body_tx, mut body_rx) = mpsc::channel::<Vec<Bytes>>(64);
        let body_stream = futures::stream::poll_fn(move |cx| body_rx.poll_recv(cx))
            .flat_map(futures::stream::iter)
            .map(Ok::<_, std::io::Error>);
        let request = post(
            self.inner.run_url.clone(),
            ids.apply(&self.inner.headers.h2_run),
            reqwest::Body::wrap_stream(body_stream),
        );
        let (client, slot) = connections.checkout();
        let response = match fallback.clone() {
            None => spawn_request(&client, request),
            Some(fallback) => spawn_auto_run_request(&client, request, fallback, fail_tx.clone()),
        };
        let mut receiver = AgentReceiver::new(response, self.inner.config.limits, fail_rx);
        receiver.slot = Some(slot);
        receiver.no_run_unless_a_message = fallback.map(|f| f.on_http1);
        AgentStream {
            sender: AgentSender {
                inner: Arc::new(SenderInner::H2 { body: std::sync::Mutex::new(Some(body_tx)), gzip, failure: fail_tx }),
            },
            receiver,
        }
    }
}

fn protocol_headers(config: &TransportConfig) -> Result<HeaderMap, CoreError> {
    let mut h = HeaderMap::new();
    if let Some(token) = &config.access_token {
        let mut v = HeaderValue::from_str(&format!("Bearer {}", token.expose()))
            .map_err(|_| CoreError::InvalidInput("accessToken contains characters not allowed in a header".into()))?;
        v.set_sensitive(true);
        h.insert("authorization", v);
    }
    let value = |name: &str, v: &str| {
        HeaderValue::from_str(v).map_err(|_| CoreError::InvalidInput(format!("{name} is not a valid header value")))
    };
    h.insert("x-cursor-client-version", value("clientVersion", &config.client_version)?);
    h.insert("x-cursor-client-type", value("clientType", &config.client_type)?);
    h.insert("x-ghost-mode", HeaderValue::from_static(if config.ghost_mode { "true" } else { "false" }));
    h.insert("connect-protocol-version", HeaderValue::from_static("1"));
    for (name, v) in &config.headers {
        let lower = name.to_ascii_lowercase();
        if lower == "host" || lower == "content-length" || lower.starts_with(':') {
            return Err(CoreError::InvalidInput(format!("header {name:?} is set by the transport")));
        }
        let name = HeaderName::from_bytes(lower.as_bytes())
            .map_err(|_| CoreError::InvalidInput(format!("{name:?} is not a valid header name")))?;
        let mut v = value("header", v)?;
        if name == reqwest::header::AUTHORIZATION || name.as_str().contains("key") || name.as_str().contains("token") {
            v.set_sensitive(true);
        }
        h.insert(name, v);
    }
    Ok(h)
}

const X_REQUEST_ID: HeaderName = HeaderName::from_static("x-request-id");
const X_ORIGINAL_REQUEST_ID: HeaderName = HeaderName::from_static("x-original-request-id");

/// The headers of each kind of request, apart from the request ids.
#[derive(Clone)]
struct RequestHeaders {
    sse_stream: HeaderMap,
    sse_append: HeaderMap,
    h2_run: HeaderMap,
}

impl RequestHeaders {
    fn new(protocol: HeaderMap, compression: Compression) -> Self {
        let with = |base: &HeaderMap, extra: &[(&'static str, &'static str)]| {
            let mut h = base.clone();
            for &(name, value) in extra {
                h.insert(HeaderName::from_static(name), HeaderValue::from_static(value));
            }
            h
        };
        let mut connect_stream =
            with(&protocol, &[("content-type", "application/connect+proto"), ("connect-accept-encoding", "gzip")]);
        if compression == Compression::Gzip {
            connect_stream = with(&connect_stream, &[("connect-content-encoding", "gzip")]);
        }
        RequestHeaders {
            sse_stream: with(&connect_stream, &[("x-cursor-streaming", "true")]),
            sse_append: with(
                &protocol,
                &[("x-cursor-streaming", "true"), ("content-type", "application/proto"), ("accept-encoding", "gzip")],
            ),
            h2_run: with(&connect_stream, &[("te", "trailers")]),
        }
    }
}

/// `x-request-id` and `x-original-request-id` of one stream, as header values.
struct RequestIds {
    request_id: Option<HeaderValue>,
    original: Option<HeaderValue>,
}

impl RequestIds {
    fn new(request_id: &str, original: Option<&str>) -> Self {
        RequestIds {
            request_id: HeaderValue::from_str(request_id).ok(),
            original: original.and_then(|v| HeaderValue::from_str(v).ok()),
        }
    }

    /// `headers` with the ids added.
    fn apply(&self, headers: &HeaderMap) -> HeaderMap {
        let mut out = headers.clone();
        if let Some(v) = &self.request_id {
            out.insert(X_REQUEST_ID, v.clone());
        }
        if let Some(v) = &self.original {
            out.insert(X_ORIGINAL_REQUEST_ID, v.clone());
        }
        out
    }
}

/// A POST with exactly these headers (the client adds only its defaults, `user-agent`).
fn post(url: reqwest::Url, headers: HeaderMap, body: reqwest::Body) -> reqwest::Request {
    let mut request = reqwest::Request::new(reqwest::Method::POST, url);
    *request.headers_mut() = headers;
    *request.body_mut() = Some(body);
    request
}

type ResponseTask = JoinHandle<Result<reqwest::Response, CoreError>>;

/// Starts the request now, so the stream opens even before anyone reads from it.
fn spawn_request(client: &reqwest::Client, request: reqwest::Request) -> ResponseTask {
    let response = client.execute(request);
    tokio::spawn(async move { ok_or_http_error(response.await.map_err(CoreError::from)?).await })
}

/// Whether a `Run` request's error response says that the server has no such endpoint.
fn no_run_endpoint(err: &ConnectError) -> bool {
    err.code == connect::Code::Unimplemented || matches!(err.http_status, Some(404 | 405 | 501))
}

/// The response if its status is a success, else the error its status and body say.
async fn ok_or_http_error(response: reqwest::Response) -> Result<reqwest::Response, CoreError> {
    let status = response.status();
    if !status.is_success() {
        let body = read_capped(response, 64 * 1024).await;
        return Err(CoreError::from_connect(ConnectError::from_http(status.as_u16(), &body)));
    }
    Ok(response)
}

/// What an automatic transport's `Run` request needs to report that the server does not speak
/// HTTP/2 (see [`AutoConnections`]).
#[derive(Clone)]
struct Fallback {
    on_http1: Arc<AtomicBool>,
    /// h2c by prior knowledge (a plain `http` URL) rather than h2 chosen by ALPN.
    h2c: bool,
}

/// [`spawn_request`] for a `Run` request of an automatic transport: what shows that the server
/// does not offer `Run` over HTTP/2 (see [`AutoConnections`]) switches the transport to
/// HTTP/1.1 and fails the stream, both halves, with [`CoreError::NoHttp2`].
fn spawn_auto_run_request(
    client: &reqwest::Client,
    request: reqwest::Request,
    fallback: Fallback,
    failure: Arc<watch::Sender<Option<CoreError>>>,
) -> ResponseTask {
    let response = client.execute(request);
    tokio::spawn(async move {
        let why = match response.await {
            Ok(response) if response.version() == reqwest::Version::HTTP_2 => match ok_or_http_error(response).await {
                Err(CoreError::Server(e)) if no_run_endpoint(&e) => format!("it has no Run endpoint ({e})"),
                other => return other,
            },
            Ok(response) => {
                format!("it answered over {:?} (status {})", response.version(), response.status().as_u16())
            }
            Err(e) if fallback.h2c && !e.is_connect() && !e.is_timeout() => error_chain(&e),
            Err(e) => return Err(CoreError::from(e)),
        };
        let err = move_to_http1(&fallback.on_http1, why);
        record_failure(&failure, err.clone());
        Err(err)
    })
}

async fn read_capped(response: reqwest::Response, max: usize) -> Vec<u8> {
    let mut out = Vec::new();
    let mut body = response.bytes_stream();
    while let Some(Ok(chunk)) = body.next().await {
        out.extend_from_slice(&chunk[..chunk.len().min(max - out.len())]);
        if out.len() >= max {
            break;
        }
    }
    out
}

/// Largest message we send (the official client's append cap).
pub const MAX_OUTBOUND_MESSAGE: usize = 16 * 1024 * 1024;

fn too_large(len: usize) -> CoreError {
    CoreError::InvalidInput(format!("message of {len} bytes exceeds the {MAX_OUTBOUND_MESSAGE}-byte limit"))
}

/// Both halves of one agent stream.
pub struct AgentStream {
    pub sender: AgentSender,
    pub receiver: AgentReceiver,
}

/// Outbound half. Cloneable; every clone shares one seqno counter.
#[derive(Clone)]
pub struct AgentSender {
    inner: Arc<SenderInner>,
}

// One per stream, behind an Arc: the variants' sizes do not matter.
#[allow(clippy::large_enum_variant)]
enum SenderInner {
    Sse(SseSender),
    H2 {
        body: std::sync::Mutex<Option<mpsc::Sender<Vec<Bytes>>>>,
        gzip: bool,
        failure: Arc<watch::Sender<Option<CoreError>>>,
    },
}

struct SseSender {
    client: reqwest::Client,
    url: reqwest::Url,
    headers: HeaderMap,
    request_id: String,
    config: Arc<TransportConfig>,
    next_seqno: Mutex<i64>,
    in_flight: Arc<Semaphore>,
    connections: Arc<Semaphore>,
    failure: Arc<watch::Sender<Option<CoreError>>>,
}

fn record_failure(failure: &watch::Sender<Option<CoreError>>, err: CoreError) {
    failure.send_if_modified(|slot| {
        if slot.is_none() {
            *slot = Some(err);
            true
        } else {
            false
        }
    });
}

impl AgentSender {
    /// Sends one message. For SSE this returns once the append is in flight (it waits while 16
    /// are pending); a failed append fails the stream: the receiver reports it and later sends
    /// return it. Appends are never retried, since the server may have accepted one.
    pub async fn send(&self, msg: &AgentClientMessage) -> Result<(), CoreError> {
        self.send_encoded(Bytes::from(msg.encode_to_vec())).await
    }

    /// Sends an already-encoded `AgentClientMessage` (the turn loop splices raw checkpoint
    /// bytes into run requests, so it never re-encodes them through prost).
    /// The message may come in pieces (large values moved in rather than copied); appends
    /// stream them as they are.
    pub async fn send_encoded(&self, payload: impl Into<Pieces>) -> Result<(), CoreError> {
        let payload = payload.into();
        match &*self.inner {
            SenderInner::Sse(s) => s.send(payload).await,
            SenderInner::H2 { body, gzip, failure } => {
                // One frame is one channel item, so frames of concurrent senders never interleave.
                if let Some(err) = failure.borrow().clone() {
                    return Err(err);
                }
                let tx = body.lock().expect("sender lock").clone();
                let tx = tx.ok_or_else(|| CoreError::Closed("the stream's send side is closed".into()))?;
                if payload.len() > MAX_OUTBOUND_MESSAGE {
                    return Err(too_large(payload.len()));
                }
                let frame = if *gzip && payload.len() >= MIN_COMPRESS_BYTES {
                    let compressed = Bytes::from(connect::gzip_pieces(&payload));
                    connect::encode_frame_pieces(connect::FLAG_COMPRESSED, compressed.into())
                } else {
                    connect::encode_frame_pieces(0, payload)
                };
                tx.send(frame).await.map_err(|_| {
                    // We did not close it (that is checked above), so the peer or the
                    // connection ended the request side.
                    failure
                        .borrow()
                        .clone()
                        .unwrap_or(CoreError::Network("the Run stream was closed by the server".into()))
                })
            }
        }
    }

    /// Waits until every append sent so far has been acknowledged (SSE); a no-op for h2.
    pub async fn flush(&self) -> Result<(), CoreError> {
        if let SenderInner::Sse(s) = &*self.inner {
            let n = s.config.max_appends_in_flight as u32;
            let _all = s.in_flight.acquire_many(n).await.map_err(|_| CoreError::Closed("sender closed".into()))?;
            if let Some(err) = s.failure.borrow().clone() {
                return Err(err);
            }
        }
        Ok(())
    }

    /// Half-closes the stream (h2: ends the request body). Further sends fail.
    pub fn close(&self) {
        match &*self.inner {
            SenderInner::H2 { body, .. } => {
                body.lock().expect("sender lock").take();
            }
            SenderInner::Sse(s) => s.in_flight.close(),
        }
    }

    /// Seqno the next append will use (SSE), for diagnostics and tests.
    pub async fn next_seqno(&self) -> Option<i64> {
        match &*self.inner {
            SenderInner::Sse(s) => Some(*s.next_seqno.lock().await),
            SenderInner::H2 { .. } => None,
        }
    }
}

impl SseSender {
    async fn send(&self, payload: Pieces) -> Result<(), CoreError> {
        if let Some(err) = self.failure.borrow().clone() {
            return Err(err);
        }
        if payload.len() > MAX_OUTBOUND_MESSAGE {
            return Err(too_large(payload.len()));
        }
        let binary = self.config.append_encoding == AppendEncoding::Binary;
        // The lock makes "take a permit, take a seqno, start the request" one step, so seqnos
        // leave in order and none is skipped or reused.
        let mut seqno_guard = self.next_seqno.lock().await;
        let permit = self
            .in_flight
            .clone()
            .acquire_owned()
            .await
            .map_err(|_| CoreError::Closed("the stream's send side is closed".into()))?;
        if let Some(err) = self.failure.borrow().clone() {
            return Err(err);
        }
        let seqno = *seqno_guard;
        *seqno_guard += 1;
        let wire_bytes = if binary { payload.len() } else { payload.len() * 2 };
        let request_id = BidiRequestId { request_id: self.request_id.clone() };
        let mut body = AppendBody::new(payload, request_id, seqno, binary);
        let mut headers = self.headers.clone();
        let body = if self.config.compression == Compression::Gzip && body.remaining() >= MIN_COMPRESS_BYTES {
            headers.insert(reqwest::header::CONTENT_ENCODING, HeaderValue::from_static("gzip"));
            // Compressed as it is produced: the hex of a large payload is never held whole.
            let len = body.remaining();
            reqwest::Body::from(connect::gzip_parts(len, std::iter::from_fn(move || body.next_chunk())))
        } else {
            reqwest::Body::wrap(body)
        };
        let request = post(self.url.clone(), headers, body);
        let deadline =
            self.config.append_deadline + Duration::from_millis((wire_bytes as u64 * 1000).div_ceil(131_072));
        let failure = self.failure.clone();
        let client = self.client.clone();
        // A large body does not queue for (or hold) one of the shared connections: its transfer
        // outweighs a new connection, and it must not keep small appends, heartbeats among
        // them, waiting behind it.
        let connections = (wire_bytes < QUEUED_APPEND_MAX_BYTES).then(|| self.connections.clone());
        tokio::spawn(async move {
            // The deadline covers the wait for a connection too: an append is late either way.
            let result = tokio::time::timeout(deadline, async {
                // Held until the response body is read, when the connection is free again.
                let _connection = match connections {
                    Some(c) => Some(c.acquire_owned().await.map_err(|_| CoreError::Closed("transport closed".into()))?),
                    None => None,
                };
                let response = client.execute(request).await.map_err(CoreError::from)?;
                let status = response.status();
                let body = read_capped(response, 64 * 1024).await;
                if !status.is_success() {
                    return Err(CoreError::from_connect(ConnectError::from_http(status.as_u16(), &body)));
                }
                Ok(())
            })
            .await;
            let result = result.unwrap_or_else(|_| {
                Err(CoreError::Timeout(format!(
                    "BidiAppend seqno {seqno} exceeded its {} ms deadline",
                    deadline.as_millis()
                )))
            });
            if let Err(err) = result {
                record_failure(&failure, err);
            }
            drop(permit);
        });
        drop(seqno_guard);
        Ok(())
    }
}

/// Appends with a body this large or larger bypass the shared-connection queue.
const QUEUED_APPEND_MAX_BYTES: usize = 256 * 1024;

/// How much of the payload one hex body frame carries: small enough that its buffer is
/// recycled by the allocator from one frame to the next (no fresh pages per frame).
const HEX_FRAME_PAYLOAD: usize = 32 * 1024;

/// A `BidiAppendRequest` body produced while it is written, byte for byte what prost encodes
/// (fields in number order): the small fields around the payload, which goes out as it is
/// (`data_binary`, no copy) or hex-encoded one slice per frame (`data`). A large exec result
/// thus never exists a second time as a hex string twice its size.
struct AppendBody {
    head: Bytes,
    payload: std::collections::VecDeque<Bytes>,
    payload_len: usize,
    hex: bool,
    tail: Bytes,
}

impl AppendBody {
    fn new(payload: Pieces, request_id: BidiRequestId, append_seqno: i64, binary: bool) -> Self {
        use crate::field::aiserver::v1::bidi_append_request::{DATA, DATA_BINARY};
        use prost::encoding::{encode_key, encode_varint, WireType};
        let payload_len = payload.len();
        let chunks = payload.into_chunks().into();
        let rest = BidiAppendRequest {
            data: String::new(),
            request_id: Some(request_id),
            append_seqno,
            data_binary: Bytes::new(),
        }
        .encode_to_vec();
        let mut key = Vec::with_capacity(11);
        if binary {
            // `data_binary` has the highest number: it comes after `request_id` and `append_seqno`.
            if payload_len > 0 {
                encode_key(DATA_BINARY, WireType::LengthDelimited, &mut key);
                encode_varint(payload_len as u64, &mut key);
            }
            let mut head = rest;
            head.extend_from_slice(&key);
            AppendBody { head: head.into(), payload: chunks, payload_len, hex: false, tail: Bytes::new() }
        } else {
            // `data` has the lowest number: it comes first.
            if payload_len > 0 {
                encode_key(DATA, WireType::LengthDelimited, &mut key);
                encode_varint(payload_len as u64 * 2, &mut key);
            }
            AppendBody { head: key.into(), payload: chunks, payload_len, hex: true, tail: rest.into() }
        }
    }

    /// Bytes still to be produced.
    fn remaining(&self) -> usize {
        self.head.len() + self.payload_len * if self.hex { 2 } else { 1 } + self.tail.len()
    }

    fn next_chunk(&mut self) -> Option<Bytes> {
        if !self.head.is_empty() {
            return Some(std::mem::take(&mut self.head));
        }
        if let Some(front) = self.payload.front_mut() {
            let chunk = if self.hex {
                let slice = front.split_to(front.len().min(HEX_FRAME_PAYLOAD));
                self.payload_len -= slice.len();
                Bytes::from(hex_simd::encode_type::<Vec<u8>>(&slice, hex_simd::AsciiCase::Lower))
            } else {
                self.payload_len -= front.len();
                std::mem::take(front)
            };
            if front.is_empty() {
                self.payload.pop_front();
            }
            return Some(chunk);
        }
        (!self.tail.is_empty()).then(|| std::mem::take(&mut self.tail))
    }

    /// The whole body in one buffer.
    #[cfg(test)]
    fn into_vec(mut self) -> Vec<u8> {
        let mut out = Vec::with_capacity(self.remaining());
        while let Some(chunk) = self.next_chunk() {
            out.extend_from_slice(&chunk);
        }
        out
    }
}

impl http_body::Body for AppendBody {
    type Data = Bytes;
    type Error = std::convert::Infallible;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        _cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<Option<Result<http_body::Frame<Bytes>, Self::Error>>> {
        std::task::Poll::Ready(self.next_chunk().map(|chunk| Ok(http_body::Frame::data(chunk))))
    }

    fn is_end_stream(&self) -> bool {
        self.remaining() == 0
    }

    /// Exact, so the request carries a `content-length` rather than chunked encoding.
    fn size_hint(&self) -> http_body::SizeHint {
        http_body::SizeHint::with_exact(self.remaining() as u64)
    }
}

type BodyStream = Pin<Box<dyn Stream<Item = Result<Bytes, reqwest::Error>> + Send>>;

enum ResponseState {
    Pending(ResponseTask),
    Body(BodyStream),
    Done,
}

/// Inbound half: server messages in order, then `Ok(None)` after a clean end-of-stream frame.
pub struct AgentReceiver {
    state: ResponseState,
    decoder: FrameDecoder,
    failure: watch::Receiver<Option<CoreError>>,
    trailers: std::collections::BTreeMap<String, Vec<String>>,
    response_headers: HeaderMap,
    /// The stream's place on an HTTP/2 connection, held as long as the stream can be read.
    slot: Option<StreamSlot>,
    /// On an automatic transport's `Run` stream until its first message: the flag that moves
    /// the transport to HTTP/1.1 should the stream end at once with Connect `unimplemented`
    /// (a Connect server's answer for a streaming method it lacks comes in the body).
    no_run_unless_a_message: Option<Arc<AtomicBool>>,
}

impl Drop for AgentReceiver {
    fn drop(&mut self) {
        if let ResponseState::Pending(task) = &self.state {
            task.abort();
        }
    }
}

impl AgentReceiver {
    fn new(task: ResponseTask, limits: Limits, failure: watch::Receiver<Option<CoreError>>) -> Self {
        AgentReceiver {
            state: ResponseState::Pending(task),
            decoder: FrameDecoder::new(limits),
            failure,
            trailers: Default::default(),
            response_headers: HeaderMap::new(),
            slot: None,
            no_run_unless_a_message: None,
        }
    }

    /// Trailers (`metadata`) of the end-of-stream frame, once it has arrived.
    pub fn trailers(&self) -> &std::collections::BTreeMap<String, Vec<String>> {
        &self.trailers
    }

    /// Response headers, once they have arrived.
    pub fn response_headers(&self) -> &HeaderMap {
        &self.response_headers
    }

    fn fail(&mut self, err: CoreError) -> Result<Option<ServerFrame>, CoreError> {
        self.state = ResponseState::Done;
        Err(err)
    }

    /// The next message already received and buffered, without waiting for the network:
    /// `None` when a whole frame is not buffered yet. Lets the turn loop work through a burst
    /// of frames from one read in a tight loop.
    pub fn next_buffered(&mut self) -> Option<Result<Option<ServerFrame>, CoreError>> {
        if matches!(self.state, ResponseState::Done) {
            return None;
        }
        match self.decoder.next_frame() {
            Err(e) => Some(self.fail(e.into())),
            Ok(Some(Frame::Message(raw))) => {
                self.no_run_unless_a_message = None;
                // Decoded in place on the heap, never moved whole (see `ServerFrame`).
                let mut message = Box::<AgentServerMessage>::default();
                Some(match message.merge(raw.clone()) {
                    Ok(()) => Ok(Some(ServerFrame { message, raw })),
                    Err(e) => self.fail(CoreError::Protocol(format!("frame is not an AgentServerMessage: {e}"))),
                })
            }
            Ok(Some(Frame::End(end))) => {
                self.trailers = end.metadata;
                Some(match end.error {
                    Some(err) => match self.no_run_unless_a_message.take() {
                        Some(on_http1) if no_run_endpoint(&err) => {
                            self.fail(move_to_http1(&on_http1, format!("it has no Run endpoint ({err})")))
                        }
                        _ => self.fail(CoreError::from_connect(err)),
                    },
                    None => {
                        self.state = ResponseState::Done;
                        Ok(None)
                    }
                })
            }
            Ok(None) => None,
        }
    }

    /// The next server message; `Ok(None)` after a clean end (`{}` end-of-stream frame).
    /// A Connect error end, a framing violation, a failed append or a connection that closes
    /// without the end-of-stream frame is an `Err`, and the receiver is finished after it.
    pub async fn next(&mut self) -> Result<Option<ServerFrame>, CoreError> {
        loop {
            if matches!(self.state, ResponseState::Done) {
                return Ok(None);
            }
            if let Some(outcome) = self.next_buffered() {
                return outcome;
            }
            let failed = self.failure.borrow().clone();
            if let Some(err) = failed {
                return self.fail(err);
            }
            let mut failure = self.failure.clone();
            // Wakes when an append fails; once every sender is gone it can never fire.
            let append_failed = async move {
                if failure.changed().await.is_err() {
                    std::future::pending::<()>().await
                }
            };
            match &mut self.state {
                ResponseState::Pending(task) => {
                    let outcome = tokio::select! {
                        biased;
                        _ = append_failed => continue,
                        r = task => r,
                    };
                    match outcome {
                        Ok(Ok(response)) => {
                            self.response_headers = response.headers().clone();
                            self.state = ResponseState::Body(Box::pin(response.bytes_stream()));
                        }
                        Ok(Err(err)) => return self.fail(err),
                        Err(join) => return self.fail(CoreError::Network(format!("request task failed: {join}"))),
                    }
                }
                ResponseState::Body(body) => {
                    let chunk = tokio::select! {
                        biased;
                        _ = append_failed => continue,
                        c = body.next() => c,
                    };
                    match chunk {
                        Some(Ok(bytes)) => self.decoder.push(&bytes),
                        Some(Err(e)) => return self.fail(CoreError::Network(error_chain(&e))),
                        None => {
                            let result = self.decoder.finish();
                            return match result {
                                Err(e) => self.fail(e.into()),
                                Ok(()) => self.fail(CoreError::StreamClosed),
                            };
                        }
                    }
                }
                ResponseState::Done => return Ok(None),
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn append_bodies_are_what_prost_would_encode() {
        use http_body::Body as _;
        use http_body_util::BodyExt;
        let large: Vec<u8> = (0..3 * HEX_FRAME_PAYLOAD + 17).map(|i| (i * 7) as u8).collect();
        for payload in [&b""[..], b"\x00\xff hello", &[7u8; 300][..], &large[..]] {
            let request_id = BidiRequestId { request_id: "r-1".into() };
            let payload = Bytes::copy_from_slice(payload);
            for binary in [false, true] {
                let expected = BidiAppendRequest {
                    data: if binary { String::new() } else { hex::encode(&payload) },
                    request_id: Some(request_id.clone()),
                    append_seqno: 42,
                    data_binary: if binary { payload.clone() } else { Bytes::new() },
                }
                .encode_to_vec();
                // The payload as one piece and as uneven pieces.
                let mut split = Pieces::default();
                let mut rest = payload.clone();
                for size in [1, 7, HEX_FRAME_PAYLOAD + 3] {
                    split.push(rest.split_to(size.min(rest.len())));
                }
                split.push(rest);
                let body = AppendBody::new(split, request_id.clone(), 42, binary);
                assert_eq!(body.size_hint().exact(), Some(expected.len() as u64));
                assert_eq!(body.into_vec(), expected, "binary {binary}, {} bytes", payload.len());
                // Streamed frame by frame, the same bytes; large payloads in several frames.
                let streamed = AppendBody::new(payload.clone().into(), request_id.clone(), 42, binary);
                let frames = futures::executor::block_on(async {
                    let mut body = std::pin::pin!(streamed);
                    let mut frames = Vec::new();
                    while let Some(frame) = body.frame().await {
                        frames.push(frame.unwrap().into_data().unwrap());
                    }
                    assert!(body.is_end_stream());
                    frames
                });
                assert_eq!(frames.concat(), expected);
                if !binary && payload.len() > HEX_FRAME_PAYLOAD {
                    assert!(frames.iter().all(|f| f.len() <= 2 * HEX_FRAME_PAYLOAD), "hex goes out in slices");
                }
            }
        }
    }

    #[test]
    fn secret_never_prints() {
        let s = Secret::new("tok-123");
        assert_eq!(format!("{s:?}"), "Secret(<redacted>)");
        let cfg = TransportConfig { access_token: Some(s), ..Default::default() };
        assert!(!format!("{cfg:?}").contains("tok-123"));
    }

    #[test]
    fn transport_owned_headers_are_refused() {
        let cfg = TransportConfig { headers: vec![("Host".into(), "evil".into())], ..Default::default() };
        assert!(matches!(Transport::new(cfg), Err(CoreError::InvalidInput(_))));
        let cfg = TransportConfig { base_url: "ftp://x".into(), ..Default::default() };
        assert!(matches!(Transport::new(cfg), Err(CoreError::InvalidInput(_))));
    }
}
