//! One source for tool cards: what an ACP `tool_call` shows — title, kind, locations, content,
//! the Cursor tool key — for a Cursor tool call (the translation), an exec request or an
//! interaction query (the host that answers them: the stdio agent, through the binding's
//! `describeExec` / `describeInteraction`), and what it ends with once the call is over
//! (status, content, a small `rawOutput`).
//!
//! Everything here is pure: proto3 JSON in, ACP values out, paths made relative (titles) or
//! absolute (locations, diffs) against the session's folder. To add a tool: an arm in
//! `tools.rs` (title, kind, locations), and, when its result deserves more than a status, an
//! arm in `outcomes.rs`; an exec kind or interaction query maps onto a tool in `exec.rs` /
//! `interaction.rs`. The tool types the 2026 schema adds have theirs in `pi_and_agent.rs`.

mod exec;
mod interaction;
mod outcomes;
mod paths;
mod pi_and_agent;
mod raw;
mod render;
mod titles;
mod tools;

use agent_client_protocol_schema::v1 as acp;
use serde_json::Value;

pub use exec::{exec_card, exec_outcome};
pub use interaction::interaction_card;
pub use outcomes::tool_outcome;
pub use paths::Paths;
pub use raw::compact;
pub use tools::{tool_card, tool_kind};

pub(crate) use render::{fenced, str_arg, text_content, MAX_OUTPUT_CHARS};

/// Where Zed reads a tool's name (`_meta.tool_name`); ACP's own `name` carries it too.
pub const TOOL_NAME_META: &str = "tool_name";

/// What a card shows while its call runs.
#[derive(Debug, Clone, PartialEq)]
pub struct Card {
    /// The Cursor tool key (`read`, `shell`, `mcp`, …): ACP's `name` and `_meta.tool_name`.
    pub name: String,
    /// Plain text: the command as it is, workspace-relative paths.
    pub title: String,
    pub kind: acp::ToolKind,
    /// Absolute paths, with the first line read where there is one.
    pub locations: Vec<acp::ToolCallLocation>,
    /// Shown while the call runs: a diff to approve, the plan proposed, a sub-agent's prompt.
    pub content: Vec<acp::ToolCallContent>,
    pub raw_input: Value,
}

impl Card {
    /// The ACP `tool_call` announcing this card.
    pub fn tool_call(&self, id: impl Into<acp::ToolCallId>, status: acp::ToolCallStatus) -> acp::ToolCall {
        let mut meta = acp::Meta::new();
        meta.insert(TOOL_NAME_META.into(), Value::String(self.name.clone()));
        acp::ToolCall::new(id, self.title.clone())
            .name(self.name.clone())
            .kind(self.kind)
            .status(status)
            .locations(self.locations.clone())
            .content(self.content.clone())
            .raw_input(self.raw_input.clone())
            .meta(meta)
    }

    /// The card as ACP JSON without an id or a status (what a permission request's `toolCall`
    /// and a `tool_call` share).
    pub fn to_json(&self) -> Value {
        let mut value = acp_json(&self.tool_call("", acp::ToolCallStatus::Pending));
        if let Some(fields) = value.as_object_mut() {
            fields.remove("toolCallId");
            fields.remove("status");
        }
        value
    }
}

/// What a card ends with.
#[derive(Debug, Clone, PartialEq)]
pub struct Outcome {
    /// `Completed` or `Failed`.
    pub status: acp::ToolCallStatus,
    /// Replaces what the card shows; empty leaves it as it is (a diff, a terminal).
    pub content: Vec<acp::ToolCallContent>,
    /// Replaces the card's locations when not empty (a read's range, the files grep matched).
    pub locations: Vec<acp::ToolCallLocation>,
    /// The result, [`compact`]ed: structure and small values, never a whole file.
    pub raw_output: Value,
}

impl Outcome {
    pub(crate) fn new(ok: bool, content: Vec<acp::ToolCallContent>, result: &Value) -> Self {
        Outcome {
            status: if ok { acp::ToolCallStatus::Completed } else { acp::ToolCallStatus::Failed },
            content,
            locations: Vec::new(),
            raw_output: compact(result),
        }
    }

    pub fn ok(&self) -> bool {
        self.status == acp::ToolCallStatus::Completed
    }

    /// The `tool_call_update` fields that settle a card.
    pub fn fields(&self) -> acp::ToolCallUpdateFields {
        let mut fields = acp::ToolCallUpdateFields::new().status(self.status).raw_output(self.raw_output.clone());
        if !self.content.is_empty() {
            fields = fields.content(self.content.clone());
        }
        if !self.locations.is_empty() {
            fields = fields.locations(self.locations.clone());
        }
        fields
    }

    /// The settling fields as ACP JSON (a `tool_call_update` without its id).
    pub fn to_json(&self) -> Value {
        let mut value = acp_json(&acp::ToolCallUpdate::new("", self.fields()));
        if let Some(fields) = value.as_object_mut() {
            fields.remove("toolCallId");
        }
        value
    }
}

/// ACP JSON of a value, with new files' diffs carrying an explicit `oldText: null` (the schema
/// crate omits `None`; editors key "new file" rendering on the null).
pub fn acp_json(value: &impl serde::Serialize) -> Value {
    let mut value = serde_json::to_value(value).unwrap_or(Value::Null);
    if let Some(content) = value.get_mut("content").and_then(|c| c.as_array_mut()) {
        for item in content {
            if item.get("type").and_then(|t| t.as_str()) == Some("diff") && item.get("oldText").is_none() {
                item["oldText"] = Value::Null;
            }
        }
    }
    value
}

/// Writes `update` to `out` as the JSON of [`acp_json`]. A chunk (text, thought, a user's words:
/// nearly all of a turn) holds one content block and never a list of diffs, so it is written
/// straight from its value, with no JSON tree between; every other update goes through
/// [`acp_json`].
pub fn write_acp_json(out: &mut Vec<u8>, update: &acp::SessionUpdate) -> serde_json::Result<()> {
    match update {
        acp::SessionUpdate::AgentMessageChunk(_)
        | acp::SessionUpdate::AgentThoughtChunk(_)
        | acp::SessionUpdate::UserMessageChunk(_) => serde_json::to_writer(out, update),
        _ => serde_json::to_writer(out, &acp_json(update)),
    }
}
