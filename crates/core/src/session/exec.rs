//! Answers to the server's exec requests: the host's typed result, shell output streamed as
//! `shell_stream` events, heartbeats while the host works, then `stream_close`.

use bytes::Bytes;
use tokio::sync::mpsc;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use super::config::Timing;
use super::inner::SessionInner;
use super::messages::exec_control as control;
use super::request_context;
use crate::bridge;
use crate::error::CoreError;
use crate::field::agent::v1 as f;
use crate::host::{ExecContext, ExecRequest, ShellOutput};
use crate::proto::agent::v1 as pb;
use crate::transport::{AgentSender, MAX_OUTBOUND_MESSAGE};
use crate::wire;

fn shell_event(id: u32, exec_id: &str, event: pb::shell_stream::Event) -> Bytes {
    let stream = pb::ShellStream { event: Some(event) };
    bridge::exec_client_message(id, exec_id, f::exec_client_message::SHELL_STREAM, &stream)
}

fn output_event(chunk: ShellOutput) -> pb::shell_stream::Event {
    match chunk {
        ShellOutput::Stdout(data) => pb::shell_stream::Event::Stdout(pb::ShellStreamStdout { data }),
        ShellOutput::Stderr(data) => pb::shell_stream::Event::Stderr(pb::ShellStreamStderr { data }),
    }
}

/// What the host's answer to an exec request becomes on the wire.
enum ExecReply {
    /// The typed result message, encoded.
    Result(wire::Pieces),
    /// No handler took the request: throw + close.
    Unhandled,
    /// The handler failed, timed out, was aborted or returned an invalid result: the result
    /// type's error branch (a shell failure for a streaming shell), or throw when it has none.
    Failed(String),
}

impl ExecReply {
    fn from_host(request: &ExecRequest, outcome: Result<Option<serde_json::Value>, CoreError>) -> Self {
        match outcome {
            Ok(Some(json)) => match bridge::exec_result(request, json) {
                // Too large to send: the server would see only `stream_close`, and the model
                // would take the missing answer for an empty one. It gets the reason instead.
                Ok(result) if result.len() > MAX_OUTBOUND_MESSAGE => ExecReply::Failed(format!(
                    "the {} result is {} bytes, over the {MAX_OUTBOUND_MESSAGE}-byte limit of one message",
                    request.kind,
                    result.len()
                )),
                Ok(result) => ExecReply::Result(result),
                Err(e) => ExecReply::Failed(format!("the exec callback returned an invalid {}: {e}", request.kind)),
            },
            Ok(None) => ExecReply::Unhandled,
            Err(CoreError::Aborted) => ExecReply::Failed("aborted".into()),
            Err(e) => ExecReply::Failed(e.to_string()),
        }
    }
}

/// The messages that answer one exec request, all sent through the turn's sender.
struct Replier<'a> {
    sender: &'a AgentSender,
    id: u32,
    exec_id: &'a str,
}

/// Which message of an exec could not be sent: a lost answer is a warning, a lost heartbeat,
/// output chunk or close is not (the stream has failed, and the turn reports that).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Part {
    Answer,
    Progress,
}

impl Replier<'_> {
    async fn send(&self, part: Part, message: &pb::AgentClientMessage) {
        if let Err(e) = self.sender.send(message).await {
            self.unsent(part, &e);
        }
    }

    async fn send_encoded(&self, part: Part, message: impl Into<wire::Pieces>) {
        if let Err(e) = self.sender.send_encoded(message).await {
            self.unsent(part, &e);
        }
    }

    fn unsent(&self, part: Part, error: &CoreError) {
        let (id, exec_id) = (self.id, self.exec_id);
        match part {
            Part::Answer => tracing::warn!(id, exec_id, error = %error, "the answer to an exec request was not sent"),
            Part::Progress => tracing::debug!(id, exec_id, error = %error, "an exec stream message was not sent"),
        }
    }

    async fn answer(&self, result: impl Into<wire::Pieces>) {
        self.send_encoded(Part::Answer, result).await;
    }

    async fn shell_event(&self, event: pb::shell_stream::Event) {
        self.send_encoded(Part::Progress, shell_event(self.id, self.exec_id, event)).await;
    }

    async fn throw(&self, error: String) {
        let throw = pb::ExecClientThrow { id: self.id, error, stack_trace: None, error_code: None };
        self.send(Part::Answer, &control(pb::exec_client_control_message::Message::Throw(throw))).await;
    }

    async fn heartbeat(&self) {
        let heartbeat = pb::ExecClientHeartbeat { id: self.id };
        self.send(Part::Progress, &control(pb::exec_client_control_message::Message::Heartbeat(heartbeat))).await;
    }

    /// `stream_close`: the last message of every exec, whatever came before it.
    async fn close(&self) {
        let close = pb::ExecClientStreamClose { id: self.id };
        self.send(Part::Progress, &control(pb::exec_client_control_message::Message::StreamClose(close))).await;
    }
}

/// Answers one exec request: typed result then `stream_close`; throw + close when nothing can
/// answer it. Heartbeats every 3 s while the host works; abort and cancel stop the wait.
pub(super) async fn run(
    session: &SessionInner,
    sender: &AgentSender,
    id: u32,
    exec_id: &str,
    request: Option<ExecRequest>,
    token: CancellationToken,
    timing: &Timing,
) {
    let reply = Replier { sender, id, exec_id };
    if let Some(request) = &request {
        tracing::debug!(id, exec_id, kind = %request.kind, "exec request");
    }
    let Some(request) = request else {
        tracing::warn!(id, exec_id, "an exec request of a kind this schema does not know: answered with throw");
        reply.throw("No handler found for this server message (unknown exec branch)".into()).await;
        return reply.close().await;
    };
    if request.kind == "requestContext" {
        match request_context_result(session, &request).await {
            Some(bytes) => reply.answer(bytes).await,
            None => reply.throw("the request context is unavailable".into()).await,
        }
        return reply.close().await;
    }
    let streaming = request.kind == "shellStream";
    if streaming {
        reply.shell_event(pb::shell_stream::Event::Start(Default::default())).await;
    }
    let (out_tx, mut out_rx) = mpsc::unbounded_channel::<ShellOutput>();
    let ctx = ExecContext { cancel: token.clone(), output: out_tx };
    let host_call = session.host.exec(request.clone(), ctx);
    let mut beat = tokio::time::interval_at(Instant::now() + timing.exec_heartbeat, timing.exec_heartbeat);
    let deadline = tokio::time::sleep(timing.callback);
    tokio::pin!(host_call, deadline);
    let outcome: Result<Option<serde_json::Value>, CoreError> = loop {
        tokio::select! {
            r = &mut host_call => break r,
            Some(chunk) = out_rx.recv() => {
                if streaming {
                    reply.shell_event(output_event(chunk)).await;
                }
            }
            _ = beat.tick() => reply.heartbeat().await,
            _ = token.cancelled() => break Err(CoreError::Aborted),
            _ = &mut deadline => {
                token.cancel();
                break Err(CoreError::Timeout(format!(
                    "the {} exec callback did not settle within {} ms", request.kind, timing.callback.as_millis()
                )));
            }
        }
    };
    // Output produced just before the result still goes out, in order.
    while let Ok(chunk) = out_rx.try_recv() {
        if streaming {
            reply.shell_event(output_event(chunk)).await;
        }
    }
    match ExecReply::from_host(&request, outcome) {
        ExecReply::Result(result) => {
            if streaming {
                reply.shell_event(pb::shell_stream::Event::Exit(shell_exit(&request, &result))).await;
            }
            reply.answer(result).await;
        }
        ExecReply::Unhandled => {
            tracing::debug!(id, exec_id, kind = %request.kind, "no handler for an exec request: answered with throw");
            reply.throw(format!("No handler for {} in this client", request.kind)).await
        }
        ExecReply::Failed(message) => {
            tracing::debug!(id, exec_id, kind = %request.kind, error = %message, "an exec request failed");
            let as_result = if streaming {
                let exit = pb::ShellStreamExit { code: 1, aborted: token.is_cancelled(), ..Default::default() };
                reply.shell_event(pb::shell_stream::Event::Exit(exit)).await;
                let failure = pb::ShellResult {
                    result: Some(pb::shell_result::Result::Failure(pb::ShellFailure {
                        command: request.args.get("command").and_then(|c| c.as_str()).unwrap_or_default().to_string(),
                        exit_code: 1,
                        stderr: message.clone(),
                        aborted: token.is_cancelled(),
                        ..Default::default()
                    })),
                    ..Default::default()
                };
                Some(bridge::exec_client_message(id, exec_id, f::exec_client_message::SHELL_RESULT, &failure))
            } else {
                bridge::exec_error_result(&request, &message)
            };
            match as_result {
                Some(bytes) => reply.answer(bytes).await,
                None => reply.throw(message).await,
            }
        }
    }
    reply.close().await;
}

/// The typed answer to a `requestContext` exec: the context, or the result type's error branch
/// when the host's callback fails; `None` when neither can be encoded (the caller throws).
async fn request_context_result(session: &SessionInner, request: &ExecRequest) -> Option<Bytes> {
    match request_context::for_session(session).await {
        Ok(ctx) => {
            let result = pb::RequestContextResult {
                result: Some(pb::request_context_result::Result::Success(pb::RequestContextSuccess {
                    request_context: Some(ctx),
                    ..Default::default()
                })),
            };
            Some(bridge::exec_client_message(request.id, &request.exec_id, request.field, &result))
        }
        Err(e) => bridge::exec_error_result(request, &e.to_string()),
    }
}

/// The `exit` event for a streaming shell, from the `AgentClientMessage` carrying its final
/// `ShellResult`.
fn shell_exit(request: &ExecRequest, client_message: &wire::Pieces) -> pb::ShellStreamExit {
    let cwd = request.args.get("workingDirectory").and_then(|c| c.as_str()).unwrap_or_default().to_string();
    let (code, aborted) = bridge::shell_stream_outcome(client_message).unwrap_or((1, false));
    pb::ShellStreamExit { code: code as u32, cwd, aborted, ..Default::default() }
}
