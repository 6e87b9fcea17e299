//! The shape `listModels()` gives: the fields a model picker shows, and the server's
//! `ModelDetails` (proto3 JSON) to send back as they are.

use cursor_acp_core::models;
use cursor_acp_core::proto::agent::v1 as pb;
use serde_json::{json, Value};

pub use models::{details_from_json, details_json};

/// `[{ modelId, displayName, displayNameShort, aliases, maxMode, thinking, details }]`.
pub fn list_json(list: &[pb::ModelDetails]) -> Value {
    Value::Array(
        list.iter()
            .map(|m| {
                json!({
                    "modelId": m.model_id,
                    "displayName": if m.display_name.is_empty() { &m.model_id } else { &m.display_name },
                    "displayNameShort": m.display_name_short,
                    "aliases": m.aliases,
                    "maxMode": m.max_mode.unwrap_or(false),
                    "thinking": m.thinking_details.is_some(),
                    "details": details_json(m),
                })
            })
            .collect(),
    )
}
