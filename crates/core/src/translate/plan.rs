//! Todos as the full ACP `plan`, and what the checkpoint drives: context usage and the mode.

use agent_client_protocol_schema::v1 as acp;
use prost::Message as _;
use serde_json::Value;

use super::content::str_arg;
use super::translator::{Todo, Translator};
use crate::proto::agent::v1 as pb;

impl Translator {
    /// Applies an `UpdateTodosArgs` / `CreatePlanArgs` todo list and emits the full `plan` when
    /// it changed.
    pub(super) fn apply_todos(&mut self, args: &Value) -> Vec<acp::SessionUpdate> {
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
}

/// `AgentMode` value → ACP mode id (`agent`, `ask`, `plan`, …).
pub fn mode_id(mode: i32) -> Option<String> {
    pb::AgentMode::try_from(mode)
        .ok()
        .filter(|m| *m != pb::AgentMode::Unspecified)
        .map(|m| m.as_str_name().trim_start_matches("AGENT_MODE_").to_ascii_lowercase())
}
