//! [`AgentSender`], the outbound half of a stream: one interface over the RunSSE sender (one
//! `BidiAppend` per message) and the `Run` sender (frames of one HTTP/2 request body).

use std::sync::Arc;

use bytes::Bytes;
use prost::Message as _;

use super::h2::H2Sender;
use super::sse::SseSender;
use crate::error::CoreError;
use crate::proto::agent::v1::AgentClientMessage;
use crate::wire::Pieces;

/// Outbound half. Cloneable; every clone shares one seqno counter.
#[derive(Clone)]
pub struct AgentSender {
    inner: Arc<SenderInner>,
}

// One per stream, behind an Arc: the variants' sizes do not matter.
#[allow(clippy::large_enum_variant, reason = "one per stream, behind an Arc")]
enum SenderInner {
    Sse(SseSender),
    H2(H2Sender),
}

impl AgentSender {
    pub(super) fn sse(sender: SseSender) -> Self {
        AgentSender { inner: Arc::new(SenderInner::Sse(sender)) }
    }

    pub(super) fn h2(sender: H2Sender) -> Self {
        AgentSender { inner: Arc::new(SenderInner::H2(sender)) }
    }

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
            SenderInner::H2(h2) => h2.send(payload).await,
        }
    }

    /// Waits until every append sent so far has been acknowledged (SSE); a no-op for h2.
    pub async fn flush(&self) -> Result<(), CoreError> {
        match &*self.inner {
            SenderInner::Sse(s) => s.flush().await,
            SenderInner::H2(_) => Ok(()),
        }
    }

    /// Half-closes the stream (h2: ends the request body). Further sends fail.
    pub fn close(&self) {
        match &*self.inner {
            SenderInner::H2(h2) => h2.close(),
            SenderInner::Sse(s) => s.close(),
        }
    }

    /// Seqno the next append will use (SSE), for diagnostics and tests.
    pub async fn next_seqno(&self) -> Option<i64> {
        match &*self.inner {
            SenderInner::Sse(s) => Some(s.next_seqno().await),
            SenderInner::H2(_) => None,
        }
    }
}
