//! What became of a message sent into the running turn (`context_injection_state`).
//!
//! A user message injected with `Session::inject_user_message` appears in the transcript as a
//! `user_message_chunk` where the model took it in (`delivered`); one the server holds for the
//! next turn, cancels or rejects is a notice saying so. System context injections show nothing.

use agent_client_protocol_schema::v1 as acp;

use super::content::{chunk, new_id};
use super::injected_messages::InjectedMessages;
use super::translator::Translator;
use crate::proto::agent::v1 as pb;

impl Translator {
    /// Shares the session's record of the user messages it injects.
    pub fn set_injected_messages(&mut self, injected: InjectedMessages) {
        self.injected = injected;
    }

    pub(super) fn on_injection_state(&mut self, update: &pb::ContextInjectionStateUpdate) -> Vec<acp::SessionUpdate> {
        use pb::context_injection_state::State;
        let id = update.injection_id.as_str();
        let Some(state) = update.state.as_ref().and_then(|s| s.state.as_ref()) else { return Vec::new() };
        match state {
            State::Queued(_) => Vec::new(),
            State::Delivered(_) => match self.injected.take(id) {
                Some(text) => {
                    self.rotate();
                    vec![acp::SessionUpdate::UserMessageChunk(chunk(text, &new_id()))]
                }
                None => Vec::new(),
            },
            // Still sent, with the next turn: kept until it is delivered then.
            State::QueuedForNextTurn(_) => match self.injected.get(id) {
                Some(_) => self.warn("Your message will reach the agent with the next turn."),
                None => Vec::new(),
            },
            State::Cancelled(_) => match self.injected.take(id) {
                Some(_) => self.warn("Your message was not delivered: the injection was cancelled."),
                None => Vec::new(),
            },
            State::Rejected(r) => match self.injected.take(id) {
                Some(_) if r.reason.is_empty() => self.warn("Your message was not delivered."),
                Some(_) => self.warn(&format!("Your message was not delivered: {}", r.reason)),
                None => Vec::new(),
            },
        }
    }

    /// A warning for the user: an ACP `notice` where the client shows them, else a message of
    /// its own.
    fn warn(&mut self, text: &str) -> Vec<acp::SessionUpdate> {
        self.rotate();
        if self.notices {
            return vec![acp::SessionUpdate::Notice(acp::Notice::new(acp::NoticeSeverity::Warning, text.to_string()))];
        }
        vec![acp::SessionUpdate::AgentMessageChunk(chunk(text.to_string(), &new_id()))]
    }
}
