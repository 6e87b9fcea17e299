//! What a card ends with, from its tool's result: `completed` for success, `failed` with the
//! reason otherwise, and the content an editor user expects to see — the range of the file
//! read, the listing, the matches, the command's output, the diff.

use agent_client_protocol_schema::v1 as acp;
use serde_json::Value;

use super::paths::Paths;
use super::pi_and_agent;
use super::render::{
    bool_arg, camel_to_snake, count, fenced, fenced_lines, humanize, line_count, listing, num_arg, read_summary,
    str_arg, text_content,
};
use super::Outcome;

/// Result fields outside the result's oneof (`ShellResult.sandbox_policy`): not its branch.
const NOT_A_BRANCH: [&str; 1] = ["sandboxPolicy"];
/// Files a search lists as locations.
const MAX_LOCATIONS: usize = 20;

/// The outcome of tool `name` (called with `args`) whose result message is `result`, in
/// proto3 JSON; `live_output` is what a shell printed while it ran, for results without it.
pub fn tool_outcome(name: &str, args: &Value, result: &Value, live_output: &str, paths: &Paths) -> Outcome {
    let Some((branch, body)) = branch(result) else { return Outcome::new(true, Vec::new(), result) };
    if pi_and_agent::describes(name) {
        return pi_and_agent::outcome(name, args, branch, body, result, paths);
    }
    let settled = |ok: bool, content: Vec<acp::ToolCallContent>| Outcome::new(ok, content, result);
    match (name, branch) {
        ("shell", "success") if bool_arg(result, "isBackground") => settled(true, vec![background(body)]),
        ("shell", "success" | "failure" | "timeout") => {
            let (ok, content) = shell(branch, body, live_output);
            settled(ok, content)
        }
        ("read", "success") => {
            let mut outcome = settled(true, vec![text_content(read(args, body))]);
            let path = str_arg(body, "path").or_else(|| str_arg(args, "path"));
            let line = first_line(args, body);
            outcome.locations = path.map(|p| vec![paths.location(p, line.map(|l| l as u32))]).unwrap_or_default();
            outcome
        }
        ("ls", "success") => {
            let root = body.get("directoryTreeRoot").cloned().unwrap_or(Value::Null);
            let lines = listing(&root);
            let content = if lines.is_empty() { "Empty folder".to_string() } else { fenced_lines(&lines) };
            settled(true, vec![text_content(content)])
        }
        ("grep", "success") => {
            let (content, files) = grep(body, paths);
            let mut outcome = settled(true, content);
            outcome.locations = files;
            outcome
        }
        ("edit", "success") => {
            let path = str_arg(body, "path").or_else(|| str_arg(args, "path")).unwrap_or_default();
            let new_text = str_arg(body, "afterFullFileContent").unwrap_or_default();
            let diff = acp::Diff::new(paths.absolute(path), new_text)
                .old_text(str_arg(body, "beforeFullFileContent").map(str::to_string));
            settled(true, vec![acp::ToolCallContent::Diff(diff)])
        }
        ("delete", "success") => {
            let path = str_arg(body, "path").or_else(|| str_arg(args, "path")).unwrap_or_default();
            let old = body.get("prevContent").and_then(|s| s.as_str()).unwrap_or_default();
            let diff = acp::Diff::new(paths.absolute(path), "").old_text(old.to_string());
            settled(true, vec![acp::ToolCallContent::Diff(diff)])
        }
        ("glob", "success") => {
            let files: Vec<String> = strings(body, "files").iter().map(|f| paths.relative(f)).collect();
            let n = num_arg(body, "totalFiles").unwrap_or(files.len() as i64);
            let mut content = vec![text_content(count(n, "file"))];
            if !files.is_empty() {
                content.push(text_content(fenced_lines(&files)));
            }
            settled(true, content)
        }
        ("mcp", "success") => {
            let failed = bool_arg(body, "isError");
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
            settled(!failed, content)
        }
        ("fetch" | "web_fetch", "success") => settled(true, fetched(body)),
        (_, "success") => settled(true, Vec::new()),
        // Asynchronous answers are still pending, not failed.
        ("ask_question", "async") => settled(true, Vec::new()),
        (_, other) => {
            let why = ["error", "reason", "errorMessage", "message"]
                .iter()
                .find_map(|k| str_arg(body, k))
                .map(str::to_string)
                .unwrap_or_else(|| humanize(&camel_to_snake(other)));
            settled(false, vec![text_content(why)])
        }
    }
}

/// The branch of a result's oneof and its message (`{"success": {…}}` → `success`): the first
/// message-valued field that is not one of the result's own fields, else its first field.
fn branch(result: &Value) -> Option<(&str, &Value)> {
    let fields = result.as_object()?;
    fields
        .iter()
        .find(|(k, v)| v.is_object() && !NOT_A_BRANCH.contains(&k.as_str()))
        .or_else(|| fields.iter().next())
        .map(|(k, v)| (k.as_str(), v))
}

/// A shell's output (from its result, else what streamed while it ran) and whether it succeeded.
fn shell(branch: &str, body: &Value, live_output: &str) -> (bool, Vec<acp::ToolCallContent>) {
    let exit = num_arg(body, "exitCode").unwrap_or(0);
    let mut output = str_arg(body, "interleavedOutput")
        .map(str::to_string)
        .unwrap_or_else(|| ["stdout", "stderr"].iter().filter_map(|k| str_arg(body, k)).collect::<Vec<_>>().concat());
    if output.is_empty() {
        output = live_output.to_string();
    }
    let ok = branch == "success" && exit == 0;
    let mut content = Vec::new();
    if !output.is_empty() {
        content.push(text_content(fenced(&output)));
    }
    if !ok {
        content.push(text_content(match branch {
            "timeout" => "Timed out".to_string(),
            _ => match str_arg(body, "signal") {
                Some(signal) => format!("Killed by {signal}"),
                None => format!("Exited with code {exit}"),
            },
        }));
    }
    (ok, content)
}

pub(super) fn background(body: &Value) -> acp::ToolCallContent {
    text_content(match num_arg(body, "shellId") {
        Some(id) => format!("Started in the background (shell {id})"),
        None => "Started in the background".to_string(),
    })
}

/// `Lines 10–14 of 120` for a read (a `ReadToolSuccess` from the server, or the `ReadSuccess`
/// a host answered with).
fn read(args: &Value, body: &Value) -> String {
    if bool_arg(body, "isEmpty") {
        return "Empty file".to_string();
    }
    if body.get("data").is_some() || body.get("dataBlobId").is_some() {
        let bytes = num_arg(body, "fileSize").map(|n| format!(" ({n} bytes)")).unwrap_or_default();
        return format!("Binary file{bytes}");
    }
    let total = num_arg(body, "totalLines");
    let truncated = bool_arg(body, "truncated") || bool_arg(body, "exceededLimit");
    if let Some(range) = body.get("readRange") {
        let start = num_arg(range, "startLine").unwrap_or(1);
        let end = num_arg(range, "endLine").unwrap_or(start);
        return read_summary(Some(start), Some((end - start + 1).max(0)), total, truncated);
    }
    let read_lines = body.get("content").and_then(|c| c.as_str()).map(line_count);
    read_summary(first_line(args, body), read_lines, total, truncated)
}

fn first_line(args: &Value, body: &Value) -> Option<i64> {
    body.get("readRange").and_then(|r| num_arg(r, "startLine")).or_else(|| num_arg(args, "offset").filter(|o| *o > 0))
}

/// A grep's matches (`n matches in m files` and the lines, the files or the counts) and the
/// files it matched as locations.
fn grep(body: &Value, paths: &Paths) -> (Vec<acp::ToolCallContent>, Vec<acp::ToolCallLocation>) {
    let mut lines = Vec::new();
    let mut files: Vec<(String, Option<u32>)> = Vec::new();
    let (mut matches, mut truncated) = (0i64, false);
    let results = body.get("workspaceResults").and_then(|w| w.as_object()).into_iter().flat_map(|w| w.values());
    for union in results.chain(body.get("activeEditorResult")) {
        let Some((mode, r)) = branch(union) else { continue };
        truncated |= bool_arg(r, "clientTruncated") || bool_arg(r, "ripgrepTruncated");
        match mode {
            "content" => {
                for m in r.get("matches").and_then(|m| m.as_array()).into_iter().flatten() {
                    let file = str_arg(m, "file").unwrap_or_default();
                    let rel = paths.relative(file);
                    let mut first = None;
                    for line in m.get("matches").and_then(|l| l.as_array()).into_iter().flatten() {
                        let n = num_arg(line, "lineNumber").unwrap_or(0);
                        let text = line.get("content").and_then(|c| c.as_str()).unwrap_or_default();
                        let context = bool_arg(line, "isContextLine");
                        if !context {
                            matches += 1;
                            first.get_or_insert(n as u32);
                        }
                        // As ripgrep prints them: `file:12:match`, `file-13-context`.
                        let sep = if context { '-' } else { ':' };
                        lines.push(format!("{rel}{sep}{n}{sep}{text}"));
                    }
                    files.push((file.to_string(), first));
                }
            }
            "files" => {
                for f in strings(r, "files") {
                    lines.push(paths.relative(f));
                    files.push((f.to_string(), None));
                }
            }
            "count" => {
                for c in r.get("counts").and_then(|c| c.as_array()).into_iter().flatten() {
                    let file = str_arg(c, "file").unwrap_or_default();
                    let n = num_arg(c, "count").unwrap_or(0);
                    matches += n;
                    lines.push(format!("{}: {n}", paths.relative(file)));
                    files.push((file.to_string(), None));
                }
            }
            _ => {}
        }
    }
    let mut summary = if matches > 0 {
        let noun = if matches == 1 { "match" } else { "matches" };
        format!("{matches} {noun} in {}", count(files.len() as i64, "file"))
    } else if files.is_empty() {
        "No matches".to_string()
    } else {
        count(files.len() as i64, "file")
    };
    if truncated {
        summary.push_str(" (truncated)");
    }
    let mut content = vec![text_content(summary)];
    if !lines.is_empty() {
        content.push(text_content(fenced_lines(&lines)));
    }
    let locations = files.iter().take(MAX_LOCATIONS).map(|(f, line)| paths.location(f, *line)).collect();
    (content, locations)
}

/// `HTTP 200 · text/html · 1234 characters` for a fetch.
fn fetched(body: &Value) -> Vec<acp::ToolCallContent> {
    let mut parts = Vec::new();
    if let Some(status) = num_arg(body, "statusCode") {
        parts.push(format!("HTTP {status}"));
    }
    if let Some(t) = str_arg(body, "contentType") {
        parts.push(t.to_string());
    }
    if let Some(c) = body.get("content").and_then(|c| c.as_str()) {
        parts.push(count(c.chars().count() as i64, "character"));
    }
    if parts.is_empty() {
        return Vec::new();
    }
    vec![text_content(parts.join(" · "))]
}

fn strings<'a>(v: &'a Value, key: &str) -> Vec<&'a str> {
    v.get(key).and_then(|f| f.as_array()).map(|f| f.iter().filter_map(|s| s.as_str()).collect()).unwrap_or_default()
}
