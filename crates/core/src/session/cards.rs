//! The session's tool cards as its client has been told of them: the one place that decides
//! which `tool_call` and `tool_call_update` reach the client, and under which ACP id.
//!
//! What editors rely on, kept here for every card, the server's and the host's alike:
//! - a card's ACP id is unique in the session, across its turns and across restarts (the ids
//!   used are saved with the session). A server's call ids are only unique in a turn (the
//!   embedded demo announces `demo-ls` every turn), so a reused id becomes `demo-ls~2`, `~3`, …;
//!   its terminal and the cards it is the parent of are named by the same mapping;
//! - a card is announced (`tool_call`) before any update, permission request or form names it;
//! - a card that ended (`completed` or `failed`) stays ended: later updates of it are dropped;
//! - once the user cancelled the turn, no new card and no words (message and thought chunks)
//!   go out;
//! - every card announced in a turn has ended when the turn's last update is read: the ledger
//!   fails those still open (cards the host opened and did not settle).
//!
//! The ledger is applied where the turn's updates are handed to their reader (`updates.rs`),
//! not where they are translated: an update translated before a cancel but read after it was
//! never shown, so it is judged by the state at reading time.

use std::collections::{BTreeSet, HashMap};

use agent_client_protocol_schema::v1 as acp;
use serde_json::Value;
use tokio::sync::oneshot;

/// What a card that the turn left open ends with when the turn ends.
const TURN_ENDED_FIRST: &str = "The turn ended before this tool call finished.";

/// A waiter for a card's announcement, and the ACP id it gets (`None`: it never will be).
pub(crate) type CardWaiter = oneshot::Sender<Option<String>>;

/// Waiters to wake once the batch that announced their cards has been handed over: a request
/// about a card must go out after the card, and the reader writes the batch first.
#[derive(Default)]
pub(crate) struct Wakes(Vec<(CardWaiter, Option<String>)>);

impl Wakes {
    pub(crate) fn send(self) {
        for (waiter, id) in self.0 {
            // The waiter may have given up (its timeout passed): nothing to tell it then.
            let _ignored = waiter.send(id);
        }
    }
}

/// The session's ledger: the ACP ids it has used, and the cards of its current turn.
#[derive(Default)]
pub(crate) struct CardLedger {
    used: BTreeSet<String>,
    turn: TurnCards,
}

/// Where a card of the current turn stands, as the client has seen it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum CardState {
    Open,
    Ended,
}

/// The cards of one turn (or of one replay).
#[derive(Default)]
pub(crate) struct TurnCards {
    /// Local id (the server's call id, or the host's own) → ACP id.
    ids: HashMap<String, String>,
    state: HashMap<String, CardState>,
    /// Local ids in the order they were announced (the end-of-turn sweep keeps that order).
    order: Vec<String>,
    waiters: HashMap<String, Vec<CardWaiter>>,
    over: bool,
}

/// Whether the turn an update belongs to was cancelled by the user when it is read.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Reading {
    Running,
    Cancelled,
}

impl CardLedger {
    /// A ledger that knows the ACP ids a saved session used.
    pub(crate) fn with_used(used: impl IntoIterator<Item = String>) -> Self {
        CardLedger { used: used.into_iter().collect(), turn: TurnCards::default() }
    }

    /// The ACP ids the session has used, for its saved form.
    pub(crate) fn used_ids(&self) -> Vec<String> {
        self.used.iter().cloned().collect()
    }

    /// A new turn: the previous one's cards are gone (its waiters learn they never will be).
    pub(crate) fn begin_turn(&mut self) -> Wakes {
        let old = std::mem::take(&mut self.turn);
        old.release()
    }

    /// The update as the client gets it (ids mapped), or `None` when it must not go out.
    pub(crate) fn admit(
        &mut self,
        update: acp::SessionUpdate,
        reading: Reading,
        wakes: &mut Wakes,
    ) -> Option<acp::SessionUpdate> {
        self.turn.admit(&mut self.used, update, reading, wakes)
    }

    /// The end of the turn's updates: every card still open fails (with why), and the turn is
    /// over for the host (no card opens any more; waiters learn it).
    pub(crate) fn end_turn(&mut self, reading: Reading, wakes: &mut Wakes) -> Vec<acp::SessionUpdate> {
        self.turn.end(reading, wakes)
    }

    /// Waits for the announcement of `local` in this turn: `Ok(id)` when it is out already,
    /// `Err(None)` when it never will be (the turn is over), else a receiver.
    pub(crate) fn wait_for(&mut self, local: &str) -> Result<oneshot::Receiver<Option<String>>, Option<String>> {
        if let Some(id) = self.turn.open_id(local) {
            return Err(Some(id));
        }
        if self.turn.over {
            return Err(None);
        }
        let (tx, rx) = oneshot::channel();
        self.turn.waiters.entry(local.to_string()).or_default().push(tx);
        Ok(rx)
    }

    /// Replayed updates (`session/load`) as the client gets them: a scope of their own, whose
    /// ids count as used, so no later card of the session takes them.
    pub(crate) fn replay(&mut self, updates: Vec<acp::SessionUpdate>) -> Vec<acp::SessionUpdate> {
        let mut scope = TurnCards::default();
        let mut wakes = Wakes::default();
        let mut out: Vec<_> =
            updates.into_iter().filter_map(|u| scope.admit(&mut self.used, u, Reading::Running, &mut wakes)).collect();
        out.extend(scope.end(Reading::Running, &mut wakes));
        out
    }
}

impl TurnCards {
    fn open_id(&self, local: &str) -> Option<String> {
        match self.state.get(local) {
            Some(CardState::Open) => self.ids.get(local).cloned(),
            _ => None,
        }
    }

    fn admit(
        &mut self,
        used: &mut BTreeSet<String>,
        update: acp::SessionUpdate,
        reading: Reading,
        wakes: &mut Wakes,
    ) -> Option<acp::SessionUpdate> {
        use acp::SessionUpdate as S;
        let cancelled = reading == Reading::Cancelled;
        match update {
            S::AgentMessageChunk(_) | S::AgentThoughtChunk(_) if cancelled => None,
            // Nothing of a turn goes out after its end (a host's update that came too late).
            S::ToolCall(_) | S::ToolCallUpdate(_) if self.over => None,
            S::ToolCall(mut call) => {
                let local = call.tool_call_id.to_string();
                match self.state.get(&local) {
                    // Announced already: a second announcement adds nothing.
                    Some(CardState::Open) => None,
                    _ if cancelled => None,
                    // New, or an id used again after its card ended: a card of its own.
                    _ => {
                        let id = fresh_id(used, &local);
                        self.ids.insert(local.clone(), id.clone());
                        self.state.insert(local.clone(), CardState::Open);
                        self.order.retain(|l| *l != local);
                        self.order.push(local.clone());
                        call.tool_call_id = acp::ToolCallId::new(id.clone());
                        self.map_content(call.content.iter_mut());
                        call.meta = call.meta.take().map(|m| self.map_meta(m));
                        if let Some(waiting) = self.waiters.remove(&local) {
                            wakes.0.extend(waiting.into_iter().map(|w| (w, Some(id.clone()))));
                        }
                        Some(S::ToolCall(call))
                    }
                }
            }
            S::ToolCallUpdate(mut update) => {
                let local = update.tool_call_id.to_string();
                if self.state.get(&local) != Some(&CardState::Open) {
                    return None;
                }
                if matches!(update.fields.status, Some(acp::ToolCallStatus::Completed | acp::ToolCallStatus::Failed)) {
                    self.state.insert(local.clone(), CardState::Ended);
                }
                update.tool_call_id = acp::ToolCallId::new(self.ids.get(&local).cloned().unwrap_or(local));
                if let Some(content) = update.fields.content.as_mut() {
                    self.map_content(content.iter_mut());
                }
                update.meta = update.meta.take().map(|m| self.map_meta(m));
                Some(S::ToolCallUpdate(update))
            }
            other => Some(other),
        }
    }

    fn end(&mut self, reading: Reading, wakes: &mut Wakes) -> Vec<acp::SessionUpdate> {
        let reason = match reading {
            Reading::Cancelled => crate::translate::CANCELLED_BY_USER,
            Reading::Running => TURN_ENDED_FIRST,
        };
        let mut out = Vec::new();
        for local in std::mem::take(&mut self.order) {
            if self.state.get(&local) != Some(&CardState::Open) {
                continue;
            }
            self.state.insert(local.clone(), CardState::Ended);
            let id = self.ids.get(&local).cloned().unwrap_or(local);
            let fields = acp::ToolCallUpdateFields::new()
                .status(acp::ToolCallStatus::Failed)
                .content(vec![crate::cards::text_content(reason)]);
            out.push(acp::SessionUpdate::ToolCallUpdate(acp::ToolCallUpdate::new(id, fields)));
        }
        self.over = true;
        for (_, waiting) in self.waiters.drain() {
            wakes.0.extend(waiting.into_iter().map(|w| (w, None)));
        }
        out
    }

    /// The turn is replaced by the next one: its waiters learn their cards will not come.
    fn release(mut self) -> Wakes {
        let mut wakes = Wakes::default();
        for (_, waiting) in self.waiters.drain() {
            wakes.0.extend(waiting.into_iter().map(|w| (w, None)));
        }
        wakes
    }

    /// The ACP id for a local id named inside a card (its terminal, its parent): the card's
    /// mapping where this turn has one; as it is otherwise.
    fn mapped(&self, local: &str) -> String {
        self.ids.get(local).cloned().unwrap_or_else(|| local.to_string())
    }

    fn map_content<'a>(&self, content: impl Iterator<Item = &'a mut acp::ToolCallContent>) {
        for c in content {
            if let acp::ToolCallContent::Terminal(t) = c {
                t.terminal_id = acp::TerminalId::new(self.mapped(&t.terminal_id.to_string()));
            }
        }
    }

    fn map_meta(&self, mut meta: acp::Meta) -> acp::Meta {
        for key in ["terminal_info", "terminal_output", "terminal_exit"] {
            if let Some(Value::Object(o)) = meta.get_mut(key) {
                if let Some(Value::String(id)) = o.get("terminal_id") {
                    let id = self.mapped(id);
                    o.insert("terminal_id".into(), Value::String(id));
                }
            }
        }
        if let Some(Value::String(parent)) = meta.get("parentToolCallId") {
            let parent = self.mapped(parent);
            meta.insert("parentToolCallId".into(), Value::String(parent));
        }
        meta
    }
}

/// `local` the first time the session uses it, then `local~2`, `local~3`, …
fn fresh_id(used: &mut BTreeSet<String>, local: &str) -> String {
    let mut id = local.to_string();
    let mut n = 2u64;
    while used.contains(&id) {
        id = format!("{local}~{n}");
        n += 1;
    }
    used.insert(id.clone());
    id
}
