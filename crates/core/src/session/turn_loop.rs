//! The task that runs one turn: attempts (one server stream each) until the turn ends, is
//! cancelled, or fails for good; heartbeats, stall detection, resume with back-off, and the
//! dispatch of every server message to the translator or a request handler.

use std::collections::HashMap;
use std::sync::atomic::Ordering;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use agent_client_protocol_schema::v1 as acp;
use bytes::Bytes;
use tokio::sync::{mpsc, watch};
use tokio::task::JoinSet;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use super::config::{Timing, TurnResult, TurnUsage};
use super::deltas::merge_delta;
use super::inner::SessionInner;
use super::messages::{self, FirstAction};
use super::turn::{RunEndHooks, Turn, TurnShared};
use super::{exec, interaction, kv, request_context, retry};
use crate::bridge;
use crate::error::CoreError;
use crate::field::agent::v1 as f;
use crate::proto::agent::v1 as pb;
use crate::translate::{Translator, CANCELLED_BY_USER};
use crate::transport::{AgentReceiver, AgentSender, ServerFrame, TokenReason};
use crate::updates::{CardGate, QueuedUpdate, Updates};
use crate::wire;

/// Starts the task that runs a turn, and returns the turn's first handle.
pub(super) fn spawn(
    session: Arc<SessionInner>,
    first: FirstAction,
    cancel: CancellationToken,
    translator: Translator,
) -> Turn {
    let (tx, rx) = mpsc::channel(session.timing.queue.max(1));
    let (result_tx, result_rx) = watch::channel(None);
    session.cards().begin_turn().send();
    let gate = CardGate::new(session.cards.clone(), cancel.clone());
    let shared = Arc::new(TurnShared::new(Updates::new(rx, gate), cancel, result_rx));
    session.lock().active_turn = Some(Arc::downgrade(&shared));
    let mut translator = translator;
    translator.begin_turn();
    // Made here and moved in whole: made inside, the task kept the translator twice.
    let mut turn = TurnLoop::new(session.clone(), shared.clone(), tx, translator);
    tokio::spawn(async move {
        // Declared first, dropped last: the hooks run after the result is out, and also if
        // this task panics.
        let _end_hooks = RunEndHooks(turn.shared.clone());
        let result = turn.run(first).await;
        match &result {
            Ok(r) => {
                tracing::info!(conversation_id = %session.conversation_id, stop_reason = ?r.stop_reason, "turn over")
            }
            Err(e) => tracing::warn!(conversation_id = %session.conversation_id, error = %e, "turn failed"),
        }
        let TurnLoop { translator, .. } = turn;
        session.turn_over(translator);
        // Stored whether or not a handle still watches: the end hooks read it next.
        result_tx.send_replace(Some(result));
    });
    Turn::new(shared)
}

/// Whether a refused token may still be asked for again before the turn fails.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum TokenRetry {
    Available,
    /// Asked for again since the server last sent anything.
    Used,
}

/// How one attempt (one server stream) ended.
enum AttemptEnd {
    TurnEnded,
    Cancelled,
    Failed(CoreError),
}

/// The turn loop's end of the update queue. Dropped with the loop, however it ends (a panic
/// included): reads still waiting then get the last updates, or the end of the turn.
struct UpdateSender {
    tx: Option<mpsc::Sender<QueuedUpdate>>,
    shared: Arc<TurnShared>,
}

impl UpdateSender {
    fn sender(&self) -> &mpsc::Sender<QueuedUpdate> {
        self.tx.as_ref().expect("present until dropped")
    }
}

impl Drop for UpdateSender {
    fn drop(&mut self) {
        // Closed first, so that the reads served below see the end of the turn.
        drop(self.tx.take());
        self.shared.updates.serve();
    }
}

/// Where a turn stands with respect to cancel.
enum Phase {
    Running,
    /// `cancel_action` has been sent (`send` is its task, until the attempt's wind-down takes
    /// it); the turn resolves `cancelled` at `deadline` at the latest.
    Cancelling {
        deadline: Instant,
        send: Option<tokio::task::JoinHandle<()>>,
    },
}

impl Phase {
    /// When the turn resolves `cancelled` whatever the server does, once cancel has begun.
    fn deadline(&self) -> Option<Instant> {
        match self {
            Phase::Running => None,
            Phase::Cancelling { deadline, .. } => Some(*deadline),
        }
    }
}

struct TurnLoop {
    session: Arc<SessionInner>,
    shared: Arc<TurnShared>,
    tx: UpdateSender,
    translator: Translator,
    usage: Option<TurnUsage>,
    phase: Phase,
    handlers: JoinSet<()>,
    exec_tokens: Arc<Mutex<HashMap<u32, CancellationToken>>>,
    /// Whether the current attempt's stream has brought a frame (so a refusal after it is not
    /// a refusal "at the start").
    heard_from_server: bool,
    /// `AgentRunRequest.run_id`: made for the turn, kept across its resume attempts.
    run_id: String,
    /// Output of the shells this client runs, from their exec tasks, for their cards.
    local_output: (mpsc::UnboundedSender<exec::LocalOutput>, mpsc::UnboundedReceiver<exec::LocalOutput>),
}

impl TurnLoop {
    fn new(
        session: Arc<SessionInner>,
        shared: Arc<TurnShared>,
        tx: mpsc::Sender<QueuedUpdate>,
        translator: Translator,
    ) -> Self {
        TurnLoop {
            session,
            tx: UpdateSender { tx: Some(tx), shared: shared.clone() },
            shared,
            translator,
            usage: None,
            phase: Phase::Running,
            handlers: JoinSet::new(),
            exec_tokens: Arc::default(),
            heard_from_server: false,
            run_id: uuid::Uuid::new_v4().to_string(),
            local_output: mpsc::unbounded_channel(),
        }
    }

    fn timing(&self) -> &Timing {
        &self.session.timing
    }

    /// Queues an update: waits for room (back-pressure) unless nobody will read it, or the
    /// cancel deadline has passed. A read waiting for it gets it at once, from this thread.
    async fn emit(&mut self, update: QueuedUpdate) {
        match self.tx.sender().try_send(update) {
            Ok(()) => self.shared.updates.serve(),
            Err(mpsc::error::TrySendError::Closed(_)) => {}
            // The wait is a future of its own, on the heap: inline, its select and the update
            // it holds made up 1.4 KiB of every turn's 4.2 KiB task, for the rare full queue.
            Err(mpsc::error::TrySendError::Full(update)) => Box::pin(self.emit_when_room(update)).await,
        }
    }

    /// [`Self::emit`] once the queue is full.
    async fn emit_when_room(&mut self, update: QueuedUpdate) {
        let deadline = self.phase.deadline();
        let mut update = Some(update);
        loop {
            if self.shared.readers.state().drops_overflow(self.shared.cancel.is_cancelled()) {
                self.shared.dropped.fetch_add(1, Ordering::SeqCst);
                return;
            }
            let wake = self.shared.readers.may_drop();
            tokio::select! {
                permit = self.tx.sender().reserve() => {
                    if let (Ok(permit), Some(u)) = (permit, update.take()) {
                        permit.send(u);
                        self.shared.updates.serve();
                    }
                    return;
                }
                _ = wake => continue,
                _ = sleep_until_opt(deadline) => {
                    self.shared.dropped.fetch_add(1, Ordering::SeqCst);
                    return;
                }
            }
        }
    }

    async fn emit_all(&mut self, updates: Vec<acp::SessionUpdate>) {
        let mut updates = updates.into_iter();
        // Not `for`: its `next()` result (an update, 496 bytes) would be kept across the await,
        // in every turn's task; boxed first, only the box is.
        while let Some(update) = updates.next().map(Box::new) {
            self.emit(update).await;
        }
    }

    async fn run(&mut self, first: FirstAction) -> Result<TurnResult, CoreError> {
        if self.shared.cancel.is_cancelled() {
            // Aborted before it started: nothing was sent, nothing to wait for.
            return Ok(TurnResult { stop_reason: acp::StopReason::Cancelled, usage: None });
        }
        let original_request_id = uuid::Uuid::new_v4().to_string();
        tracing::info!(
            conversation_id = %self.session.conversation_id,
            request_id = %original_request_id,
            run_id = %self.run_id,
            transport = ?self.session.transport.active_kind(),
            "turn started"
        );
        let mut attempt: u32 = 0;
        let mut moved_to_http1 = false;
        let mut request_id = original_request_id.clone();
        let mut token = TokenReason::Request;
        let mut token_retry = TokenRetry::Available;
        let outcome = loop {
            let first = if attempt == 0 { Some(&first) } else { None };
            let end = self.attempt(&request_id, &original_request_id, first, token).await;
            token = TokenReason::Request;
            let heard = std::mem::take(&mut self.heard_from_server);
            if heard {
                token_retry = TokenRetry::Available;
            }
            match end {
                AttemptEnd::TurnEnded => {
                    self.drain().await;
                    // Cancel always wins: a turn cancelled before it ended is never end_turn.
                    break Ok(if self.shared.cancel.is_cancelled() {
                        acp::StopReason::Cancelled
                    } else {
                        acp::StopReason::EndTurn
                    });
                }
                AttemptEnd::Cancelled => break Ok(acp::StopReason::Cancelled),
                AttemptEnd::Failed(_) if self.shared.cancel.is_cancelled() => break Ok(acp::StopReason::Cancelled),
                // The server does not speak HTTP/2 and never saw this stream: the same attempt
                // again, on the HTTP/1.1 transport the automatic one has switched to.
                AttemptEnd::Failed(CoreError::NoHttp2(why)) if !moved_to_http1 => {
                    tracing::info!(why = %why, "starting the turn again over HTTP/1.1");
                    moved_to_http1 = true;
                }
                // The token was refused: asked for anew (once; a second refusal in a row fails).
                // Before the stream produced anything, the same attempt again, unseen; later in
                // the stream (a token that expired meanwhile), a resume, as after a drop, and
                // counted as one: a server that refuses every stream after a frame ends the turn.
                AttemptEnd::Failed(CoreError::Auth(_))
                    if token_retry == TokenRetry::Available && (!heard || attempt < self.timing().resume_attempts) =>
                {
                    tracing::info!(during_stream = heard, "the server refused the access token; asking for a new one");
                    token_retry = TokenRetry::Used;
                    token = TokenReason::Unauthenticated;
                    request_id = uuid::Uuid::new_v4().to_string();
                    if heard {
                        self.abort_handlers();
                        let swept = self.translator.sweep("Interrupted: the access token expired; resuming.");
                        self.emit_all(swept).await;
                        attempt += 1;
                    }
                }
                AttemptEnd::Failed(e) => match retry::decide_after(e, attempt, heard, self.timing()) {
                    retry::Decision::Resume(delay) => {
                        tracing::warn!(attempt, delay_ms = delay.as_millis() as u64, "the stream failed; resuming");
                        self.abort_handlers();
                        let swept = self.translator.sweep("Interrupted: the connection was lost; resuming.");
                        self.emit_all(swept).await;
                        tokio::select! {
                            _ = tokio::time::sleep(delay) => {}
                            _ = self.shared.cancel.cancelled() => break Ok(acp::StopReason::Cancelled),
                        }
                        attempt += 1;
                        request_id = uuid::Uuid::new_v4().to_string();
                    }
                    retry::Decision::GiveUp(e) => {
                        break stop_reason_for(e.with_sign_in_hint(&self.session.transport.config().sign_in_hint))
                    }
                },
            }
        };
        self.abort_handlers();
        let reason = match &outcome {
            Ok(acp::StopReason::Cancelled) => CANCELLED_BY_USER,
            Ok(_) => "The turn ended before this tool call finished.",
            Err(_) => "The turn failed before this tool call finished.",
        };
        let swept = self.translator.sweep(reason);
        self.emit_all(swept).await;
        outcome.map(|stop_reason| TurnResult { stop_reason, usage: self.usage })
    }

    fn abort_handlers(&mut self) {
        for token in self.exec_tokens.lock().expect("exec tokens").values() {
            token.cancel();
        }
        self.handlers.abort_all();
    }

    /// Lets in-flight handlers finish (bounded), so results already produced are sent.
    async fn drain(&mut self) {
        let drain = self.timing().drain;
        let finished = tokio::time::timeout(drain, async { while self.handlers.join_next().await.is_some() {} }).await;
        if finished.is_err() {
            tracing::debug!(
                handlers = self.handlers.len(),
                drain_ms = drain.as_millis() as u64,
                "request handlers still running after the turn ended; aborting them"
            );
        }
    }

    async fn run_request(&self, first: Option<&FirstAction>) -> Result<Bytes, CoreError> {
        let request_context = request_context::for_session(&self.session).await?;
        let (checkpoint, model) = {
            let s = self.session.lock();
            (s.checkpoint.clone(), s.model.clone())
        };
        let action = messages::action(first, request_context)?;
        let conversation_id = &self.session.conversation_id;
        Ok(messages::run_request(action, checkpoint.as_deref(), &model, conversation_id, &self.run_id))
    }

    async fn attempt(
        &mut self,
        request_id: &str,
        original: &str,
        first: Option<&FirstAction>,
        token: TokenReason,
    ) -> AttemptEnd {
        let stream = self.session.transport.open_with(request_id, Some(original), token);
        let sender = stream.sender.clone();
        let mut receiver = stream.receiver;
        let end = self.attempt_on(&sender, &mut receiver, first).await;
        if matches!(end, AttemptEnd::Cancelled) {
            // Let the cancel reach the server and the stream end politely, in the background:
            // the turn resolves now, and a reset would discard frames still queued.
            let cancel_send = match &mut self.phase {
                Phase::Cancelling { send, .. } => send.take(),
                Phase::Running => None,
            };
            tokio::spawn(async move {
                if let Some(Err(e)) = match cancel_send {
                    Some(send) => Some(send.await),
                    None => None,
                } {
                    tracing::debug!(error = %e, "the cancel_action task did not finish");
                }
                sender.close();
                let ended = tokio::time::timeout(Duration::from_secs(2), async {
                    while let Ok(Some(_)) = receiver.next().await {}
                })
                .await;
                if ended.is_err() {
                    tracing::debug!("the cancelled stream did not end within 2 s; dropping it");
                }
            });
        }
        end
    }

    async fn attempt_on(
        &mut self,
        sender: &AgentSender,
        receiver: &mut AgentReceiver,
        first: Option<&FirstAction>,
    ) -> AttemptEnd {
        let sender = sender.clone();
        // Until this stream's run request is out, nothing may be sent into the turn: an action
        // arriving before it (seqno 0 on RunSSE) would reach a run that does not exist yet.
        self.session.lock().active_sender = None;
        let run_request = match self.run_request(first).await {
            Ok(r) => r,
            Err(e) => return AttemptEnd::Failed(e),
        };
        if let Err(e) = sender.send_encoded(run_request).await {
            // The response usually says why the request side closed (a Connect error, a
            // server that does not speak HTTP/2); the sender only knows that it did.
            let why = tokio::time::timeout(Duration::from_secs(5), receiver.next()).await;
            return AttemptEnd::Failed(match why {
                Ok(Err(from_response)) => from_response,
                _ => e,
            });
        }
        {
            let mut state = self.session.lock();
            state.active_sender = Some(sender.clone());
            state.active_run_id = Some(self.run_id.clone());
        }
        if self.shared.cancel.is_cancelled() && matches!(self.phase, Phase::Running) {
            self.start_cancel(&sender).await;
        }
        let heartbeat = spawn_heartbeat(sender.clone(), self.timing().client_heartbeat);
        let _heartbeat_guard = AbortOnDrop(heartbeat);
        // The cancel signal and the stall timer are made once per stream, not once per read: a
        // future made in the loop would register with the token and the timer wheel, and leave
        // them again, for every frame. The timer is moved on only when it fires early.
        let cancel = self.shared.cancel.clone();
        let cancelled = cancel.cancelled();
        tokio::pin!(cancelled);
        let stall = self.timing().stall;
        let mut last_frame = Instant::now();
        let stalled = tokio::time::sleep_until(last_frame + stall);
        tokio::pin!(stalled);
        loop {
            let cancel_requested = matches!(self.phase, Phase::Cancelling { .. });
            tokio::select! {
                biased;
                _ = &mut cancelled, if !cancel_requested => {
                    self.start_cancel(&sender).await;
                }
                _ = sleep_until_opt(self.phase.deadline()), if cancel_requested => {
                    return AttemptEnd::Cancelled;
                }
                Some(output) = self.local_output.1.recv() => {
                    let updates = self.translator.local_output(&output.call_id, &output.text);
                    self.emit_all(updates).await;
                }
                _ = &mut stalled => {
                    if last_frame + stall > Instant::now() {
                        stalled.as_mut().reset(last_frame + stall);
                        continue;
                    }
                    if cancel_requested {
                        return AttemptEnd::Cancelled;
                    }
                    tracing::warn!(stall_ms = stall.as_millis() as u64, "no frame from the server: the stream stalled");
                    return AttemptEnd::Failed(CoreError::Timeout(format!(
                        "no frame from the server for {} ms", stall.as_millis()
                    )));
                }
                frame = receiver.next() => {
                    last_frame = Instant::now();
                    match frame {
                        Ok(Some(frame)) => {
                            self.heard_from_server = true;
                            // Work through everything this read brought in, merging runs of text
                            // deltas, before paying for another select (a timer and a wake-up).
                            let mut current = frame;
                            loop {
                                let next = match receiver.next_buffered_after(&mut current, merge_delta) {
                                    Some(Ok(Some(next))) => Some(next),
                                    // The end, an error or an incomplete frame: the next read
                                    // gives it (the receiver keeps how the stream ended), after
                                    // `current` is dispatched.
                                    _ => None,
                                };
                                if self.dispatch(current, &sender).await {
                                    return AttemptEnd::TurnEnded;
                                }
                                match next {
                                    Some(next) => current = next,
                                    None => break,
                                }
                            }
                        }
                        Ok(None) if cancel_requested => return AttemptEnd::Cancelled,
                        Ok(None) => {
                            // A stream that ends without turn_ended is a transport fault: resume applies.
                            return AttemptEnd::Failed(CoreError::Network("the stream ended without turn_ended".into()));
                        }
                        Err(_) if cancel_requested => return AttemptEnd::Cancelled,
                        Err(e) => return AttemptEnd::Failed(e),
                    }
                }
            }
        }
    }

    /// Running → Cancelling: aborts the running execs and sends `cancel_action`, without waiting
    /// for it; the turn resolves `cancelled` within the cancel grace whatever the server does.
    /// The open cards end `failed` at once, and what the server still sends about the turn is
    /// not shown (`Translator::cancel`).
    async fn start_cancel(&mut self, sender: &AgentSender) {
        let deadline = Instant::now() + self.timing().cancel_grace;
        for token in self.exec_tokens.lock().expect("exec tokens").values() {
            token.cancel();
        }
        let cancel = messages::cancel_action();
        let sender = sender.clone();
        // Never block the loop on the server: the deadline bounds the wait whatever happens.
        tracing::info!(grace_ms = self.timing().cancel_grace.as_millis() as u64, "cancelling the turn");
        let send = tokio::spawn(async move {
            // The deadline resolves the turn all the same; the stream's error is the receiver's.
            if let Err(e) = sender.send(&cancel).await {
                tracing::debug!(error = %e, "cancel_action was not sent");
            }
        });
        self.phase = Phase::Cancelling { deadline, send: Some(send) };
        let swept = self.translator.cancel();
        self.emit_all(swept).await;
    }

    /// Handles one server message; `true` when it ended the turn.
    async fn dispatch(&mut self, frame: ServerFrame, sender: &AgentSender) -> bool {
        use pb::agent_server_message::Message as S;
        match frame.message.message {
            Some(S::InteractionUpdate(update)) => {
                if let Some(pb::interaction_update::Message::TurnEnded(t)) = &update.message {
                    self.usage = Some(TurnUsage {
                        input_tokens: t.input_tokens.unwrap_or(0),
                        output_tokens: t.output_tokens.unwrap_or(0),
                        cache_read_tokens: t.cache_read_tokens.unwrap_or(0),
                        cache_write_tokens: t.cache_write_tokens.unwrap_or(0),
                        reasoning_tokens: t.reasoning_tokens.unwrap_or(0),
                    });
                    return true;
                }
                let updates = self.translator.on_update(&update);
                // Not kept across the await, in every turn's task.
                drop(update);
                self.emit_all(updates).await;
            }
            Some(S::ConversationCheckpointUpdate(state)) => {
                if let Some(raw) =
                    wire::length_delimited_field(&frame.raw, f::agent_server_message::CONVERSATION_CHECKPOINT_UPDATE)
                {
                    self.session.lock().checkpoint = Some(raw);
                }
                let updates = self.translator.on_checkpoint(&state);
                self.emit_all(updates).await;
            }
            Some(S::ExecServerMessage(_)) => {
                let raw = wire::length_delimited_field(&frame.raw, f::agent_server_message::EXEC_SERVER_MESSAGE)
                    .unwrap_or_default();
                self.spawn_exec(raw, sender.clone());
            }
            Some(S::ExecServerControlMessage(control)) => {
                if let Some(pb::exec_server_control_message::Message::Abort(abort)) = control.message {
                    if let Some(token) = self.exec_tokens.lock().expect("exec tokens").get(&abort.id) {
                        token.cancel();
                    }
                }
            }
            Some(S::KvServerMessage(kv)) => {
                let blobs = self.session.blobs.clone();
                let timeout = self.timing().callback;
                let sender = sender.clone();
                self.handlers.spawn(async move {
                    let reply = kv::answer(blobs, kv, timeout).await;
                    let id = reply.id;
                    let reply = messages::client_msg(pb::agent_client_message::Message::KvClientMessage(reply));
                    if let Err(e) = sender.send(&reply).await {
                        tracing::warn!(id, error = %e, "the reply to a KV request was not sent");
                    }
                });
            }
            Some(S::InteractionQuery(_)) => {
                let raw = wire::length_delimited_field(&frame.raw, f::agent_server_message::INTERACTION_QUERY)
                    .unwrap_or_default();
                let session = self.session.clone();
                let cancel = self.shared.cancel.child_token();
                let timeout = self.timing().callback;
                let sender = sender.clone();
                self.handlers.spawn(async move {
                    if let Some(reply) = interaction::answer(session, &raw, cancel, timeout).await {
                        let reply = wire::wrap(f::agent_client_message::INTERACTION_RESPONSE, &reply);
                        if let Err(e) = sender.send_encoded(reply).await {
                            tracing::warn!(error = %e, "the reply to an interaction query was not sent");
                        }
                    }
                });
            }
            None => {}
        }
        false
    }

    fn spawn_exec(&mut self, raw: Bytes, sender: AgentSender) {
        let (id, exec_id, request) = match bridge::decode_exec(&raw) {
            Ok(decoded) => decoded,
            Err(e) => {
                // Not even an id to answer: nothing can be sent back for it.
                tracing::warn!(bytes = raw.len(), error = %e, "dropped an exec request that does not decode (no id to answer)");
                return;
            }
        };
        let token = self.shared.cancel.child_token();
        self.exec_tokens.lock().expect("exec tokens").insert(id, token.clone());
        let tokens = self.exec_tokens.clone();
        let session = self.session.clone();
        let timing = self.timing().clone();
        let live_output = self.local_output.0.clone();
        self.handlers.spawn(async move {
            exec::run(&session, &sender, id, &exec_id, request, token, &timing, Some(&live_output)).await;
            tokens.lock().expect("exec tokens").remove(&id);
        });
    }
}

struct AbortOnDrop(tokio::task::JoinHandle<()>);

impl Drop for AbortOnDrop {
    fn drop(&mut self) {
        self.0.abort();
    }
}

async fn sleep_until_opt(deadline: Option<Instant>) {
    match deadline {
        Some(d) => tokio::time::sleep_until(d).await,
        None => std::future::pending().await,
    }
}

/// Errors that are ACP stop reasons rather than failures.
fn stop_reason_for(e: CoreError) -> Result<acp::StopReason, CoreError> {
    if let Some(name) = e.connect_error().and_then(|c| c.cursor_error_name()) {
        if matches!(name, "ERROR_MAX_TOKENS" | "ERROR_CONVERSATION_TOO_LONG") {
            return Ok(acp::StopReason::MaxTokens);
        }
    }
    Err(e)
}

fn spawn_heartbeat(sender: AgentSender, every: Duration) -> tokio::task::JoinHandle<()> {
    let heartbeat = messages::client_heartbeat();
    tokio::spawn(async move {
        let mut tick = tokio::time::interval_at(Instant::now() + every, every);
        tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            tick.tick().await;
            if sender.send(&heartbeat).await.is_err() {
                return;
            }
        }
    })
}

#[cfg(test)]
mod tests {
    use std::io::Write;

    use super::*;
    use crate::host::{MemoryBlobStore, NoHost};
    use crate::transport::{Transport, TransportConfig, TransportKind};

    /// Formatted events, kept for the test to read.
    #[derive(Clone, Default)]
    struct Captured(Arc<Mutex<Vec<u8>>>);

    impl Write for Captured {
        fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
            self.0.lock().unwrap().extend_from_slice(buf);
            Ok(buf.len())
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }

    fn turn_loop() -> TurnLoop {
        // Nothing listens on the discard port: the stream the test opens fails in the background.
        let config =
            TransportConfig { base_url: "http://127.0.0.1:9".into(), kind: TransportKind::Sse, ..Default::default() };
        let session = Arc::new(SessionInner {
            transport: Transport::new(config).expect("a valid config"),
            host: Arc::new(NoHost),
            tools: None,
            blobs: Arc::new(MemoryBlobStore::new()),
            timing: Timing::default(),
            compaction_updates: false,
            notices: false,
            terminal_output: false,
            shell: "/bin/sh".into(),
            conversation_id: "c-1".into(),
            injected: Default::default(),
            cards: Default::default(),
            state: Default::default(),
        });
        let (tx, rx) = mpsc::channel(4);
        let (_result_tx, result_rx) = watch::channel(None);
        let cancel = CancellationToken::new();
        let gate = CardGate::new(session.cards.clone(), cancel.clone());
        let shared = Arc::new(TurnShared::new(Updates::new(rx, gate), cancel, result_rx));
        TurnLoop::new(session, shared, tx, Translator::new())
    }

    /// An exec request that does not decode has no id to answer with: it is dropped, and the
    /// drop is a warning naming what was lost (its size), not its bytes.
    #[tokio::test]
    async fn an_exec_request_that_does_not_decode_is_dropped_with_a_warning() {
        let captured = Captured::default();
        let writer = captured.clone();
        let subscriber = tracing_subscriber::fmt()
            .with_writer(move || writer.clone())
            .with_ansi(false)
            .with_max_level(tracing::Level::DEBUG)
            .finish();
        let _default = tracing::subscriber::set_default(subscriber);
        let mut turn = turn_loop();
        let sender = turn.session.transport.open("r-1", None).sender;
        // `id` (a varint) sent as a length-delimited field: prost-reflect refuses it.
        let request = [0x0a, 0x03, 0xca, 0xfe, 0x01];
        let frame = ServerFrame {
            message: Box::new(pb::AgentServerMessage {
                message: Some(pb::agent_server_message::Message::ExecServerMessage(Box::default())),
                ..Default::default()
            }),
            raw: wire::wrap(f::agent_server_message::EXEC_SERVER_MESSAGE, &request),
        };
        assert!(!turn.dispatch(frame, &sender).await, "not the end of the turn");
        assert!(turn.handlers.is_empty(), "nothing is answered");
        let logged = String::from_utf8(captured.0.lock().unwrap().clone()).unwrap();
        let line = logged.lines().find(|l| l.contains("exec request that does not decode")).unwrap_or_else(|| {
            panic!("no event for the dropped request in {logged:?}");
        });
        assert!(line.contains("WARN") && line.contains("bytes=5"), "{line}");
        assert!(!line.to_ascii_lowercase().contains("cafe"), "the payload is not logged: {line}");
    }
}
