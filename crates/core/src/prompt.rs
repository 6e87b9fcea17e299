//! ACP prompt content → Cursor `UserMessage`.

use agent_client_protocol_schema::v1 as acp;
use base64::Engine as _;

use crate::error::CoreError;
use crate::proto::agent::v1 as pb;

/// Parses prompt content given as JSON: a string, or an array of ACP `ContentBlock`s. Block
/// types other than text, image, resource and resource_link (audio: the client advertises no
/// audio) are rejected with an error naming the type.
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

/// Builds the user message: text blocks become the text; embedded text resources become
/// selected files; links become mentions (`@path` for a file, `[name](uri)` for anything else:
/// never a read); images, and embedded blobs of an image type, become selected images. What
/// cannot be sent (another binary, audio, an image whose data is not base64) becomes a short
/// note in the text naming it, its type and size, so the model knows it was there: no block
/// fails the whole prompt.
pub fn user_message(blocks: &[acp::ContentBlock], mode: Option<i32>) -> Result<pb::UserMessage, CoreError> {
    let mut text = Vec::new();
    let mut context = pb::SelectedContext::default();
    for block in blocks {
        match block {
            acp::ContentBlock::Text(t) => text.push(t.text.clone()),
            acp::ContentBlock::ResourceLink(link) => text.push(mention(&link.uri, &link.name)),
            acp::ContentBlock::Resource(r) => match &r.resource {
                acp::EmbeddedResourceResource::TextResourceContents(t) => {
                    context.files.push(pb::SelectedFile {
                        content: t.text.clone(),
                        path: path_of(&t.uri),
                        relative_path: None,
                    });
                }
                acp::EmbeddedResourceResource::BlobResourceContents(b) => {
                    let mime = b.mime_type.as_deref().unwrap_or("application/octet-stream");
                    match image(&b.blob, mime, &b.uri) {
                        Some(img) if mime.starts_with("image/") => context.selected_images.push(img),
                        _ => text.push(note(&name_of(&b.uri), mime, base64_len(&b.blob))),
                    }
                }
                _ => text.push("[an embedded resource of a kind this client cannot send was left out]".to_string()),
            },
            acp::ContentBlock::Image(img) => {
                let uri = img.uri.clone().unwrap_or_default();
                match image(&img.data, &img.mime_type, &uri) {
                    Some(selected) => context.selected_images.push(selected),
                    None => text.push(note(&name_of(&uri), &img.mime_type, img.data.len())),
                }
            }
            acp::ContentBlock::Audio(a) => text.push(note("audio", &a.mime_type, base64_len(&a.data))),
            other => {
                let kind = serde_json::to_value(other)
                    .ok()
                    .and_then(|v| v.get("type").and_then(|t| t.as_str()).map(str::to_string))
                    .unwrap_or_else(|| "unknown".into());
                text.push(format!("[a {kind} block this client cannot send was left out]"));
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

/// What the model sees of a link: `@path` for a local file (the form Cursor's own mentions
/// take), `[name](uri)` for any other scheme.
fn mention(uri: &str, name: &str) -> String {
    if uri.starts_with("file://") {
        return format!("@{}", path_of(uri));
    }
    if name.is_empty() || name == uri {
        format!("<{uri}>")
    } else {
        format!("[{name}]({uri})")
    }
}

/// An image to select, or `None` when its data is not base64.
fn image(data: &str, mime: &str, uri: &str) -> Option<pb::SelectedImage> {
    let bytes = base64::engine::general_purpose::STANDARD.decode(data.as_bytes()).ok()?;
    Some(pb::SelectedImage {
        uuid: uuid::Uuid::new_v4().to_string(),
        path: if uri.is_empty() { String::new() } else { path_of(uri) },
        mime_type: mime.to_string(),
        data_or_blob_id: Some(pb::selected_image::DataOrBlobId::Data(bytes.into())),
        ..Default::default()
    })
}

/// The note that stands for an attachment that is not sent.
fn note(name: &str, mime: &str, bytes: usize) -> String {
    format!("[attachment not sent: {name} ({mime}, {bytes} bytes)]")
}

/// The last segment of a URI's path (what a person calls the file).
fn name_of(uri: &str) -> String {
    let path = path_of(uri);
    let name = path.rsplit(['/', '\\']).find(|s| !s.is_empty()).unwrap_or("");
    if name.is_empty() {
        "attachment".to_string()
    } else {
        name.to_string()
    }
}

/// The size of what base64 text encodes, without decoding it.
fn base64_len(data: &str) -> usize {
    let trimmed = data.trim_end_matches('=');
    trimmed.len() * 3 / 4
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
    fn no_block_fails_the_prompt_what_cannot_be_sent_is_named() {
        let blocks = parse_content(&json!([
            { "type": "text", "text": "Look" },
            { "type": "resource", "resource": { "uri": "file:///w/shot.png", "blob": "AAEC", "mimeType": "image/png" } },
            { "type": "resource", "resource": { "uri": "file:///w/spec.pdf", "blob": "JVBERi0xLjc=", "mimeType": "application/pdf" } },
            { "type": "image", "data": "not base64!", "mimeType": "image/png" },
            { "type": "resource_link", "uri": "https://example.com/issue/1", "name": "Issue 1" },
            { "type": "resource_link", "uri": "zed:///agent/thread/7", "name": "zed:///agent/thread/7" }
        ]))
        .unwrap();
        // Audio comes only from Rust callers (parse_content refuses it): a note too.
        let mut blocks = blocks;
        blocks.insert(4, acp::ContentBlock::Audio(acp::AudioContent::new("AAAA", "audio/wav")));
        let m = user_message(&blocks, None).unwrap();
        let lines: Vec<&str> = m.text.lines().collect();
        assert_eq!(
            lines,
            [
                "Look",
                "[attachment not sent: spec.pdf (application/pdf, 8 bytes)]",
                "[attachment not sent: attachment (image/png, 11 bytes)]",
                "[attachment not sent: audio (audio/wav, 3 bytes)]",
                "[Issue 1](https://example.com/issue/1)",
                "<zed:///agent/thread/7>",
            ]
        );
        let ctx = m.selected_context.unwrap();
        assert_eq!(ctx.selected_images.len(), 1, "the blob of an image type is an image");
        assert_eq!(ctx.selected_images[0].path, "/w/shot.png");
        assert!(ctx.files.is_empty());
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
