//! A Cursor tool's card while it runs: title, kind, locations and starting content, from the
//! tool's key (`read`, `shell`, … : the `ToolCall` branch without `_tool_call`) and its args.

use agent_client_protocol_schema::v1 as acp;
use serde_json::Value;

use super::paths::Paths;
use super::pi_and_agent;
use super::render::{humanize, num_arg, str_arg, text_content};
use super::titles::{find_title, grep_title};
use super::Card;

/// The card of tool `name` called with `args` (its args message in proto3 JSON).
pub fn tool_card(name: &str, args: &Value, paths: &Paths) -> Card {
    Card {
        name: name.to_string(),
        title: title(name, args, paths),
        kind: tool_kind(name),
        locations: locations(name, args, paths),
        content: starting_content(name, args),
        raw_input: args.clone(),
    }
}

pub fn tool_kind(name: &str) -> acp::ToolKind {
    match name {
        "read" | "read_lints" | "read_mcp_resource" | "list_mcp_resources" => acp::ToolKind::Read,
        "edit" | "apply_agent_diff" => acp::ToolKind::Edit,
        "delete" => acp::ToolKind::Delete,
        "grep" | "glob" | "ls" | "sem_search" => acp::ToolKind::Search,
        "shell" | "write_shell_stdin" => acp::ToolKind::Execute,
        "web_search" | "web_fetch" | "fetch" => acp::ToolKind::Fetch,
        "switch_mode" => acp::ToolKind::SwitchMode,
        "create_plan" | "reflect" | "task" | "read_todos" => acp::ToolKind::Think,
        other => pi_and_agent::kind(other).unwrap_or(acp::ToolKind::Other),
    }
}

fn title(name: &str, a: &Value, paths: &Paths) -> String {
    let rel = |key: &str| str_arg(a, key).map(|p| paths.relative(p));
    let title = match name {
        "shell" => str_arg(a, "command").map(str::to_string),
        "write_shell_stdin" => Some(format!("Write to shell {}", num_arg(a, "shellId").unwrap_or_default())),
        "read" => rel("path").map(|p| match (num_arg(a, "offset"), num_arg(a, "limit")) {
            (Some(o), Some(l)) if l > 0 => format!("Read {p} (L{}–L{})", o.max(1), o.max(1) + l - 1),
            (Some(o), None) => format!("Read {p} (from L{})", o.max(1)),
            _ => format!("Read {p}"),
        }),
        "edit" => rel("path").map(|p| format!("Edit {p}")),
        "delete" => rel("path").map(|p| format!("Delete {p}")),
        "grep" => grep_title(a, paths),
        "glob" => find_title(str_arg(a, "globPattern"), rel("targetDirectory")),
        "ls" => Some(format!("List {}", rel("path").unwrap_or_else(|| ".".into()))),
        "sem_search" => Some(match str_arg(a, "query") {
            Some(q) => format!("Search codebase: {q}"),
            None => "Search codebase".into(),
        }),
        "read_lints" => {
            let paths: Vec<String> = string_list(a, "paths").iter().map(|p| paths.relative(p)).collect();
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
        "generate_image" => Some(match str_arg(a, "description").filter(|d| !d.is_empty()) {
            Some(d) => format!("Generate image: {d}"),
            None => "Generate image".into(),
        }),
        "read_todos" => Some("Read TODOs".into()),
        "apply_agent_diff" => Some("Apply diff".into()),
        "truncated" => Some("Truncated tool call".into()),
        other => pi_and_agent::title(other, a, paths),
    };
    title.unwrap_or_else(|| humanize(name))
}

fn locations(name: &str, a: &Value, paths: &Paths) -> Vec<acp::ToolCallLocation> {
    match name {
        "read" => str_arg(a, "path")
            .map(|p| vec![paths.location(p, num_arg(a, "offset").map(|o| o.max(1) as u32))])
            .unwrap_or_default(),
        "edit" | "delete" | "ls" => str_arg(a, "path").map(|p| vec![paths.location(p, None)]).unwrap_or_default(),
        "read_lints" => string_list(a, "paths").iter().map(|p| paths.location(p, None)).collect(),
        other => pi_and_agent::locations(other, a, paths),
    }
}

/// Content shown while the call runs (the task's prompt, the plan being proposed).
fn starting_content(name: &str, a: &Value) -> Vec<acp::ToolCallContent> {
    match name {
        "task" => str_arg(a, "prompt").map(|p| vec![text_content(p)]).unwrap_or_default(),
        "create_plan" => str_arg(a, "plan").map(|p| vec![text_content(p)]).unwrap_or_default(),
        other => pi_and_agent::starting_content(other, a),
    }
}

fn string_list<'a>(a: &'a Value, key: &str) -> Vec<&'a str> {
    a.get(key).and_then(|p| p.as_array()).map(|ps| ps.iter().filter_map(|p| p.as_str()).collect()).unwrap_or_default()
}
