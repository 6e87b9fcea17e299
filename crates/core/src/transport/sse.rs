//! The RunSSE sender: one unary `BidiAppend` per outbound message, `append_seqno` counted from
//! 0 on one counter, a bounded number in flight, each with a deadline, never retried
//! (docs/protocol.md, "RunSSE + BidiAppend"). Its body is encoded while it is written.

use std::pin::Pin;
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use prost::Message as _;
use reqwest::header::{HeaderMap, HeaderValue};
use tokio::sync::{Mutex, Semaphore};

use super::config::{
    too_large, AppendEncoding, Compression, TransportConfig, MAX_OUTBOUND_MESSAGE, MIN_COMPRESS_BYTES,
};
use super::credentials::StreamAuth;
use super::failure::{record_failure, FailureSlot};
use super::request::{post, read_capped};
use crate::connect::{self, ConnectError};
use crate::error::CoreError;
use crate::proto::aiserver::v1::{BidiAppendRequest, BidiRequestId};
use crate::wire::Pieces;

pub(super) struct SseSender {
    client: reqwest::Client,
    url: reqwest::Url,
    headers: HeaderMap,
    request_id: String,
    config: Arc<TransportConfig>,
    next_seqno: Mutex<i64>,
    in_flight: Arc<Semaphore>,
    /// Shared by every SSE sender of the transport (see `DEFAULT_MAX_APPEND_CONNECTIONS`).
    connections: Arc<Semaphore>,
    failure: FailureSlot,
    /// The stream's token: its appends carry the one its RunSSE request was sent with.
    auth: Arc<StreamAuth>,
}

impl SseSender {
    #[allow(
        clippy::too_many_arguments,
        reason = "the parts of one stream, each used once; a struct would only repeat them"
    )]
    pub(super) fn new(
        client: reqwest::Client,
        url: reqwest::Url,
        headers: HeaderMap,
        request_id: String,
        config: Arc<TransportConfig>,
        connections: Arc<Semaphore>,
        failure: FailureSlot,
        auth: Arc<StreamAuth>,
    ) -> Self {
        let in_flight = Arc::new(Semaphore::new(config.max_appends_in_flight));
        SseSender {
            client,
            url,
            headers,
            request_id,
            config,
            next_seqno: Mutex::new(0),
            in_flight,
            connections,
            failure,
            auth,
        }
    }

    /// Waits until every append sent so far has been acknowledged.
    pub(super) async fn flush(&self) -> Result<(), CoreError> {
        let n = self.config.max_appends_in_flight as u32;
        let _all = self.in_flight.acquire_many(n).await.map_err(|_| CoreError::Closed("sender closed".into()))?;
        if let Some(err) = self.failure.borrow().clone() {
            return Err(err);
        }
        Ok(())
    }

    /// Further sends fail.
    pub(super) fn close(&self) {
        self.in_flight.close();
    }

    pub(super) async fn next_seqno(&self) -> i64 {
        *self.next_seqno.lock().await
    }

    /// Starts the append of one message (see [`super::AgentSender::send`]).
    pub(super) async fn send(&self, payload: Pieces) -> Result<(), CoreError> {
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
        let mut request = post(self.url.clone(), headers, body);
        let deadline =
            self.config.append_deadline + Duration::from_millis((wire_bytes as u64 * 1000).div_ceil(131_072));
        let failure = self.failure.clone();
        let client = self.client.clone();
        let auth = self.auth.clone();
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
                auth.apply(request.headers_mut()).await?;
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
                tracing::debug!(seqno, error = %err, "BidiAppend failed: the stream fails with it");
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
}
