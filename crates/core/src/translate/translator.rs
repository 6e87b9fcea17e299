//! The [`Translator`]'s state and the dispatch of each `InteractionUpdate` to its family.

use std::collections::{BTreeMap, HashMap};

use agent_client_protocol_schema::v1 as acp;

use super::injected_messages::InjectedMessages;
use crate::cards::Paths;
use crate::proto::agent::v1 as pb;

/// Translation state for one session (message ids and the plan carry across turns).
#[derive(Debug, Default)]
pub struct Translator {
    /// The session's folder: titles show paths relative to it, locations absolute.
    pub(super) paths: Paths,
    /// Where the turn stands: running, or cancelled by the user (then what the server still
    /// sends about it is not shown).
    pub(super) turn: TurnState,
    pub(super) message_id: Option<String>,
    pub(super) thought_id: Option<String>,
    /// Announced tool calls not yet completed or failed.
    pub(super) open: BTreeMap<String, OpenCall>,
    /// The running shell card that `shell_output_delta` (not call-scoped) attaches to.
    pub(super) current_shell: Option<String>,
    pub(super) last_usage: Option<(u64, u64)>,
    pub(super) todos: Vec<Todo>,
    pub(super) last_plan: Option<Vec<(String, String)>>,
    pub(super) mode: Option<i32>,
    pub(super) compactions: u32,
    pub(super) compaction: Option<String>,
    /// The client renders ACP compaction updates (`session.compaction` capability); otherwise
    /// summarization is shown as a `think` tool card.
    pub(super) compaction_updates: bool,
    /// The client renders ACP `notice` updates (`session.notices`); otherwise server notices
    /// are a message of their own.
    pub(super) notices: bool,
    /// The client renders Zed's display-only terminal (`_meta.terminal_output` capability):
    /// shell cards carry a terminal and stream through `_meta` instead of fenced text.
    pub(super) terminal_output: bool,
    /// User messages the session sent into the running turn (injection_state.rs shows their fate).
    pub(super) injected: InjectedMessages,
    /// Live output of cards the translation did not open (the host's own), by card id.
    pub(super) host_card_output: HashMap<String, String>,
}

#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub(super) enum TurnState {
    #[default]
    Running,
    Cancelled,
}

/// What a card cancelled by the user ends with.
pub const CANCELLED_BY_USER: &str = "Cancelled by the user.";

#[derive(Debug, Default)]
pub(super) struct OpenCall {
    pub(super) name: String,
    /// Accumulated live output (shell deltas), its tail only past what a card shows.
    pub(super) output: String,
    /// This client runs the call and shows its output as it comes (`Translator::local_output`):
    /// the server's relay of the same output is not shown again.
    pub(super) local: bool,
}

impl OpenCall {
    pub(super) fn new(name: impl Into<String>) -> Self {
        OpenCall { name: name.into(), ..Default::default() }
    }
}

#[derive(Debug, Clone)]
pub(super) struct Todo {
    pub(super) id: String,
    pub(super) content: String,
    pub(super) status: String,
}

impl Translator {
    pub fn new() -> Self {
        Self::default()
    }

    /// Paths in titles are shown relative to `cwd`; relative paths in locations become absolute.
    pub fn with_cwd(cwd: Option<String>) -> Self {
        Translator { paths: Paths::new(cwd.as_deref()), ..Self::default() }
    }

    /// A new turn begins: the previous one's cancel no longer applies.
    pub fn begin_turn(&mut self) {
        self.turn = TurnState::Running;
        self.host_card_output.clear();
    }

    /// The user cancelled the turn: every open card ends `failed` with the reason, now, and
    /// whatever the server still sends about this turn (text, thinking, tool calls finishing)
    /// is not shown, so no card is flipped to `completed` behind the user's back. Checkpoints
    /// still count (usage, plan, mode are the conversation's state).
    pub fn cancel(&mut self) -> Vec<acp::SessionUpdate> {
        self.turn = TurnState::Cancelled;
        self.rotate();
        self.sweep(CANCELLED_BY_USER)
    }

    /// Report context summarization as `compaction_update` / `compaction_summary_chunk`.
    pub fn set_compaction_updates(&mut self, enabled: bool) {
        self.compaction_updates = enabled;
    }

    /// Show shells as display-only terminals (`_meta.terminal_info/_output/_exit`).
    pub fn set_terminal_output(&mut self, enabled: bool) {
        self.terminal_output = enabled;
    }

    /// Report server notices as ACP `notice` updates.
    pub fn set_notices(&mut self, enabled: bool) {
        self.notices = enabled;
    }

    pub fn on_update(&mut self, update: &pb::InteractionUpdate) -> Vec<acp::SessionUpdate> {
        self.on_update_in(update, None)
    }

    pub(super) fn on_update_in(
        &mut self,
        update: &pb::InteractionUpdate,
        parent: Option<&str>,
    ) -> Vec<acp::SessionUpdate> {
        use pb::interaction_update::Message as U;
        let Some(message) = &update.message else { return Vec::new() };
        if self.turn == TurnState::Cancelled {
            return Vec::new();
        }
        match message {
            // Sub-agent text belongs to the sub-agent's card, not to the main transcript.
            U::TextDelta(_) | U::ThinkingDelta(_) if parent.is_some() => Vec::new(),
            // Operational notices (quota warnings, model substitution) are not model output.
            U::TextDelta(d) if d.is_server_notice && !d.text.is_empty() => self.on_notice(&d.text),
            U::TextDelta(d) if !d.text.is_empty() => self.on_text(&d.text),
            U::ThinkingDelta(d) if !d.text.is_empty() => self.on_thinking(&d.text),
            U::ThinkingCompleted(_) | U::StepStarted(_) | U::StepCompleted(_) => {
                self.rotate();
                Vec::new()
            }
            U::PartialToolCall(p) => {
                self.announce(&p.call_id, p.tool_call.as_ref(), acp::ToolCallStatus::Pending, parent)
            }
            U::ToolCallStarted(s) => {
                self.announce(&s.call_id, s.tool_call.as_ref(), acp::ToolCallStatus::InProgress, parent)
            }
            U::ToolCallCompleted(c) => self.complete(&c.call_id, c.tool_call.as_ref(), parent),
            U::ToolCallDelta(d) => self.on_tool_call_delta(d),
            U::ShellOutputDelta(s) => self.on_shell_output(s),
            U::SummaryStarted(_) => self.start_compaction(),
            U::Summary(s) => self.on_summary(&s.summary),
            U::SummaryCompleted(_) => self.complete_compaction(),
            U::ContextInjectionState(s) if parent.is_none() => self.on_injection_state(s),
            U::ResponseComparison(c) if parent.is_none() => self.on_response_comparison(c),
            // Heartbeats, token deltas, echoes of the prompt, suggestions, feedback: nothing to show.
            _ => Vec::new(),
        }
    }
}
