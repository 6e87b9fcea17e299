//! Small helpers the translation families share: ids, content blocks, reading proto3 JSON
//! arguments, and output shown in a card.

use agent_client_protocol_schema::v1 as acp;
use serde_json::Value;

/// Text tool output shown in a card is capped (the full output stays in `rawOutput`).
const MAX_OUTPUT_CHARS: usize = 64 * 1024;

pub(super) fn new_id() -> String {
    uuid::Uuid::new_v4().to_string()
}

pub(super) fn text_block(text: impl Into<String>) -> acp::ContentBlock {
    acp::ContentBlock::Text(acp::TextContent::new(text.into()))
}

pub(super) fn chunk(text: String, id: &str) -> acp::ContentChunk {
    acp::ContentChunk::new(text_block(text)).message_id(acp::MessageId::new(id))
}

pub(super) fn text_content(text: impl Into<String>) -> acp::ToolCallContent {
    acp::ToolCallContent::Content(acp::Content::new(text_block(text)))
}

pub(super) fn str_arg<'a>(args: &'a Value, key: &str) -> Option<&'a str> {
    args.get(key).and_then(|v| v.as_str()).filter(|s| !s.is_empty())
}

pub(super) fn num_arg(args: &Value, key: &str) -> Option<i64> {
    args.get(key).and_then(|v| v.as_i64().or_else(|| v.as_str().and_then(|s| s.parse().ok())))
}

pub(super) fn humanize(name: &str) -> String {
    let spaced = name.replace('_', " ");
    let mut c = spaced.chars();
    c.next().map(|f| f.to_uppercase().chain(c).collect()).unwrap_or_default()
}

pub(super) fn terminal_meta(key: &str, value: Value) -> acp::Meta {
    let mut meta = acp::Meta::new();
    meta.insert(key.into(), value);
    meta
}

pub(super) fn camel_to_snake(s: &str) -> String {
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
pub(super) fn fenced(output: &str) -> String {
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
