//! The state one session shares between its handles ([`super::Session`]) and its turn loop.

use std::sync::{Arc, Mutex, MutexGuard, Weak};

use std::time::Duration;

use agent_client_protocol_schema::v1 as acp;
use bytes::Bytes;
use tokio_util::sync::CancellationToken;

use super::cards::CardLedger;
use super::config::Timing;
use super::turn::TurnShared;
use crate::cards::Card;
use crate::host::{BlobStore, Host};
use crate::proto::agent::v1 as pb;
use crate::tools::LocalTools;
use crate::translate::{InjectedMessages, Translator};
use crate::transport::{AgentSender, Transport};

/// How long a question about a server's tool call waits for that card to reach the client (it
/// may come just after the request that names it).
pub(super) const ANNOUNCE_WAIT: Duration = Duration::from_millis(500);

/// The card a question to the host is about, as the client knows it.
pub(super) struct QuestionCard {
    /// Its ACP id.
    pub(super) id: String,
    /// Its id in the session: the server's call id, or the core's own.
    pub(super) local: String,
    /// Opened by the core, which settles it once the question is answered.
    pub(super) own: bool,
}

/// What a session's handles and its turn loop share: the client's transport, host and timing,
/// the session's blob store, and its mutable state behind one lock.
pub(super) struct SessionInner {
    pub(super) transport: Transport,
    pub(super) host: Arc<dyn Host>,
    /// The client's built-in tools, run by the core (`tool_runs`) for what the host leaves.
    pub(super) tools: Option<LocalTools>,
    pub(super) blobs: Arc<dyn BlobStore>,
    pub(super) timing: Timing,
    pub(super) compaction_updates: bool,
    pub(super) notices: bool,
    pub(super) terminal_output: bool,
    /// The client's shell, named in every request context.
    pub(super) shell: Arc<str>,
    pub(super) conversation_id: String,
    /// User messages injected into a running turn, until their `context_injection_state` says
    /// what became of them (shared with the translator).
    pub(super) injected: InjectedMessages,
    /// The cards as the client has been told of them, across the session's turns.
    pub(super) cards: Arc<Mutex<CardLedger>>,
    pub(super) state: Mutex<SessionState>,
}

#[derive(Default)]
pub(super) struct SessionState {
    pub(super) checkpoint: Option<Bytes>,
    /// The model every run request and prewarm names (Auto unless one was chosen).
    pub(super) model: pb::ModelDetails,
    pub(super) mode: Option<String>,
    pub(super) cwd: Option<String>,
    pub(super) active: Option<CancellationToken>,
    /// The running turn's queue and readers, for the host's own cards.
    pub(super) active_turn: Option<Weak<TurnShared>>,
    /// The running attempt's sender and the turn's run id, for actions sent into the running
    /// turn (an injection names the run it expects).
    pub(super) active_sender: Option<AgentSender>,
    pub(super) active_run_id: Option<String>,
    /// The MCP tools of the last request context: (combined name, server, tool), to resolve
    /// an `mcp` exec against.
    pub(super) mcp_tools: Vec<(String, String, String)>,
    /// Kept between turns: message ids and the plan carry over.
    pub(super) translator: Option<Translator>,

    pub(super) closed: bool,
}

impl SessionInner {
    pub(super) fn lock(&self) -> MutexGuard<'_, SessionState> {
        self.state.lock().expect("session lock")
    }

    pub(super) fn cards(&self) -> MutexGuard<'_, CardLedger> {
        // The ledger is consistent between its calls: a panic elsewhere leaves it usable.
        self.cards.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    /// See [`super::Session::card_announced`].
    pub(super) async fn card_announced(&self, local: &str, within: Duration) -> Option<String> {
        let rx = match self.cards().wait_for(local) {
            Ok(rx) => rx,
            Err(now) => return now,
        };
        tokio::time::timeout(within, rx).await.ok().and_then(Result::ok).flatten()
    }

    /// See [`super::Session::open_card`].
    pub(super) async fn open_card(&self, card: acp::ToolCall) -> Option<String> {
        let turn = self.running_turn()?;
        if turn.cancel.is_cancelled() {
            return None;
        }
        let local = card.tool_call_id.to_string();
        let rx = match self.cards().wait_for(&local) {
            Ok(rx) => rx,
            Err(now) => return now,
        };
        let mut ended = turn.ended();
        turn.updates.push_host(acp::SessionUpdate::ToolCall(card));
        drop(turn);
        tokio::select! {
            id = rx => id.ok().flatten(),
            _ = ended.wait_for(Option::is_some) => None,
        }
    }

    /// The card a question to the host is about (a permission, a choice, an editor's call): the
    /// server's tool call `server_call` once the client has been told of it (waiting a little:
    /// it may come just after the request), else a card of the core's own, opened as `own_id`
    /// showing `card`. `None` when the turn was cancelled or ended meanwhile.
    pub(super) async fn card_for_question(
        &self,
        server_call: &str,
        own_id: String,
        card: &Card,
    ) -> Option<QuestionCard> {
        if !server_call.is_empty() {
            if let Some(id) = self.card_announced(server_call, ANNOUNCE_WAIT).await {
                return Some(QuestionCard { id, local: server_call.to_string(), own: false });
            }
        }
        let id = self.open_card(card.tool_call(own_id.clone(), acp::ToolCallStatus::Pending)).await?;
        Some(QuestionCard { id, local: own_id, own: true })
    }

    /// See [`super::Session::settle_card`].
    pub(super) fn settle_card(&self, update: acp::ToolCallUpdate) {
        if let Some(turn) = self.running_turn() {
            turn.updates.push_host(acp::SessionUpdate::ToolCallUpdate(update));
        }
    }

    fn running_turn(&self) -> Option<Arc<TurnShared>> {
        self.lock().active_turn.as_ref().and_then(Weak::upgrade)
    }

    /// Frees the session for its next turn; called by the turn loop once its turn is over.
    pub(super) fn turn_over(&self, translator: Translator) {
        let mut s = self.lock();
        s.active = None;
        s.active_turn = None;
        s.active_sender = None;
        s.active_run_id = None;
        s.translator = Some(translator);
    }
}
