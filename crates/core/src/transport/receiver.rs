//! [`AgentReceiver`], the inbound half of a stream: the response's Connect frames decoded to
//! server messages in order, ended by the end-of-stream frame, a failure of the request side,
//! or the connection's end.

use std::collections::BTreeMap;
use std::future::Future;
use std::pin::Pin;

use bytes::Bytes;
use futures::future::{Fuse, FutureExt as _};
use futures::{Stream, StreamExt};
use prost::Message as _;
use reqwest::header::HeaderMap;
use tokio::sync::watch;

use super::auto::RunCheck;
use super::clients::StreamSlot;
use super::request::ResponseTask;
use crate::connect::{Encoding, Frame, FrameDecoder, Limits};
use crate::error::{error_chain, CoreError};
use crate::proto::agent::v1::AgentServerMessage;

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

/// Frames up to this size are decoded from a borrowed slice, their `bytes` fields copied; larger
/// ones from a shared reference to the received bytes, their `bytes` fields slices of it. For a
/// frame of a few bytes (a text delta) the copy is cheaper than the two atomic reference-count
/// updates of sharing.
const SHARED_DECODE_MIN: usize = 1024;

/// Decodes one frame's payload into `message`, which must be empty.
fn decode_frame(message: &mut AgentServerMessage, raw: &Bytes) -> Result<(), CoreError> {
    let decoded = if raw.len() < SHARED_DECODE_MIN { message.merge(&raw[..]) } else { message.merge(raw.clone()) };
    decoded.map_err(|e| CoreError::Protocol(format!("frame is not an AgentServerMessage: {e}")))
}

type BodyStream = Pin<Box<dyn Stream<Item = Result<Bytes, reqwest::Error>> + Send>>;

/// Resolves once the request side of the stream has failed (an append, the request body), and
/// never if every sender is gone first. Made once per stream: a wait made for every read would
/// join the channel's waiters and leave them again for every chunk of the response.
type FailureSignal = Fuse<Pin<Box<dyn Future<Output = ()> + Send>>>;

fn failure_signal(mut failure: watch::Receiver<Option<CoreError>>) -> FailureSignal {
    let signal: Pin<Box<dyn Future<Output = ()> + Send>> = Box::pin(async move {
        while failure.borrow_and_update().is_none() {
            if failure.changed().await.is_err() {
                std::future::pending::<()>().await;
            }
        }
    });
    signal.fuse()
}

enum ResponseState {
    Pending(ResponseTask),
    Body(BodyStream),
    /// The end-of-stream frame said the stream ended cleanly.
    Ended,
    /// The stream failed; every later read gives the same error, so one found while the turn
    /// loop works through a burst of buffered frames is not lost.
    Failed(CoreError),
}

/// Inbound half: server messages in order, then `Ok(None)` after a clean end-of-stream frame.
pub struct AgentReceiver {
    state: ResponseState,
    decoder: FrameDecoder,
    /// The request side's failure, once there is one.
    failure: watch::Receiver<Option<CoreError>>,
    /// Wakes a waiting read when that failure arrives.
    request_failed: FailureSignal,
    trailers: BTreeMap<String, Vec<String>>,
    response_headers: HeaderMap,
    /// The stream's place on an HTTP/2 connection, held (never read) as long as the stream
    /// can be read: dropping it frees the place.
    _slot: Option<StreamSlot>,
    run_check: RunCheck,
}

impl Drop for AgentReceiver {
    fn drop(&mut self) {
        if let ResponseState::Pending(task) = &self.state {
            task.abort();
        }
    }
}

impl AgentReceiver {
    /// The receiver of a stream whose response `task` brings; `slot` is its place on an HTTP/2
    /// connection, if it has one.
    pub(super) fn new(
        task: ResponseTask,
        limits: Limits,
        failure: watch::Receiver<Option<CoreError>>,
        slot: Option<StreamSlot>,
        run_check: RunCheck,
    ) -> Self {
        AgentReceiver {
            state: ResponseState::Pending(task),
            decoder: FrameDecoder::new(limits),
            request_failed: failure_signal(failure.clone()),
            failure,
            trailers: Default::default(),
            response_headers: HeaderMap::new(),
            _slot: slot,
            run_check,
        }
    }

    /// Trailers (`metadata`) of the end-of-stream frame, once it has arrived.
    pub fn trailers(&self) -> &BTreeMap<String, Vec<String>> {
        &self.trailers
    }

    /// Response headers, once they have arrived.
    pub fn response_headers(&self) -> &HeaderMap {
        &self.response_headers
    }

    fn fail(&mut self, err: CoreError) -> Result<Option<ServerFrame>, CoreError> {
        self.state = ResponseState::Failed(err.clone());
        Err(err)
    }

    /// How the stream ended, once it has: `Ok(None)` for a clean end, else its error.
    fn finished(&self) -> Option<Result<Option<ServerFrame>, CoreError>> {
        match &self.state {
            ResponseState::Ended => Some(Ok(None)),
            ResponseState::Failed(err) => Some(Err(err.clone())),
            ResponseState::Pending(_) | ResponseState::Body(_) => None,
        }
    }

    /// The next message already received and buffered, without waiting for the network:
    /// `None` when a whole frame is not buffered yet. Lets the turn loop work through a burst
    /// of frames from one read in a tight loop. Once the stream has ended or failed, that
    /// outcome (again and again, as [`next`](Self::next) gives it).
    pub fn next_buffered(&mut self) -> Option<Result<Option<ServerFrame>, CoreError>> {
        if let Some(outcome) = self.finished() {
            return Some(outcome);
        }
        match self.decoder.next_frame() {
            Ok(Some(Frame::Message(raw))) => {
                self.run_check.message_arrived();
                Some(self.decoded(raw))
            }
            other => self.not_a_message(other),
        }
    }

    /// The frame of message `raw`, or the stream's failure when it is not an
    /// `AgentServerMessage`.
    fn decoded(&mut self, raw: Bytes) -> Result<Option<ServerFrame>, CoreError> {
        // Decoded in place on the heap, never moved whole (see `ServerFrame`).
        let mut message = Box::<AgentServerMessage>::default();
        match decode_frame(&mut message, &raw) {
            Ok(()) => Ok(Some(ServerFrame { message, raw })),
            Err(e) => self.fail(e),
        }
    }

    /// As [`next_buffered`](Self::next_buffered), after first giving `run` every buffered
    /// message that `extend` takes into it from its encoded bytes (the turn loop merging a run
    /// of text deltas): those are never decoded and cost no frame of their own. The first
    /// message `extend` refuses is decoded and returned.
    pub fn next_buffered_after(
        &mut self,
        run: &mut ServerFrame,
        mut extend: impl FnMut(&mut ServerFrame, &[u8]) -> bool,
    ) -> Option<Result<Option<ServerFrame>, CoreError>> {
        loop {
            if let Some(outcome) = self.finished() {
                return Some(outcome);
            }
            match self.decoder.next_frame() {
                Ok(Some(Frame::Message(raw))) => {
                    self.run_check.message_arrived();
                    if extend(run, &raw) {
                        continue;
                    }
                    return Some(self.decoded(raw));
                }
                other => return self.not_a_message(other),
            }
        }
    }

    /// What the `next_buffered` methods make of a decoder outcome other than a message: the
    /// end of the stream (clean or an error), a framing error, or nothing whole yet.
    fn not_a_message(
        &mut self,
        outcome: Result<Option<Frame>, crate::connect::FrameError>,
    ) -> Option<Result<Option<ServerFrame>, CoreError>> {
        match outcome {
            Err(e) => Some(self.fail(e.into())),
            Ok(Some(Frame::Message(_))) => unreachable!("the callers decode messages themselves"),
            Ok(Some(Frame::End(end))) => {
                self.trailers = end.metadata;
                Some(match end.error {
                    Some(err) => {
                        let err = self.run_check.end_error(err);
                        self.fail(err)
                    }
                    None => {
                        self.state = ResponseState::Ended;
                        Ok(None)
                    }
                })
            }
            Ok(None) => None,
        }
    }

    /// The next server message; `Ok(None)` after a clean end (`{}` end-of-stream frame).
    /// A Connect error end, a framing violation, a failed append or a connection that closes
    /// without the end-of-stream frame is an `Err`. The receiver is finished after either, and
    /// every later call gives the same outcome again.
    pub async fn next(&mut self) -> Result<Option<ServerFrame>, CoreError> {
        loop {
            if let Some(outcome) = self.next_buffered() {
                return outcome;
            }
            let failure = self.failure.borrow().clone();
            if let Some(err) = failure {
                return self.fail(err);
            }
            match &mut self.state {
                ResponseState::Pending(task) => {
                    let outcome = tokio::select! {
                        biased;
                        _ = &mut self.request_failed => continue,
                        r = task => r,
                    };
                    match outcome {
                        Ok(Ok(response)) => {
                            self.decoder.set_encoding(Encoding::of_stream(response.headers()));
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
                        _ = &mut self.request_failed => continue,
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
                ResponseState::Ended | ResponseState::Failed(_) => {
                    return self.finished().expect("the stream is finished")
                }
            }
        }
    }
}
