//! Exec requests as cards: the host that runs a request (a permission prompt before a shell, a
//! card of its own for an exec that came without its tool call) shows the same card the
//! server's tool call gets, and settles it from the result it answered with.

use agent_client_protocol_schema::v1 as acp;
use serde_json::{json, Map, Value};

use super::outcomes::{background, tool_outcome};
use super::paths::Paths;
use super::render::{camel_to_snake, str_arg};
use super::tools::tool_card;
use super::{Card, Outcome};

/// The Cursor tool an exec kind runs for (the args messages match: `ReadArgs` has the fields
/// of the read tool's args, `ShellArgs` is the shell tool's).
fn tool_for(kind: &str) -> Option<String> {
    Some(
        match kind {
            "read" | "redactedRead" => "read",
            "write" => "edit",
            "shell" | "shellStream" | "backgroundShellSpawn" | "miniSweAgentBash" => "shell",
            "writeShellStdin" => "write_shell_stdin",
            "diagnostics" => "read_lints",
            "listMcpResources" => "list_mcp_resources",
            "readMcpResource" => "read_mcp_resource",
            // Not a tool of the model's: the context of the request.
            "requestContext" => return None,
            other => return Some(camel_to_snake(other)),
        }
        .to_string(),
    )
}

/// The card of an exec request (`kind` as the host gets it, `args` its message in proto3 JSON);
/// `None` for requests that are not a tool call (`requestContext`). `previous_text` is the
/// file's text before a `write` or `delete` (`None`: a new file, or not text), shown as a diff.
pub fn exec_card(kind: &str, args: &Value, paths: &Paths, previous_text: Option<&str>) -> Option<Card> {
    let name = tool_for(kind)?;
    let path = str_arg(args, "path").map(|p| paths.absolute(p));
    let mut card = tool_card(&name, args, paths);
    match kind {
        "write" => {
            let path = path.unwrap_or_default();
            card.title = format!("Write {}", paths.relative(&path));
            card.raw_input = json!({ "path": path });
            let binary = str_arg(args, "fileBytes").is_some();
            card.content = if binary {
                Vec::new()
            } else {
                let new_text = args.get("fileText").and_then(|t| t.as_str()).unwrap_or_default();
                let diff = acp::Diff::new(path.clone(), new_text).old_text(previous_text.map(str::to_string));
                vec![acp::ToolCallContent::Diff(diff)]
            };
            card.locations = vec![acp::ToolCallLocation::new(path)];
        }
        "delete" => {
            let path = path.unwrap_or_default();
            card.raw_input = json!({ "path": path });
            card.content = previous_text
                .map(|old| vec![acp::ToolCallContent::Diff(acp::Diff::new(path.clone(), "").old_text(old.to_string()))])
                .unwrap_or_default();
        }
        "shell" | "shellStream" | "backgroundShellSpawn" | "miniSweAgentBash" => {
            let cwd = str_arg(args, "workingDirectory").map(|d| paths.absolute(d)).or(paths.cwd().map(str::to_string));
            let mut input = Map::new();
            input.insert("command".into(), args.get("command").cloned().unwrap_or(Value::String(String::new())));
            if let Some(cwd) = cwd {
                input.insert("cwd".into(), Value::String(cwd));
            }
            if kind == "backgroundShellSpawn" {
                input.insert("background".into(), Value::Bool(true));
            }
            card.raw_input = Value::Object(input);
        }
        "piWrite" | "piEdit" => {
            let path = path.unwrap_or_default();
            card.raw_input = json!({ "path": path });
            card.content = if kind == "piWrite" {
                let new_text = str_arg(args, "content").unwrap_or_default();
                vec![acp::ToolCallContent::Diff(
                    acp::Diff::new(path.clone(), new_text).old_text(previous_text.map(str::to_string)),
                )]
            } else {
                edit_diffs(&path, args, previous_text)
            };
            card.locations = vec![acp::ToolCallLocation::new(path)];
        }
        "piBash" => card.raw_input = json!({ "command": args.get("command").cloned().unwrap_or(Value::Null) }),
        "mcp" => card.raw_input = args.get("args").cloned().unwrap_or_else(|| json!({})),
        "fetch" => card.raw_input = json!({ "url": args.get("url").cloned().unwrap_or(Value::Null) }),
        _ => {}
    }
    Some(card)
}

/// A pi edit as diffs: the whole file before and after when every replacement's old text is in
/// it as written (each replacing its first occurrence, in order), else each replacement alone.
fn edit_diffs(path: &str, args: &Value, previous_text: Option<&str>) -> Vec<acp::ToolCallContent> {
    let edits: Vec<(&str, &str)> = args
        .get("edits")
        .and_then(Value::as_array)
        .map(|edits| {
            edits
                .iter()
                .map(|e| (str_arg(e, "oldText").unwrap_or_default(), str_arg(e, "newText").unwrap_or_default()))
                .collect()
        })
        .unwrap_or_default();
    let whole = previous_text.and_then(|old| {
        edits.iter().try_fold(old.to_string(), |text, (from, to)| {
            (!from.is_empty() && text.contains(from)).then(|| text.replacen(from, to, 1))
        })
    });
    match (previous_text, whole) {
        (Some(old), Some(new)) => {
            vec![acp::ToolCallContent::Diff(acp::Diff::new(path.to_string(), new).old_text(old.to_string()))]
        }
        _ => edits
            .into_iter()
            .map(|(from, to)| {
                acp::ToolCallContent::Diff(acp::Diff::new(path.to_string(), to).old_text(from.to_string()))
            })
            .collect(),
    }
}

/// How the card of an exec request ends, from the result the host answered with (its result
/// message in proto3 JSON: `ReadResult` for `read`, `ShellResult` for the shells, …).
pub fn exec_outcome(kind: &str, args: &Value, result: &Value, paths: &Paths) -> Outcome {
    let name = tool_for(kind).unwrap_or_else(|| camel_to_snake(kind));
    match (kind, result.get("success")) {
        // The card already shows the diff it asked about.
        ("write" | "piWrite" | "piEdit", Some(_)) => Outcome::new(true, Vec::new(), result),
        ("backgroundShellSpawn", Some(success)) => Outcome::new(true, vec![background(success)], result),
        _ => tool_outcome(&name, args, result, "", paths),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn diffs(card: &Card) -> Vec<(Option<String>, String)> {
        card.content
            .iter()
            .map(|c| match c {
                acp::ToolCallContent::Diff(d) => (d.old_text.clone(), d.new_text.clone()),
                other => panic!("not a diff: {other:?}"),
            })
            .collect()
    }

    #[test]
    fn a_pi_edit_is_shown_as_the_whole_file_before_and_after_when_every_edit_applies() {
        let paths = Paths::new(Some("/w"));
        let args = json!({ "path": "a.txt", "edits": [
            { "oldText": "one", "newText": "1" },
            { "oldText": "three", "newText": "3" },
        ]});
        let card = exec_card("piEdit", &args, &paths, Some("one two three one")).unwrap();
        assert_eq!(card.title, "Edit a.txt");
        assert_eq!(card.kind, acp::ToolKind::Edit);
        assert_eq!(diffs(&card), [(Some("one two three one".into()), "1 two 3 one".into())], "first occurrences only");
        assert_eq!(card.raw_input, json!({ "path": "/w/a.txt" }));

        // An old text that is not in the file: each replacement on its own, as asked.
        let card = exec_card("piEdit", &args, &paths, Some("nothing here")).unwrap();
        assert_eq!(diffs(&card), [(Some("one".into()), "1".into()), (Some("three".into()), "3".into())]);
    }

    #[test]
    fn a_pi_write_shows_its_diff_and_its_success_keeps_it() {
        let paths = Paths::new(Some("/w"));
        let args = json!({ "path": "/w/b.txt", "content": "new\n" });
        let card = exec_card("piWrite", &args, &paths, Some("old\n")).unwrap();
        assert_eq!(card.title, "Write b.txt");
        assert_eq!(diffs(&card), [(Some("old\n".into()), "new\n".into())]);
        let outcome = exec_outcome("piWrite", &args, &json!({ "success": {} }), &paths);
        assert!(outcome.ok() && outcome.content.is_empty(), "the card's diff stays: {outcome:?}");
    }
}
