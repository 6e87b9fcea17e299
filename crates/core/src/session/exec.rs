//! Answers to the server's exec requests: the host's typed result, shell output streamed as
//! `shell_stream` events, heartbeats while the host works, then `stream_close`.

use bytes::Bytes;
use tokio::sync::mpsc;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use super::client::Session;
use super::config::Timing;
use super::messages::exec_control as control;
use super::request_context;
use crate::bridge;
use crate::error::CoreError;
use crate::field::agent::v1 as f;
use crate::host::{ExecContext, ExecRequest, ShellOutput};
use crate::proto::agent::v1 as pb;
use crate::transport::AgentSender;
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

/// Answers one exec request: typed result then `stream_close`; throw + close when nothing can
/// answer it. Heartbeats every 3 s while the host works; abort and cancel stop the wait.
pub(super) async fn run(
    session: &Session,
    sender: &AgentSender,
    id: u32,
    exec_id: &str,
    request: Option<ExecRequest>,
    token: CancellationToken,
    timing: &Timing,
) {
    let close = control(pb::exec_client_control_message::Message::StreamClose(pb::ExecClientStreamClose { id }));
    let throw = |error: String| {
        control(pb::exec_client_control_message::Message::Throw(pb::ExecClientThrow {
            id,
            error,
            stack_trace: None,
            error_code: None,
        }))
    };
    let Some(request) = request else {
        let _ = sender.send(&throw("No handler found for this server message (unknown exec branch)".into())).await;
        let _ = sender.send(&close).await;
        return;
    };
    if request.kind == "requestContext" {
        let reply = match request_context::for_session(session).await {
            Ok(ctx) => {
                let result = pb::RequestContextResult {
                    result: Some(pb::request_context_result::Result::Success(pb::RequestContextSuccess {
                        request_context: Some(ctx),
                    })),
                };
                Some(bridge::exec_client_message(id, exec_id, request.field, &result))
            }
            Err(e) => bridge::exec_error_result(&request, &e.to_string()),
        };
        match reply {
            Some(bytes) => {
                let _ = sender.send_encoded(bytes).await;
            }
            None => {
                let _ = sender.send(&throw("the request context is unavailable".into())).await;
            }
        }
        let _ = sender.send(&close).await;
        return;
    }
    let streaming = request.kind == "shellStream";
    if streaming {
        let _ = sender.send_encoded(shell_event(id, exec_id, pb::shell_stream::Event::Start(Default::default()))).await;
    }
    let (out_tx, mut out_rx) = mpsc::unbounded_channel::<ShellOutput>();
    let ctx = ExecContext { cancel: token.clone(), output: out_tx };
    let host_call = session.inner.host.exec(request.clone(), ctx);
    let heartbeat = control(pb::exec_client_control_message::Message::Heartbeat(pb::ExecClientHeartbeat { id }));
    let mut beat = tokio::time::interval_at(Instant::now() + timing.exec_heartbeat, timing.exec_heartbeat);
    let deadline = tokio::time::sleep(timing.callback);
    tokio::pin!(host_call, deadline);
    let outcome: Result<Option<serde_json::Value>, CoreError> = loop {
        tokio::select! {
            r = &mut host_call => break r,
            Some(chunk) = out_rx.recv() => {
                if streaming {
                    let _ = sender.send_encoded(shell_event(id, exec_id, output_event(chunk))).await;
                }
            }
            _ = beat.tick() => {
                let _ = sender.send(&heartbeat).await;
            }
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
            let _ = sender.send_encoded(shell_event(id, exec_id, output_event(chunk))).await;
        }
    }
    let reply = match outcome {
        Ok(Some(json)) => match bridge::exec_result(&request, json) {
            Ok(bytes) => Ok(bytes),
            Err(e) => Err(format!("the exec callback returned an invalid {}: {e}", request.kind)),
        },
        Ok(None) => Err(String::new()),
        Err(CoreError::Aborted) => Err("aborted".into()),
        Err(e) => Err(e.to_string()),
    };
    match reply {
        Ok(result) => {
            if streaming {
                let exit = shell_exit(&request, &result);
                let _ = sender.send_encoded(shell_event(id, exec_id, pb::shell_stream::Event::Exit(exit))).await;
            }
            let _ = sender.send_encoded(result).await;
        }
        Err(message) if message.is_empty() => {
            let _ = sender.send(&throw(format!("No handler for {} in this client", request.kind))).await;
        }
        Err(message) => {
            if streaming {
                let exit = pb::ShellStreamExit { code: 1, aborted: token.is_cancelled(), ..Default::default() };
                let _ = sender.send_encoded(shell_event(id, exec_id, pb::shell_stream::Event::Exit(exit))).await;
            }
            let as_result = if streaming {
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
                Some(bytes) => {
                    let _ = sender.send_encoded(bytes).await;
                }
                None => {
                    let _ = sender.send(&throw(message)).await;
                }
            }
        }
    }
    let _ = sender.send(&close).await;
}

/// The `exit` event for a streaming shell, from the `AgentClientMessage` carrying its final
/// `ShellResult`.
fn shell_exit(request: &ExecRequest, client_message: &wire::Pieces) -> pb::ShellStreamExit {
    let cwd = request.args.get("workingDirectory").and_then(|c| c.as_str()).unwrap_or_default().to_string();
    let (code, aborted) = bridge::shell_stream_outcome(client_message).unwrap_or((1, false));
    pb::ShellStreamExit { code: code as u32, cwd, aborted, ..Default::default() }
}
