//! Sessions and the cancel-aware turn loop (architecture §4, client-behaviour §3 and §6).
//!
//! One prompt = one turn = one server stream (plus resume attempts). The loop sends the run
//! request, heartbeats every 5 s, answers every server request (exec, KV, interaction) from
//! handler tasks that write through the shared sender, translates updates into a bounded
//! queue, keeps checkpoints as raw bytes, detects stalls, resumes after drops, and resolves
//! `cancelled` within a bounded time whatever the server does.

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use agent_client_protocol_schema::v1 as acp;
use bytes::{Bytes, BytesMut};
use prost::Message as _;
use tokio::sync::{mpsc, watch, Notify};
use tokio::task::JoinSet;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use crate::bridge;
use crate::error::CoreError;
use crate::field::agent::v1 as f;
use crate::host::{BlobStore, ExecContext, ExecRequest, Host, MemoryBlobStore, ShellOutput};
use crate::prompt;
use crate::proto::agent::v1 as pb;
use crate::protojson;
use crate::translate::Translator;
use crate::transport::{AgentSender, Transport, TransportConfig, TransportKind};
pub use crate::updates::DeliverBatch;
use crate::updates::{QueuedUpdate, Updates};
use crate::wire;

/// Timers and bounds of the turn loop. Defaults follow the real CLI.
#[derive(Debug, Clone)]
pub struct Timing {
    pub client_heartbeat: Duration,
    pub exec_heartbeat: Duration,
    /// No inbound frame for this long = stall (then resume).
    pub stall: Duration,
    /// After cancel, how long to wait for the server before resolving `cancelled` anyway.
    pub cancel_grace: Duration,
    /// Bound on a host callback (exec, interaction, request context, KV override).
    pub callback: Duration,
    /// After `turn_ended`, how long in-flight handlers may take to finish.
    pub drain: Duration,
    pub resume_attempts: u32,
    pub resume_backoff: Duration,
    pub resume_backoff_max: Duration,
    /// Capacity of the update queue (back-pressure beyond it).
    pub queue: usize,
}

impl Default for Timing {
    fn default() -> Self {
        Timing {
            client_heartbeat: Duration::from_secs(5),
            exec_heartbeat: Duration::from_secs(3),
            stall: Duration::from_secs(30),
            cancel_grace: Duration::from_secs(2),
            callback: Duration::from_secs(300),
            drain: Duration::from_secs(5),
            resume_attempts: 3,
            resume_backoff: Duration::from_secs(1),
            resume_backoff_max: Duration::from_secs(60),
            queue: 256,
        }
    }
}

/// Client-wide configuration.
#[derive(Debug, Clone, Default)]
pub struct ClientConfig {
    pub transport: TransportConfig,
    pub timing: Timing,
    /// Report summarization as ACP compaction updates (the client advertised `session.compaction`).
    pub compaction_updates: bool,
    /// Report server notices as ACP `notice` updates (the client advertised `session.notices`).
    pub notices: bool,
    /// Show shells as Zed display-only terminals (the client advertised `_meta.terminal_output`).
    pub terminal_output: bool,
}

/// Options of a new session.
#[derive(Debug, Clone, Default)]
pub struct SessionOptions {
    pub conversation_id: Option<String>,
    pub model: Option<String>,
    pub mode: Option<String>,
    pub cwd: Option<String>,
}

/// What `Session::save` returns and `AgentClient::load_session` takes.
#[derive(Debug, Clone, Default)]
pub struct SavedSession {
    pub conversation_id: String,
    /// The latest checkpoint exactly as the server sent it.
    pub checkpoint: Option<Bytes>,
    /// Blobs of the session's store (id, data), when the store can enumerate them.
    pub blobs: Vec<(Bytes, Bytes)>,
    pub model: Option<String>,
    pub mode: Option<String>,
    pub cwd: Option<String>,
}

/// Token counts of one turn (`turn_ended`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct TurnUsage {
    pub input_tokens: i64,
    pub output_tokens: i64,
    pub cache_read_tokens: i64,
    pub cache_write_tokens: i64,
    pub reasoning_tokens: i64,
}

impl TurnUsage {
    pub fn total(&self) -> i64 {
        self.input_tokens + self.output_tokens + self.cache_read_tokens + self.cache_write_tokens
    }
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TurnResult {
    pub stop_reason: acp::StopReason,
    pub usage: Option<TurnUsage>,
}

/// A configured client: transport, host and the KV override, shared by its sessions.
#[derive(Clone)]
pub struct AgentClient {
    transport: Transport,
    host: Arc<dyn Host>,
    kv: Option<Arc<dyn BlobStore>>,
    timing: Timing,
    compaction_updates: bool,
    notices: bool,
    terminal_output: bool,
}

impl AgentClient {
    pub fn new(config: ClientConfig, host: Arc<dyn Host>, kv: Option<Arc<dyn BlobStore>>) -> Result<Self, CoreError> {
        Ok(AgentClient {
            transport: Transport::new(config.transport)?,
            host,
            kv,
            timing: config.timing,
            compaction_updates: config.compaction_updates,
            notices: config.notices,
            terminal_output: config.terminal_output,
        })
    }

    /// The transport the next turn will use: [`TransportKind::H2`] or [`TransportKind::Sse`] (the
    /// automatic transport's choice so far).
    pub fn active_transport(&self) -> TransportKind {
        self.transport.active_kind()
    }

    pub fn new_session(&self, options: SessionOptions) -> Result<Session, CoreError> {
        self.session(
            options.conversation_id.unwrap_or_else(|| uuid::Uuid::new_v4().to_string()),
            None,
            options.model,
            options.mode,
            options.cwd,
            Vec::new(),
        )
    }

    /// Continues a saved conversation (its blobs are restored into the session's store).
    pub fn load_session(&self, saved: SavedSession) -> Result<Session, CoreError> {
        if saved.conversation_id.is_empty() {
            return Err(CoreError::InvalidInput("saved session has no conversationId".into()));
        }
        self.session(saved.conversation_id, saved.checkpoint, saved.model, saved.mode, saved.cwd, saved.blobs)
    }

    fn session(
        &self,
        conversation_id: String,
        checkpoint: Option<Bytes>,
        model: Option<String>,
        mode: Option<String>,
        cwd: Option<String>,
        blobs: Vec<(Bytes, Bytes)>,
    ) -> Result<Session, CoreError> {
        if let Some(m) = &mode {
            prompt::mode_value(m)?;
        }
        let store: Arc<dyn BlobStore> = match &self.kv {
            Some(kv) => kv.clone(),
            None => {
                let mem = MemoryBlobStore::new();
                for (id, data) in blobs.iter().cloned() {
                    mem.insert(id, data);
                }
                Arc::new(mem)
            }
        };
        if self.kv.is_some() && !blobs.is_empty() {
            // Restore into the host's store too, so the server can fetch them.
            let kv = store.clone();
            for (id, data) in blobs {
                tokio::spawn(kv.set(id, data));
            }
        }
        Ok(Session {
            inner: Arc::new(SessionInner {
                transport: self.transport.clone(),
                host: self.host.clone(),
                blobs: store,
                timing: self.timing.clone(),
                compaction_updates: self.compaction_updates,
                notices: self.notices,
                terminal_output: self.terminal_output,
                conversation_id,
                state: Mutex::new(SessionState { checkpoint, model, mode, cwd, ..Default::default() }),
            }),
        })
    }
}

/// One conversation. At most one turn runs at a time: a second prompt while one runs is
/// rejected with `E_BUSY` (never queued silently).
#[derive(Clone)]
pub struct Session {
    inner: Arc<SessionInner>,
}

struct SessionInner {
    transport: Transport,
    host: Arc<dyn Host>,
    blobs: Arc<dyn BlobStore>,
    timing: Timing,
    compaction_updates: bool,
    notices: bool,
    terminal_output: bool,
    conversation_id: String,
    state: Mutex<SessionState>,
}

#[derive(Default)]
struct SessionState {
    checkpoint: Option<Bytes>,
    model: Option<String>,
    mode: Option<String>,
    cwd: Option<String>,
    active: Option<CancellationToken>,
    active_sender: Option<AgentSender>,
    active_request_id: Option<String>,
    translator: Option<Translator>,
    closed: bool,
}

impl Session {
    pub fn conversation_id(&self) -> &str {
        &self.inner.conversation_id
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, SessionState> {
        self.inner.state.lock().expect("session lock")
    }

    pub fn set_model(&self, model: Option<String>) {
        self.lock().model = model;
    }

    pub fn set_mode(&self, mode: Option<String>) -> Result<(), CoreError> {
        if let Some(m) = &mode {
            prompt::mode_value(m)?;
        }
        self.lock().mode = mode;
        Ok(())
    }

    /// The latest checkpoint (raw bytes).
    pub fn checkpoint(&self) -> Option<Bytes> {
        self.lock().checkpoint.clone()
    }

    /// Starts a turn with ACP content blocks.
    pub fn prompt(&self, content: Vec<acp::ContentBlock>) -> Result<Turn, CoreError> {
        self.prompt_with(content, CancellationToken::new())
    }

    /// Like [`prompt`](Self::prompt), cancelled by `cancel` (already cancelled: the turn
    /// resolves `cancelled` without contacting the server).
    pub fn prompt_with(&self, content: Vec<acp::ContentBlock>, cancel: CancellationToken) -> Result<Turn, CoreError> {
        let mode = self.lock().mode.clone();
        let message = prompt::user_message(&content, mode.as_deref().map(prompt::mode_value).transpose()?)?;
        let first = if message.text.trim().is_empty() && message.selected_context.is_none() {
            // Empty user turns become a resume (client-behaviour §4 #19).
            FirstAction::Resume
        } else {
            FirstAction::User(Box::new(message))
        };
        self.start(first, cancel)
    }

    /// Starts a turn with any `ConversationAction` (proto3 JSON), e.g. `{"summarizeAction":{}}`.
    pub fn action(&self, action: &serde_json::Value) -> Result<Turn, CoreError> {
        self.action_with(action, CancellationToken::new())
    }

    /// Like [`action`](Self::action), cancelled by `cancel`.
    pub fn action_with(&self, action: &serde_json::Value, cancel: CancellationToken) -> Result<Turn, CoreError> {
        let action: pb::ConversationAction =
            protojson::from_json("agent.v1.ConversationAction", action).map_err(CoreError::InvalidInput)?;
        if action.action.is_none() {
            return Err(CoreError::InvalidInput("the action must set one ConversationAction branch".into()));
        }
        self.start(FirstAction::Raw(Box::new(action)), cancel)
    }

    /// Sends a `ConversationAction` into the running turn (e.g. inject context, cancel a
    /// sub-agent). Fails with `E_CLOSED` when no turn runs.
    pub async fn send_action(&self, action: &serde_json::Value) -> Result<(), CoreError> {
        let action: pb::ConversationAction =
            protojson::from_json("agent.v1.ConversationAction", action).map_err(CoreError::InvalidInput)?;
        let sender = self.lock().active_sender.clone();
        let sender = sender.ok_or_else(|| CoreError::Closed("no turn is running".into()))?;
        sender.send(&client_msg(pb::agent_client_message::Message::ConversationAction(Box::new(action)))).await
    }

    /// Injects system context into the running turn (`inject_context_action`) without a new
    /// user turn. Returns the injection id.
    pub async fn inject_context(&self, content: &str, producer: &str) -> Result<String, CoreError> {
        let run_id =
            self.lock().active_request_id.clone().ok_or_else(|| CoreError::Closed("no turn is running".into()))?;
        let injection_id = uuid::Uuid::new_v4().to_string();
        let action = serde_json::json!({ "injectContextAction": {
            "injectionId": injection_id,
            "expectedRunId": run_id,
            "systemContext": { "producer": producer, "content": content },
        }});
        self.send_action(&action).await?;
        Ok(injection_id)
    }

    /// Sends a `PrewarmRequest` (model, conversation state) on its own short stream.
    pub async fn prewarm(&self) -> Result<(), CoreError> {
        let (model, checkpoint) = {
            let s = self.lock();
            (s.model.clone(), s.checkpoint.clone())
        };
        let (model_details, requested_model) = model_fields(model.as_deref());
        let request = pb::PrewarmRequest {
            model_details,
            requested_model,
            conversation_id: Some(self.inner.conversation_id.clone()),
            ..Default::default()
        };
        let mut body = BytesMut::from(&request.encode_to_vec()[..]);
        wire::put_length_delimited(
            &mut body,
            f::prewarm_request::CONVERSATION_STATE,
            checkpoint.as_deref().unwrap_or_default(),
        );
        let stream = self.inner.transport.open(&uuid::Uuid::new_v4().to_string(), None);
        stream.sender.send_encoded(wire::wrap(f::agent_client_message::PREWARM_REQUEST, &body)).await?;
        stream.sender.flush().await?;
        stream.sender.close();
        Ok(())
    }

    fn start(&self, first: FirstAction, cancel: CancellationToken) -> Result<Turn, CoreError> {
        let translator = {
            let mut s = self.lock();
            if s.closed {
                return Err(CoreError::Closed("the session is closed".into()));
            }
            if s.active.is_some() {
                return Err(CoreError::Busy);
            }
            s.active = Some(cancel.clone());
            let mode = s.mode.as_deref().and_then(|m| prompt::mode_value(m).ok());
            s.translator.take().unwrap_or_else(|| {
                let mut t = Translator::with_cwd(s.cwd.clone());
                t.set_mode(mode);
                t.set_compaction_updates(self.inner.compaction_updates);
                t.set_notices(self.inner.notices);
                t.set_terminal_output(self.inner.terminal_output);
                t
            })
        };
        let (tx, rx) = mpsc::channel(self.inner.timing.queue.max(1));
        let (result_tx, result_rx) = watch::channel(None);
        let shared = Arc::new(TurnShared {
            updates: Updates::new(rx),
            cancel: cancel.clone(),
            result: result_rx,
            iterating: AtomicBool::new(false),
            discard: AtomicBool::new(false),
            abandoned: AtomicBool::new(false),
            discard_wake: Notify::new(),
            dropped: AtomicU64::new(0),
            end_hooks: Mutex::new(Some(Vec::new())),
        });
        let session = self.clone();
        let loop_shared = shared.clone();
        tokio::spawn(async move {
            // Declared first, dropped last: the hooks run after the result is out, and also if
            // this task panics.
            let _end_hooks = RunEndHooks(loop_shared.clone());
            let mut turn = TurnLoop::new(session.clone(), loop_shared, tx, translator);
            let result = turn.run(first).await;
            let TurnLoop { translator, .. } = turn;
            {
                let mut s = session.lock();
                s.active = None;
                s.active_sender = None;
                s.active_request_id = None;
                s.translator = Some(translator);
            }
            let _ = result_tx.send(Some(result));
        });
        let owner = Arc::new(TurnOwner(shared.clone()));
        Ok(Turn { shared, _owner: owner })
    }

    /// The updates that replay the stored conversation (user messages, assistant text and
    /// thinking, completed tool calls), for ACP `session/load`. Turn and step entries of the
    /// checkpoint are blob ids (resolved through the session's blob store) or inline messages.
    pub async fn replay(&self) -> Vec<acp::SessionUpdate> {
        let (checkpoint, cwd) = {
            let s = self.lock();
            (s.checkpoint.clone(), s.cwd.clone())
        };
        let Some(state) = checkpoint.and_then(|c| pb::ConversationStateStructure::decode(c).ok()) else {
            return Vec::new();
        };
        let mut translator = Translator::with_cwd(cwd);
        let mut out = Vec::new();
        for turn in state.turns {
            let turn = self.resolve_blob(turn).await;
            let Ok(pb::ConversationTurnStructure {
                turn: Some(pb::conversation_turn_structure::Turn::AgentConversationTurn(t)),
            }) = pb::ConversationTurnStructure::decode(turn)
            else {
                continue;
            };
            let user = self.resolve_blob(t.user_message).await;
            if let Ok(message) = pb::UserMessage::decode(user) {
                out.extend(translator.replay_user(&message.text));
            }
            for step in t.steps {
                let step = self.resolve_blob(step).await;
                if let Ok(step) = pb::ConversationStep::decode(step) {
                    out.extend(translator.replay_step(&step));
                }
            }
        }
        out
    }

    /// A 32-byte entry that names a stored blob is replaced by the blob; anything else is inline.
    async fn resolve_blob(&self, entry: Bytes) -> Bytes {
        if entry.len() == 32 {
            if let Ok(Some(blob)) = self.inner.blobs.get(entry.clone()).await {
                return blob;
            }
        }
        entry
    }

    /// Cancels the running turn, if any.
    pub fn cancel(&self) {
        if let Some(c) = &self.lock().active {
            c.cancel();
        }
    }

    /// Conversation id, checkpoint and the blobs it may reference.
    pub fn save(&self) -> SavedSession {
        let s = self.lock();
        SavedSession {
            conversation_id: self.inner.conversation_id.clone(),
            checkpoint: s.checkpoint.clone(),
            blobs: self.inner.blobs.snapshot().unwrap_or_default(),
            model: s.model.clone(),
            mode: s.mode.clone(),
            cwd: s.cwd.clone(),
        }
    }

    /// Cancels any running turn; later prompts fail with `E_CLOSED`.
    pub fn close(&self) {
        let mut s = self.lock();
        s.closed = true;
        if let Some(c) = &s.active {
            c.cancel();
        }
    }
}

fn client_msg(m: pb::agent_client_message::Message) -> pb::AgentClientMessage {
    pb::AgentClientMessage { message: Some(m) }
}

fn model_fields(model: Option<&str>) -> (Option<pb::ModelDetails>, Option<pb::RequestedModel>) {
    match model {
        None | Some("") => (None, None),
        Some(m) => (
            Some(pb::ModelDetails {
                model_id: m.to_string(),
                display_model_id: m.to_string(),
                display_name: m.to_string(),
                ..Default::default()
            }),
            Some(pb::RequestedModel { model_id: m.to_string(), ..Default::default() }),
        ),
    }
}

enum FirstAction {
    User(Box<pb::UserMessage>),
    Resume,
    Raw(Box<pb::ConversationAction>),
}

/// The handle of one running turn: an ordered stream of ACP updates, then a result.
#[derive(Clone)]
pub struct Turn {
    shared: Arc<TurnShared>,
    _owner: Arc<TurnOwner>,
}

/// Dropped with the last handle of a turn: nobody can read its updates any more, so the loop
/// drops them instead of blocking on a full queue (the turn still runs to its end, and the
/// session is freed).
struct TurnOwner(Arc<TurnShared>);

impl Drop for TurnOwner {
    fn drop(&mut self) {
        self.0.abandoned.store(true, Ordering::SeqCst);
        self.0.discard_wake.notify_waiters();
    }
}

struct TurnShared {
    updates: Updates,
    cancel: CancellationToken,
    result: watch::Receiver<Option<Result<TurnResult, CoreError>>>,
    /// Someone has asked for an update: never drop updates from now on.
    iterating: AtomicBool,
    /// Nobody will read updates (result awaited without iterating, or the iterator released).
    discard: AtomicBool,
    /// Every handle of the turn is gone.
    abandoned: AtomicBool,
    discard_wake: Notify,
    dropped: AtomicU64,
    /// Run once the turn is over (see [`Turn::on_end`]); `None` once they have run.
    end_hooks: Mutex<Option<Vec<EndHook>>>,
}

/// Called once when a turn is over, on the thread that ends it.
pub type EndHook = Box<dyn FnOnce() + Send>;

/// Runs a turn's end hooks when dropped, at the end of the turn's task.
struct RunEndHooks(Arc<TurnShared>);

impl Drop for RunEndHooks {
    fn drop(&mut self) {
        let hooks = self.0.end_hooks.lock().unwrap_or_else(|poisoned| poisoned.into_inner()).take();
        for hook in hooks.into_iter().flatten() {
            hook();
        }
    }
}

impl Turn {
    /// The next update; `None` once the turn has delivered everything.
    pub async fn next(&self) -> Option<acp::SessionUpdate> {
        self.next_batch(1).await.pop()
    }

    /// Up to `max` updates at once (waits for the first; never splits coalescing). Empty once
    /// the turn has delivered everything.
    pub async fn next_batch(&self, max: usize) -> Vec<acp::SessionUpdate> {
        self.shared.iterating.store(true, Ordering::SeqCst);
        self.shared.updates.next_batch(max).await
    }

    /// Like [`next_batch`](Self::next_batch), without a task: `deliver` gets the batch on this
    /// thread if updates are queued, or else on the turn's thread as soon as it queues one.
    /// Reads are served in the order they are made, whichever way they were made.
    pub fn read_batch(&self, max: usize, deliver: DeliverBatch) {
        self.shared.iterating.store(true, Ordering::SeqCst);
        self.shared.updates.read_with(max, deliver);
    }

    /// Cancels the turn (ACP `session/cancel`): it resolves `cancelled` within the grace bound.
    pub fn cancel(&self) {
        self.shared.cancel.cancel();
    }

    /// The consumer stopped iterating (`break`): cancel, and drop updates nobody will read.
    pub fn release(&self) {
        self.shared.discard.store(true, Ordering::SeqCst);
        self.shared.discard_wake.notify_waiters();
        self.shared.cancel.cancel();
    }

    /// Updates dropped because nobody read them (see [`Turn::result`]).
    pub fn dropped_updates(&self) -> u64 {
        self.shared.dropped.load(Ordering::SeqCst)
    }

    /// Calls `hook` once the turn is over (at once if it is over already), without a task to
    /// wait for it: a thousand turns starting together would otherwise each spawn one more.
    /// Like [`ended`](Self::ended), it neither holds the turn nor changes what readers see.
    pub fn on_end(&self, hook: EndHook) {
        let mut hooks = self.shared.end_hooks.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
        match hooks.as_mut() {
            Some(waiting) => waiting.push(hook),
            None => {
                drop(hooks);
                hook();
            }
        }
    }

    /// Resolves once the turn is over. Unlike [`result`](Self::result) it neither discards
    /// queued updates nor holds the turn: a watcher that outlives every handle does not keep
    /// the turn's updates alive or change what readers see.
    pub fn ended(&self) -> impl std::future::Future<Output = ()> + Send + 'static {
        let mut result = self.shared.result.clone();
        async move {
            let _ = result.wait_for(|r| r.is_some()).await;
        }
    }

    /// The turn's outcome, once the turn is over: every update it produced has been queued
    /// before this resolves (and stays readable from [`next`](Self::next)). When nobody has
    /// iterated, queued updates are discarded so a full queue cannot hold the turn open.
    pub async fn result(&self) -> Result<TurnResult, CoreError> {
        self.discard_unless_iterating();
        let mut result = self.shared.result.clone();
        let outcome = loop {
            if let Some(r) = result.borrow().clone() {
                break r;
            }
            if result.changed().await.is_err() {
                break Err(no_result());
            }
        };
        outcome
    }

    /// Like [`result`](Self::result), without a task: `deliver` gets the outcome once the turn
    /// is over (at once if it is over already), on the thread that ends it.
    pub fn result_with(&self, deliver: Box<dyn FnOnce(Result<TurnResult, CoreError>) + Send>) {
        self.discard_unless_iterating();
        let result = self.shared.result.clone();
        self.on_end(Box::new(move || {
            // Set before the end hooks run, unless the turn's task panicked.
            let outcome = result.borrow().clone().unwrap_or_else(|| Err(no_result()));
            deliver(outcome);
        }));
    }

    /// Awaiting the result without iterating means nobody reads the updates: a full queue must
    /// not hold the turn open.
    fn discard_unless_iterating(&self) {
        if !self.shared.iterating.load(Ordering::SeqCst) {
            self.shared.discard.store(true, Ordering::SeqCst);
            self.shared.discard_wake.notify_waiters();
        }
    }
}

fn no_result() -> CoreError {
    CoreError::Closed("the turn task ended without a result".into())
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

struct TurnLoop {
    session: Session,
    shared: Arc<TurnShared>,
    tx: UpdateSender,
    translator: Translator,
    usage: Option<TurnUsage>,
    cancel_deadline: Option<Instant>,
    /// The in-flight send of `cancel_action`.
    cancel_send: Option<tokio::task::JoinHandle<()>>,
    handlers: JoinSet<()>,
    exec_tokens: Arc<Mutex<HashMap<u32, CancellationToken>>>,
}

impl TurnLoop {
    fn new(session: Session, shared: Arc<TurnShared>, tx: mpsc::Sender<QueuedUpdate>, translator: Translator) -> Self {
        TurnLoop {
            session,
            tx: UpdateSender { tx: Some(tx), shared: shared.clone() },
            shared,
            translator,
            usage: None,
            cancel_deadline: None,
            cancel_send: None,
            handlers: JoinSet::new(),
            exec_tokens: Arc::default(),
        }
    }

    fn timing(&self) -> &Timing {
        &self.session.inner.timing
    }

    /// Queues an update: waits for room (back-pressure) unless nobody will read it, or the
    /// cancel deadline has passed. A read waiting for it gets it at once, from this thread.
    async fn emit(&mut self, update: acp::SessionUpdate) {
        let update = match self.tx.sender().try_send(Box::new(update)) {
            Ok(()) => return self.shared.updates.serve(),
            Err(mpsc::error::TrySendError::Closed(_)) => return,
            Err(mpsc::error::TrySendError::Full(u)) => u,
        };
        let deadline = self.cancel_deadline;
        let mut update = Some(update);
        loop {
            let discard = self.shared.discard.load(Ordering::SeqCst);
            if self.shared.abandoned.load(Ordering::SeqCst)
                || discard && !self.shared.iterating.load(Ordering::SeqCst)
                || discard && self.shared.cancel.is_cancelled()
            {
                self.shared.dropped.fetch_add(1, Ordering::SeqCst);
                return;
            }
            let wake = self.shared.discard_wake.notified();
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
        for u in updates {
            self.emit(u).await;
        }
    }

    async fn run(&mut self, first: FirstAction) -> Result<TurnResult, CoreError> {
        if self.shared.cancel.is_cancelled() {
            // Aborted before it started: nothing was sent, nothing to wait for.
            return Ok(TurnResult { stop_reason: acp::StopReason::Cancelled, usage: None });
        }
        let original_request_id = uuid::Uuid::new_v4().to_string();
        let mut attempt: u32 = 0;
        let mut moved_to_http1 = false;
        let outcome = loop {
            let request_id = if attempt == 0 { original_request_id.clone() } else { uuid::Uuid::new_v4().to_string() };
            let end =
                self.attempt(&request_id, &original_request_id, if attempt == 0 { Some(&first) } else { None }).await;
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
                AttemptEnd::Failed(CoreError::NoHttp2(_)) if !moved_to_http1 => moved_to_http1 = true,
                AttemptEnd::Failed(e) if e.is_retryable() && attempt < self.timing().resume_attempts => {
                    self.abort_handlers();
                    let swept = self.translator.sweep("Interrupted: the connection was lost; resuming.");
                    self.emit_all(swept).await;
                    let delay = backoff(self.timing(), attempt);
                    tokio::select! {
                        _ = tokio::time::sleep(delay) => {}
                        _ = self.shared.cancel.cancelled() => break Ok(acp::StopReason::Cancelled),
                    }
                    attempt += 1;
                }
                AttemptEnd::Failed(e) => break stop_reason_for(e),
            }
        };
        self.abort_handlers();
        let reason = match &outcome {
            Ok(acp::StopReason::Cancelled) => "Cancelled.",
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
        let _ = tokio::time::timeout(drain, async { while self.handlers.join_next().await.is_some() {} }).await;
    }

    async fn run_request(&self, first: Option<&FirstAction>) -> Result<Bytes, CoreError> {
        let request_context = self.request_context().await?;
        let (checkpoint, model) = {
            let s = self.session.lock();
            (s.checkpoint.clone(), s.model.clone())
        };
        let action = match first {
            Some(FirstAction::User(message)) => {
                pb::conversation_action::Action::UserMessageAction(pb::UserMessageAction {
                    user_message: Some((**message).clone()),
                    request_context: Some(request_context),
                    ..Default::default()
                })
            }
            Some(FirstAction::Raw(action)) => {
                return Ok(self.encode_run_request((**action).clone(), checkpoint, model.as_deref()));
            }
            Some(FirstAction::Resume) | None => pb::conversation_action::Action::ResumeAction(pb::ResumeAction {
                request_context: Some(request_context),
            }),
        };
        let action = pb::ConversationAction { action: Some(action), ..Default::default() };
        Ok(self.encode_run_request(action, checkpoint, model.as_deref()))
    }

    /// `AgentClientMessage{run_request}` with the checkpoint spliced in byte-for-byte.
    fn encode_run_request(
        &self,
        action: pb::ConversationAction,
        checkpoint: Option<Bytes>,
        model: Option<&str>,
    ) -> Bytes {
        let (model_details, requested_model) = model_fields(model);
        let request = pb::AgentRunRequest {
            action: Some(action),
            model_details,
            requested_model,
            conversation_id: Some(self.session.inner.conversation_id.clone()),
            ..Default::default()
        };
        let mut body = BytesMut::from(&request.encode_to_vec()[..]);
        wire::put_length_delimited(
            &mut body,
            f::agent_run_request::CONVERSATION_STATE,
            checkpoint.as_deref().unwrap_or_default(),
        );
        wire::wrap(f::agent_client_message::RUN_REQUEST, &body)
    }

    async fn request_context(&self) -> Result<pb::RequestContext, CoreError> {
        request_context_for(&self.session).await
    }

    async fn attempt(&mut self, request_id: &str, original: &str, first: Option<&FirstAction>) -> AttemptEnd {
        let stream = self.session.inner.transport.open(request_id, Some(original));
        let sender = stream.sender.clone();
        let mut receiver = stream.receiver;
        let end = self.attempt_on(request_id, &sender, &mut receiver, first).await;
        if matches!(end, AttemptEnd::Cancelled) {
            // Let the cancel reach the server and the stream end politely, in the background:
            // the turn resolves now, and a reset would discard frames still queued.
            let cancel_send = self.cancel_send.take();
            tokio::spawn(async move {
                if let Some(send) = cancel_send {
                    let _ = send.await;
                }
                sender.close();
                let _ = tokio::time::timeout(Duration::from_secs(2), async {
                    while let Ok(Some(_)) = receiver.next().await {}
                })
                .await;
            });
        }
        end
    }

    async fn attempt_on(
        &mut self,
        request_id: &str,
        sender: &AgentSender,
        receiver: &mut crate::transport::AgentReceiver,
        first: Option<&FirstAction>,
    ) -> AttemptEnd {
        let sender = sender.clone();
        {
            let mut state = self.session.lock();
            state.active_sender = Some(sender.clone());
            state.active_request_id = Some(request_id.to_string());
        }
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
        if self.shared.cancel.is_cancelled() && self.cancel_deadline.is_none() {
            self.start_cancel(&sender);
        }
        let heartbeat = spawn_heartbeat(sender.clone(), self.timing().client_heartbeat);
        let _heartbeat_guard = AbortOnDrop(heartbeat);
        let stall = self.timing().stall;
        let mut last_frame = Instant::now();
        loop {
            let cancel_requested = self.cancel_deadline.is_some();
            tokio::select! {
                biased;
                _ = self.shared.cancel.cancelled(), if !cancel_requested => {
                    self.start_cancel(&sender);
                }
                _ = sleep_until_opt(self.cancel_deadline), if cancel_requested => {
                    return AttemptEnd::Cancelled;
                }
                _ = tokio::time::sleep_until(last_frame + stall) => {
                    if cancel_requested {
                        return AttemptEnd::Cancelled;
                    }
                    return AttemptEnd::Failed(CoreError::Timeout(format!(
                        "no frame from the server for {} ms", stall.as_millis()
                    )));
                }
                frame = receiver.next() => {
                    last_frame = Instant::now();
                    match frame {
                        Ok(Some(frame)) => {
                            // Work through everything this read brought in, merging runs of text
                            // deltas, before paying for another select (a timer and a wake-up).
                            let mut current = frame;
                            loop {
                                let next = match receiver.next_buffered() {
                                    Some(Ok(Some(next))) => match merge_delta(current, next) {
                                        Ok(merged) => {
                                            current = merged;
                                            continue;
                                        }
                                        Err((held, next)) => {
                                            current = held;
                                            Some(next)
                                        }
                                    },
                                    // End, error or an incomplete frame: the next select sees it.
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

    fn start_cancel(&mut self, sender: &AgentSender) {
        self.cancel_deadline = Some(Instant::now() + self.timing().cancel_grace);
        for token in self.exec_tokens.lock().expect("exec tokens").values() {
            token.cancel();
        }
        let cancel =
            client_msg(pb::agent_client_message::Message::ConversationAction(Box::new(pb::ConversationAction {
                action: Some(pb::conversation_action::Action::CancelAction(pb::CancelAction {
                    reason: "user cancelled".into(),
                    interrupted_pending_tool_call_resolutions: None,
                })),
                ..Default::default()
            })));
        let sender = sender.clone();
        // Never block the loop on the server: the deadline bounds the wait whatever happens.
        self.cancel_send = Some(tokio::spawn(async move {
            let _ = sender.send(&cancel).await;
        }));
    }

    /// Handles one server message; `true` when it ended the turn.
    async fn dispatch(&mut self, frame: crate::transport::ServerFrame, sender: &AgentSender) -> bool {
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
                let blobs = self.session.inner.blobs.clone();
                let timeout = self.timing().callback;
                let sender = sender.clone();
                self.handlers.spawn(async move {
                    let reply = answer_kv(blobs, kv, timeout).await;
                    let _ = sender.send(&client_msg(pb::agent_client_message::Message::KvClientMessage(reply))).await;
                });
            }
            Some(S::InteractionQuery(_)) => {
                let raw = wire::length_delimited_field(&frame.raw, f::agent_server_message::INTERACTION_QUERY)
                    .unwrap_or_default();
                let host = self.session.inner.host.clone();
                let cancel = self.shared.cancel.child_token();
                let timeout = self.timing().callback;
                let sender = sender.clone();
                self.handlers.spawn(async move {
                    if let Some(reply) = answer_interaction(host, &raw, cancel, timeout).await {
                        let _ = sender
                            .send_encoded(wire::wrap(f::agent_client_message::INTERACTION_RESPONSE, &reply))
                            .await;
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
                let _ = e;
                return;
            }
        };
        let token = self.shared.cancel.child_token();
        self.exec_tokens.lock().expect("exec tokens").insert(id, token.clone());
        let tokens = self.exec_tokens.clone();
        let session = self.session.clone();
        let timing = self.timing().clone();
        self.handlers.spawn(async move {
            run_exec(&session, &sender, id, &exec_id, request, token, &timing).await;
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

/// `min(base × 2^attempt, max)` plus 0–20 % jitter.
fn backoff(timing: &Timing, attempt: u32) -> Duration {
    let base = timing.resume_backoff.saturating_mul(1u32 << attempt.min(16)).min(timing.resume_backoff_max);
    let jitter = base.mul_f64(rand::random::<f64>() * 0.2);
    base + jitter
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
    let heartbeat = client_msg(pb::agent_client_message::Message::ClientHeartbeat(pb::ClientHeartbeat {}));
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

/// The request context: what the host supplies, with the session's folder as workspace and
/// this machine's OS and shell filled in where the host left them empty. A failing or invalid
/// host callback is an `E_CALLBACK` error (the context cannot be guessed).
async fn request_context_for(session: &Session) -> Result<pb::RequestContext, CoreError> {
    let timeout = session.inner.timing.callback;
    let from_host = tokio::time::timeout(timeout, session.inner.host.request_context()).await;
    let mut ctx = match from_host {
        Ok(Ok(Some(json))) => protojson::from_json::<pb::RequestContext>("agent.v1.RequestContext", &json)
            .map_err(|e| CoreError::Callback(format!("requestContext returned an invalid RequestContext: {e}")))?,
        Ok(Ok(None)) => pb::RequestContext::default(),
        Ok(Err(e)) => return Err(e),
        Err(_) => {
            return Err(CoreError::Callback(format!(
                "the requestContext callback did not settle within {} ms",
                timeout.as_millis()
            )))
        }
    };
    let env = ctx.env.get_or_insert_with(Default::default);
    let cwd = session.lock().cwd.clone();
    if let Some(cwd) = cwd {
        if env.workspace_paths.is_empty() {
            env.workspace_paths.push(cwd.clone());
        }
        if env.project_folder.is_empty() {
            env.project_folder = cwd;
        }
    }
    if env.os_version.is_empty() {
        env.os_version = std::env::consts::OS.to_string();
    }
    if env.shell.is_empty() {
        env.shell = std::env::var("SHELL").unwrap_or_default();
    }
    Ok(ctx)
}

async fn answer_kv(blobs: Arc<dyn BlobStore>, kv: pb::KvServerMessage, timeout: Duration) -> pb::KvClientMessage {
    use pb::kv_client_message::Message as C;
    let message = match kv.message {
        Some(pb::kv_server_message::Message::GetBlobArgs(args)) => {
            let data = tokio::time::timeout(timeout, blobs.get(args.blob_id)).await.ok().and_then(Result::ok).flatten();
            Some(C::GetBlobResult(pb::GetBlobResult { blob_data: data }))
        }
        Some(pb::kv_server_message::Message::SetBlobArgs(args)) => {
            let error = match tokio::time::timeout(timeout, blobs.set(args.blob_id, args.blob_data)).await {
                Ok(Ok(())) => None,
                Ok(Err(e)) => Some(pb::Error { message: e.to_string() }),
                Err(_) => Some(pb::Error { message: "blob store timed out".into() }),
            };
            Some(C::SetBlobResult(pb::SetBlobResult { error }))
        }
        // An unknown KV branch: a get result with no data is the harmless answer.
        None => Some(C::GetBlobResult(pb::GetBlobResult { blob_data: None })),
    };
    pb::KvClientMessage { id: kv.id, message }
}

/// `InteractionResponse` bytes for a query; `None` only when the query cannot be decoded.
async fn answer_interaction(
    host: Arc<dyn Host>,
    raw: &[u8],
    cancel: CancellationToken,
    timeout: Duration,
) -> Option<Bytes> {
    let (id, query) = bridge::decode_interaction(raw).ok()?;
    let Some(query) = query else {
        // A kind this schema does not know: answer "approved" with the empty message of that
        // number is impossible to name, so answer with an InteractionResponse that carries
        // only the id (the server sees a reply rather than silence).
        return Some(wire_id_only(id));
    };
    let answer = tokio::select! {
        r = tokio::time::timeout(timeout, host.interaction(query.clone(), cancel.clone())) => match r {
            Ok(Ok(Some(json))) => bridge::interaction_response(&query, json)
                .unwrap_or_else(|e| bridge::interaction_rejection(&query, &format!("invalid answer from the client: {e}"))),
            Ok(Ok(None)) => bridge::interaction_rejection(&query, "This client does not handle this request."),
            Ok(Err(e)) => bridge::interaction_rejection(&query, &e.to_string()),
            Err(_) => bridge::interaction_rejection(&query, "The client did not answer in time."),
        },
        _ = cancel.cancelled() => bridge::interaction_rejection(&query, "Cancelled by the user."),
    };
    Some(answer)
}

fn wire_id_only(id: u32) -> Bytes {
    pb::InteractionResponse { id, result: None }.encode_to_vec().into()
}

fn control(m: pb::exec_client_control_message::Message) -> pb::AgentClientMessage {
    client_msg(pb::agent_client_message::Message::ExecClientControlMessage(pb::ExecClientControlMessage {
        message: Some(m),
    }))
}

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

/// Appends `next` to `current` when both are plain text deltas (or both thinking deltas): the
/// translation of the merged delta is exactly that of the run, one update instead of many.
/// Otherwise gives both back.
#[allow(clippy::result_large_err)]
fn merge_delta(
    mut current: crate::transport::ServerFrame,
    next: crate::transport::ServerFrame,
) -> Result<crate::transport::ServerFrame, (crate::transport::ServerFrame, crate::transport::ServerFrame)> {
    use pb::agent_server_message::Message as S;
    use pb::interaction_update::Message as U;
    let target = match &mut current.message.message {
        Some(S::InteractionUpdate(pb::InteractionUpdate { message: Some(u) })) => u,
        _ => return Err((current, next)),
    };
    let merged = match (target, &next.message.message) {
        (U::TextDelta(a), Some(S::InteractionUpdate(pb::InteractionUpdate { message: Some(U::TextDelta(b)) })))
            if a.is_server_notice == b.is_server_notice =>
        {
            a.text.push_str(&b.text);
            true
        }
        (
            U::ThinkingDelta(a),
            Some(S::InteractionUpdate(pb::InteractionUpdate { message: Some(U::ThinkingDelta(b)) })),
        ) if a.thinking_style == b.thinking_style => {
            a.text.push_str(&b.text);
            true
        }
        _ => false,
    };
    if merged {
        Ok(current)
    } else {
        Err((current, next))
    }
}

/// Answers one exec request: typed result then `stream_close`; throw + close when nothing can
/// answer it. Heartbeats every 3 s while the host works; abort and cancel stop the wait.
async fn run_exec(
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
        let reply = match request_context_for(session).await {
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
