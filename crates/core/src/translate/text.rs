//! Text and thinking chunks (one `messageId` per segment) and server notices.

use agent_client_protocol_schema::v1 as acp;

use super::content::{chunk, new_id};
use super::translator::Translator;

impl Translator {
    /// Ends the current text and thought segments: the next chunk gets a new `messageId`.
    pub fn rotate(&mut self) {
        self.message_id = None;
        self.thought_id = None;
    }

    /// A notice is not model output: an ACP `notice` where the client shows them, else a
    /// message of its own.
    pub(super) fn on_notice(&mut self, text: &str) -> Vec<acp::SessionUpdate> {
        self.rotate();
        if self.notices {
            return vec![acp::SessionUpdate::Notice(acp::Notice::new(acp::NoticeSeverity::Info, text.to_string()))];
        }
        let update = acp::SessionUpdate::AgentMessageChunk(chunk(text.to_string(), &new_id()));
        vec![update]
    }

    pub(super) fn on_text(&mut self, text: &str) -> Vec<acp::SessionUpdate> {
        self.thought_id = None;
        let id = self.message_id.get_or_insert_with(new_id).clone();
        vec![acp::SessionUpdate::AgentMessageChunk(chunk(text.to_string(), &id))]
    }

    pub(super) fn on_thinking(&mut self, text: &str) -> Vec<acp::SessionUpdate> {
        self.message_id = None;
        let id = self.thought_id.get_or_insert_with(new_id).clone();
        vec![acp::SessionUpdate::AgentThoughtChunk(chunk(text.to_string(), &id))]
    }
}
