//! Small helpers the translation families share: ids, chunks, terminal `_meta`.

use agent_client_protocol_schema::v1 as acp;
use serde_json::Value;

pub(super) use crate::cards::{fenced, str_arg, text_content};

pub(super) fn new_id() -> String {
    uuid::Uuid::new_v4().to_string()
}

pub(super) fn text_block(text: impl Into<String>) -> acp::ContentBlock {
    acp::ContentBlock::Text(acp::TextContent::new(text.into()))
}

pub(super) fn chunk(text: String, id: &str) -> acp::ContentChunk {
    acp::ContentChunk::new(text_block(text)).message_id(acp::MessageId::new(id))
}

pub(super) fn terminal_meta(key: &str, value: Value) -> acp::Meta {
    let mut meta = acp::Meta::new();
    meta.insert(key.into(), value);
    meta
}
