//! The automatic transport: `Run` over HTTP/2 while the server speaks it, RunSSE + BidiAppend
//! over HTTP/1.1 for good once a stream shows that it does not.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use super::clients::{http_client, H2Connections};
use super::config::{TransportConfig, TransportKind};
use super::credentials::StreamAuth;
use super::diagnosis;
use super::failure::{record_failure, FailureSlot};
use super::request::{ok_or_http_error, ResponseTask};
use crate::connect::{self, ConnectError};
use crate::error::{error_chain, CoreError};

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
pub(super) struct AutoConnections {
    pub(super) h2: Arc<H2Connections>,
    pub(super) http1: reqwest::Client,
    pub(super) switch: Arc<Http1Switch>,
}

/// Whether an automatic transport has moved to HTTP/1.1; shared by the transport and its
/// `Run` streams, any of which may find out. Once on, it stays on for the client's lifetime.
#[derive(Debug, Default)]
pub(super) struct Http1Switch(AtomicBool);

impl Http1Switch {
    /// Whether a stream has shown that the server does not offer `Run` over HTTP/2.
    pub(super) fn is_on(&self) -> bool {
        self.0.load(Ordering::Relaxed)
    }

    /// Moves the transport to HTTP/1.1; returns the error for the stream that showed `why`.
    fn turn_on(&self, why: String) -> CoreError {
        self.0.store(true, Ordering::Relaxed);
        tracing::info!(why = %why, "the server does not offer Run over HTTP/2: RunSSE over HTTP/1.1 from now on");
        CoreError::NoHttp2(why)
    }
}

/// Whether a `Run` request's error response says that the server has no such endpoint.
fn no_run_endpoint(err: &ConnectError) -> bool {
    err.code == connect::Code::Unimplemented || matches!(err.http_status, Some(404 | 405 | 501))
}

/// What an automatic transport's `Run` request needs to report that the server does not speak
/// HTTP/2 (see [`AutoConnections`]).
#[derive(Clone)]
pub(super) struct Fallback {
    pub(super) switch: Arc<Http1Switch>,
    /// h2c by prior knowledge (a plain `http` URL) rather than h2 chosen by ALPN.
    pub(super) h2c: bool,
}

/// `spawn_request` for a `Run` request of an automatic transport: what shows that the server
/// does not offer `Run` over HTTP/2 (see [`AutoConnections`]) switches the transport to
/// HTTP/1.1 and fails the stream, both halves, with [`CoreError::NoHttp2`].
pub(super) fn spawn_run_request(
    client: &reqwest::Client,
    mut request: reqwest::Request,
    auth: Arc<StreamAuth>,
    fallback: Fallback,
    failure: FailureSlot,
) -> ResponseTask {
    let client = client.clone();
    tokio::spawn(async move {
        auth.apply(request.headers_mut()).await?;
        let why = match client.execute(request).await {
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
        let err = fallback.switch.turn_on(why);
        record_failure(&failure, err.clone());
        Err(err)
    })
}

/// `spawn_request` for a `Run` request under `'h2'`: a server, or a proxy in front of it, that
/// shows it does not speak HTTP/2 fails the stream at once with
/// [`CoreError::Http2Unsupported`], whose message names the fix; retrying cannot help. What
/// shows it, narrower than for the automatic transport (where a wrong guess only costs a move
/// to HTTP/1.1): an answer over HTTP/1.1, an ALPN refusal, or on h2c an HTTP/1.1 answer to the
/// preface read as an HTTP/2 frame ("frame with invalid size": the first bytes of
/// `HTTP/1.1 400` make a frame length far over the limit). A connection that merely closes
/// before any response (an HTTP/1.1 server hanging up on the preface, but also a server going
/// away) is probed: h2c again on a connection of its own, and HTTP/1.1; only a server that fails
/// h2c again and answers HTTP/1.1 is taken for one without HTTP/2. Anything else is left to
/// the resume rules.
pub(super) fn spawn_h2_only_request(
    client: &reqwest::Client,
    mut request: reqwest::Request,
    auth: Arc<StreamAuth>,
    config: Arc<TransportConfig>,
    failure: FailureSlot,
) -> ResponseTask {
    let client = client.clone();
    let url = request.url().clone();
    let h2c = url.scheme() == "http";
    tokio::spawn(async move {
        auth.apply(request.headers_mut()).await?;
        let why = match client.execute(request).await {
            Ok(response) if response.version() == reqwest::Version::HTTP_2 => return ok_or_http_error(response).await,
            Ok(response) => format!("it answered over {:?}", response.version()),
            Err(e) if diagnosis::refused_alpn(&e) => "it accepts no HTTP/2 in the TLS handshake (ALPN)".to_string(),
            Err(e) if h2c && answered_as_http1(&e) => {
                format!("it answered the HTTP/2 preface as HTTP/1.1: {}", error_chain(&e))
            }
            Err(e) if h2c && !e.is_connect() && !e.is_timeout() && speaks_only_http1(&config, &url).await => {
                format!("it hangs up on HTTP/2 and answers HTTP/1.1: {}", error_chain(&e))
            }
            Err(e) => return Err(CoreError::from(e)),
        };
        let err = CoreError::Http2Unsupported(diagnosis::no_http2(&url, &why));
        record_failure(&failure, err.clone());
        Err(err)
    })
}

/// Whether the server at `url` fails a fresh h2c request before answering and answers an
/// HTTP/1.1 one (with any status). The probes ask for `/` (no method of the protocol, so they
/// start nothing on the server), each on a connection of its own, a few seconds at most.
async fn speaks_only_http1(config: &TransportConfig, url: &reqwest::Url) -> bool {
    let mut root = url.clone();
    root.set_path("/");
    root.set_query(None);
    let probe = |kind| {
        let root = root.clone();
        async move {
            let client = http_client(config, kind, &root).ok()?;
            tokio::time::timeout(PROBE_TIMEOUT, client.get(root).send()).await.ok()
        }
    };
    let h2_fails = matches!(probe(TransportKind::H2).await, Some(Err(e)) if !e.is_connect() && !e.is_timeout());
    h2_fails && matches!(probe(TransportKind::Sse).await, Some(Ok(_)))
}

const PROBE_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(3);

/// Whether an h2c request failed because the peer answered in HTTP/1.1 (see above).
fn answered_as_http1(e: &reqwest::Error) -> bool {
    !e.is_connect() && !e.is_timeout() && error_chain(e).contains("frame with invalid size")
}

/// What the end of a `Run` stream can still show about the server (see [`AutoConnections`]).
pub(super) enum RunCheck {
    /// Nothing: not an automatic transport's `Run` stream, or a message has arrived.
    Settled,
    /// An automatic transport's `Run` stream before its first message: an end with Connect
    /// `unimplemented` (a Connect server's answer for a streaming method it lacks comes in the
    /// body) moves the transport to HTTP/1.1.
    UntilFirstMessage(Arc<Http1Switch>),
}

impl RunCheck {
    /// A message arrived: the server has `Run`.
    pub(super) fn message_arrived(&mut self) {
        *self = RunCheck::Settled;
    }

    /// The error an end-of-stream error `err` fails the stream with.
    pub(super) fn end_error(&mut self, err: ConnectError) -> CoreError {
        match std::mem::replace(self, RunCheck::Settled) {
            RunCheck::UntilFirstMessage(switch) if no_run_endpoint(&err) => {
                switch.turn_on(format!("it has no Run endpoint ({err})"))
            }
            _ => CoreError::from_connect(err),
        }
    }
}
