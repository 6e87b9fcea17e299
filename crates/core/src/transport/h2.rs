//! The `Run` sender: each message one Connect frame of the stream's HTTP/2 request body.

use std::sync::Mutex;

use bytes::Bytes;
use futures::StreamExt;
use tokio::sync::mpsc;

use super::config::{too_large, MAX_OUTBOUND_MESSAGE, MIN_COMPRESS_BYTES};
use super::failure::FailureSlot;
use crate::connect;
use crate::error::CoreError;
use crate::wire::Pieces;

pub(super) struct H2Sender {
    /// `None` once the request side is closed.
    body: Mutex<Option<mpsc::Sender<Vec<Bytes>>>>,
    gzip: bool,
    failure: FailureSlot,
}

impl H2Sender {
    /// A sender and the request body it writes.
    pub(super) fn new(gzip: bool, failure: FailureSlot) -> (Self, reqwest::Body) {
        // One item per frame, in the buffers `connect::encode_frame_pieces` made of it.
        let (body_tx, mut body_rx) = mpsc::channel::<Vec<Bytes>>(64);
        let body_stream = futures::stream::poll_fn(move |cx| body_rx.poll_recv(cx))
            .flat_map(futures::stream::iter)
            .map(Ok::<_, std::io::Error>);
        (H2Sender { body: Mutex::new(Some(body_tx)), gzip, failure }, reqwest::Body::wrap_stream(body_stream))
    }

    pub(super) async fn send(&self, payload: Pieces) -> Result<(), CoreError> {
        // One frame is one channel item, so frames of concurrent senders never interleave.
        if let Some(err) = self.failure.borrow().clone() {
            return Err(err);
        }
        let tx = self.body.lock().expect("sender lock").clone();
        let tx = tx.ok_or_else(|| CoreError::Closed("the stream's send side is closed".into()))?;
        if payload.len() > MAX_OUTBOUND_MESSAGE {
            return Err(too_large(payload.len()));
        }
        let frame = if self.gzip && payload.len() >= MIN_COMPRESS_BYTES {
            let compressed = Bytes::from(connect::gzip_pieces(&payload));
            connect::encode_frame_pieces(connect::FLAG_COMPRESSED, compressed.into())
        } else {
            connect::encode_frame_pieces(0, payload)
        };
        tx.send(frame).await.map_err(|_| {
            // We did not close it (that is checked above), so the peer or the
            // connection ended the request side.
            self.failure
                .borrow()
                .clone()
                .unwrap_or(CoreError::Network("the Run stream was closed by the server".into()))
        })
    }

    /// Ends the request body.
    pub(super) fn close(&self) {
        self.body.lock().expect("sender lock").take();
    }
}
