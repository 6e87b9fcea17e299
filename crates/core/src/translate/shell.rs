//! Live output of running calls: shell deltas as fenced text or through Zed's display-only
//! terminal (`_meta.terminal_output`), and sub-agent updates inside their task's card.

use agent_client_protocol_schema::v1 as acp;

use super::content::{fenced, terminal_meta, text_content};
use super::translator::{Translator, TurnState};
use crate::proto::agent::v1 as pb;

impl Translator {
    pub(super) fn on_tool_call_delta(&mut self, delta: &pb::ToolCallDeltaUpdate) -> Vec<acp::SessionUpdate> {
        use pb::tool_call_delta::Delta;
        let Some(Delta::ShellToolCallDelta(shell)) = delta.tool_call_delta.as_ref().and_then(|d| d.delta.as_ref())
        else {
            if let Some(Delta::TaskToolCallDelta(task)) = delta.tool_call_delta.as_ref().and_then(|d| d.delta.as_ref())
            {
                if let Some(inner) = &task.interaction_update {
                    return self.on_update_in(inner, Some(&delta.call_id));
                }
            }
            // Edit previews and environment replacement: shown when the call completes.
            return Vec::new();
        };
        let text = match &shell.delta {
            Some(pb::shell_tool_call_delta::Delta::Stdout(o)) => o.content.clone(),
            Some(pb::shell_tool_call_delta::Delta::Stderr(e)) => e.content.clone(),
            None => return Vec::new(),
        };
        self.append_output(&delta.call_id, &text)
    }

    pub(super) fn on_shell_output(&mut self, event: &pb::ShellOutputDeltaUpdate) -> Vec<acp::SessionUpdate> {
        let Some(call_id) = self.current_shell.clone() else { return Vec::new() };
        match &event.event {
            Some(pb::shell_output_delta_update::Event::Stdout(o)) => self.append_output(&call_id, &o.data),
            Some(pb::shell_output_delta_update::Event::Stderr(e)) => self.append_output(&call_id, &e.data),
            _ => Vec::new(),
        }
    }

    /// Output the server relays for a running call, unless this client shows it itself.
    fn append_output(&mut self, call_id: &str, text: &str) -> Vec<acp::SessionUpdate> {
        if self.open.get(call_id).is_some_and(|call| call.local) {
            return Vec::new();
        }
        self.show_output(call_id, text)
    }

    /// Output of a call this client runs (a built-in shell), as it comes: shown as the
    /// server's shell deltas are, which are then not shown again for that call (the server
    /// relays the same output). A card the host opened itself gets it as fenced text.
    pub fn local_output(&mut self, call_id: &str, text: &str) -> Vec<acp::SessionUpdate> {
        if self.turn == TurnState::Cancelled || text.is_empty() {
            return Vec::new();
        }
        if let Some(call) = self.open.get_mut(call_id) {
            call.local = true;
            return self.show_output(call_id, text);
        }
        let output = self.host_card_output.entry(call_id.to_string()).or_default();
        push_tail(output, text);
        let fields = acp::ToolCallUpdateFields::new().content(vec![text_content(fenced(output))]);
        vec![acp::SessionUpdate::ToolCallUpdate(acp::ToolCallUpdate::new(call_id.to_string(), fields))]
    }

    /// Live output of a running call: the chunk through the display terminal, or the whole
    /// (capped) output so far as a code block.
    fn show_output(&mut self, call_id: &str, text: &str) -> Vec<acp::SessionUpdate> {
        let terminal = self.terminal_output;
        let Some(call) = self.open.get_mut(call_id) else { return Vec::new() };
        if text.is_empty() {
            return Vec::new();
        }
        push_tail(&mut call.output, text);
        if terminal && call.name == "shell" {
            let meta = terminal_meta("terminal_output", serde_json::json!({ "terminal_id": call_id, "data": text }));
            let update = acp::ToolCallUpdate::new(call_id.to_string(), acp::ToolCallUpdateFields::new()).meta(meta);
            return vec![acp::SessionUpdate::ToolCallUpdate(update)];
        }
        let fields = acp::ToolCallUpdateFields::new().content(vec![text_content(fenced(&call.output))]);
        vec![acp::SessionUpdate::ToolCallUpdate(acp::ToolCallUpdate::new(call_id.to_string(), fields))]
    }
}

/// Live output kept for a card: what `fenced` shows is its tail, so more than twice that is
/// never kept (a command printing for an hour holds the same memory as one printing a page).
fn push_tail(output: &mut String, text: &str) {
    output.push_str(text);
    let keep = 2 * crate::cards::MAX_OUTPUT_CHARS;
    if output.len() > 2 * keep {
        let mut start = output.len() - keep;
        while !output.is_char_boundary(start) {
            start += 1;
        }
        output.drain(..start);
    }
}
