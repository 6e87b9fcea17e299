//! A tool call reporting the result of the exec the client ran for it, as Cursor's server
//! reports it in `tool_call_completed`: the exec's result message becomes the tool call's
//! result (the same message for `ls`, `grep`, the shells, …; a read's `ReadResult` becomes the
//! read tool's `ReadToolResult`).

use prost::Message;
use prost_reflect::{DynamicMessage, ReflectMessage as _, Value};
use serde::Serialize as _;
use serde_json::json;

use cursor_acp_core::descriptors::whole_schema as pool;
use cursor_acp_core::proto::agent::v1 as pb;
use cursor_acp_core::protojson;

/// `call` with its result set to the one `reply` carries.
pub(crate) fn with_exec_result(call: pb::ToolCall, reply: &pb::ExecClientMessage) -> Result<pb::ToolCall, String> {
    let mut call = dynamic("agent.v1.ToolCall", &call)?;
    let (tool_field, tool) = call.fields().next().map(|(f, v)| (f, v.clone())).ok_or("the tool call names no tool")?;
    let mut tool = tool.as_message().cloned().ok_or("the tool call's branch is not a message")?;
    let result_field = tool.descriptor().get_field_by_name("result").ok_or("this tool has no result")?;
    let prost_reflect::Kind::Message(wanted) = result_field.kind() else {
        return Err("the tool's result is not a message".into());
    };
    let reply = dynamic("agent.v1.ExecClientMessage", reply)?;
    let (_, answered) = reply
        .fields()
        .find(|(f, _)| f.containing_oneof().is_some_and(|o| o.name() == "message"))
        .ok_or("the exec was not answered with a result")?;
    let answered = answered.as_message().ok_or("the exec's result is not a message")?;
    let result = if answered.descriptor() == wanted {
        answered.clone()
    } else if answered.descriptor().full_name() == "agent.v1.ReadResult"
        && wanted.full_name() == "agent.v1.ReadToolResult"
    {
        read_tool_result(answered)?
    } else {
        return Err(format!("a {} does not report a {}", answered.descriptor().full_name(), wanted.full_name()));
    };
    tool.set_field(&result_field, Value::Message(result));
    call.set_field(&tool_field, Value::Message(tool));
    pb::ToolCall::decode(call.encode_to_vec().as_slice()).map_err(|e| e.to_string())
}

/// A generated message as a dynamic one, to reach its fields by name.
fn dynamic(name: &str, message: &impl Message) -> Result<DynamicMessage, String> {
    let descriptor = pool().get_message_by_name(name).ok_or(format!("no {name} in the schema"))?;
    DynamicMessage::decode(descriptor, message.encode_to_vec().as_slice()).map_err(|e| e.to_string())
}

/// What the server makes of a read the client answered: the content and counts on success,
/// the reason otherwise.
fn read_tool_result(read: &DynamicMessage) -> Result<DynamicMessage, String> {
    let read: serde_json::Value = read.serialize(serde_json::value::Serializer).map_err(|e| e.to_string())?;
    let tool_result = match read.get("success") {
        Some(s) => json!({ "success": {
            "path": s.get("path"),
            "content": s.get("content"),
            "totalLines": s.get("totalLines"),
            "fileSize": s.get("fileSize"),
            "exceededLimit": s.get("truncated"),
        } }),
        None => {
            let why = read
                .as_object()
                .and_then(|o| o.iter().next())
                .map(|(branch, body)| {
                    body.get("error")
                        .or_else(|| body.get("reason"))
                        .and_then(|e| e.as_str())
                        .unwrap_or(branch)
                        .to_string()
                })
                .unwrap_or_default();
            json!({ "error": { "errorMessage": why } })
        }
    };
    let tool_result = strip_nulls(tool_result);
    let message: pb::ReadToolResult = protojson::from_json("agent.v1.ReadToolResult", &tool_result)?;
    dynamic("agent.v1.ReadToolResult", &message)
}

fn strip_nulls(value: serde_json::Value) -> serde_json::Value {
    match value {
        serde_json::Value::Object(fields) => serde_json::Value::Object(
            fields.into_iter().filter(|(_, v)| !v.is_null()).map(|(k, v)| (k, strip_nulls(v))).collect(),
        ),
        other => other,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use cursor_acp_core::protojson::from_json;

    fn reply(json: serde_json::Value) -> pb::ExecClientMessage {
        from_json("agent.v1.ExecClientMessage", &json).unwrap()
    }

    fn call(json: serde_json::Value) -> pb::ToolCall {
        from_json("agent.v1.ToolCall", &json).unwrap()
    }

    fn to_json(call: &pb::ToolCall) -> serde_json::Value {
        protojson::to_json("agent.v1.ToolCall", &call.encode_to_vec()).unwrap()
    }

    #[test]
    fn the_exec_result_becomes_the_tool_calls() {
        let ls = reply(
            json!({ "id": 1, "lsResult": { "success": { "directoryTreeRoot": { "absPath": "/w", "numFiles": 2 } } } }),
        );
        let out = with_exec_result(call(json!({ "lsToolCall": { "args": { "path": "/w" } } })), &ls).unwrap();
        assert_eq!(to_json(&out)["lsToolCall"]["result"]["success"]["directoryTreeRoot"]["absPath"], "/w");
        let read = reply(
            json!({ "id": 2, "readResult": { "success": { "path": "/w/a", "content": "x\n", "totalLines": 1 } } }),
        );
        let out = with_exec_result(call(json!({ "readToolCall": { "args": { "path": "/w/a" } } })), &read).unwrap();
        assert_eq!(
            to_json(&out)["readToolCall"]["result"]["success"],
            json!({ "path": "/w/a", "content": "x\n", "totalLines": 1 })
        );
        let missing = reply(json!({ "id": 3, "readResult": { "fileNotFound": { "path": "/w/b" } } }));
        let out = with_exec_result(call(json!({ "readToolCall": { "args": { "path": "/w/b" } } })), &missing).unwrap();
        assert!(to_json(&out)["readToolCall"]["result"]["error"].is_object());
        let err = with_exec_result(call(json!({ "lsToolCall": {} })), &read).unwrap_err();
        assert!(err.contains("ReadResult"), "{err}");
    }
}
