//! MCP tool-schema normalisation on arbitrary JSON: never a panic, no combinator left, and the
//! `Struct` and JSON-text forms come out alike.
#![no_main]

use cursor_acp_core::proto::agent::v1 as pb;
use cursor_acp_core::tool_schema::{has_combinators, normalize, normalize_tool, to_proto};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Ok(schema) = serde_json::from_slice::<serde_json::Value>(data) else { return };
    let mut out = schema.clone();
    normalize(&mut out);
    assert!(!has_combinators(&out), "{schema} -> {out}");
    let mut tool = pb::McpToolDefinition {
        input_schema: Some(to_proto(schema.clone())),
        input_schema_json: Some(schema.to_string()),
        ..Default::default()
    };
    normalize_tool(&mut tool);
    let text = tool.input_schema_json.as_deref().unwrap_or_default();
    let from_text: serde_json::Value = serde_json::from_str(text).expect("normalized JSON text parses");
    assert_eq!(tool.input_schema, Some(to_proto(from_text)), "{schema}");
});
