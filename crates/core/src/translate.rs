//! Cursor stream → ACP `session/update`s (pure: protobuf in, ACP values out).
//!
//! Rules kept here: one `messageId` per contiguous text or thought segment (rotated at tool
//! calls, `thinking_completed` and step boundaries); `tool_call` is announced before any
//! `tool_call_update` of that id; every announced tool call is closed (`completed`/`failed`),
//! swept at turn end and on cancel; heartbeats and unknown branches produce nothing.

use std::collections::BTreeMap;

use agent_client_protocol_schema::v1 as acp;
use prost::Message as _;
use prost_reflect::{DynamicMessage, ReflectMessage, SerializeOptions};

use crate::proto::agent::v1 as pb;
use crate::protojson::pool;

/// Translation state for one session (message ids rotate across turns too).
#[derive(Debug, Default)]
pub struct Translator {
    message_id: Option<String>,
    thought_id: Option<String>,
    /// Announced tool calls not yet completed or failed.
    open: BTreeMap<String, ()>,
    last_usage: Option<(u64, u64)>,
}

fn new_id() -> String {
    uuid::Uuid::new_v4().to_string()
}

fn chunk(text: String, id: &str) -> acp::ContentChunk {
    acp::ContentChunk::new(acp::ContentBlock::Text(acp::TextContent::new(text))).message_id(acp::MessageId::new(id))
}

/// A tool call's wire branch, args and result, read through the descriptors.
struct ToolView {
    /// The Cursor tool key, e.g. `read`, `shell`, `mcp` (the branch name without `_tool_call`).
    name: String,
    args: serde_json::Value,
    result: Option<serde_json::Value>,
}

fn tool_view(call: &pb::ToolCall) -> Option<ToolView> {
    let desc = pool().get_message_by_name("agent.v1.ToolCall")?;
    let msg = DynamicMessage::decode(desc, call.encode_to_vec().as_slice()).ok()?;
    let (field, value) = msg.fields().next()?;
    let name = field.name().strip_suffix("_tool_call").unwrap_or(field.name()).to_string();
    let wrapper = value.as_message()?;
    let options = SerializeOptions::new().skip_default_fields(true);
    let json = |name: &str| {
        let f = wrapper.descriptor().get_field_by_name(name)?;
        if !wrapper.has_field(&f) {
            return None;
        }
        let v = wrapper.get_field(&f);
        v.as_message()?.serialize_with_options(serde_json::value::Serializer, &options).ok()
    };
    Some(ToolView { args: json("args").unwrap_or(serde_json::json!({})), result: json("result"), name })
}

fn tool_kind(name: &str) -> acp::ToolKind {
    match name {
        "read" | "read_lints" | "read_todos" | "read_mcp_resource" => acp::ToolKind::Read,
        "edit" | "apply_agent_diff" => acp::ToolKind::Edit,
        "delete" => acp::ToolKind::Delete,
        "grep" | "glob" | "ls" | "sem_search" | "list_mcp_resources" => acp::ToolKind::Search,
        "shell" | "write_shell_stdin" => acp::ToolKind::Execute,
        "web_search" | "web_fetch" | "fetch" => acp::ToolKind::Fetch,
        "switch_mode" => acp::ToolKind::SwitchMode,
        "create_plan" | "update_todos" | "reflect" | "task" => acp::ToolKind::Think,
        _ => acp::ToolKind::Other,
    }
}

fn str_arg<'a>(args: &'a serde_json::Value, keys: &[&str]) -> Option<&'a str> {
    keys.iter().find_map(|k| args.get(*k).and_then(|v| v.as_str())).filter(|s| !s.is_empty())
}

fn tool_title(view: &ToolView) -> String {
    let a = &view.args;
    let detail = match view.name.as_str() {
        "shell" => str_arg(a, &["command"]).map(str::to_string),
        "grep" | "glob" => str_arg(a, &["pattern", "globPattern"]).map(|p| format!("{} {p}", view.name)),
        "web_search" => str_arg(a, &["searchTerm"]).map(|t| format!("Search web: \"{t}\"")),
        "web_fetch" | "fetch" => str_arg(a, &["url"]).map(|u| format!("Fetch {u}")),
        "mcp" => str_arg(a, &["toolName", "name"]).map(|t| format!("MCP {t}")),
        _ => str_arg(a, &["path", "targetDirectory", "url"]).map(|p| format!("{} {p}", capitalize(&view.name))),
    };
    detail.unwrap_or_else(|| capitalize(&view.name.replace('_', " ")))
}

fn capitalize(s: &str) -> String {
    let mut c = s.chars();
    c.next().map(|f| f.to_uppercase().chain(c).collect()).unwrap_or_default()
}

fn locations(view: &ToolView) -> Vec<acp::ToolCallLocation> {
    str_arg(&view.args, &["path"])
        .filter(|p| p.starts_with('/') || p.chars().nth(1) == Some(':'))
        .map(|p| vec![acp::ToolCallLocation::new(p)])
        .unwrap_or_default()
}

fn succeeded(result: &serde_json::Value) -> bool {
    result.get("success").is_some()
}

impl Translator {
    pub fn new() -> Self {
        Self::default()
    }

    /// Ends the current text and thought segments: the next chunk gets a new `messageId`.
    pub fn rotate(&mut self) {
        self.message_id = None;
        self.thought_id = None;
    }

    /// Tool call ids announced and not yet finished.
    pub fn open_tool_calls(&self) -> impl Iterator<Item = &str> {
        self.open.keys().map(String::as_str)
    }

    pub fn on_update(&mut self, update: &pb::InteractionUpdate) -> Vec<acp::SessionUpdate> {
        use pb::interaction_update::Message as U;
        let Some(message) = &update.message else { return Vec::new() };
        match message {
            U::TextDelta(d) if !d.text.is_empty() => {
                self.thought_id = None;
                let id = self.message_id.get_or_insert_with(new_id).clone();
                vec![acp::SessionUpdate::AgentMessageChunk(chunk(d.text.clone(), &id))]
            }
            U::ThinkingDelta(d) if !d.text.is_empty() => {
                self.message_id = None;
                let id = self.thought_id.get_or_insert_with(new_id).clone();
                vec![acp::SessionUpdate::AgentThoughtChunk(chunk(d.text.clone(), &id))]
            }
            U::ThinkingCompleted(_) | U::StepStarted(_) | U::StepCompleted(_) => {
                self.rotate();
                Vec::new()
            }
            U::PartialToolCall(p) => self.announce(&p.call_id, p.tool_call.as_ref(), acp::ToolCallStatus::Pending),
            U::ToolCallStarted(s) => self.announce(&s.call_id, s.tool_call.as_ref(), acp::ToolCallStatus::InProgress),
            U::ToolCallCompleted(c) => self.complete(&c.call_id, c.tool_call.as_ref()),
            _ => Vec::new(),
        }
    }

    fn announce(
        &mut self,
        call_id: &str,
        call: Option<&pb::ToolCall>,
        status: acp::ToolCallStatus,
    ) -> Vec<acp::SessionUpdate> {
        self.rotate();
        let view = call.and_then(tool_view);
        if self.open.contains_key(call_id) {
            let mut fields = acp::ToolCallUpdateFields::new().status(status);
            if let Some(v) = &view {
                fields = fields.title(tool_title(v)).raw_input(v.args.clone());
            }
            return vec![acp::SessionUpdate::ToolCallUpdate(acp::ToolCallUpdate::new(call_id.to_string(), fields))];
        }
        self.open.insert(call_id.to_string(), ());
        let mut tc = acp::ToolCall::new(call_id.to_string(), "Tool call").status(status);
        if let Some(v) = &view {
            tc = acp::ToolCall::new(call_id.to_string(), tool_title(v))
                .name(v.name.clone())
                .kind(tool_kind(&v.name))
                .status(status)
                .locations(locations(v))
                .raw_input(v.args.clone());
        }
        vec![acp::SessionUpdate::ToolCall(tc)]
    }

    fn complete(&mut self, call_id: &str, call: Option<&pb::ToolCall>) -> Vec<acp::SessionUpdate> {
        self.rotate();
        let mut out = Vec::new();
        if !self.open.contains_key(call_id) {
            // Completed without an announcement: announce first so the update has a card.
            out.extend(self.announce(call_id, call, acp::ToolCallStatus::InProgress));
        }
        self.open.remove(call_id);
        let view = call.and_then(tool_view);
        let result = view.as_ref().and_then(|v| v.result.clone());
        let ok = result.as_ref().is_some_and(succeeded);
        let mut fields = acp::ToolCallUpdateFields::new().status(if ok {
            acp::ToolCallStatus::Completed
        } else {
            acp::ToolCallStatus::Failed
        });
        if let Some(r) = result {
            fields = fields.raw_output(r);
        }
        out.push(acp::SessionUpdate::ToolCallUpdate(acp::ToolCallUpdate::new(call_id.to_string(), fields)));
        out
    }

    /// `usage_update` from the checkpoint's token details, when they changed.
    pub fn on_checkpoint(&mut self, state: &pb::ConversationStateStructure) -> Vec<acp::SessionUpdate> {
        let Some(t) = &state.token_details else { return Vec::new() };
        if t.max_tokens == 0 {
            return Vec::new();
        }
        let usage = (t.used_tokens as u64, t.max_tokens as u64);
        if self.last_usage == Some(usage) {
            return Vec::new();
        }
        self.last_usage = Some(usage);
        vec![acp::SessionUpdate::UsageUpdate(acp::UsageUpdate::new(usage.0, usage.1))]
    }

    /// Closes every open tool call as failed (turn end, cancel, resume).
    pub fn sweep(&mut self, reason: &str) -> Vec<acp::SessionUpdate> {
        let open = std::mem::take(&mut self.open);
        open.into_keys()
            .map(|id| {
                let fields = acp::ToolCallUpdateFields::new().status(acp::ToolCallStatus::Failed).content(vec![
                    acp::ToolCallContent::Content(acp::Content::new(acp::ContentBlock::Text(acp::TextContent::new(
                        reason,
                    )))),
                ]);
                acp::SessionUpdate::ToolCallUpdate(acp::ToolCallUpdate::new(id, fields))
            })
            .collect()
    }
}
