//! Cursor stream → ACP `session/update`s (pure: protobuf in, ACP values out).
//!
//! Rules kept here (acp-mapping §4–§5): one `messageId` per contiguous text or thought segment
//! (rotated at tool calls, `thinking_completed` and step boundaries); `tool_call` is announced
//! before any `tool_call_update` of that id; every announced tool call is closed (`completed` or
//! `failed`), swept at turn end and on cancel; titles are plain text (commands verbatim,
//! workspace-relative paths), `locations` and diff paths absolute; todos become a full `plan`;
//! heartbeats, token deltas and unknown branches produce nothing.

use std::collections::BTreeMap;

use agent_client_protocol_schema::v1 as acp;
use prost::Message as _;
use prost_reflect::{DynamicMessage, ReflectMessage, SerializeOptions};
use serde_json::Value;

use crate::proto::agent::v1 as pb;
use crate::protojson::pool;

/// Text tool output shown in a card is capped (the full output stays in `rawOutput`).
const MAX_OUTPUT_CHARS: usize = 64 * 1024;

/// Translation state for one session (message ids and the plan carry across turns).
#[derive(Debug, Default)]
pub struct Translator {
    cwd: Option<String>,
    message_id: Option<String>,
    thought_id: Option<String>,
    /// Announced tool calls not yet completed or failed.
    open: BTreeMap<String, OpenCall>,
    /// The running shell card that `shell_output_delta` (not call-scoped) attaches to.
    current_shell: Option<String>,
    last_usage: Option<(u64, u64)>,
    todos: Vec<Todo>,
    last_plan: Option<Vec<(String, String)>>,
    mode: Option<i32>,
    compactions: u32,
    compaction: Option<String>,
    /// The client renders ACP compaction updates (`session.compaction` capability); otherwise
    /// summarization is shown as a `think` tool card.
    compaction_updates: bool,
    /// The client renders ACP `notice` updates (`session.notices`); otherwise server notices
    /// are a message of their own.
    notices: bool,
    /// The client renders Zed's display-only terminal (`_meta.terminal_output` capability):
    /// shell cards carry a terminal and stream through `_meta` instead of fenced text.
    terminal_output: bool,
}

#[derive(Debug, Default)]
struct OpenCall {
    name: String,
    /// Accumulated live output (shell deltas).
    output: String,
}

#[derive(Debug, Clone)]
struct Todo {
    id: String,
    content: String,
    status: String,
}

fn new_id() -> String {
    uuid::Uuid::new_v4().to_string()
}

fn text_block(text: impl Into<String>) -> acp::ContentBlock {
    acp::ContentBlock::Text(acp::TextContent::new(text.into()))
}

fn chunk(text: String, id: &str) -> acp::ContentChunk {
    acp::ContentChunk::new(text_block(text)).message_id(acp::MessageId::new(id))
}

fn text_content(text: impl Into<String>) -> acp::ToolCallContent {
    acp::ToolCallContent::Content(acp::Content::new(text_block(text)))
}

/// A tool call's wire branch, args and result, read through the descriptors as proto3 JSON.
struct ToolView {
    /// The Cursor tool key, e.g. `read`, `shell`, `mcp` (the branch name without `_tool_call`).
    name: String,
    args: Value,
    result: Option<Value>,
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
        "read" | "read_lints" | "read_mcp_resource" | "list_mcp_resources" => acp::ToolKind::Read,
        "edit" | "apply_agent_diff" => acp::ToolKind::Edit,
        "delete" => acp::ToolKind::Delete,
        "grep" | "glob" | "ls" | "sem_search" => acp::ToolKind::Search,
        "shell" | "write_shell_stdin" => acp::ToolKind::Execute,
        "web_search" | "web_fetch" | "fetch" => acp::ToolKind::Fetch,
        "switch_mode" => acp::ToolKind::SwitchMode,
        "create_plan" | "reflect" | "task" | "read_todos" => acp::ToolKind::Think,
        _ => acp::ToolKind::Other,
    }
}

fn str_arg<'a>(args: &'a Value, key: &str) -> Option<&'a str> {
    args.get(key).and_then(|v| v.as_str()).filter(|s| !s.is_empty())
}

fn num_arg(args: &Value, key: &str) -> Option<i64> {
    args.get(key).and_then(|v| v.as_i64().or_else(|| v.as_str().and_then(|s| s.parse().ok())))
}

fn humanize(name: &str) -> String {
    let spaced = name.replace('_', " ");
    let mut c = spaced.chars();
    c.next().map(|f| f.to_uppercase().chain(c).collect()).unwrap_or_default()
}

impl Translator {
    pub fn new() -> Self {
        Self::default()
    }

    /// Paths in titles are shown relative to `cwd`; relative paths in locations become absolute.
    pub fn with_cwd(cwd: Option<String>) -> Self {
        Translator { cwd: cwd.map(|c| c.trim_end_matches('/').to_string()), ..Self::default() }
    }

    fn relative(&self, path: &str) -> String {
        match &self.cwd {
            Some(cwd) if !cwd.is_empty() && path == cwd => ".".to_string(),
            Some(cwd) if !cwd.is_empty() => {
                path.strip_prefix(cwd.as_str()).and_then(|rest| rest.strip_prefix('/')).unwrap_or(path).to_string()
            }
            _ => path.to_string(),
        }
    }

    fn absolute(&self, path: &str) -> String {
        let is_abs = path.starts_with('/') || path.chars().nth(1) == Some(':');
        match &self.cwd {
            Some(cwd) if !is_abs && !cwd.is_empty() => format!("{cwd}/{path}"),
            _ => path.to_string(),
        }
    }

    fn location(&self, path: &str, line: Option<u32>) -> acp::ToolCallLocation {
        acp::ToolCallLocation::new(self.absolute(path)).line(line)
    }

    fn title(&self, view: &ToolView) -> String {
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
            _ => None,
        };
        title.unwrap_or_else(|| humanize(&view.name))
    }

    fn locations(&self, view: &ToolView) -> Vec<acp::ToolCallLocation> {
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
            _ => Vec::new(),
        }
    }

    /// Content shown while the call runs (the task prompt, the plan being proposed).
    fn starting_content(&self, view: &ToolView) -> Vec<acp::ToolCallContent> {
        match view.name.as_str() {
            "task" => str_arg(&view.args, "prompt").map(|p| vec![text_content(p)]).unwrap_or_default(),
            "create_plan" => str_arg(&view.args, "plan").map(|p| vec![text_content(p)]).unwrap_or_default(),
            _ => Vec::new(),
        }
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
        self.on_update_in(update, None)
    }

    fn on_update_in(&mut self, update: &pb::InteractionUpdate, parent: Option<&str>) -> Vec<acp::SessionUpdate> {
        use pb::interaction_update::Message as U;
        let Some(message) = &update.message else { return Vec::new() };
        match message {
            // Sub-agent text belongs to the sub-agent's card, not to the main transcript.
            U::TextDelta(_) | U::ThinkingDelta(_) if parent.is_some() => Vec::new(),
            // Operational notices (quota warnings, model substitution) are not model output.
            U::TextDelta(d) if d.is_server_notice && !d.text.is_empty() => {
                self.rotate();
                if self.notices {
                    return vec![acp::SessionUpdate::Notice(acp::Notice::new(
                        acp::NoticeSeverity::Info,
                        d.text.clone(),
                    ))];
                }
                let update = acp::SessionUpdate::AgentMessageChunk(chunk(d.text.clone(), &new_id()));
                vec![update]
            }
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
            U::Summary(s) => {
                let mut out = Vec::new();
                if self.compaction.is_none() {
                    out.extend(self.start_compaction());
                }
                let id = self.compaction.clone().unwrap_or_default();
                if self.compaction_updates {
                    out.push(acp::SessionUpdate::CompactionSummaryChunk(acp::CompactionSummaryChunk::new(
                        id,
                        text_block(s.summary.clone()),
                    )));
                } else {
                    let fields = acp::ToolCallUpdateFields::new().content(vec![text_content(s.summary.clone())]);
                    out.push(acp::SessionUpdate::ToolCallUpdate(acp::ToolCallUpdate::new(id, fields)));
                }
                out
            }
            U::SummaryCompleted(_) => match self.compaction.take() {
                Some(id) if self.compaction_updates => vec![acp::SessionUpdate::CompactionUpdate(
                    acp::CompactionUpdate::new(id, acp::CompactionStatus::Completed),
                )],
                Some(id) => {
                    self.open.remove(&id);
                    let fields = acp::ToolCallUpdateFields::new().status(acp::ToolCallStatus::Completed);
                    vec![acp::SessionUpdate::ToolCallUpdate(acp::ToolCallUpdate::new(id, fields))]
                }
                None => Vec::new(),
            },
            // Heartbeats, token deltas, echoes of the prompt, suggestions, feedback: nothing to show.
            _ => Vec::new(),
        }
    }

    /// Context summarization: a compaction update, or a `think` card for clients without it.
    fn start_compaction(&mut self) -> Vec<acp::SessionUpdate> {
        self.rotate();
        self.compactions += 1;
        let id = format!("compaction-{}-{}", self.compactions, &new_id()[..8]);
        self.compaction = Some(id.clone());
        if self.compaction_updates {
            return vec![acp::SessionUpdate::CompactionUpdate(acp::CompactionUpdate::new(
                id,
                acp::CompactionStatus::InProgress,
            ))];
        }
        self.open.insert(id.clone(), OpenCall { name: "summary".into(), output: String::new() });
        let call = acp::ToolCall::new(id, "Compacting conversation")
            .kind(acp::ToolKind::Think)
            .status(acp::ToolCallStatus::InProgress);
        vec![acp::SessionUpdate::ToolCall(call)]
    }

    fn on_tool_call_delta(&mut self, delta: &pb::ToolCallDeltaUpdate) -> Vec<acp::SessionUpdate> {
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

    fn on_shell_output(&mut self, event: &pb::ShellOutputDeltaUpdate) -> Vec<acp::SessionUpdate> {
        let Some(call_id) = self.current_shell.clone() else { return Vec::new() };
        match &event.event {
            Some(pb::shell_output_delta_update::Event::Stdout(o)) => self.append_output(&call_id, &o.data),
            Some(pb::shell_output_delta_update::Event::Stderr(e)) => self.append_output(&call_id, &e.data),
            _ => Vec::new(),
        }
    }

    /// Live output of a running call: the chunk through the display terminal, or the whole
    /// (capped) output so far as a code block.
    fn append_output(&mut self, call_id: &str, text: &str) -> Vec<acp::SessionUpdate> {
        let terminal = self.terminal_output;
        let Some(call) = self.open.get_mut(call_id) else { return Vec::new() };
        if text.is_empty() {
            return Vec::new();
        }
        call.output.push_str(text);
        if terminal && call.name == "shell" {
            let meta = terminal_meta("terminal_output", serde_json::json!({ "terminal_id": call_id, "data": text }));
            let update = acp::ToolCallUpdate::new(call_id.to_string(), acp::ToolCallUpdateFields::new()).meta(meta);
            return vec![acp::SessionUpdate::ToolCallUpdate(update)];
        }
        let fields = acp::ToolCallUpdateFields::new().content(vec![text_content(fenced(&call.output))]);
        vec![acp::SessionUpdate::ToolCallUpdate(acp::ToolCallUpdate::new(call_id.to_string(), fields))]
    }

    fn announce(
        &mut self,
        call_id: &str,
        call: Option<&pb::ToolCall>,
        status: acp::ToolCallStatus,
        parent: Option<&str>,
    ) -> Vec<acp::SessionUpdate> {
        self.rotate();
        let view = call.and_then(tool_view);
        match view.as_ref().filter(|v| v.name == "update_todos") {
            // Todos are shown as the plan, not as a card.
            Some(todos) => self.apply_todos(&todos.args),
            None => self.announce_view(call_id, view.as_ref(), status, parent),
        }
    }

    fn announce_view(
        &mut self,
        call_id: &str,
        view: Option<&ToolView>,
        status: acp::ToolCallStatus,
        parent: Option<&str>,
    ) -> Vec<acp::SessionUpdate> {
        if let Some(open) = self.open.get(call_id) {
            let mut fields = acp::ToolCallUpdateFields::new().status(status);
            if let Some(v) = view.filter(|v| v.name == open.name || open.name.is_empty()) {
                fields = fields.title(self.title(v)).raw_input(v.args.clone());
                let locations = self.locations(v);
                if !locations.is_empty() {
                    fields = fields.locations(locations);
                }
            }
            return vec![acp::SessionUpdate::ToolCallUpdate(acp::ToolCallUpdate::new(call_id.to_string(), fields))];
        }
        let name = view.map(|v| v.name.clone()).unwrap_or_default();
        if name == "shell" {
            self.current_shell = Some(call_id.to_string());
        }
        self.open.insert(call_id.to_string(), OpenCall { name, output: String::new() });
        let mut tc = acp::ToolCall::new(call_id.to_string(), "Tool call").status(status);
        if let Some(v) = view {
            tc = acp::ToolCall::new(call_id.to_string(), self.title(v))
                .name(v.name.clone())
                .kind(tool_kind(&v.name))
                .status(status)
                .locations(self.locations(v))
                .content(self.starting_content(v))
                .raw_input(v.args.clone());
        }
        let mut meta = acp::Meta::new();
        if let Some(parent) = parent {
            meta.insert("parentToolCallId".into(), Value::String(parent.to_string()));
        }
        if let Some(v) = view.filter(|v| self.terminal_output && v.name == "shell") {
            let cwd = str_arg(&v.args, "workingDirectory").map(|d| self.absolute(d)).or_else(|| self.cwd.clone());
            tc = tc.content(vec![acp::ToolCallContent::Terminal(acp::Terminal::new(call_id.to_string()))]);
            meta.insert("terminal_info".into(), serde_json::json!({ "terminal_id": call_id, "cwd": cwd }));
        }
        if !meta.is_empty() {
            tc = tc.meta(meta);
        }
        vec![acp::SessionUpdate::ToolCall(tc)]
    }

    fn complete(
        &mut self,
        call_id: &str,
        call: Option<&pb::ToolCall>,
        parent: Option<&str>,
    ) -> Vec<acp::SessionUpdate> {
        self.rotate();
        let view = call.and_then(tool_view);
        if let Some(todos) = view.as_ref().filter(|v| v.name == "update_todos") {
            return self.apply_todos(&todos.args);
        }
        let mut out = Vec::new();
        if !self.open.contains_key(call_id) {
            // Completed without an announcement: announce first so the update has a card.
            out.extend(self.announce_view(call_id, view.as_ref(), acp::ToolCallStatus::InProgress, parent));
        }
        let open = self.open.remove(call_id).unwrap_or_default();
        if self.current_shell.as_deref() == Some(call_id) {
            self.current_shell = None;
        }
        let mut fields = acp::ToolCallUpdateFields::new();
        match view.as_ref().and_then(|v| v.result.as_ref().map(|r| (v, r))) {
            Some((v, result)) => {
                let (ok, content) = self.outcome(v, result, &open.output);
                fields = fields
                    .status(if ok { acp::ToolCallStatus::Completed } else { acp::ToolCallStatus::Failed })
                    .raw_output(result.clone());
                if self.terminal_output && v.name == "shell" {
                    // The terminal keeps its content; the exit goes through `_meta`.
                    let body = result.as_object().and_then(|o| o.values().next());
                    let exit = body.and_then(|b| b.get("exitCode")).and_then(|c| c.as_i64()).unwrap_or(0);
                    let signal = body.and_then(|b| str_arg(b, "signal")).map(str::to_string);
                    let meta = terminal_meta(
                        "terminal_exit",
                        serde_json::json!({ "terminal_id": call_id, "exit_code": exit, "signal": signal }),
                    );
                    let update = acp::ToolCallUpdate::new(call_id.to_string(), fields).meta(meta);
                    out.push(acp::SessionUpdate::ToolCallUpdate(update));
                    return out;
                }
                if !content.is_empty() {
                    fields = fields.content(content);
                }
                if v.name == "switch_mode" && ok {
                    if let Some(mode) = str_arg(&v.args, "targetModeId") {
                        out.push(acp::SessionUpdate::ToolCallUpdate(acp::ToolCallUpdate::new(
                            call_id.to_string(),
                            fields,
                        )));
                        out.push(acp::SessionUpdate::CurrentModeUpdate(acp::CurrentModeUpdate::new(mode.to_string())));
                        return out;
                    }
                }
            }
            // No result on the wire: the server resolved it; nothing says it failed.
            None => fields = fields.status(acp::ToolCallStatus::Completed),
        }
        out.push(acp::SessionUpdate::ToolCallUpdate(acp::ToolCallUpdate::new(call_id.to_string(), fields)));
        if let Some(v) = &view {
            if v.name == "create_plan" {
                out.extend(self.apply_todos(&v.args));
            }
        }
        out
    }

    /// Success and the card content for a finished call.
    fn outcome(&self, view: &ToolView, result: &Value, live_output: &str) -> (bool, Vec<acp::ToolCallContent>) {
        let (branch, body) = match result.as_object().and_then(|o| o.iter().next()) {
            Some((k, v)) => (k.as_str(), v),
            None => return (true, Vec::new()),
        };
        let a = &view.args;
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

    /// Applies an `UpdateTodosArgs` / `CreatePlanArgs` todo list and emits the full `plan` when
    /// it changed.
    fn apply_todos(&mut self, args: &Value) -> Vec<acp::SessionUpdate> {
        let incoming: Vec<Todo> = args
            .get("todos")
            .and_then(|t| t.as_array())
            .map(|items| {
                items
                    .iter()
                    .map(|t| Todo {
                        id: str_arg(t, "id").unwrap_or_default().to_string(),
                        content: str_arg(t, "content").unwrap_or_default().to_string(),
                        status: t.get("status").and_then(|s| s.as_str()).unwrap_or("TODO_STATUS_PENDING").to_string(),
                    })
                    .collect()
            })
            .unwrap_or_default();
        if args.get("merge").and_then(|m| m.as_bool()).unwrap_or(false) {
            for todo in incoming {
                match self.todos.iter_mut().find(|t| !todo.id.is_empty() && t.id == todo.id) {
                    Some(existing) => {
                        if !todo.content.is_empty() {
                            existing.content = todo.content;
                        }
                        existing.status = todo.status;
                    }
                    None => self.todos.push(todo),
                }
            }
        } else {
            self.todos = incoming;
        }
        self.emit_plan()
    }

    fn emit_plan(&mut self) -> Vec<acp::SessionUpdate> {
        // v1 plans have no "cancelled": cancelled items leave the plan.
        let entries: Vec<(String, String)> = self
            .todos
            .iter()
            .filter(|t| t.status != "TODO_STATUS_CANCELLED")
            .map(|t| (t.content.clone(), t.status.clone()))
            .collect();
        // Unchanged, or still empty: nothing to show.
        if self.last_plan.as_ref() == Some(&entries) || (self.last_plan.is_none() && entries.is_empty()) {
            return Vec::new();
        }
        self.last_plan = Some(entries.clone());
        let plan = acp::Plan::new(
            entries
                .into_iter()
                .map(|(content, status)| {
                    let status = match status.as_str() {
                        "TODO_STATUS_IN_PROGRESS" => acp::PlanEntryStatus::InProgress,
                        "TODO_STATUS_COMPLETED" => acp::PlanEntryStatus::Completed,
                        _ => acp::PlanEntryStatus::Pending,
                    };
                    acp::PlanEntry::new(content, acp::PlanEntryPriority::Medium, status)
                })
                .collect(),
        );
        vec![acp::SessionUpdate::Plan(plan)]
    }

    /// Checkpoint-driven updates: context usage, the todo plan, the mode.
    pub fn on_checkpoint(&mut self, state: &pb::ConversationStateStructure) -> Vec<acp::SessionUpdate> {
        let mut out = Vec::new();
        if let Some(t) = &state.token_details {
            let usage = (t.used_tokens as u64, t.max_tokens as u64);
            if t.max_tokens != 0 && self.last_usage != Some(usage) {
                self.last_usage = Some(usage);
                out.push(acp::SessionUpdate::UsageUpdate(acp::UsageUpdate::new(usage.0, usage.1)));
            }
        }
        // Todo entries are serialized TodoItems (entries that are blob ids do not decode).
        let todos: Vec<pb::TodoItem> =
            state.todos.iter().filter_map(|b| pb::TodoItem::decode(b.clone()).ok()).collect();
        if !todos.is_empty() {
            self.todos = todos
                .into_iter()
                .filter(|t| !t.content.is_empty())
                .map(|t| Todo {
                    id: t.id,
                    content: t.content,
                    status: pb::TodoStatus::try_from(t.status)
                        .map(|s| s.as_str_name().to_string())
                        .unwrap_or_else(|_| "TODO_STATUS_PENDING".into()),
                })
                .collect();
            out.extend(self.emit_plan());
        }
        if let Some(mode) = state.mode {
            if self.mode.is_some() && self.mode != Some(mode) {
                if let Some(id) = mode_id(mode) {
                    out.push(acp::SessionUpdate::CurrentModeUpdate(acp::CurrentModeUpdate::new(id)));
                }
            }
            self.mode = Some(mode);
        }
        out
    }

    /// Remembers the mode the session runs in, so only real changes are reported.
    pub fn set_mode(&mut self, mode: Option<i32>) {
        self.mode = mode;
    }

    /// Closes every open tool call as failed (turn end, cancel, resume).
    pub fn sweep(&mut self, reason: &str) -> Vec<acp::SessionUpdate> {
        let open = std::mem::take(&mut self.open);
        self.current_shell = None;
        let mut out = Vec::new();
        if let Some(id) = self.compaction.take().filter(|_| self.compaction_updates) {
            out.push(acp::SessionUpdate::CompactionUpdate(
                acp::CompactionUpdate::new(id, acp::CompactionStatus::Failed).error(reason.to_string()),
            ));
        }
        out.extend(open.into_keys().map(|id| {
            let fields = acp::ToolCallUpdateFields::new()
                .status(acp::ToolCallStatus::Failed)
                .content(vec![text_content(reason)]);
            acp::SessionUpdate::ToolCallUpdate(acp::ToolCallUpdate::new(id, fields))
        }));
        out
    }

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

/// An update as ACP JSON. New files are shown as diffs with an explicit `oldText: null`
/// (the schema crate omits `None`; editors key "new file" rendering on the null).
pub fn to_json(update: &acp::SessionUpdate) -> Value {
    let mut value = serde_json::to_value(update).unwrap_or(Value::Null);
    if let Some(content) = value.get_mut("content").and_then(|c| c.as_array_mut()) {
        for item in content {
            if item.get("type").and_then(|t| t.as_str()) == Some("diff") && item.get("oldText").is_none() {
                item["oldText"] = Value::Null;
            }
        }
    }
    value
}

fn terminal_meta(key: &str, value: Value) -> acp::Meta {
    let mut meta = acp::Meta::new();
    meta.insert(key.into(), value);
    meta
}

/// `AgentMode` value → ACP mode id (`agent`, `ask`, `plan`, …).
pub fn mode_id(mode: i32) -> Option<String> {
    pb::AgentMode::try_from(mode)
        .ok()
        .filter(|m| *m != pb::AgentMode::Unspecified)
        .map(|m| m.as_str_name().trim_start_matches("AGENT_MODE_").to_ascii_lowercase())
}

fn camel_to_snake(s: &str) -> String {
    let mut out = String::new();
    for c in s.chars() {
        if c.is_ascii_uppercase() {
            out.push('_');
            out.push(c.to_ascii_lowercase());
        } else {
            out.push(c);
        }
    }
    out
}

/// Output in a code block, keeping the tail when it is too long.
fn fenced(output: &str) -> String {
    let trimmed = if output.len() > MAX_OUTPUT_CHARS {
        let mut start = output.len() - MAX_OUTPUT_CHARS;
        while !output.is_char_boundary(start) {
            start += 1;
        }
        format!("…\n{}", &output[start..])
    } else {
        output.to_string()
    };
    let fence = if trimmed.contains("```") { "````" } else { "```" };
    format!("{fence}\n{}\n{fence}", trimmed.trim_end_matches('\n'))
}
