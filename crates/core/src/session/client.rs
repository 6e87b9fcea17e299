//! [`AgentClient`] (transport, host and KV override, shared by its sessions) and [`Session`]
//! (one conversation: its checkpoint, model, mode and cwd, and the turn running now).

use std::sync::{Arc, Mutex};
use std::time::Duration;

use agent_client_protocol_schema::v1 as acp;
use bytes::Bytes;
use prost::Message as _;
use tokio_util::sync::CancellationToken;

use super::cards::CardLedger;
use super::config::{ClientConfig, PromptExtras, SavedSession, SessionOptions, Timing};
use super::inner::{SessionInner, SessionState};
use super::messages::{self, FirstAction};
use super::request_context;
use super::turn::Turn;
use super::turn_loop;
use crate::error::CoreError;
use crate::host::{BlobStore, Host, MemoryBlobStore};
use crate::models;
use crate::prompt;
use crate::proto::agent::v1 as pb;
use crate::protojson;
use crate::tools::LocalTools;
use crate::translate::Translator;
use crate::transport::{TokenReason, Transport, TransportKind};

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
    /// The shell the request context names (`ClientConfig::shell`), shared by the sessions.
    shell: Arc<str>,
    /// Built-in tools the core runs for the execs the host leaves (`with_tools`).
    tools: Option<LocalTools>,
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
            shell: config.shell.display().to_string().into(),
            tools: None,
        })
    }

    /// Runs `tools` in the core for every exec the host leaves unanswered: reads, searches and
    /// listings at once; writes, deletes, shells, fetches and MCP calls once the host's
    /// [`Host::permission`] policy allows them, on a card the client already shows. Their
    /// shell becomes the one the request context names.
    pub fn with_tools(mut self, tools: LocalTools) -> Self {
        self.shell = tools.shell().display().to_string().into();
        self.tools = Some(tools);
        self
    }

    /// The built-in tools the core runs for this client's sessions, if any.
    pub fn tools(&self) -> Option<&LocalTools> {
        self.tools.as_ref()
    }

    /// The shell the request context names: the one this client's tools run.
    pub fn shell(&self) -> &str {
        &self.shell
    }

    /// The transport the next turn will use: [`TransportKind::H2`] or [`TransportKind::Sse`] (the
    /// automatic transport's choice so far).
    pub fn active_transport(&self) -> TransportKind {
        self.transport.active_kind()
    }

    /// The models the account may use (`GetUsableModels`), as the server describes them.
    pub async fn usable_models(&self) -> Result<Vec<pb::ModelDetails>, CoreError> {
        models::usable_models(&self.transport).await
    }

    pub fn new_session(&self, options: SessionOptions) -> Result<Session, CoreError> {
        let model = models::choose(options.model.as_deref(), options.model_details)?;
        let fresh = SavedSession {
            conversation_id: options.conversation_id.unwrap_or_else(|| uuid::Uuid::new_v4().to_string()),
            mode: options.mode,
            cwd: options.cwd,
            ..SavedSession::default()
        };
        self.session(fresh, model)
    }

    /// Continues a saved conversation (its blobs are restored into the session's store).
    pub fn load_session(&self, saved: SavedSession) -> Result<Session, CoreError> {
        if saved.conversation_id.is_empty() {
            return Err(CoreError::InvalidInput("saved session has no conversationId".into()));
        }
        let model = models::choose(saved.model.as_deref(), saved.model_details.clone())?;
        self.session(saved, model)
    }

    /// A session continuing `saved` (a new one: nothing but its id, mode and cwd), with `model`.
    fn session(&self, saved: SavedSession, model: pb::ModelDetails) -> Result<Session, CoreError> {
        let SavedSession { conversation_id, checkpoint, blobs, mode, cwd, card_ids, .. } = saved;
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
                tools: self.tools.clone(),
                blobs: store,
                timing: self.timing.clone(),
                compaction_updates: self.compaction_updates,
                notices: self.notices,
                terminal_output: self.terminal_output,
                shell: self.shell.clone(),
                conversation_id,
                injected: Default::default(),
                cards: Arc::new(Mutex::new(CardLedger::with_used(card_ids))),
                state: SessionState { checkpoint, model, mode, cwd, ..Default::default() }.into(),
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

impl Session {
    pub fn conversation_id(&self) -> &str {
        &self.inner.conversation_id
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, SessionState> {
        self.inner.lock()
    }

    /// The model of the next turns: an id, the server's details for it, or neither (Auto).
    pub fn set_model(&self, model: Option<&str>, details: Option<pb::ModelDetails>) -> Result<(), CoreError> {
        self.lock().model = models::choose(model, details)?;
        Ok(())
    }

    /// The model the next turn runs with.
    pub fn model(&self) -> pb::ModelDetails {
        self.lock().model.clone()
    }

    /// Max Mode for the next turns (`ModelDetails.max_mode` and `RequestedModel.max_mode` of
    /// every run request and prewarm); kept with the session. Whether the model offers it is
    /// the account's catalogue's to say (`GetUsableModels`): the server refuses it otherwise.
    pub fn set_max_mode(&self, on: bool) {
        self.lock().model.max_mode = Some(on);
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
        self.prompt_with_extras(content, PromptExtras::default(), cancel)
    }

    /// Like [`prompt_with`](Self::prompt_with), with fields of the user message and action the
    /// content does not give (see [`PromptExtras`]).
    pub fn prompt_with_extras(
        &self,
        content: Vec<acp::ContentBlock>,
        extras: PromptExtras,
        cancel: CancellationToken,
    ) -> Result<Turn, CoreError> {
        let mode = self.lock().mode.clone();
        let mut message = prompt::user_message(&content, mode.as_deref().map(prompt::mode_value).transpose()?)?;
        if let Some(fields) = &extras.user_message {
            let fields: pb::UserMessage = protojson::from_json("agent.v1.UserMessage", fields)
                .map_err(|e| CoreError::InvalidInput(format!("userMessage: {e}")))?;
            // Protobuf merge: what the host sets wins, lists are appended.
            message.merge(fields.encode_to_vec().as_slice()).map_err(|e| CoreError::InvalidInput(e.to_string()))?;
        }
        let parts = match &extras.request_context_parts {
            Some(json) => Some(Box::new(
                protojson::from_json::<pb::RequestContextPartReferences>("agent.v1.RequestContextPartReferences", json)
                    .map_err(|e| CoreError::InvalidInput(format!("requestContextParts: {e}")))?,
            )),
            None => None,
        };
        let first = if message.text.trim().is_empty() && message.selected_context.is_none() {
            // An empty user message would be dropped by the server: it becomes a resume
            // (docs/protocol.md, "The messages of a turn").
            FirstAction::Resume
        } else {
            FirstAction::User { message: message.encode_to_vec().into(), parts }
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
        sender
            .send(&messages::client_msg(pb::agent_client_message::Message::ConversationAction(Box::new(action))))
            .await
    }

    /// Injects system context into the running turn (`inject_context_action`) without a new
    /// user turn. Returns the injection id.
    pub async fn inject_context(&self, content: &str, producer: &str) -> Result<String, CoreError> {
        let payload = pb::inject_context_action::Payload::SystemContext(pb::SystemContextInjection {
            producer: producer.to_string(),
            content: content.to_string(),
        });
        self.inject(uuid::Uuid::new_v4().to_string(), payload).await
    }

    /// Sends a user message into the running turn (`inject_context_action.user_context`, with a
    /// fresh request context), for the model to take in at its next step; `context_injection_state`
    /// updates then say whether it was delivered. Returns the injection id.
    pub async fn inject_user_message(&self, text: &str) -> Result<String, CoreError> {
        let mode = self.lock().mode.clone();
        let content = vec![acp::ContentBlock::Text(acp::TextContent::new(text))];
        let message = prompt::user_message(&content, mode.as_deref().map(prompt::mode_value).transpose()?)?;
        if message.text.trim().is_empty() {
            return Err(CoreError::InvalidInput("the message to inject is empty".into()));
        }
        let request_context = request_context::for_session(&self.inner).await?;
        // Known before it is sent: its state may come back at once.
        let id = uuid::Uuid::new_v4().to_string();
        self.inner.injected.insert(id.clone(), message.text.clone());
        let payload = pb::inject_context_action::Payload::UserContext(pb::UserContextInjection {
            user_message: Some(message),
            request_context: Some(request_context),
        });
        self.inject(id.clone(), payload).await.inspect_err(|_| self.inner.injected.forget(&id))
    }

    /// `inject_context_action` naming the running turn's run (`expected_run_id`).
    async fn inject(
        &self,
        injection_id: String,
        payload: pb::inject_context_action::Payload,
    ) -> Result<String, CoreError> {
        let (sender, run_id) = {
            let s = self.lock();
            (s.active_sender.clone(), s.active_run_id.clone())
        };
        let (Some(sender), Some(run_id)) = (sender, run_id) else {
            return Err(CoreError::Closed("no turn is running".into()));
        };
        let action = pb::ConversationAction {
            action: Some(pb::conversation_action::Action::InjectContextAction(pb::InjectContextAction {
                injection_id: injection_id.clone(),
                expected_run_id: run_id,
                payload: Some(payload),
            })),
            ..Default::default()
        };
        sender
            .send(&messages::client_msg(pb::agent_client_message::Message::ConversationAction(Box::new(action))))
            .await?;
        Ok(injection_id)
    }

    /// Sends a `PrewarmRequest` (model, conversation state) on its own short stream. A refused
    /// token (seen on RunSSE, which acknowledges each message) is asked for again once, as for
    /// a turn.
    pub async fn prewarm(&self) -> Result<(), CoreError> {
        let (model, checkpoint) = {
            let s = self.lock();
            (s.model.clone(), s.checkpoint.clone())
        };
        let request = messages::prewarm_request(checkpoint.as_deref(), &model, &self.inner.conversation_id);
        let transport = &self.inner.transport;
        let result = match self.prewarm_once(request.clone(), TokenReason::Request).await {
            Err(CoreError::Auth(_)) => self.prewarm_once(request, TokenReason::Unauthenticated).await,
            other => other,
        };
        result.map_err(|e| e.with_sign_in_hint(&transport.config().sign_in_hint))
    }

    async fn prewarm_once(&self, request: Bytes, reason: TokenReason) -> Result<(), CoreError> {
        let stream = self.inner.transport.open_with(&uuid::Uuid::new_v4().to_string(), None, reason);
        stream.sender.send_encoded(request).await?;
        // RunSSE acknowledges the append (a refused token shows here). On h2 nothing answers a
        // prewarm: the stream is kept open a moment in the background, so the frame is not
        // reset away before the server has read it; a stream that fails meanwhile (no server
        // there, a refusal) is a log line, since nobody waits for it.
        let flushed = stream.sender.flush().await;
        stream.sender.close();
        let mut receiver = stream.receiver;
        tokio::spawn(async move {
            if let Ok(Err(e)) = tokio::time::timeout(std::time::Duration::from_secs(2), receiver.next()).await {
                tracing::info!(error = %e, "prewarm failed; the next prompt connects as usual");
            }
        });
        flushed
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
                t.set_injected_messages(self.inner.injected.clone());
                t
            })
        };
        Ok(turn_loop::spawn(self.inner.clone(), first, cancel, translator))
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
        self.inner.cards().replay(out)
    }

    /// The ACP id of card `local` (a server's call id) once the client has been told of it in
    /// the running turn: at once if it has, `None` if the turn ends first or `within` passes.
    /// A request about a card (a permission, a form) waits for it, so it never names a card the
    /// client does not know.
    pub async fn card_announced(&self, local: &str, within: Duration) -> Option<String> {
        self.inner.card_announced(local, within).await
    }

    /// Opens a card of the host's own in the running turn (an exec that came without its tool
    /// call, a question of the host's): the ACP id once the client has been told of it, or
    /// `None` when no turn runs, it was cancelled, or it ends first. If the card is out
    /// already, its id. A card the host does not settle fails when the turn ends.
    pub async fn open_card(&self, card: acp::ToolCall) -> Option<String> {
        self.inner.open_card(card).await
    }

    /// Settles (or updates) a card of the host's own in the running turn. Like every update,
    /// it goes out only if the card is open: never for a card the client was not told of, or
    /// after the card ended.
    pub fn settle_card(&self, update: acp::ToolCallUpdate) {
        self.inner.settle_card(update)
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
        SavedSession { blobs: self.inner.blobs.snapshot().unwrap_or_default(), ..self.save_without_blobs() }
    }

    /// What [`save`](Self::save) returns, without the blobs: for a session whose blob store keeps
    /// them itself (a folder of files), where a copy in every save would read the whole
    /// conversation from disk again at each turn's end.
    pub fn save_without_blobs(&self) -> SavedSession {
        let s = self.lock();
        SavedSession {
            conversation_id: self.inner.conversation_id.clone(),
            checkpoint: s.checkpoint.clone(),
            blobs: Vec::new(),
            model: Some(s.model.model_id.clone()),
            model_details: Some(s.model.clone()),
            mode: s.mode.clone(),
            cwd: s.cwd.clone(),
            card_ids: self.inner.cards().used_ids(),
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
