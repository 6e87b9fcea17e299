//! Cards of the pi tools and of the agent's own actions, the tool types the 2026 schema adds:
//! the `pi_*` family (read, bash, edit, write, grep, find, ls), conversation search, cloud-agent
//! data, messages to the user, SCM connection and goals. `tools.rs` and `outcomes.rs` ask here
//! for what they do not know.

use agent_client_protocol_schema::v1 as acp;
use serde_json::Value;

use super::paths::Paths;
use super::render::{count, fenced, num_arg, str_arg, text_content};
use super::titles::{find_title, grep_title};
use super::Outcome;

/// The tool types this file describes.
const NAMES: &[&str] = &[
    "pi_read",
    "pi_bash",
    "pi_edit",
    "pi_write",
    "pi_grep",
    "pi_find",
    "pi_ls",
    "search_conversations",
    "fetch_cloud_agent_data",
    "send_message",
    "send_to_user",
    "connect_scm",
    "create_goal",
    "update_goal",
];

pub(super) fn describes(name: &str) -> bool {
    NAMES.contains(&name)
}

pub(super) fn kind(name: &str) -> Option<acp::ToolKind> {
    Some(match name {
        "pi_read" => acp::ToolKind::Read,
        "pi_edit" | "pi_write" => acp::ToolKind::Edit,
        "pi_grep" | "pi_find" | "pi_ls" | "search_conversations" => acp::ToolKind::Search,
        "pi_bash" => acp::ToolKind::Execute,
        "fetch_cloud_agent_data" => acp::ToolKind::Fetch,
        "create_goal" | "update_goal" => acp::ToolKind::Think,
        _ => return None,
    })
}

/// `GOAL_STATUS_COMPLETE` → `complete`.
fn goal_status(args: &Value) -> Option<String> {
    str_arg(args, "status").map(|s| s.trim_start_matches("GOAL_STATUS_").to_lowercase())
}

pub(super) fn title(name: &str, a: &Value, paths: &Paths) -> Option<String> {
    let rel = |key: &str| str_arg(a, key).map(|p| paths.relative(p));
    match name {
        // pi's offset is the first line shown (1-based), its limit a count of lines.
        "pi_read" => rel("path").map(|p| match (num_arg(a, "offset"), num_arg(a, "limit")) {
            (Some(o), Some(l)) if l > 0 => format!("Read {p} (L{}–L{})", o.max(1), o.max(1) + l - 1),
            (Some(o), _) => format!("Read {p} (from L{})", o.max(1)),
            (None, Some(l)) if l > 0 => format!("Read {p} (L1–L{l})"),
            _ => format!("Read {p}"),
        }),
        "pi_bash" => str_arg(a, "command").map(str::to_string),
        "pi_edit" => rel("path").map(|p| format!("Edit {p}")),
        "pi_write" => rel("path").map(|p| format!("Write {p}")),
        "pi_grep" => grep_title(a, paths),
        "pi_find" => find_title(str_arg(a, "pattern"), rel("path")),
        "pi_ls" => Some(format!("List {}", rel("path").unwrap_or_else(|| ".".into()))),
        "search_conversations" => Some(
            str_arg(a, "query").map_or("Search conversations".into(), |q| format!("Search conversations: \"{q}\"")),
        ),
        "fetch_cloud_agent_data" => Some("Fetch cloud agent data".into()),
        "send_message" => Some("Send message".into()),
        "send_to_user" => Some("Message to user".into()),
        "connect_scm" => {
            let repo = a.get("github").and_then(|g| g.get("repository"));
            let owner = repo.and_then(|r| str_arg(r, "owner"));
            let name = repo.and_then(|r| str_arg(r, "repo"));
            Some(match (owner, name) {
                (Some(o), Some(n)) => format!("Connect GitHub {o}/{n}"),
                _ => "Connect source control".into(),
            })
        }
        "create_goal" => Some(str_arg(a, "objective").map_or("Set goal".into(), |o| format!("Goal: {o}"))),
        "update_goal" => Some(goal_status(a).map_or("Update goal".into(), |s| format!("Goal {s}"))),
        _ => None,
    }
}

pub(super) fn locations(name: &str, a: &Value, paths: &Paths) -> Vec<acp::ToolCallLocation> {
    match name {
        "pi_read" => str_arg(a, "path")
            .map(|p| vec![paths.location(p, num_arg(a, "offset").map(|o| o.max(1) as u32))])
            .unwrap_or_default(),
        "pi_edit" | "pi_write" | "pi_ls" => {
            str_arg(a, "path").map(|p| vec![paths.location(p, None)]).unwrap_or_default()
        }
        _ => Vec::new(),
    }
}

/// What a card shows while the call runs: the message sent to the user, the goal.
pub(super) fn starting_content(name: &str, a: &Value) -> Vec<acp::ToolCallContent> {
    let text = match name {
        "send_to_user" => str_arg(a, "message").map(str::to_string),
        "send_message" => a
            .get("text")
            .and_then(|t| str_arg(t, "content"))
            .map(str::to_string)
            .or_else(|| a.get("attachment").and_then(|t| str_arg(t, "url")).map(str::to_string)),
        "create_goal" => str_arg(a, "objective").map(str::to_string),
        _ => None,
    };
    text.map(|t| vec![text_content(t)]).unwrap_or_default()
}

/// How a call of these types ends (`branch` and `body`: its result's oneof member); failures
/// say why.
pub(super) fn outcome(name: &str, a: &Value, branch: &str, body: &Value, result: &Value, paths: &Paths) -> Outcome {
    let settled = |ok: bool, content: Vec<acp::ToolCallContent>| Outcome::new(ok, content, result);
    let output = str_arg(body, "output");
    let fenced_output = || output.map(|o| vec![text_content(fenced(o))]).unwrap_or_default();
    match (name, branch) {
        ("pi_bash", "success") => settled(true, fenced_output()),
        ("pi_bash", _) => {
            let why = str_arg(body, "error").unwrap_or("The command failed");
            settled(false, vec![text_content(fenced(why))])
        }
        ("pi_edit", "success") => {
            let patch = str_arg(body, "patch").or_else(|| str_arg(body, "diff")).unwrap_or_default();
            let mut content = vec![text_content(output.unwrap_or("Edited").to_string())];
            if !patch.is_empty() {
                content.push(text_content(format!("```diff\n{}\n```", patch.trim_end_matches('\n'))));
            }
            settled(true, content)
        }
        ("pi_write", "success") => {
            let path = str_arg(a, "path").unwrap_or_default();
            let new_text = str_arg(a, "content").unwrap_or_default();
            settled(true, vec![acp::ToolCallContent::Diff(acp::Diff::new(paths.absolute(path), new_text))])
        }
        ("pi_read" | "pi_grep" | "pi_find" | "pi_ls", "success") => settled(true, fenced_output()),
        ("search_conversations", "success") => {
            let hits = body.get("hits").and_then(Value::as_array).map(Vec::as_slice).unwrap_or_default();
            let mut text = count(hits.len() as i64, "conversation");
            for title in hits.iter().filter_map(|hit| str_arg(hit, "title")) {
                text.push_str(&format!("\n- {title}"));
            }
            settled(true, vec![text_content(text)])
        }
        ("fetch_cloud_agent_data", "success") => {
            settled(true, str_arg(body, "summary").map(|s| vec![text_content(s)]).unwrap_or_default())
        }
        ("update_goal", "success") => {
            settled(true, goal_status(body).map(|s| vec![text_content(format!("Goal {s}"))]).unwrap_or_default())
        }
        (_, "success") => settled(true, Vec::new()),
        (_, other) => {
            let why = ["error", "reason", "errorMessage"]
                .iter()
                .find_map(|k| str_arg(body, k))
                .map(str::to_string)
                .unwrap_or_else(|| format!("The tool call ended: {other}"));
            settled(false, vec![text_content(why)])
        }
    }
}
