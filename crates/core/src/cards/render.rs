//! Reading proto3 JSON arguments, and text as cards show it: code blocks, listings, counts.

use agent_client_protocol_schema::v1 as acp;
use serde_json::Value;

/// Text tool output shown in a card is capped (the tail is kept).
pub(crate) const MAX_OUTPUT_CHARS: usize = 64 * 1024;
/// Lines of a listing or of matches shown in a card.
const MAX_LINES: usize = 200;
/// Lines a listing collects at most (so that the count of those left out is right for any
/// listing the tools produce, and a huge tree still costs little).
const MAX_COLLECTED: usize = 20_000;

pub(crate) fn text_block(text: impl Into<String>) -> acp::ContentBlock {
    acp::ContentBlock::Text(acp::TextContent::new(text.into()))
}

pub(crate) fn text_content(text: impl Into<String>) -> acp::ToolCallContent {
    acp::ToolCallContent::Content(acp::Content::new(text_block(text)))
}

/// A string argument; empty counts as absent (proto3 JSON leaves defaults out anyway).
pub(crate) fn str_arg<'a>(args: &'a Value, key: &str) -> Option<&'a str> {
    args.get(key).and_then(|v| v.as_str()).filter(|s| !s.is_empty())
}

/// A number argument (int64 values arrive as strings in proto3 JSON).
pub(crate) fn num_arg(args: &Value, key: &str) -> Option<i64> {
    args.get(key).and_then(|v| v.as_i64().or_else(|| v.as_str().and_then(|s| s.parse().ok())))
}

pub(crate) fn bool_arg(args: &Value, key: &str) -> bool {
    args.get(key).and_then(|v| v.as_bool()).unwrap_or(false)
}

/// `read_lints` → `Read lints`.
pub(crate) fn humanize(name: &str) -> String {
    let spaced = name.replace('_', " ");
    let mut c = spaced.chars();
    c.next().map(|f| f.to_uppercase().chain(c).collect()).unwrap_or_default()
}

/// `fileNotFound` → `file_not_found`.
pub(crate) fn camel_to_snake(s: &str) -> String {
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

/// `1 file`, `3 files`.
pub(crate) fn count(n: i64, noun: &str) -> String {
    format!("{n} {noun}{}", if n == 1 { "" } else { "s" })
}

/// Output in a code block, keeping the tail when it is too long.
pub(crate) fn fenced(output: &str) -> String {
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

/// Lines in a code block, at most [`MAX_LINES`] of them, then how many were left out.
pub(crate) fn fenced_lines(lines: &[String]) -> String {
    let mut shown: Vec<&str> = lines.iter().take(MAX_LINES).map(String::as_str).collect();
    let more = lines.len().saturating_sub(MAX_LINES);
    let tail = format!("… {more} more");
    if more > 0 {
        shown.push(&tail);
    }
    fenced(&shown.join("\n"))
}

/// An `LsDirectoryTreeNode` as an indented listing of its children (folders end in `/`).
pub(crate) fn listing(root: &Value) -> Vec<String> {
    fn walk(node: &Value, depth: usize, lines: &mut Vec<String>) {
        if lines.len() >= MAX_COLLECTED {
            return;
        }
        let indent = "  ".repeat(depth);
        for dir in node.get("childrenDirs").and_then(|d| d.as_array()).into_iter().flatten() {
            let path = str_arg(dir, "absPath").unwrap_or_default();
            let name = path.rsplit(['/', '\\']).next().unwrap_or(path);
            lines.push(format!("{indent}{name}/"));
            walk(dir, depth + 1, lines);
        }
        for file in node.get("childrenFiles").and_then(|f| f.as_array()).into_iter().flatten() {
            if let Some(name) = str_arg(file, "name") {
                lines.push(format!("{indent}{name}"));
            }
        }
    }
    let mut lines = Vec::new();
    walk(root, 0, &mut lines);
    lines
}

/// The range a read covered, in its card's words: `Lines 10–14 of 120`, `120 lines`, `Empty file`.
pub(crate) fn read_summary(
    first_line: Option<i64>,
    lines_read: Option<i64>,
    total: Option<i64>,
    truncated: bool,
) -> String {
    let mut text = match (first_line, lines_read, total) {
        (_, Some(0), _) | (None, None, Some(0)) => "Empty file".to_string(),
        (Some(first), Some(n), Some(total)) if first > 1 || n < total => {
            format!("Lines {first}–{} of {total}", first + n - 1)
        }
        (Some(first), Some(n), None) if first > 1 => format!("Lines {first}–{}", first + n - 1),
        (_, _, Some(total)) => count(total, "line"),
        (_, Some(n), None) => count(n, "line"),
        _ => "Read".to_string(),
    };
    if truncated {
        text.push_str(" (truncated)");
    }
    text
}

/// Lines of text: a trailing newline ends the last line rather than starting another.
pub(crate) fn line_count(text: &str) -> i64 {
    if text.is_empty() {
        return 0;
    }
    (text.matches('\n').count() + usize::from(!text.ends_with('\n'))) as i64
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn read_summaries() {
        assert_eq!(read_summary(Some(10), Some(5), Some(120), false), "Lines 10–14 of 120");
        assert_eq!(read_summary(Some(1), Some(120), Some(120), false), "120 lines");
        assert_eq!(read_summary(None, None, Some(1), true), "1 line (truncated)");
        assert_eq!(read_summary(Some(1), Some(0), Some(0), false), "Empty file");
        assert_eq!(line_count("a\nb\n"), 2);
        assert_eq!(line_count("a\nb"), 2);
    }

    #[test]
    fn long_listings_are_cut_with_a_count() {
        let lines: Vec<String> = (0..250).map(|i| format!("f{i}")).collect();
        let shown = fenced_lines(&lines);
        assert!(shown.contains("f199\n… 50 more\n```"), "{shown}");
        assert!(!shown.contains("f200"));
    }
}
