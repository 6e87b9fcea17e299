//! Plays one scenario turn onto a response stream, waiting for the client's answers. A
//! `cancel_action` ends the turn as Cursor's server ends it: an abort for every exec still
//! running, a short wait for what the client still owes, then the end of the stream with
//! `canceled` (unless the step playing waits for that action itself, as `awaitClient
//! conversationAction` does: then the scenario plays on).

use std::io::Write;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use base64::Engine as _;
use bytes::Bytes;
use hyper::body::Frame;
use prost::Message as _;
use sha2::Digest;
use tokio::sync::mpsc;

use super::conversation::Conversation;
use super::cursor_error::build_error;
use super::echo;
use super::inbox::{Inbox, Owed, Waited};
use super::scenario::{agent_message as from_json, Step};
use cursor_acp_core::connect::{self, Code, ConnectError};
use cursor_acp_core::proto::agent::v1 as pb;

pub(crate) type BodyItem = Result<Frame<Bytes>, std::io::Error>;

/// The proto3 JSON name of a client message's branch.
pub(crate) fn client_kind(msg: &pb::AgentClientMessage) -> &'static str {
    use pb::agent_client_message::Message as M;
    match &msg.message {
        Some(M::RunRequest(_)) => "runRequest",
        Some(M::ExecClientMessage(_)) => "execClientMessage",
        Some(M::ExecClientControlMessage(_)) => "execClientControlMessage",
        Some(M::KvClientMessage(_)) => "kvClientMessage",
        Some(M::ConversationAction(_)) => "conversationAction",
        Some(M::InteractionResponse(_)) => "interactionResponse",
        Some(M::ClientHeartbeat(_)) => "clientHeartbeat",
        Some(M::PrewarmRequest(_)) => "prewarmRequest",
        None => "empty",
    }
}

pub(crate) struct TurnContext {
    pub out: mpsc::Sender<BodyItem>,
    pub inbox: Inbox,
    pub gzip: bool,
    pub wait_timeout: Duration,
    pub heartbeat_ms: u64,
    /// What a run request must pass before the turn is played.
    pub checks: Arc<super::run_checks::RunChecks>,
    /// The conversation the turn's checkpoints carry, from the run request on; `None` when no
    /// checkpoint of the turn carries it (nothing is kept of what it plays).
    pub conversation: Option<Conversation>,
}

enum Flow {
    Continue,
    /// The stream is finished; the string says how.
    Stop(String),
    /// The client sent `cancel_action`: the turn ends as a cancelled run does.
    Cancelled,
}

/// How long a cancelled run waits for what the client still owes before it ends the stream.
const CANCEL_SETTLE: Duration = Duration::from_millis(250);

fn server_msg(message: pb::agent_server_message::Message) -> pb::AgentServerMessage {
    pb::AgentServerMessage { message: Some(message), ..Default::default() }
}

fn update(u: pb::interaction_update::Message) -> pb::AgentServerMessage {
    server_msg(pb::agent_server_message::Message::InteractionUpdate(pb::InteractionUpdate { message: Some(u) }))
}

impl TurnContext {
    async fn write(&self, bytes: Bytes) -> Result<(), String> {
        self.out.send(Ok(Frame::data(bytes))).await.map_err(|_| "client gone".to_string())
    }

    async fn send(&self, msg: &pb::AgentServerMessage) -> Result<(), String> {
        self.write(connect::encode_message(msg, self.gzip, 0)).await
    }

    /// Sends an encoded `AgentServerMessage`: without gzip, the envelope header and the
    /// message go out as two body chunks, so the message is not copied.
    async fn send_encoded(&self, message: Bytes) -> Result<(), String> {
        if self.gzip {
            return self.write(connect::encode_frame(connect::FLAG_COMPRESSED, &connect::gzip(&message))).await;
        }
        let len = u32::try_from(message.len()).map_err(|_| "message over 4 GiB".to_string())?;
        self.write(Bytes::copy_from_slice(&connect::frame_header(0, len))).await?;
        self.write(message).await
    }

    pub(crate) async fn end(&self, error: Option<&ConnectError>) -> String {
        #[allow(
            clippy::let_underscore_must_use,
            reason = "the client may be gone; the run's outcome is returned either way"
        )]
        let _ = self.write(connect::encode_end_stream(error)).await;
        match error {
            Some(e) => format!("error: {e}"),
            None => "end".into(),
        }
    }

    /// Waits for a matching client message, bounded by the scenario's wait timeout; a missing
    /// answer ends the stream with `deadline_exceeded` so a broken client fails fast, not hangs.
    async fn wait_for(
        &mut self,
        what: &str,
        matches: impl FnMut(&pb::AgentClientMessage) -> bool,
    ) -> Result<pb::AgentClientMessage, Flow> {
        let timeout = self.wait_timeout;
        let out = self.out.clone();
        tokio::select! {
            r = tokio::time::timeout(timeout, self.inbox.wait(matches)) => match r {
                Ok(Waited::Got(m)) => Ok(*m),
                Ok(Waited::Cancelled) => Err(Flow::Cancelled),
                Ok(Waited::Gone) => Err(Flow::Stop("client gone".into())),
                Err(_) => {
                    let err = ConnectError::new(
                        Code::DeadlineExceeded,
                        format!("embedded backend: no {what} within {} ms", timeout.as_millis()),
                    );
                    Err(Flow::Stop(self.end(Some(&err)).await))
                }
            },
            _ = out.closed() => Err(Flow::Stop("client gone".into())),
        }
    }

    /// Sleeps for `ms`, unless the client cancels first.
    async fn sleep(&mut self, ms: u64) -> Flow {
        tokio::select! {
            _ = tokio::time::sleep(Duration::from_millis(ms)) => Flow::Continue,
            waited = self.inbox.wait(|_| false) => match waited {
                Waited::Cancelled => Flow::Cancelled,
                // The client's half of the run is over; its answers no longer matter.
                Waited::Got(_) | Waited::Gone => {
                    tokio::time::sleep(Duration::from_millis(ms)).await;
                    Flow::Continue
                }
            },
        }
    }

    /// Ends a run the client cancelled: aborts the execs still running, gives the client a
    /// moment to settle what it owes (its answers to the aborted execs, to pending queries),
    /// then ends the stream with `canceled`.
    async fn cancelled(&mut self) -> String {
        for owed in self.inbox.owed().to_vec() {
            if let Owed::Exec(id) = owed {
                let abort = pb::ExecServerControlMessage {
                    message: Some(pb::exec_server_control_message::Message::Abort(pb::ExecServerAbort { id })),
                };
                if self
                    .send(&server_msg(pb::agent_server_message::Message::ExecServerControlMessage(abort)))
                    .await
                    .is_err()
                {
                    return "client gone".into();
                }
            }
        }
        #[allow(
            clippy::let_underscore_must_use,
            reason = "a client that never settles its inbox is ended all the same"
        )]
        let _ = tokio::time::timeout(CANCEL_SETTLE, self.inbox.settled()).await;
        self.end(Some(&ConnectError::new(Code::Canceled, "the client cancelled the run"))).await;
        "cancelled".into()
    }
}

/// Whether a step waits for the client's `cancel_action` itself (so a cancel is its to take).
fn takes_cancel(step: &Step) -> bool {
    matches!(step, Step::AwaitClient { kind } if kind.replace('_', "").eq_ignore_ascii_case("conversationAction"))
}

/// Runs one turn to completion and reports how the stream ended.
pub(crate) async fn run_turn(steps: Vec<super::Step>, mut ctx: TurnContext) -> String {
    let paused = Arc::new(AtomicBool::new(false));
    let heartbeat = (ctx.heartbeat_ms > 0).then(|| {
        let out = ctx.out.clone();
        let paused = paused.clone();
        let every = Duration::from_millis(ctx.heartbeat_ms);
        let frame =
            connect::encode_message(&update(pb::interaction_update::Message::Heartbeat(Default::default())), false, 0);
        tokio::spawn(async move {
            let mut tick = tokio::time::interval_at(tokio::time::Instant::now() + every, every);
            loop {
                tick.tick().await;
                if !paused.load(Ordering::SeqCst) && out.send(Ok(Frame::data(frame.clone()))).await.is_err() {
                    break;
                }
            }
        })
    });
    let mut outcome = None;
    // Like Cursor's server, do nothing until the run request has arrived, and refuse one it
    // would refuse.
    match ctx
        .wait_for("run request", |m| matches!(m.message, Some(pb::agent_client_message::Message::RunRequest(_))))
        .await
    {
        Err(Flow::Stop(how)) => outcome = Some(how),
        Err(_) => outcome = Some(ctx.cancelled().await),
        Ok(message) => {
            if let Some(pb::agent_client_message::Message::RunRequest(run)) = &message.message {
                if let Err(refused) = ctx.checks.check(run) {
                    outcome = Some(ctx.end(Some(&refused)).await);
                } else if steps.iter().any(|s| matches!(s, Step::Checkpoint { with_conversation: true, .. })) {
                    ctx.conversation = Some(Conversation::begin(run, first_free_kv_id(&steps)));
                }
            }
        }
    }
    for step in steps.into_iter().take(if outcome.is_some() { 0 } else { usize::MAX }) {
        ctx.inbox.take_arrived();
        let flow = if ctx.inbox.cancel_requested() && !takes_cancel(&step) {
            Ok(Flow::Cancelled)
        } else {
            run_step(step, &mut ctx, &paused).await
        };
        match flow {
            Ok(Flow::Continue) => {}
            Ok(Flow::Stop(how)) => {
                outcome = Some(how);
                break;
            }
            Ok(Flow::Cancelled) => {
                outcome = Some(ctx.cancelled().await);
                break;
            }
            Err(how) if ctx.out.is_closed() => {
                outcome = Some(how);
                break;
            }
            Err(how) => {
                let err = ConnectError::new(Code::Internal, format!("embedded backend: {how}"));
                outcome = Some(ctx.end(Some(&err)).await);
                break;
            }
        }
    }
    if let Some(h) = heartbeat {
        h.abort();
    }
    match outcome {
        Some(how) => how,
        None => ctx.end(None).await,
    }
}

async fn run_step(step: Step, ctx: &mut TurnContext, paused: &AtomicBool) -> Result<Flow, String> {
    use pb::agent_server_message::Message as S;
    use pb::interaction_update::Message as U;
    let invalid = |e: String| e;
    match step {
        Step::Text { text } => {
            let delta = U::TextDelta(pb::TextDeltaUpdate { text, is_server_notice: false });
            if let Some(c) = &mut ctx.conversation {
                c.observe(&delta);
            }
            ctx.send(&update(delta)).await?
        }
        Step::TextBurst { text, count } => {
            if let Some(c) = &mut ctx.conversation {
                c.observe_text(&text, count);
            }
            let frame = connect::encode_message(
                &update(U::TextDelta(pb::TextDeltaUpdate { text, is_server_notice: false })),
                ctx.gzip,
                0,
            );
            // Batch frames into larger writes: the point is to load the client, not the server.
            // Every write is a slice of one run of frames, built once: building each write in
            // fresh memory (page faults here) held the client's first bytes back by milliseconds.
            let per_write = (64 * 1024 / frame.len().max(1)).max(1) as u64;
            let run_frames = per_write.min(count) as usize;
            let mut run = Vec::with_capacity(frame.len() * run_frames);
            for _ in 0..run_frames {
                run.extend_from_slice(&frame);
            }
            let run = Bytes::from(run);
            let mut left = count;
            while left > 0 {
                let n = left.min(per_write);
                ctx.write(run.slice(..frame.len() * n as usize)).await?;
                left -= n;
            }
        }
        Step::Thinking { text } => {
            let delta = U::ThinkingDelta(pb::ThinkingDeltaUpdate { text, thinking_style: None });
            if let Some(c) = &mut ctx.conversation {
                c.observe(&delta);
            }
            ctx.send(&update(delta)).await?
        }
        Step::ThinkingCompleted { duration_ms } => {
            let completed = U::ThinkingCompleted(pb::ThinkingCompletedUpdate { thinking_duration_ms: duration_ms });
            if let Some(c) = &mut ctx.conversation {
                c.observe(&completed);
            }
            ctx.send(&update(completed)).await?
        }
        Step::ToolCallStarted { call_id, tool_call, model_call_id } => {
            let tool_call = Some(from_json("ToolCall", &tool_call).map_err(invalid)?);
            let started = pb::ToolCallStartedUpdate { call_id, tool_call, model_call_id };
            ctx.send(&update(U::ToolCallStarted(Box::new(started)))).await?
        }
        Step::ToolCallCompleted { call_id, tool_call, model_call_id, result_from_exec } => {
            let mut tool_call: pb::ToolCall = from_json("ToolCall", &tool_call).map_err(invalid)?;
            if let Some(id) = result_from_exec {
                ctx.inbox.take_arrived();
                let reply = ctx.inbox.exec_result(id).ok_or(format!("exec {id} has not been answered"))?;
                tool_call =
                    echo::with_exec_result(tool_call, reply).map_err(|e| format!("resultFromExec {id}: {e}"))?;
            }
            let completed = U::ToolCallCompleted(Box::new(pb::ToolCallCompletedUpdate {
                call_id,
                tool_call: Some(tool_call),
                model_call_id,
            }));
            if let Some(c) = &mut ctx.conversation {
                c.observe(&completed);
            }
            ctx.send(&update(completed)).await?
        }
        Step::Update { update: u } => {
            let u: pb::InteractionUpdate = from_json("InteractionUpdate", &u)?;
            if let (Some(c), Some(m)) = (&mut ctx.conversation, &u.message) {
                c.observe(m);
            }
            ctx.send(&server_msg(S::InteractionUpdate(u))).await?
        }
        Step::Send { message } => {
            ctx.send(&from_json::<pb::AgentServerMessage>("AgentServerMessage", &message)?).await?
        }
        Step::Exec { id, exec_id, args, wait } => {
            let mut msg: pb::ExecServerMessage = from_json("ExecServerMessage", &args)?;
            msg.id = id;
            msg.exec_id = exec_id.unwrap_or_else(|| format!("exec-{id}"));
            ctx.send(&server_msg(S::ExecServerMessage(Box::new(msg)))).await?;
            ctx.inbox.owe(Owed::Exec(id));
            if wait.unwrap_or(true) {
                if let Err(flow) = await_exec(ctx, id).await {
                    return Ok(flow);
                }
            }
        }
        Step::AwaitExec { id } => {
            if let Err(flow) = await_exec(ctx, id).await {
                return Ok(flow);
            }
        }
        Step::AbortExec { id } => {
            let abort = pb::ExecServerControlMessage {
                message: Some(pb::exec_server_control_message::Message::Abort(pb::ExecServerAbort { id })),
            };
            ctx.send(&server_msg(S::ExecServerControlMessage(abort))).await?
        }
        Step::KvGet { id, blob_id } => {
            let blob_id = hex::decode(&blob_id).map_err(|e| format!("kvGet blobId is not hex: {e}"))?;
            let msg = pb::KvServerMessage {
                id,
                span_context: None,
                message: Some(pb::kv_server_message::Message::GetBlobArgs(pb::GetBlobArgs { blob_id: blob_id.into() })),
            };
            ctx.send(&server_msg(S::KvServerMessage(msg))).await?;
            ctx.inbox.owe(Owed::Kv(id));
            if let Err(flow) = ctx.wait_for(&format!("reply to KV get {id}"), |m| is_kv_reply(m, id)).await {
                return Ok(flow);
            }
        }
        Step::KvSet { id, blob_id, data, data_base64 } => {
            let data = match (data, data_base64) {
                (Some(t), None) => t.into_bytes(),
                (None, Some(b)) => {
                    base64::engine::general_purpose::STANDARD.decode(b).map_err(|e| format!("kvSet dataBase64: {e}"))?
                }
                _ => return Err("kvSet needs exactly one of data / dataBase64".into()),
            };
            let blob_id = match blob_id {
                Some(h) => hex::decode(h).map_err(|e| format!("kvSet blobId is not hex: {e}"))?,
                None => sha2::Sha256::digest(&data).to_vec(),
            };
            let msg = pb::KvServerMessage {
                id,
                span_context: None,
                message: Some(pb::kv_server_message::Message::SetBlobArgs(pb::SetBlobArgs {
                    blob_id: blob_id.into(),
                    blob_data: data.into(),
                })),
            };
            ctx.send(&server_msg(S::KvServerMessage(msg))).await?;
            ctx.inbox.owe(Owed::Kv(id));
            if let Err(flow) = ctx.wait_for(&format!("reply to KV set {id}"), |m| is_kv_reply(m, id)).await {
                return Ok(flow);
            }
        }
        Step::Interaction { id, query } => {
            let mut msg: pb::InteractionQuery = from_json("InteractionQuery", &query)?;
            msg.id = id;
            ctx.send(&server_msg(S::InteractionQuery(msg))).await?;
            ctx.inbox.owe(Owed::Interaction(id));
            let what = format!("response to interaction query {id}");
            if let Err(flow) = ctx
                .wait_for(&what, |m| {
                    matches!(&m.message, Some(pb::agent_client_message::Message::InteractionResponse(r)) if r.id == id)
                })
                .await
            {
                return Ok(flow);
            }
        }
        Step::Checkpoint { message, with_conversation, .. } => match ctx.conversation.take() {
            Some(mut conversation) if with_conversation => {
                let flow = checkpoint_with_conversation(ctx, &mut conversation, message).await;
                ctx.conversation = Some(conversation);
                return flow;
            }
            kept => {
                ctx.conversation = kept;
                ctx.send_encoded(message).await?
            }
        },
        Step::Heartbeat => ctx.send(&update(U::Heartbeat(Default::default()))).await?,
        Step::TurnEnded { input_tokens, output_tokens, cache_read_tokens, cache_write_tokens, reasoning_tokens } => {
            let t = pb::TurnEndedUpdate {
                input_tokens,
                output_tokens,
                cache_read_tokens,
                cache_write_tokens,
                reasoning_tokens,
            };
            ctx.send(&update(U::TurnEnded(t))).await?
        }
        Step::Sleep { ms } => return Ok(ctx.sleep(ms).await),
        Step::AwaitClient { kind } => {
            let want = kind.replace('_', "").to_ascii_lowercase();
            let what = format!("client message of kind {kind}");
            if let Err(flow) = ctx.wait_for(&what, |m| client_kind(m).to_ascii_lowercase() == want).await {
                return Ok(flow);
            }
        }
        Step::InjectionState { states } => {
            let injection = |m: &pb::AgentClientMessage| match &m.message {
                Some(pb::agent_client_message::Message::ConversationAction(a)) => match &a.action {
                    Some(pb::conversation_action::Action::InjectContextAction(i)) => Some(i.injection_id.clone()),
                    _ => None,
                },
                _ => None,
            };
            let id = match ctx.wait_for("an inject_context_action", |m| injection(m).is_some()).await {
                Ok(m) => injection(&m).unwrap_or_default(),
                Err(flow) => return Ok(flow),
            };
            for state in states {
                let state: pb::ContextInjectionState = from_json("ContextInjectionState", &state)?;
                let changed = pb::ContextInjectionStateUpdate { injection_id: id.clone(), state: Some(state) };
                ctx.send(&update(U::ContextInjectionState(changed))).await?;
            }
        }
        Step::Drop => {
            #[allow(
                clippy::let_underscore_must_use,
                reason = "the connection is being dropped on purpose; a reader already gone changes nothing"
            )]
            let _ = ctx.out.send(Err(std::io::Error::other("embedded backend: connection dropped"))).await;
            return Ok(Flow::Stop("drop".into()));
        }
        Step::Stall { ms } => {
            paused.store(true, Ordering::SeqCst);
            tokio::time::sleep(Duration::from_millis(ms)).await;
            paused.store(false, Ordering::SeqCst);
        }
        Step::Garbage => {
            // Field 1 as a varint with an unterminated continuation: not a valid message.
            ctx.write(connect::encode_frame(0, &[0x08, 0xff, 0xff, 0xff])).await?;
        }
        Step::Oversize { length } => {
            let mut bytes = connect::frame_header(0, length).to_vec();
            bytes.extend_from_slice(&[0u8; 1024]);
            ctx.write(Bytes::from(bytes)).await?;
            return Ok(Flow::Stop("oversize".into()));
        }
        Step::GzipBomb { decompressed_bytes } => {
            let mut enc = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::best());
            let zeros = vec![0u8; 1 << 20];
            let mut left = decompressed_bytes;
            while left > 0 {
                let n = left.min(zeros.len() as u64) as usize;
                enc.write_all(&zeros[..n]).map_err(|e| e.to_string())?;
                left -= n as u64;
            }
            let gz = enc.finish().map_err(|e| e.to_string())?;
            ctx.write(connect::encode_frame(connect::FLAG_COMPRESSED, &gz)).await?;
            return Ok(Flow::Stop("gzip bomb".into()));
        }
        Step::ReservedFlag { flags } => {
            let msg = update(U::Heartbeat(Default::default())).encode_to_vec();
            ctx.write(connect::encode_frame(flags.unwrap_or(0x04), &msg)).await?;
            return Ok(Flow::Stop("reserved flag".into()));
        }
        Step::RawBytes { base64 } => {
            let bytes =
                base64::engine::general_purpose::STANDARD.decode(base64).map_err(|e| format!("rawBytes: {e}"))?;
            ctx.write(Bytes::from(bytes)).await?;
        }
        Step::Error { code, message, cursor_error, title, detail, is_retryable, retry_delay_ms } => {
            let mut err = build_error(&code, message, cursor_error, title, detail, is_retryable)?;
            if let Some(ms) = retry_delay_ms {
                err.details.push(connect::retry_info_detail(Duration::from_millis(ms)));
            }
            return Ok(Flow::Stop(ctx.end(Some(&err)).await));
        }
        Step::HttpError { .. } => return Err("httpError must be the first step".into()),
        Step::Close => return Ok(Flow::Stop("close".into())),
        Step::End => return Ok(Flow::Stop(ctx.end(None).await)),
    }
    Ok(Flow::Continue)
}

async fn await_exec(ctx: &mut TurnContext, id: u32) -> Result<(), Flow> {
    ctx.wait_for(&format!("stream_close for exec {id}"), |m| {
        matches!(
            &m.message,
            Some(pb::agent_client_message::Message::ExecClientControlMessage(pb::ExecClientControlMessage {
                message: Some(pb::exec_client_control_message::Message::StreamClose(c))
            })) if c.id == id
        )
    })
    .await
    .map(|_| ())
}

/// The first KV id above those the scenario's own KV steps use in this turn: the backend's own
/// requests take ids from there, so no reply is taken for another's.
fn first_free_kv_id(steps: &[Step]) -> u32 {
    let used = steps.iter().filter_map(|s| match s {
        Step::KvGet { id, .. } | Step::KvSet { id, .. } => Some(*id),
        _ => None,
    });
    used.max().map_or(1, |id| id.saturating_add(1))
}

/// Sends a KV request of the backend's own and notes that the client owes its reply.
async fn send_kv(ctx: &mut TurnContext, id: u32, message: pb::kv_server_message::Message) -> Result<(), String> {
    let msg = pb::KvServerMessage { id, span_context: None, message: Some(message) };
    ctx.send(&server_msg(pb::agent_server_message::Message::KvServerMessage(msg))).await?;
    ctx.inbox.owe(Owed::Kv(id));
    Ok(())
}

/// Plays a checkpoint step with the conversation so far: a resumed run first reads back the
/// turn it may continue (KV `get`); the blobs the checkpoint names are then stored with the
/// client (KV `set`, all sent, then every reply awaited), and only then does the checkpoint go
/// out, so a client never holds a checkpoint naming a blob it was not given.
async fn checkpoint_with_conversation(
    ctx: &mut TurnContext,
    conversation: &mut Conversation,
    message: Bytes,
) -> Result<Flow, String> {
    use pb::agent_server_message::Message as S;
    if let Some(blob_id) = conversation.turn_to_look_up() {
        let id = conversation.next_kv_id();
        send_kv(ctx, id, pb::kv_server_message::Message::GetBlobArgs(pb::GetBlobArgs { blob_id })).await?;
        let reply = match ctx.wait_for(&format!("reply to KV get {id}"), |m| is_kv_reply(m, id)).await {
            Ok(reply) => reply,
            Err(flow) => return Ok(flow),
        };
        let blob = match reply.message {
            Some(pb::agent_client_message::Message::KvClientMessage(pb::KvClientMessage {
                message: Some(pb::kv_client_message::Message::GetBlobResult(r)),
                ..
            })) => r.blob_data,
            _ => None,
        };
        conversation.looked_up(blob);
    }
    let mut msg = pb::AgentServerMessage::decode(message).map_err(|e| format!("checkpoint: {e}"))?;
    let Some(S::ConversationCheckpointUpdate(state)) = &mut msg.message else {
        return Err("a checkpoint step holds no checkpoint".into());
    };
    let mut waiting = Vec::new();
    for blob in conversation.checkpoint(state) {
        let id = conversation.next_kv_id();
        let set = pb::SetBlobArgs { blob_id: blob.id, blob_data: blob.data };
        send_kv(ctx, id, pb::kv_server_message::Message::SetBlobArgs(set)).await?;
        waiting.push(id);
    }
    for id in waiting {
        if let Err(flow) = ctx.wait_for(&format!("reply to KV set {id}"), |m| is_kv_reply(m, id)).await {
            return Ok(flow);
        }
    }
    ctx.send(&msg).await?;
    Ok(Flow::Continue)
}

fn is_kv_reply(m: &pb::AgentClientMessage, id: u32) -> bool {
    matches!(&m.message, Some(pb::agent_client_message::Message::KvClientMessage(k)) if k.id == id)
}
