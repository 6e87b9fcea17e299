//! Updates of the newer protocol: what became of a message sent into the running turn
//! (`context_injection_state`), and an alternate model's response shown for comparison
//! (`response_comparison`).
//!
//! A user message injected with `Session::inject_user_message` appears in the transcript as a
//! `user_message_chunk` where the model took it in (`delivered`); one the server holds for the
//! next turn, cancels or rejects is a notice saying so. System context injections show nothing.
//! A comparison is a card of its own (`comparison-<id>`) whose content is the alternate text.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use agent_client_protocol_schema::v1 as acp;

use super::content::{chunk, new_id, text_content};
use super::translator::{OpenCall, Translator};
use crate::proto::agent::v1 as pb;

/// User messages sent into a running turn, by injection id: shared by the session that sends
/// them and the translator that shows them once their state is known.
#[derive(Debug, Clone, Default)]
pub struct InjectedMessages(Arc<Mutex<HashMap<String, String>>>);

impl InjectedMessages {
    pub fn insert(&self, injection_id: String, text: String) {
        self.0.lock().expect("injections lock").insert(injection_id, text);
    }

    /// Drops a message whose injection could not be sent.
    pub fn forget(&self, injection_id: &str) {
        self.take(injection_id);
    }

    fn get(&self, injection_id: &str) -> Option<String> {
        self.0.lock().expect("injections lock").get(injection_id).cloned()
    }

    fn take(&self, injection_id: &str) -> Option<String> {
        self.0.lock().expect("injections lock").remove(injection_id)
    }
}

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

    pub(super) fn on_response_comparison(&mut self, update: &pb::ResponseComparisonUpdate) -> Vec<acp::SessionUpdate> {
        use pb::response_comparison_update::Event;
        let id = format!("comparison-{}", update.comparison_id);
        let Some(event) = &update.event else { return Vec::new() };
        let mut out = Vec::new();
        if !self.open.contains_key(&id) {
            let model = match event {
                Event::Started(s) if !s.alternate_model_id.is_empty() => format!(" ({})", s.alternate_model_id),
                _ => String::new(),
            };
            self.open.insert(id.clone(), OpenCall::new("response_comparison"));
            let card = acp::ToolCall::new(id.clone(), format!("Alternate response{model}"))
                .name("response_comparison".to_string())
                .kind(acp::ToolKind::Think)
                .status(acp::ToolCallStatus::InProgress);
            out.push(acp::SessionUpdate::ToolCall(card));
        }
        let update = match event {
            Event::Started(_) => return out,
            Event::TextDelta(d) => {
                let open = self.open.get_mut(&id).expect("announced above");
                open.output.push_str(&d.text);
                acp::ToolCallUpdateFields::new().content(vec![text_content(open.output.clone())])
            }
            Event::Completed(_) => {
                self.open.remove(&id);
                acp::ToolCallUpdateFields::new().status(acp::ToolCallStatus::Completed)
            }
            Event::Skipped(s) => {
                self.open.remove(&id);
                let why = pb::ResponseComparisonSkipReason::try_from(s.reason)
                    .map(|r| match r {
                        pb::ResponseComparisonSkipReason::AlternateToolCall => "the alternate model called a tool",
                        pb::ResponseComparisonSkipReason::InferenceError => "the alternate model failed",
                        pb::ResponseComparisonSkipReason::Timeout => "the alternate model timed out",
                        pb::ResponseComparisonSkipReason::Cancelled => "cancelled",
                        pb::ResponseComparisonSkipReason::Unspecified => "no reason given",
                    })
                    .unwrap_or("no reason given");
                acp::ToolCallUpdateFields::new()
                    .status(acp::ToolCallStatus::Completed)
                    .content(vec![text_content(format!("Skipped: {why}."))])
            }
        };
        out.push(acp::SessionUpdate::ToolCallUpdate(acp::ToolCallUpdate::new(id, update)));
        out
    }
}
