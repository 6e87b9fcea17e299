//! ACP prompt content → Cursor `UserMessage`.

use agent_client_protocol_schema::v1 as acp;
use base64::Engine as _;

use crate::error::CoreError;
use crate::proto::agent::v1 as pb;

/// Parses prompt content given as JSON: a string, or an array of ACP `ContentBlock`s. Unknown
/// block types are rejected with an error naming the type.
pub fn parse_content(value: &serde_json::Value) -> Result<Vec<acp::ContentBlock>, CoreError> {
    match value {
        serde_json::Value::String(s) => Ok(vec![acp::ContentBlock::Text(acp::TextContent::new(s.clone()))]),
        serde_json::Value::Array(items) => items
            .iter()
            .enumerate()
            .map(|(i, item)| {
                let kind = item.get("type").and_then(|t| t.as_str()).unwrap_or("<missing>");
                if !matches!(kind, "text" | "image" | "resource" | "resource_link") {
                    return Err(CoreError::InvalidInput(format!(
                        "prompt block {i} has unsupported type {kind:?} (expected text, image, resource or resource_link)"
                    )));
                }
                serde_json::from_value(item.clone())
                    .map_err(|e| CoreError::InvalidInput(format!("prompt block {i} ({kind}) is invalid: {e}")))
            })
            .collect(),
        _ => Err(CoreError::InvalidInput("prompt must be a string or an array of ACP content blocks".into())),
    }
}

fn path_of(uri: &str) -> String {
    uri.strip_prefix("file://").map(percent_decode).unwrap_or_else(|| uri.to_string())
}

fn percent_decode(s: &str) -> String {
    let bytes = s.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] == b'%' && i + 2 < bytes.len() {
            if let (Some(h), Some(l)) = ((bytes[i + 1] as char).to_digit(16), (bytes[i + 2] as char).to_digit(16)) {
                out.push((h * 16 + l) as u8);
                i += 3;
                continue;
            }
        }
        out.push(bytes[i]);
        i += 1;
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// Builds the user message: text blocks become the text; embedded resources become selected
/// files; links become `@path` mentions; images become selected images.
pub fn user_message(blocks: &[acp::ContentBlock], mode: Option<i32>) -> Result<pb::UserMessage, CoreError> {
    let mut text = Vec::new();
    let mut context = pb::SelectedContext::default();
    for block in blocks {
        match block {
            acp::ContentBlock::Text(t) => text.push(t.text.clone()),
            acp::ContentBlock::ResourceLink(link) => {
                let target = path_of(&link.uri);
                text.push(format!("@{target}"));
            }
            acp::ContentBlock::Resource(r) => match &r.resource {
                acp::EmbeddedResourceResource::TextResourceContents(t) => {
                    context.files.push(pb::SelectedFile {
                        content: t.text.clone(),
                        path: path_of(&t.uri),
                        relative_path: None,
                    });
                }
                acp::EmbeddedResourceResource::BlobResourceContents(b) => {
                    return Err(CoreError::InvalidInput(format!(
                        "binary resource {} cannot be sent as context",
                        b.uri
                    )));
                }
                _ => return Err(CoreError::InvalidInput("unsupported embedded resource".into())),
            },
            acp::ContentBlock::Image(img) => {
                let data = base64::engine::general_purpose::STANDARD
                    .decode(img.data.as_bytes())
                    .map_err(|e| CoreError::InvalidInput(format!("image data is not base64: {e}")))?;
                context.selected_images.push(pb::SelectedImage {
                    uuid: uuid::Uuid::new_v4().to_string(),
                    path: img.uri.clone().map(|u| path_of(&u)).unwrap_or_default(),
                    mime_type: img.mime_type.clone(),
                    data_or_blob_id: Some(pb::selected_image::DataOrBlobId::Data(data.into())),
                    ..Default::default()
                });
            }
            other => {
                let kind = serde_json::to_value(other)
                    .ok()
                    .and_then(|v| v.get("type").and_then(|t| t.as_str()).map(str::to_string))
                    .unwrap_or_else(|| "unknown".into());
                return Err(CoreError::InvalidInput(format!("prompt content of type {kind:?} is not supported")));
            }
        }
    }
    let has_context = !context.files.is_empty() || !context.selected_images.is_empty();
    Ok(pb::UserMessage {
        text: text.join("\n"),
        message_id: uuid::Uuid::new_v4().to_string(),
        selected_context: has_context.then_some(context),
        mode: mode.unwrap_or(0),
        ..Default::default()
    })
}

/// `agent` / `ask` / `plan` (and the other `AgentMode` names) → the enum value.
pub fn mode_value(mode: &str) -> Result<i32, CoreError> {
    let name = format!("AGENT_MODE_{}", mode.to_ascii_uppercase());
    pb::AgentMode::from_str_name(&name)
        .map(|m| m as i32)
        .ok_or_else(|| CoreError::InvalidInput(format!("unknown mode {mode:?} (expected agent, ask, plan, debug, …)")))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn blocks_map_to_text_files_and_images() {
        let blocks = parse_content(&json!([
            { "type": "text", "text": "Fix it" },
            { "type": "resource", "resource": { "uri": "file:///w/a%20b.rs", "text": "fn main() {}" } },
            { "type": "resource_link", "uri": "file:///w/lib.rs", "name": "lib.rs" },
            { "type": "image", "data": "AAEC", "mimeType": "image/png" }
        ]))
        .unwrap();
        let m = user_message(&blocks, Some(mode_value("plan").unwrap())).unwrap();
        assert_eq!(m.text, "Fix it\n@/w/lib.rs");
        assert_eq!(m.mode, pb::AgentMode::Plan as i32);
        let ctx = m.selected_context.unwrap();
        assert_eq!(ctx.files[0].path, "/w/a b.rs");
        assert_eq!(ctx.files[0].content, "fn main() {}");
        assert_eq!(ctx.selected_images[0].mime_type, "image/png");
    }

    #[test]
    fn unknown_block_types_are_named() {
        let err = parse_content(&json!([{ "type": "audio", "data": "", "mimeType": "audio/wav" }])).unwrap_err();
        assert!(err.to_string().contains("\"audio\""), "{err}");
        let err = parse_content(&json!([{ "type": "video" }])).unwrap_err();
        assert!(err.to_string().contains("\"video\""), "{err}");
        assert!(parse_content(&json!(42)).is_err());
        assert!(mode_value("nope").is_err());
    }
}
