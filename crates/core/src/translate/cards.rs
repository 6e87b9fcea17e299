//! A tool call's wire branch read as proto3 JSON ([`ToolView`]), and its card and outcome from
//! the one card source (`crate::cards`).

use prost::Message as _;
use prost_reflect::{ReflectMessage, SerializeOptions};
use serde_json::Value;

use super::translator::Translator;
use crate::cards::{self, Card, Outcome};
use crate::descriptors::dispatch;
use crate::proto::agent::v1 as pb;

/// A tool call's wire branch, args and result, read through the descriptors as proto3 JSON.
pub(super) struct ToolView {
    /// The Cursor tool key, e.g. `read`, `shell`, `mcp` (the branch name without `_tool_call`).
    pub(super) name: String,
    pub(super) args: Value,
    pub(super) result: Option<Value>,
}

pub(super) fn tool_view(call: &pb::ToolCall) -> Option<ToolView> {
    // The tool is the member of the `tool` oneof; the call's other fields (its id, times, hook
    // contexts) are not it.
    const NAME: &str = "agent.v1.ToolCall";
    let encoded = call.encode_to_vec();
    let (branch, wrapper) = dispatch(NAME, "tool", &encoded, |_, _| Ok(())).ok()??;
    let name = branch.name.strip_suffix("_tool_call").unwrap_or(branch.name).to_string();
    let options = SerializeOptions::new().skip_default_fields(true);
    let json = |name: &str| {
        let f = wrapper.descriptor().get_field_by_name(name)?;
        if !wrapper.has_field(&f) {
            return None;
        }
        let v = wrapper.get_field(&f);
        v.as_message()?.serialize_with_options(serde_json::value::Serializer, &options).ok()
    };
    Some(ToolView { args: json("args").unwrap_or(serde_json::json!({})), result: json("result"), name })
}

impl Translator {
    pub(super) fn card(&self, view: &ToolView) -> Card {
        cards::tool_card(&view.name, &view.args, &self.paths)
    }

    /// How a finished call ends; `live_output` is what its shell printed while it ran.
    pub(super) fn outcome(&self, view: &ToolView, result: &Value, live_output: &str) -> Outcome {
        cards::tool_outcome(&view.name, &view.args, result, live_output, &self.paths)
    }
}
