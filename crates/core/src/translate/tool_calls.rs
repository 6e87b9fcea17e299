//! The life of a tool call's card: announced once (`tool_call`), updated, and always closed
//! (`completed` or `failed`), by its completion or by the sweep at turn end, cancel and resume.

use agent_client_protocol_schema::v1 as acp;
use serde_json::Value;

use super::cards::{tool_view, ToolView};
use super::content::{str_arg, terminal_meta, text_content};
use super::translator::{OpenCall, Translator};
use crate::proto::agent::v1 as pb;

impl Translator {
    /// Tool call ids announced and not yet finished.
    pub fn open_tool_calls(&self) -> impl Iterator<Item = &str> {
        self.open.keys().map(String::as_str)
    }

    pub(super) fn announce(
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
                let card = self.card(v);
                fields = fields.title(card.title).raw_input(card.raw_input);
                if !card.locations.is_empty() {
                    fields = fields.locations(card.locations);
                }
            }
            return vec![acp::SessionUpdate::ToolCallUpdate(acp::ToolCallUpdate::new(call_id.to_string(), fields))];
        }
        let name = view.map(|v| v.name.clone()).unwrap_or_default();
        if name == "shell" {
            self.current_shell = Some(call_id.to_string());
        }
        self.open.insert(call_id.to_string(), OpenCall::new(name));
        let mut tc = acp::ToolCall::new(call_id.to_string(), "Tool call").status(status);
        if let Some(v) = view {
            tc = self.card(v).tool_call(call_id.to_string(), status);
        }
        let mut meta = tc.meta.take().unwrap_or_default();
        if let Some(parent) = parent {
            meta.insert("parentToolCallId".into(), Value::String(parent.to_string()));
        }
        if let Some(v) = view.filter(|v| self.terminal_output && v.name == "shell") {
            let cwd = str_arg(&v.args, "workingDirectory")
                .map(|d| self.paths.absolute(d))
                .or_else(|| self.paths.cwd().map(str::to_string));
            tc = tc.content(vec![acp::ToolCallContent::Terminal(acp::Terminal::new(call_id.to_string()))]);
            meta.insert("terminal_info".into(), serde_json::json!({ "terminal_id": call_id, "cwd": cwd }));
        }
        if !meta.is_empty() {
            tc = tc.meta(meta);
        }
        vec![acp::SessionUpdate::ToolCall(tc)]
    }

    pub(super) fn complete(
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
                let outcome = self.outcome(v, result, &open.output);
                let ok = outcome.ok();
                if self.terminal_output && v.name == "shell" {
                    fields = fields.status(outcome.status).raw_output(outcome.raw_output);
                    // The terminal keeps its content; the exit goes through `_meta`.
                    let body = result
                        .as_object()
                        .and_then(|o| o.values().find(|b| b.get("exitCode").is_some() || b.get("stdout").is_some()));
                    let exit = body.and_then(|b| b.get("exitCode")).and_then(|c| c.as_i64()).unwrap_or(0);
                    let signal = body.and_then(|b| str_arg(b, "signal")).map(str::to_string);
                    // Nothing streamed while it ran: the terminal shows the output the result has.
                    let output = body.map(shell_output).unwrap_or_default();
                    if open.output.is_empty() && !output.is_empty() {
                        let meta = terminal_meta(
                            "terminal_output",
                            serde_json::json!({ "terminal_id": call_id, "data": output }),
                        );
                        let update = acp::ToolCallUpdate::new(call_id.to_string(), acp::ToolCallUpdateFields::new());
                        out.push(acp::SessionUpdate::ToolCallUpdate(update.meta(meta)));
                    }
                    let meta = terminal_meta(
                        "terminal_exit",
                        serde_json::json!({ "terminal_id": call_id, "exit_code": exit, "signal": signal }),
                    );
                    let update = acp::ToolCallUpdate::new(call_id.to_string(), fields).meta(meta);
                    out.push(acp::SessionUpdate::ToolCallUpdate(update));
                    return out;
                }
                fields = outcome.fields();
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
}

/// A shell result's output as a terminal shows it: interleaved where the result has it.
fn shell_output(body: &Value) -> String {
    match str_arg(body, "interleavedOutput") {
        Some(all) => all.to_string(),
        None => ["stdout", "stderr"].iter().filter_map(|k| str_arg(body, k)).collect::<Vec<_>>().concat(),
    }
}
