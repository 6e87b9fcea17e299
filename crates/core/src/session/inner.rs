//! The state one session shares between its handles ([`super::Session`]) and its turn loop.

use std::sync::{Arc, Mutex, MutexGuard, Weak};

use bytes::Bytes;
use tokio_util::sync::CancellationToken;

use super::cards::CardLedger;
use super::config::Timing;
use super::turn::TurnShared;
use crate::host::{BlobStore, Host};
use crate::proto::agent::v1 as pb;
use crate::translate::{InjectedMessages, Translator};
use crate::transport::{AgentSender, Transport};

/// What a session's handles and its turn loop share: the client's transport, host and timing,
/// the session's blob store, and its mutable state behind one lock.
pub(super) struct SessionInner {
    pub(super) transport: Transport,
    pub(super) host: Arc<dyn Host>,
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
