//! A saved conversation replayed as updates (ACP `session/load`).

use agent_client_protocol_schema::v1 as acp;

use super::content::{chunk, new_id};
use super::translator::Translator;
use crate::proto::agent::v1 as pb;

impl Translator {
    /// The update that replays a stored user message (for ACP `session/load`).
    pub fn replay_user(&mut self, text: &str) -> Vec<acp::SessionUpdate> {
        self.rotate();
        if text.is_empty() {
            return Vec::new();
        }
        vec![acp::SessionUpdate::UserMessageChunk(chunk(text.to_string(), &new_id()))]
    }

    /// The updates that replay one stored conversation step (for ACP `session/load`).
    pub fn replay_step(&mut self, step: &pb::ConversationStep) -> Vec<acp::SessionUpdate> {
        match &step.message {
            Some(pb::conversation_step::Message::AssistantMessage(m)) if !m.text.is_empty() => {
                self.rotate();
                let id = new_id();
                vec![acp::SessionUpdate::AgentMessageChunk(chunk(m.text.clone(), &id))]
            }
            Some(pb::conversation_step::Message::ThinkingMessage(m)) if !m.text.is_empty() => {
                self.rotate();
                let id = new_id();
                vec![acp::SessionUpdate::AgentThoughtChunk(chunk(m.text.clone(), &id))]
            }
            Some(pb::conversation_step::Message::ToolCall(call)) => {
                let id = format!("replay-{}", new_id());
                let mut out = self.announce(&id, Some(call), acp::ToolCallStatus::InProgress, None);
                out.extend(self.complete(&id, Some(call), None));
                // Replayed cards are final: fold announce + completion into the card.
                out
            }
            _ => Vec::new(),
        }
    }
}
