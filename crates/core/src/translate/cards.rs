//! What a tool call's card shows: its wire branch read as proto3 JSON ([`ToolView`]), and
//! from it the title, kind, locations, starting content and outcome.

use agent_client_protocol_schema::v1 as acp;
use prost::Message as _;
use prost_reflect::{DynamicMessage, ReflectMessage, SerializeOptions};
use serde_json::Value;

use super::content::{camel_to_snake, fenced, humanize, num_arg, str_arg, text_content};
use super::newer_cards;
use super::translator::Translator;
use crate::proto::agent::v1 as pb;
use crate::protojson::pool;

/// A tool call's wire branch, args and result, read through the descriptors as proto3 JSON.
pub(super) struct ToolView {
    /// The Cursor tool key, e.g. `read`, `shell`, `mcp` (the branch name without `_tool_call`).
    pub(super) name: String,
    pub(super) args: Value,
    pub(super) result: Option<Value>,
}

pub(super) fn tool_view(call: &pb::ToolCall) -> Option<ToolView> {
    let desc = pool().get_message_by_name("agent.v1.ToolCall")?;
    let msg = DynamicMessage::decode(desc.clone(), call.encode_to_vec().as_slice()).ok()?;
    // The tool is the member of the `tool` oneof; the call's other fields (its id, times, hook
    // contexts) are not it.
    let field = desc.oneofs().find(|o| o.name() == "tool")?.fields().find(|f| msg.has_field(f))?;
    let value = msg.get_field(&field);
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

pub(super) fn tool_kind(name: &str) -> acp::ToolKind {
    match name {
        "read" | "read_lints" | "read_mcp_resource" | "list_mcp_resources" => acp::ToolKind::Read,
        "edit" | "apply_agent_diff" => acp::ToolKind::Edit,
        "delete" => acp::ToolKind::Delete,
        "grep" | "glob" | "ls" | "sem_search" => acp::ToolKind::Search,
        "shell" | "write_shell_stdin" => acp::ToolKind::Execute,
        "web_search" | "web_fetch" | "fetch" => acp::ToolKind::Fetch,
        "switch_mode" => acp::ToolKind::SwitchMode,
        "create_plan" | "reflect" | "task" | "read_todos" => acp::ToolKind::Think,
        newer => newer_cards::newer_kind(newer).unwrap_or(acp::ToolKind::Other),
    }
}

impl Translator {
    pub(super) fn title(&self, view: &ToolView) -> String {
        let a = &view.args;
        let rel = |key: &str| str_arg(a, key).map(|p| self.relative(p));
        let title = match view.name.as_str() {
            "shell" => str_arg(a, "command").map(str::to_string),
            "write_shell_stdin" => Some(format!("Write to shell {}", num_arg(a, "shellId").unwrap_or_default())),
            "read" => rel("path").map(|p| match (num_arg(a, "offset"), num_arg(a, "limit")) {
                (Some(o), Some(l)) if l > 0 => format!("Read {p} (L{}–L{})", o.max(1), o.max(1) + l - 1),
                (Some(o), None) => format!("Read {p} (from L{})", o.max(1)),
                _ => format!("Read {p}"),
            }),
            "edit" => rel("path").map(|p| format!("Edit {p}")),
            "delete" => rel("path").map(|p| format!("Delete {p}")),
            "grep" => str_arg(a, "pattern").map(|pat| {
                let mut t = format!("grep \"{pat}\"");
                if let Some(p) = rel("path") {
                    t.push(' ');
                    t.push_str(&p);
                }
                if let Some(g) = str_arg(a, "glob") {
                    t.push_str(&format!(" --include {g}"));
                }
                t
            }),
            "glob" => str_arg(a, "globPattern").map(|g| match rel("targetDirectory") {
                Some(d) => format!("Find {g} in {d}"),
                None => format!("Find {g}"),
            }),
            "ls" => Some(format!("List {}", rel("path").unwrap_or_else(|| ".".into()))),
            "sem_search" => Some("Search codebase".into()),
            "read_lints" => {
                let paths: Vec<String> = a
                    .get("paths")
                    .and_then(|p| p.as_array())
                    .map(|ps| ps.iter().filter_map(|p| p.as_str()).map(|p| self.relative(p)).collect())
                    .unwrap_or_default();
                Some(if paths.is_empty() { "Read lints".into() } else { format!("Read lints {}", paths.join(", ")) })
            }
            "mcp" => {
                let tool = str_arg(a, "toolName").or_else(|| str_arg(a, "name")).unwrap_or("tool");
                Some(match str_arg(a, "providerIdentifier") {
                    Some(server) => format!("{server}: {tool}"),
                    None => tool.to_string(),
                })
            }
            "list_mcp_resources" => Some("List MCP resources".into()),
            "read_mcp_resource" => str_arg(a, "uri").map(|u| format!("Read {u}")),
            "web_search" => str_arg(a, "searchTerm").map(|t| format!("Search web: \"{t}\"")),
            "web_fetch" | "fetch" => str_arg(a, "url").map(|u| format!("Fetch {u}")),
            "task" => str_arg(a, "description").map(str::to_string),
            "ask_question" => str_arg(a, "title").map(str::to_string).or(Some("Ask question".into())),
            "create_plan" => Some(format!("Plan: {}", str_arg(a, "name").unwrap_or("untitled"))),
            "switch_mode" => str_arg(a, "targetModeId").map(|m| format!("Switch to {m} mode")),
            "generate_image" => Some("Generate image".into()),
            "read_todos" => Some("Read TODOs".into()),
            "apply_agent_diff" => Some("Apply diff".into()),
            "truncated" => Some("Truncated tool call".into()),
            _ => self.newer_title(view),
        };
        title.unwrap_or_else(|| humanize(&view.name))
    }

    pub(super) fn locations(&self, view: &ToolView) -> Vec<acp::ToolCallLocation> {
        let a = &view.args;
        match view.name.as_str() {
            "read" => str_arg(a, "path")
                .map(|p| vec![self.location(p, num_arg(a, "offset").map(|o| o.max(1) as u32))])
                .unwrap_or_default(),
            "edit" | "delete" | "ls" => str_arg(a, "path").map(|p| vec![self.location(p, None)]).unwrap_or_default(),
            "read_lints" => a
                .get("paths")
                .and_then(|p| p.as_array())
                .map(|ps| ps.iter().filter_map(|p| p.as_str()).map(|p| self.location(p, None)).collect())
                .unwrap_or_default(),
            _ => self.newer_locations(view),
        }
    }

    /// Content shown while the call runs (the task prompt, the plan being proposed).
    pub(super) fn starting_content(&self, view: &ToolView) -> Vec<acp::ToolCallContent> {
        match view.name.as_str() {
            "task" => str_arg(&view.args, "prompt").map(|p| vec![text_content(p)]).unwrap_or_default(),
            "create_plan" => str_arg(&view.args, "plan").map(|p| vec![text_content(p)]).unwrap_or_default(),
            _ => self.newer_starting_content(view),
        }
    }

    /// Success and the card content for a finished call.
    pub(super) fn outcome(
        &self,
        view: &ToolView,
        result: &Value,
        live_output: &str,
    ) -> (bool, Vec<acp::ToolCallContent>) {
        let (branch, body) = match result.as_object().and_then(|o| o.iter().next()) {
            Some((k, v)) => (k.as_str(), v),
            None => return (true, Vec::new()),
        };
        let a = &view.args;
        if newer_cards::describes(&view.name) {
            return self.newer_outcome(view, branch, body);
        }
        match (view.name.as_str(), branch) {
            ("shell", "success" | "failure" | "timeout") => {
                let exit = body.get("exitCode").and_then(|c| c.as_i64()).unwrap_or(0);
                let mut output = String::new();
                for key in ["stdout", "stderr"] {
                    if let Some(s) = body.get(key).and_then(|s| s.as_str()) {
                        output.push_str(s);
                    }
                }
                if output.is_empty() {
                    output = live_output.to_string();
                }
                let ok = branch == "success" && exit == 0;
                let mut content = Vec::new();
                if !output.is_empty() {
                    content.push(text_content(fenced(&output)));
                }
                if !ok {
                    let why = match branch {
                        "timeout" => "Timed out".to_string(),
                        _ => format!("Exited with code {exit}"),
                    };
                    content.push(text_content(why));
                }
                (ok, content)
            }
            ("edit", "success") => {
                let path = str_arg(body, "path").or_else(|| str_arg(a, "path")).unwrap_or_default();
                let new_text = str_arg(body, "afterFullFileContent").unwrap_or_default();
                let diff = acp::Diff::new(self.absolute(path), new_text)
                    .old_text(str_arg(body, "beforeFullFileContent").map(str::to_string));
                (true, vec![acp::ToolCallContent::Diff(diff)])
            }
            ("delete", "success") => {
                let path = str_arg(body, "path").or_else(|| str_arg(a, "path")).unwrap_or_default();
                let old = body.get("prevContent").and_then(|s| s.as_str()).unwrap_or_default();
                (
                    true,
                    vec![acp::ToolCallContent::Diff(acp::Diff::new(self.absolute(path), "").old_text(old.to_string()))],
                )
            }
            ("glob", "success") => {
                let n = num_arg(body, "totalFiles").unwrap_or_else(|| {
                    body.get("files").and_then(|f| f.as_array()).map(|f| f.len() as i64).unwrap_or(0)
                });
                (true, vec![text_content(format!("{n} file{}", if n == 1 { "" } else { "s" }))])
            }
            ("mcp", "success") => {
                let failed = body.get("isError").and_then(|e| e.as_bool()).unwrap_or(false);
                let content = body
                    .get("content")
                    .and_then(|c| c.as_array())
                    .map(|items| {
                        items
                            .iter()
                            .filter_map(|i| i.get("text").and_then(|t| t.get("text")).and_then(|t| t.as_str()))
                            .map(text_content)
                            .collect()
                    })
                    .unwrap_or_default();
                (!failed, content)
            }
            ("create_plan", "success") => (true, Vec::new()),
            (_, "success") => (true, Vec::new()),
            // Asynchronous answers are still pending, not failed.
            ("ask_question", "async") => (true, Vec::new()),
            (_, other) => {
                let why = ["error", "reason", "errorMessage", "message"]
                    .iter()
                    .find_map(|k| str_arg(body, k))
                    .map(str::to_string)
                    .unwrap_or_else(|| humanize(&camel_to_snake(other)));
                (false, vec![text_content(why)])
            }
        }
    }
}
