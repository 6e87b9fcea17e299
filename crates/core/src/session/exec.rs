//! Answers to the server's exec requests: the host's typed result (or this client's own
//! default, `exec_defaults`), shell output streamed as `shell_stream` events (`shell_stream`),
//! heartbeats while the host works, then `stream_close`. Every answer says how long the client
//! worked on it, and carries hooks' contexts when the server accepts them.

use bytes::Bytes;
use tokio::sync::mpsc;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use super::config::Timing;
use super::exec_defaults::default_answer;
use super::inner::SessionInner;
use super::messages::exec_control as control;
use super::request_context;
use super::shell_stream::{self, Ending};
use super::tool_runs;
use crate::bridge::{self, ReplyExtras};
use crate::error::CoreError;
use crate::field::agent::v1 as f;
use crate::host::{ExecContext, ExecEvent, ExecRequest};
use crate::proto::agent::v1 as pb;
use crate::transport::{AgentSender, MAX_OUTBOUND_MESSAGE};
use crate::wire;

fn shell_event(id: u32, exec_id: &str, event: pb::shell_stream::Event) -> Bytes {
    let stream = pb::ShellStream { event: Some(event) };
    bridge::exec_client_message(id, exec_id, f::exec_client_message::SHELL_STREAM, &stream, &ReplyExtras::NONE)
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
    fn from_host(
        request: &ExecRequest,
        outcome: Result<Option<serde_json::Value>, CoreError>,
        extras: &ReplyExtras,
    ) -> Self {
        match outcome {
            Ok(Some(json)) => match bridge::exec_result(request, json, extras) {
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
            Ok(None) => match default_answer(request).map(|json| bridge::exec_result(request, json, extras)) {
                Some(Ok(result)) => ExecReply::Result(result),
                Some(Err(e)) => {
                    ExecReply::Failed(format!("this client's default answer to {} is invalid: {e}", request.kind))
                }
                None => ExecReply::Unhandled,
            },
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

/// A streaming shell's progress, so `start` goes out exactly once and only for a process that
/// started.
struct ShellEvents<'a> {
    reply: &'a Replier<'a>,
    started: bool,
}

impl ShellEvents<'_> {
    async fn start(&mut self) {
        if !self.started {
            self.started = true;
            self.reply.shell_event(pb::shell_stream::Event::Start(Default::default())).await;
        }
    }

    async fn output(&mut self, event: pb::shell_stream::Event) {
        // Output means the process runs, whether or not the host said so first.
        self.start().await;
        self.reply.shell_event(event).await;
    }

    /// The events before the final `ShellResult`, read from it.
    async fn end(&mut self, request: &ExecRequest, ending: Ending, elapsed_ms: i32) {
        use pb::shell_stream::Event;
        let exit = |code: i32, aborted: bool, abort_reason: Option<pb::ShellAbortReason>| {
            Event::Exit(pb::ShellStreamExit {
                code: code as u32,
                cwd: request.args.get("workingDirectory").and_then(|c| c.as_str()).unwrap_or_default().to_string(),
                aborted,
                abort_reason: abort_reason.map(|r| r as i32),
                local_execution_time_ms: Some(elapsed_ms),
                ..Default::default()
            })
        };
        let event = match ending {
            Ending::Exited { code, aborted } => {
                self.start().await;
                exit(code, aborted, aborted.then_some(pb::ShellAbortReason::UserAbort))
            }
            Ending::TimedOut => {
                self.start().await;
                exit(1, true, Some(pb::ShellAbortReason::Timeout))
            }
            Ending::Backgrounded(backgrounded) => {
                self.start().await;
                Event::Backgrounded(backgrounded)
            }
            // A process the host said had started, and then reported refused or unspawned,
            // still needs its exit.
            _ if self.started => exit(1, false, None),
            Ending::Rejected(rejected) => Event::Rejected(rejected),
            Ending::PermissionDenied(denied) => Event::PermissionDenied(denied),
            Ending::NeverStarted => return,
        };
        self.reply.shell_event(event).await;
    }
}

/// What the host reported while it worked: output (streamed for a streaming shell, and shown on
/// a shell's card) and hook contexts (kept for the answer).
async fn handle_event(
    event: ExecEvent,
    shell: Option<&mut ShellEvents<'_>>,
    live: Option<&mut LiveOutput>,
    hooks: &mut Vec<pb::HookAdditionalContext>,
) {
    if let (Some(live), ExecEvent::Stdout(text) | ExecEvent::Stderr(text)) = (live, &event) {
        live.push(text);
    }
    match (event, shell) {
        (ExecEvent::HookContext { hook_event_name, content }, _) => {
            hooks.push(pb::HookAdditionalContext { hook_event_name, content })
        }
        (ExecEvent::Started, Some(shell)) => shell.start().await,
        (ExecEvent::Stdout(data), Some(shell)) => {
            shell.output(pb::shell_stream::Event::Stdout(pb::ShellStreamStdout { data })).await
        }
        (ExecEvent::Stderr(data), Some(shell)) => {
            shell.output(pb::shell_stream::Event::Stderr(pb::ShellStreamStderr { data })).await
        }
        // Not a streaming shell: its output is in its result.
        (_, None) => {}
    }
}

/// Output of a shell this client runs, for its card (the turn loop hands it to the translator).
#[derive(Debug)]
pub(super) struct LocalOutput {
    /// The card: the server's tool call, or the one the core opened for the exec.
    pub(super) call_id: String,
    pub(super) text: String,
}

/// How often a running shell's card is updated at most: a chatty command costs the client a
/// few updates a second, not one per read of its pipe.
const LIVE_OUTPUT_EVERY: std::time::Duration = std::time::Duration::from_millis(100);

/// A running shell's output on its way to its card.
struct LiveOutput {
    to: mpsc::UnboundedSender<LocalOutput>,
    call_id: String,
    pending: String,
    next: Instant,
}

impl LiveOutput {
    /// For the shells (the kinds whose output a user watches), when the turn takes it.
    fn for_request(request: &ExecRequest, to: Option<&mpsc::UnboundedSender<LocalOutput>>) -> Option<Self> {
        use crate::kinds::ExecKind as K;
        let shell = matches!(request.exec_kind()?, K::Shell | K::ShellStream | K::MiniSweAgentBash | K::PiBash);
        let to = to.filter(|_| shell)?.clone();
        Some(LiveOutput { to, call_id: tool_runs::card_id(request), pending: String::new(), next: Instant::now() })
    }

    fn push(&mut self, text: &str) {
        self.pending.push_str(text);
        if Instant::now() >= self.next {
            self.flush();
        }
    }

    fn flush(&mut self) {
        if self.pending.is_empty() {
            return;
        }
        let text = std::mem::take(&mut self.pending);
        // A turn that is over no longer shows anything: nothing to do then.
        #[allow(clippy::let_underscore_must_use, reason = "a turn that is over no longer shows anything")]
        let _ = self.to.send(LocalOutput { call_id: self.call_id.clone(), text });
        self.next = Instant::now() + LIVE_OUTPUT_EVERY;
    }

    /// When the output held back is due.
    fn due(&self) -> Option<Instant> {
        (!self.pending.is_empty()).then_some(self.next)
    }
}

/// Answers one exec request: typed result then `stream_close`; throw + close when nothing can
/// answer it. Heartbeats every 3 s while the host works; abort and cancel stop the wait.
#[allow(clippy::too_many_arguments, reason = "what the turn loop holds for one exec, each used once")]
pub(super) async fn run(
    session: &SessionInner,
    sender: &AgentSender,
    id: u32,
    exec_id: &str,
    request: Option<ExecRequest>,
    token: CancellationToken,
    timing: &Timing,
    live_output: Option<&mpsc::UnboundedSender<LocalOutput>>,
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
    let began = Instant::now();
    let elapsed_ms = || began.elapsed().as_millis().min(i32::MAX as u128) as i32;
    if request.kind == "requestContext" {
        match request_context_result(session, &request).await {
            Some(bytes) => reply.answer(bytes).await,
            None => reply.throw("the request context is unavailable".into()).await,
        }
        return reply.close().await;
    }
    let mut shell = (request.kind == "shellStream").then_some(ShellEvents { reply: &reply, started: false });
    let mut hooks = Vec::new();
    let (ctx, mut events) = ExecContext::new(token.clone());
    // The host first (a host bringing its own tools answers what it wants); the client's
    // built-in tools then take what it left.
    let host_call = async {
        match session.host.exec(request.clone(), ctx.clone()).await? {
            Some(answer) => Ok(Some(answer)),
            None => tool_runs::run(session, &request, &ctx).await,
        }
    };
    let mut beat = tokio::time::interval_at(Instant::now() + timing.exec_heartbeat, timing.exec_heartbeat);
    let deadline = tokio::time::sleep(timing.callback);
    tokio::pin!(host_call, deadline);
    let mut live = LiveOutput::for_request(&request, live_output);
    let outcome: Result<Option<serde_json::Value>, CoreError> = loop {
        let live_due = live.as_ref().and_then(LiveOutput::due);
        tokio::select! {
            r = &mut host_call => break r,
            Some(event) = events.recv() => handle_event(event, shell.as_mut(), live.as_mut(), &mut hooks).await,
            _ = sleep_until_due(live_due) => {
                if let Some(live) = live.as_mut() {
                    live.flush();
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
    // What the host reported just before its answer still goes out, in order.
    while let Ok(event) = events.try_recv() {
        handle_event(event, shell.as_mut(), live.as_mut(), &mut hooks).await;
    }
    if let Some(live) = live.as_mut() {
        live.flush();
    }
    if !hooks.is_empty() && !request.accept_hook_additional_contexts {
        tracing::debug!(id, exec_id, hooks = hooks.len(), "hook contexts dropped: the server does not accept them");
        hooks.clear();
    }
    let extras = ReplyExtras { local_execution_time_ms: Some(elapsed_ms()), hook_additional_contexts: hooks };
    match ExecReply::from_host(&request, outcome, &extras) {
        ExecReply::Result(result) => {
            if let Some(shell) = shell.as_mut() {
                shell.end(&request, shell_stream::ending(&result), elapsed_ms()).await;
            }
            reply.answer(result).await;
        }
        ExecReply::Unhandled => {
            tracing::debug!(id, exec_id, kind = %request.kind, "no handler for an exec request: answered with throw");
            reply.throw(format!("No handler for {} in this client", request.kind)).await
        }
        ExecReply::Failed(message) => {
            tracing::debug!(id, exec_id, kind = %request.kind, error = %message, "an exec request failed");
            let as_result = match shell.as_mut() {
                Some(shell) => Some(shell_failure(&request, shell, &message, token.is_cancelled(), &extras).await),
                None => bridge::exec_error_result(&request, &message, &extras),
            };
            match as_result {
                Some(bytes) => reply.answer(bytes).await,
                None => reply.throw(message).await,
            }
        }
    }
    reply.close().await;
}

async fn sleep_until_due(due: Option<Instant>) {
    match due {
        Some(at) => tokio::time::sleep_until(at).await,
        None => std::future::pending().await,
    }
}

/// A streaming shell whose host failed: an exit and a `failure` if its process had started,
/// else a `spawn_error` (nothing ran, so nothing started or exited).
async fn shell_failure(
    request: &ExecRequest,
    shell: &mut ShellEvents<'_>,
    message: &str,
    aborted: bool,
    extras: &ReplyExtras,
) -> Bytes {
    let text = |key: &str| request.args.get(key).and_then(|c| c.as_str()).unwrap_or_default().to_string();
    let (command, working_directory) = (text("command"), text("workingDirectory"));
    let result = if shell.started {
        shell.end(request, Ending::Exited { code: 1, aborted }, extras.local_execution_time_ms.unwrap_or(0)).await;
        pb::shell_result::Result::Failure(pb::ShellFailure {
            command,
            working_directory,
            exit_code: 1,
            stderr: message.to_string(),
            aborted,
            abort_reason: aborted.then_some(pb::ShellAbortReason::UserAbort as i32),
            local_execution_time_ms: extras.local_execution_time_ms,
            ..Default::default()
        })
    } else {
        pb::shell_result::Result::SpawnError(pb::ShellSpawnError {
            command,
            working_directory,
            error: message.to_string(),
        })
    };
    let result = pb::ShellResult { result: Some(result), ..Default::default() };
    bridge::exec_client_message(request.id, &request.exec_id, f::exec_client_message::SHELL_RESULT, &result, extras)
}

/// The typed answer to a `requestContext` exec: the context, or the result type's error branch
/// when the host's callback fails; `None` when neither can be encoded (the caller throws).
async fn request_context_result(session: &SessionInner, request: &ExecRequest) -> Option<Bytes> {
    let began = Instant::now();
    let context = request_context::for_session(session).await;
    let extras = ReplyExtras {
        local_execution_time_ms: Some(began.elapsed().as_millis().min(i32::MAX as u128) as i32),
        ..ReplyExtras::NONE
    };
    match context {
        Ok(ctx) => {
            let result = pb::RequestContextResult {
                result: Some(pb::request_context_result::Result::Success(pb::RequestContextSuccess {
                    request_context: Some(ctx),
                    ..Default::default()
                })),
            };
            Some(bridge::exec_client_message(request.id, &request.exec_id, request.field, &result, &extras))
        }
        Err(e) => bridge::exec_error_result(request, &e.to_string(), &extras),
    }
}
