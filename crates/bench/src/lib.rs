//! Measurement helpers for `bench/` (not part of the client API), each a bound that a scenario
//! is read against in the same run:
//! - the decode ceiling: how fast the core's codec alone turns a received byte stream into
//!   server messages ([`decode_text_frames`], for `stream`);
//! - the transport floor: what setting up many RunSSE turns at once costs over HTTP/1.1 with
//!   reqwest and a server that does nothing else ([`FloorServer`], [`floor_turns`], for `many`).

use std::collections::HashMap;
use std::convert::Infallible;
use std::net::SocketAddr;
use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};
use std::time::{Duration, Instant};

use bytes::Bytes;
use http_body_util::{BodyExt, Either, Full};
use hyper::body::{Frame as BodyFrame, Incoming};
use hyper::{Request, Response};
use hyper_util::rt::TokioIo;
use prost::Message;
use tokio::net::TcpListener;
use tokio::sync::{oneshot, Semaphore};
use tokio_util::sync::CancellationToken;

use cursor_acp_core::connect::{encode_message, Frame, FrameDecoder};
use cursor_acp_core::error::{error_chain, CoreError};
use cursor_acp_core::proto::agent::v1 as pb;
use cursor_acp_core::transport::{default_sse_client, DEFAULT_MAX_APPEND_CONNECTIONS};

/// A Connect frame of `AgentServerMessage { interaction_update { text_delta { text } } }`.
fn text_delta_frame(text: &str) -> Bytes {
    let message = pb::AgentServerMessage {
        message: Some(pb::agent_server_message::Message::InteractionUpdate(pb::InteractionUpdate {
            message: Some(pb::interaction_update::Message::TextDelta(pb::TextDeltaUpdate {
                text: text.to_string(),
                is_server_notice: false,
            })),
        })),
        ..Default::default()
    };
    encode_message(&message, false, 0)
}

/// What [`decode_text_frames`] measured.
#[derive(Debug, Clone, Copy)]
pub struct DecodeStats {
    pub frames: usize,
    pub bytes: usize,
    pub elapsed: Duration,
}

/// Builds a stream of `count` `text_delta` frames of `text`, then times decoding it as the turn
/// loop does (envelopes from 64 KiB reads, each payload decoded as an `AgentServerMessage`).
pub fn decode_text_frames(count: usize, text: &str) -> DecodeStats {
    let frame = text_delta_frame(text);
    let mut stream = Vec::with_capacity(frame.len() * count);
    for _ in 0..count {
        stream.extend_from_slice(&frame);
    }
    let started = Instant::now();
    let mut decoder = FrameDecoder::default();
    let mut frames = 0usize;
    for chunk in stream.chunks(64 * 1024) {
        decoder.push(chunk);
        while let Ok(Some(Frame::Message(payload))) = decoder.next_frame() {
            let decoded = pb::AgentServerMessage::decode(payload).expect("frames built above decode");
            std::hint::black_box(&decoded);
            frames += 1;
        }
    }
    DecodeStats { frames, bytes: stream.len(), elapsed: started.elapsed() }
}

/// A server that does only the HTTP side of a RunSSE turn: it pairs a turn's stream with its
/// append and answers the stream once the append has arrived. Requests from [`floor_turns`]
/// (paired by their query) get a five-byte body; requests from the core (paired by
/// `x-request-id`) get one text-delta frame and a stream left open, as from a gateway whose
/// turns run on. Dropping it (or [`close`](Self::close)) stops it and cuts its connections.
pub struct FloorServer {
    addr: SocketAddr,
    shutdown: CancellationToken,
}

/// The body of every request [`floor_turns`] makes (about a small run request's size).
const FLOOR_REQUEST_BODY: &[u8] = &[0; 64];

/// Where a turn's stream and append meet, whichever arrives first.
enum Meeting {
    StreamWaiting(oneshot::Sender<()>),
    AppendArrived,
}

type Meetings = Arc<Mutex<HashMap<String, Meeting>>>;

/// A stream body: one frame, then open for good (as a turn that is still running).
struct OpenStream(Option<Bytes>);

impl hyper::body::Body for OpenStream {
    type Data = Bytes;
    type Error = Infallible;

    fn poll_frame(mut self: Pin<&mut Self>, _: &mut Context<'_>) -> Poll<Option<Result<BodyFrame<Bytes>, Infallible>>> {
        match self.0.take() {
            Some(frame) => Poll::Ready(Some(Ok(BodyFrame::data(frame)))),
            None => Poll::Pending,
        }
    }
}

impl FloorServer {
    /// Starts on an ephemeral loopback port.
    pub async fn start() -> Result<Self, CoreError> {
        let listener = TcpListener::bind(("127.0.0.1", 0))
            .await
            .map_err(|e| CoreError::Network(format!("floor server cannot listen on 127.0.0.1: {e}")))?;
        let addr = listener.local_addr().map_err(|e| CoreError::Network(e.to_string()))?;
        let shutdown = CancellationToken::new();
        tokio::spawn(accept_floor(listener, Meetings::default(), shutdown.clone()));
        Ok(FloorServer { addr, shutdown })
    }

    /// `http://127.0.0.1:PORT`
    pub fn url(&self) -> String {
        format!("http://{}", self.addr)
    }

    /// Stops accepting and cuts every open connection.
    pub fn close(&self) {
        self.shutdown.cancel();
    }
}

impl Drop for FloorServer {
    fn drop(&mut self) {
        self.shutdown.cancel();
    }
}

async fn accept_floor(listener: TcpListener, meetings: Meetings, shutdown: CancellationToken) {
    loop {
        let (socket, _) = tokio::select! {
            _ = shutdown.cancelled() => return,
            accepted = listener.accept() => match accepted {
                Ok(accepted) => accepted,
                Err(_) => {
                    tokio::time::sleep(Duration::from_millis(10)).await;
                    continue;
                }
            },
        };
        #[allow(
            clippy::let_underscore_must_use,
            reason = "Nagle only delays small frames; a socket that refuses the option still works"
        )]
        let _ = socket.set_nodelay(true);
        let (meetings, shutdown) = (meetings.clone(), shutdown.clone());
        tokio::spawn(async move {
            let service = hyper::service::service_fn(move |req| serve_floor(meetings.clone(), req));
            let connection = hyper::server::conn::http1::Builder::new().serve_connection(TokioIo::new(socket), service);
            tokio::select! {
                _ = connection => {}
                _ = shutdown.cancelled() => {}
            }
        });
    }
}

type FloorBody = Either<Full<Bytes>, OpenStream>;

async fn serve_floor(meetings: Meetings, req: Request<Incoming>) -> Result<Response<FloorBody>, Infallible> {
    let from_core = req.headers().get("x-request-id").and_then(|v| v.to_str().ok()).map(str::to_string);
    let is_stream = req.uri().path().ends_with("RunSSE") || req.uri().path() == "/stream";
    let id = from_core.clone().unwrap_or_else(|| req.uri().query().unwrap_or_default().to_string());
    #[allow(
        clippy::let_underscore_must_use,
        reason = "the body is read only to be drained; a client that went away is not the measurement's concern"
    )]
    let _ = req.into_body().collect().await;
    if !is_stream {
        let waiting = {
            let mut meetings = meetings.lock().expect("meetings lock");
            match meetings.remove(&id) {
                Some(Meeting::StreamWaiting(stream)) => Some(stream),
                _ => {
                    meetings.insert(id, Meeting::AppendArrived);
                    None
                }
            }
        };
        if let Some(stream) = waiting {
            #[allow(
                clippy::let_underscore_must_use,
                reason = "the stream's waiter may have gone; nothing is left to wake then"
            )]
            let _ = stream.send(());
        }
        return Ok(Response::new(Either::Left(Full::new(Bytes::new()))));
    }
    let wait = {
        let mut meetings = meetings.lock().expect("meetings lock");
        match meetings.remove(&id) {
            Some(Meeting::AppendArrived) => None,
            _ => {
                let (tx, rx) = oneshot::channel();
                meetings.insert(id, Meeting::StreamWaiting(tx));
                Some(rx)
            }
        }
    };
    if let Some(append) = wait {
        #[allow(clippy::let_underscore_must_use, reason = "woken or abandoned, the append is answered the same")]
        let _ = append.await;
    }
    let body = match from_core {
        Some(_) => Either::Right(OpenStream(Some(text_delta_frame("hi")))),
        None => Either::Left(Full::new(Bytes::from_static(b"first"))),
    };
    Ok(Response::builder().header("content-type", "application/connect+proto").body(body).expect("valid response"))
}

/// What [`floor_turns`] measured.
#[derive(Debug, Clone, Copy)]
pub struct FloorStats {
    pub turns: usize,
    pub wall: Duration,
    /// From a turn's start to the first byte of its stream.
    pub first_p50: Duration,
    pub first_p99: Duration,
}

/// Starts `turns` RunSSE-shaped turns at once against the [`FloorServer`] at `url`, with the
/// reqwest client that a RunSSE transport with default settings uses and none of the protocol: per turn, a
/// stream request on a connection of its own and an append request (at most
/// [`DEFAULT_MAX_APPEND_CONNECTIONS`] at a time, on kept-alive connections), each turn timed to
/// the first byte of its stream. Compared with the `many` scenario's p99 first update in the
/// same run, it shows how much of it the transport takes before any work of ours.
pub async fn floor_turns(url: &str, turns: usize) -> Result<FloorStats, CoreError> {
    if turns == 0 {
        return Err(CoreError::InvalidInput("floor_turns needs at least one turn".into()));
    }
    let client = default_sse_client(url)?;
    let base = url.trim_end_matches('/');
    let appends = Arc::new(Semaphore::new(DEFAULT_MAX_APPEND_CONNECTIONS));
    let network = |e: reqwest::Error| CoreError::Network(error_chain(&e));
    let started = Instant::now();
    let running: Vec<_> = (0..turns)
        .map(|id| {
            let (client, appends) = (client.clone(), appends.clone());
            let (stream_url, append_url) = (format!("{base}/stream?{id}"), format!("{base}/append?{id}"));
            tokio::spawn(async move {
                let start = Instant::now();
                let stream_client = client.clone();
                let stream = tokio::spawn(async move {
                    let response = stream_client.post(stream_url).body(FLOOR_REQUEST_BODY).send().await;
                    response.and_then(|r| r.error_for_status()).map_err(network)?.bytes().await.map_err(network)?;
                    Ok::<_, CoreError>(start.elapsed())
                });
                {
                    let _permit = appends.acquire().await.expect("the semaphore is never closed");
                    let response = client.post(append_url).body(FLOOR_REQUEST_BODY).send().await;
                    response.and_then(|r| r.error_for_status()).map_err(network)?.bytes().await.map_err(network)?;
                }
                stream.await.map_err(|e| CoreError::Network(format!("a floor turn failed: {e}")))?
            })
        })
        .collect();
    let mut firsts = Vec::with_capacity(turns);
    for turn in running {
        firsts.push(turn.await.map_err(|e| CoreError::Network(format!("a floor turn failed: {e}")))??);
    }
    let wall = started.elapsed();
    firsts.sort();
    let at = |percent: usize| firsts[(percent * turns / 100).min(turns - 1)];
    Ok(FloorStats { turns, wall, first_p50: at(50), first_p99: at(99) })
}

#[cfg(test)]
mod tests {
    #[test]
    fn every_frame_is_decoded() {
        let stats = super::decode_text_frames(10_000, "word ");
        assert_eq!(stats.frames, 10_000);
        // 5-byte envelope + 11-byte message (three nested tags and lengths around the 5 text bytes).
        assert_eq!(stats.bytes, 10_000 * 16);
    }

    #[tokio::test]
    async fn every_floor_turn_gets_its_first_byte_after_its_append() {
        let server = super::FloorServer::start().await.expect("floor server");
        let stats = super::floor_turns(&server.url(), 50).await.expect("floor turns");
        assert_eq!(stats.turns, 50);
        assert!(stats.first_p50 <= stats.first_p99 && stats.first_p99 <= stats.wall, "{stats:?}");
    }

    #[tokio::test]
    async fn a_floor_stream_waits_for_its_append() {
        let server = super::FloorServer::start().await.expect("floor server");
        let client = cursor_acp_core::transport::default_sse_client(&server.url()).expect("client");
        let stream = tokio::spawn(client.post(format!("{}/stream?7", server.url())).send());
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
        assert!(!stream.is_finished(), "the stream was answered before its append");
        client.post(format!("{}/append?7", server.url())).send().await.expect("append");
        let response = stream.await.expect("join").expect("stream");
        assert_eq!(response.bytes().await.expect("body"), "first");
    }

    #[tokio::test]
    async fn floor_turns_against_a_closed_server_fail_with_a_network_error() {
        let server = super::FloorServer::start().await.expect("floor server");
        let url = server.url();
        drop(server);
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
        let err = super::floor_turns(&url, 3).await.expect_err("nothing listens");
        assert!(matches!(err, cursor_acp_core::CoreError::Network(_)), "{err:?}");
        assert!(matches!(super::floor_turns(&url, 0).await, Err(cursor_acp_core::CoreError::InvalidInput(_))));
    }
}
