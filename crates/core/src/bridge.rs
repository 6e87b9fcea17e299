//! Generic decoding of exec requests / interaction queries and encoding of their replies,
//! driven by the descriptors: an `ExecServerMessage` branch is answered by the `ExecClientMessage`
//! branch named after it (`read_args` → `read_result`), an `InteractionQuery` branch by the
//! `InteractionResponse` branch of the same number.

use bytes::{Bytes, BytesMut};
use prost::encoding::{encode_key, encode_varint, WireType};
use prost_reflect::{DynamicMessage, Kind, MessageDescriptor, ReflectMessage, SerializeOptions, Value};

use crate::descriptors::{self, dispatch};
use crate::field::agent::v1 as f;
use crate::host::{ExecRequest, InteractionRequest};
use crate::kinds::{ExecKind, InteractionKind};
use crate::proto::agent::v1 as pb;
use crate::wire::{put_length_delimited, Field, Pieces};

fn to_json(msg: &DynamicMessage) -> serde_json::Value {
    let options = SerializeOptions::new().skip_default_fields(true);
    msg.serialize_with_options(serde_json::value::Serializer, &options).unwrap_or(serde_json::Value::Null)
}

fn wrong_wire_type(message: &str, number: u32) -> String {
    format!("{message} field {number}: not of its type on the wire")
}

/// Decodes an `ExecServerMessage`. `Ok(None)`: a branch this schema does not know (answer with
/// throw + close); `Err`: the bytes are not an `ExecServerMessage`.
pub fn decode_exec(raw: &[u8]) -> Result<(u32, String, Option<ExecRequest>), String> {
    use f::exec_server_message::{ACCEPT_HOOK_ADDITIONAL_CONTEXTS, EXEC_ID, ID, SPAN_CONTEXT};
    const NAME: &str = "agent.v1.ExecServerMessage";
    let (mut id, mut exec_id, mut accept_hook_additional_contexts) = (0, String::new(), false);
    let branch = dispatch(NAME, "message", raw, |number, value| {
        match (number, value) {
            // A larger varint is truncated to 32 bits, as protobuf reads a uint32.
            (ID, Field::Varint(v)) => id = v as u32,
            (ACCEPT_HOOK_ADDITIONAL_CONTEXTS, Field::Varint(v)) => accept_hook_additional_contexts = v != 0,
            (EXEC_ID, Field::LengthDelimited(bytes)) => {
                exec_id = std::str::from_utf8(bytes).map_err(|_| format!("{NAME}.exec_id is not UTF-8"))?.to_string()
            }
            // Not read, but prost refuses the whole message when it is not a valid SpanContext.
            (SPAN_CONTEXT, Field::LengthDelimited(bytes)) => {
                let desc =
                    descriptors::message("agent.v1.SpanContext").ok_or("agent.v1.SpanContext is not in proto/")?;
                descriptors::check(&desc, bytes, descriptors::RECURSION_LIMIT - 1)
                    .map_err(|e| format!("{NAME}.span_context: {e}"))?
            }
            (ID | ACCEPT_HOOK_ADDITIONAL_CONTEXTS | EXEC_ID | SPAN_CONTEXT, _) => {
                return Err(wrong_wire_type(NAME, number))
            }
            _ => {}
        }
        Ok(())
    })?;
    let Some((branch, args)) = branch else { return Ok((id, exec_id, None)) };
    let request = ExecRequest {
        id,
        exec_id: exec_id.clone(),
        kind: ExecKind::from_field(branch.number)
            .map_or_else(|| branch.json_name.to_string(), |k| k.name().to_string()),
        args: to_json(&args),
        accept_hook_additional_contexts,
        field: branch.number,
    };
    Ok((id, exec_id, Some(request)))
}

/// Decodes an `InteractionQuery`; `None` branch as for [`decode_exec`].
pub fn decode_interaction(raw: &[u8]) -> Result<(u32, Option<InteractionRequest>), String> {
    use f::interaction_query::ID;
    const NAME: &str = "agent.v1.InteractionQuery";
    let mut id = 0;
    let branch = dispatch(NAME, "query", raw, |number, value| {
        match (number, value) {
            (ID, Field::Varint(v)) => id = v as u32,
            (ID, _) => return Err(wrong_wire_type(NAME, number)),
            _ => {}
        }
        Ok(())
    })?;
    let Some((branch, query)) = branch else { return Ok((id, None)) };
    let kind = InteractionKind::from_field(branch.number)
        .map_or_else(|| branch.json_name.to_string(), |k| k.name().to_string());
    Ok((id, Some(InteractionRequest { id, kind, query: to_json(&query), field: branch.number })))
}

/// The message type of member `number` of dispatch oneof `container`.`oneof`.
fn field_type(container: &str, oneof: &str, number: u32) -> Result<MessageDescriptor, String> {
    let branch =
        descriptors::branch(container, oneof, number).ok_or_else(|| format!("{container} has no field {number}"))?;
    descriptors::message(branch.message).ok_or_else(|| format!("{} is not in proto/", branch.message))
}

/// The `ExecClientMessage` field that carries the host's result for `request`: the branch
/// named after the args branch (`read_args` → `read_result`, `git_diff_request` →
/// `git_diff_response`). Names, not numbers: the older branches share their numbers, newer
/// ones do not (`pi_read_args` = 45 is answered by `pi_read_result` = 46, while 45 is
/// `hook_additional_contexts`). A streaming shell (`shell_stream_args`) is answered by stream
/// events and finally a `shell_result`, which is what the host returns.
pub fn result_field(request: &ExecRequest) -> Result<u32, String> {
    let args = descriptors::branch("agent.v1.ExecServerMessage", "message", request.field)
        .ok_or_else(|| format!("ExecServerMessage has no field {}", request.field))?;
    let result_name = match args.name {
        "shell_stream_args" => "shell_result".to_string(),
        name => match (name.strip_suffix("_args"), name.strip_suffix("_request")) {
            (Some(stem), _) => format!("{stem}_result"),
            (None, Some(stem)) => format!("{stem}_response"),
            (None, None) => return Err(format!("ExecServerMessage.{name} names no result branch")),
        },
    };
    descriptors::branches("agent.v1.ExecClientMessage", "message")
        .iter()
        .find(|b| b.name == result_name)
        .map(|b| b.number)
        .ok_or_else(|| format!("ExecClientMessage has no {result_name} branch answering {}", args.name))
}

/// The message type of the result that answers `request`.
fn result_type(request: &ExecRequest) -> Result<(u32, MessageDescriptor), String> {
    let field = result_field(request)?;
    Ok((field, field_type("agent.v1.ExecClientMessage", "message", field)?))
}

/// Name of the result message that answers `request` (e.g. `agent.v1.ReadResult`).
pub fn exec_result_type(request: &ExecRequest) -> Result<String, String> {
    Ok(result_type(request)?.1.full_name().to_string())
}

/// The JSON for a byte array the host returned at `path` of its result for `request`: base64
/// (proto3 JSON's form) for a `bytes` field, the text for a `string` field if it is UTF-8.
/// JavaScript hosts hand over `Uint8Array`s this way, e.g. a file read into a `Buffer`.
pub fn byte_array_json(request: &ExecRequest, path: &[String], data: Vec<u8>) -> Result<serde_json::Value, String> {
    use base64::Engine as _;
    let shown = path.join(".");
    let (last, parents) = path.split_last().ok_or("a byte array is not a result")?;
    let mut desc = result_type(request)?.1;
    let field_named = |desc: &MessageDescriptor, name: &str| {
        desc.get_field_by_json_name(name)
            .or_else(|| desc.get_field_by_name(name))
            .ok_or_else(|| format!("`{shown}`: {} has no field {name}", desc.full_name()))
    };
    for name in parents {
        let field = field_named(&desc, name)?;
        desc = match field.kind() {
            Kind::Message(inner) if !field.is_list() && !field.is_map() => inner,
            _ => return Err(format!("`{shown}`: {name} is not a message field")),
        };
    }
    let field = field_named(&desc, last)?;
    match field.kind() {
        _ if field.is_list() || field.is_map() => {
            Err(format!("`{shown}` is a list or map; a byte array cannot fill it"))
        }
        Kind::Bytes => Ok(serde_json::Value::String(base64::engine::general_purpose::STANDARD.encode(&data))),
        Kind::String => String::from_utf8(data)
            .map(serde_json::Value::String)
            .map_err(|_| format!("`{shown}` is text, and the byte array given for it is not UTF-8")),
        kind => Err(format!("`{shown}` holds {kind:?}; a byte array fits only bytes and string fields")),
    }
}

fn from_json(desc: MessageDescriptor, json: serde_json::Value) -> Result<DynamicMessage, String> {
    let name = desc.full_name().to_string();
    let options = prost_reflect::DeserializeOptions::new().deny_unknown_fields(true);
    // By value: the JSON's strings move into the message instead of being copied (a read
    // result can be megabytes).
    DynamicMessage::deserialize_with_options(desc, json, &options).map_err(|e| format!("not a valid {name}: {e}"))
}

/// What an exec's answer carries besides its result message (`ExecClientMessage` fields 39
/// and 45): how long the client worked on it, and hooks' additional contexts when the server
/// said it accepts them.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct ReplyExtras {
    pub local_execution_time_ms: Option<i32>,
    pub hook_additional_contexts: Vec<pb::HookAdditionalContext>,
}

impl ReplyExtras {
    /// Nothing besides the message: what stream events carry.
    pub const NONE: ReplyExtras = ReplyExtras { local_execution_time_ms: None, hook_additional_contexts: Vec::new() };

    fn encoded_len(&self) -> usize {
        use f::exec_client_message::{HOOK_ADDITIONAL_CONTEXTS, LOCAL_EXECUTION_TIME_MS};
        let time = self
            .local_execution_time_ms
            .map_or(0, |ms| prost::encoding::int32::encoded_len(LOCAL_EXECUTION_TIME_MS, &ms));
        time + prost::encoding::message::encoded_len_repeated(HOOK_ADDITIONAL_CONTEXTS, &self.hook_additional_contexts)
    }

    fn encode(&self, out: &mut BytesMut) {
        use f::exec_client_message::{HOOK_ADDITIONAL_CONTEXTS, LOCAL_EXECUTION_TIME_MS};
        if let Some(ms) = &self.local_execution_time_ms {
            prost::encoding::int32::encode(LOCAL_EXECUTION_TIME_MS, ms, out);
        }
        for context in &self.hook_additional_contexts {
            prost::encoding::message::encode(HOOK_ADDITIONAL_CONTEXTS, context, out);
        }
    }
}

/// `AgentClientMessage{exec_client_message: ExecClientMessage{id, <field>: result, exec_id, …extras}}`,
/// encoded straight into one buffer of the exact size: the result is written once, not encoded
/// and then copied into each enclosing message.
pub fn exec_client_message(
    id: u32,
    exec_id: &str,
    field: u32,
    result: &impl prost::Message,
    extras: &ReplyExtras,
) -> Bytes {
    let result_len = result.encoded_len();
    exec_reply(id, exec_id, field, extras, result_len, result_len, |out| result.encode_raw(&mut out.small)).into_bytes()
}

/// Encodes the host's JSON result for `request` as the `AgentClientMessage` that answers it.
/// Large values (a file's content, a command's output) are moved into the encoding, not copied:
/// a 12 MiB read result goes from the host's JSON to the wire without a second 12 MiB buffer.
pub fn exec_result(request: &ExecRequest, result: serde_json::Value, extras: &ReplyExtras) -> Result<Pieces, String> {
    let (field, desc) = result_type(request)?;
    let message = from_json(desc, result)?;
    let result_len = prost::Message::encoded_len(&message);
    Ok(exec_reply(request.id, &request.exec_id, field, extras, result_len, 0, |out| encode_spliced(message, out)))
}

/// The exec reply envelope around a result of `result_len` bytes that `write_result` produces;
/// `inline` is how much of it lands in the small buffer (sized up front).
fn exec_reply(
    id: u32,
    exec_id: &str,
    field: u32,
    extras: &ReplyExtras,
    result_len: usize,
    inline: usize,
    write_result: impl FnOnce(&mut Splicer),
) -> Pieces {
    use f::exec_client_message::{EXEC_ID, ID};
    use prost::encoding::{encoded_len_varint, key_len};
    let mut exec_len = key_len(ID) + encoded_len_varint(id as u64);
    exec_len += key_len(field) + encoded_len_varint(result_len as u64) + result_len;
    if !exec_id.is_empty() {
        exec_len += key_len(EXEC_ID) + encoded_len_varint(exec_id.len() as u64) + exec_id.len();
    }
    let extras_len = extras.encoded_len();
    exec_len += extras_len;
    let envelope =
        key_len(f::agent_client_message::EXEC_CLIENT_MESSAGE) + encoded_len_varint(exec_len as u64) + exec_len
            - result_len;
    let mut out = Splicer { pieces: Pieces::default(), small: BytesMut::with_capacity(envelope + inline) };
    out.field_header(f::agent_client_message::EXEC_CLIENT_MESSAGE, exec_len);
    // Fields in the order prost writes them (by number, a oneof at its lowest): id, the
    // result, exec_id, local_execution_time_ms, hook_additional_contexts.
    encode_key(ID, WireType::Varint, &mut out.small);
    encode_varint(id as u64, &mut out.small);
    out.field_header(field, result_len);
    write_result(&mut out);
    if !exec_id.is_empty() {
        put_length_delimited(&mut out.small, EXEC_ID, exec_id.as_bytes());
    }
    extras.encode(&mut out.small);
    out.finish()
}

/// String and bytes values at least this large are moved into an encoding rather than copied.
const SPLICE_MIN: usize = 64 * 1024;

/// Builds [`Pieces`]: small fields are encoded into `small`, large values become pieces of
/// their own.
struct Splicer {
    pieces: Pieces,
    small: BytesMut,
}

impl Splicer {
    /// Key and length of length-delimited field `number`.
    fn field_header(&mut self, number: u32, len: usize) {
        encode_key(number, WireType::LengthDelimited, &mut self.small);
        encode_varint(len as u64, &mut self.small);
    }

    fn large(&mut self, value: Bytes) {
        self.pieces.push(self.small.split().freeze());
        self.pieces.push(value);
    }

    fn finish(mut self) -> Pieces {
        self.pieces.push(self.small.split().freeze());
        self.pieces
    }
}

/// Encodes `msg` field by field, in field-number order as prost-reflect does, moving singular
/// string and bytes values of [`SPLICE_MIN`] bytes or more (also inside nested messages) into
/// pieces of their own. Every other field is encoded exactly as prost-reflect encodes it.
fn encode_spliced(mut msg: DynamicMessage, out: &mut Splicer) {
    let desc = msg.descriptor();
    let mut fields: Vec<_> = msg.take_fields().collect();
    fields.sort_by_key(|(field, _)| field.number());
    for (field, value) in fields {
        let singular = !field.is_list() && !field.is_map();
        match value {
            Value::String(text) if singular && text.len() >= SPLICE_MIN => {
                out.field_header(field.number(), text.len());
                out.large(Bytes::from(text));
            }
            Value::Bytes(bytes) if singular && bytes.len() >= SPLICE_MIN => {
                out.field_header(field.number(), bytes.len());
                out.large(bytes);
            }
            Value::Message(inner) if singular && prost::Message::encoded_len(&inner) >= SPLICE_MIN => {
                out.field_header(field.number(), prost::Message::encoded_len(&inner));
                encode_spliced(inner, out);
            }
            value => {
                let mut single = DynamicMessage::new(desc.clone());
                single.set_field(&field, value);
                prost::Message::encode_raw(&single, &mut out.small);
            }
        }
    }
}

/// The result type's own error branch (`{error:{error, path?}}`), when it has one whose message
/// carries an `error` string; otherwise `None` (the caller then throws).
pub fn exec_error_result(request: &ExecRequest, message: &str, extras: &ReplyExtras) -> Option<Bytes> {
    let (field, desc) = result_type(request).ok()?;
    let error_field = desc.get_field_by_name("error")?;
    let Kind::Message(error_desc) = error_field.kind() else { return None };
    let mut error = DynamicMessage::new(error_desc.clone());
    let text_field = error_desc.get_field_by_name("error").filter(|f| matches!(f.kind(), Kind::String))?;
    error.set_field(&text_field, Value::String(message.to_string()));
    if let (Some(path_field), Some(path)) =
        (error_desc.get_field_by_name("path"), request.args.get("path").and_then(|p| p.as_str()))
    {
        if matches!(path_field.kind(), Kind::String) {
            error.set_field(&path_field, Value::String(path.to_string()));
        }
    }
    let mut result = DynamicMessage::new(desc);
    result.set_field(&error_field, Value::Message(error));
    Some(exec_client_message(request.id, &request.exec_id, field, &result, extras))
}

/// Encodes the host's JSON response to `query`. A response that chooses none of its type's
/// answers (`{}` for a web search approval) is refused: the server must get an explicit one.
pub fn interaction_response(query: &InteractionRequest, response: serde_json::Value) -> Result<Bytes, String> {
    let desc = field_type("agent.v1.InteractionResponse", "result", query.field)?;
    let message = from_json(desc, response)?;
    if !chooses_an_answer(&message) {
        return Err(format!("{} sets none of its branches", message.descriptor().full_name()));
    }
    Ok(interaction_response_bytes(query.id, query.field, &prost::Message::encode_to_vec(&message)))
}

/// Whether `msg` picks an answer: a branch of each of its oneofs, or, for a wrapper whose only
/// content is a `result` message (`AskQuestionInteractionResponse`), a branch of that.
fn chooses_an_answer(msg: &DynamicMessage) -> bool {
    let desc = msg.descriptor();
    let mut oneofs = desc.oneofs().filter(|o| !o.is_synthetic()).peekable();
    if oneofs.peek().is_some() {
        return oneofs.all(|o| o.fields().any(|f| msg.has_field(&f)));
    }
    match desc.get_field_by_name("result").filter(|f| matches!(f.kind(), Kind::Message(_))) {
        Some(result) => match msg.get_field(&result).as_message() {
            Some(inner) if msg.has_field(&result) => chooses_an_answer(inner),
            _ => false,
        },
        None => true,
    }
}

/// `InteractionResponse{id, <field>: response}` bytes.
fn interaction_response_bytes(id: u32, field: u32, response: &[u8]) -> Bytes {
    let mut out = BytesMut::with_capacity(response.len() + 16);
    encode_key(f::interaction_response::ID, WireType::Varint, &mut out);
    encode_varint(id as u64, &mut out);
    put_length_delimited(&mut out, field, response);
    out.freeze()
}

/// Fills `msg` with a refusal: `rejected{reason}` when the type has it, else recurse into a
/// `result` wrapper, else `error`/`failure`/`failed` with the reason in its text field; never
/// an empty answer when the schema offers an explicit one.
fn refuse(msg: &mut DynamicMessage, reason: &str) -> bool {
    let desc = msg.descriptor();
    for branch in ["rejected", "error", "failure", "failed"] {
        if let Some(field) = desc.get_field_by_name(branch) {
            if let Kind::Message(inner_desc) = field.kind() {
                let mut inner = DynamicMessage::new(inner_desc.clone());
                let text = ["reason", "error", "error_message", "message"]
                    .iter()
                    .find_map(|name| inner_desc.get_field_by_name(name).filter(|f| matches!(f.kind(), Kind::String)));
                if let Some(text) = text {
                    inner.set_field(&text, Value::String(reason.to_string()));
                }
                msg.set_field(&field, Value::Message(inner));
                return true;
            }
        }
        if branch == "rejected" {
            if let Some(field) = desc.get_field_by_name("result") {
                if let Kind::Message(inner_desc) = field.kind() {
                    let mut inner = DynamicMessage::new(inner_desc);
                    if refuse(&mut inner, reason) {
                        msg.set_field(&field, Value::Message(inner));
                        return true;
                    }
                }
            }
        }
    }
    false
}

/// The response that refuses `query` (used when no host callback answers it, or on cancel).
pub fn interaction_rejection(query: &InteractionRequest, reason: &str) -> Bytes {
    let bytes = match field_type("agent.v1.InteractionResponse", "result", query.field) {
        Ok(desc) => {
            let mut msg = DynamicMessage::new(desc);
            refuse(&mut msg, reason);
            prost::Message::encode_to_vec(&msg)
        }
        Err(_) => Vec::new(),
    };
    interaction_response_bytes(query.id, query.field, &bytes)
}

#[cfg(test)]
mod tests {
    use super::*;
    use prost::Message;

    /// A message of the whole schema: the tests below read it independently of the dispatch
    /// tables the code under test uses.
    fn descriptor(name: &str) -> MessageDescriptor {
        descriptors::whole_schema().get_message_by_name(name).unwrap()
    }

    /// The `ExecClientMessage` inside an encoded `AgentClientMessage`.
    fn exec_client_message_of(bytes: Bytes) -> pb::ExecClientMessage {
        match pb::AgentClientMessage::decode(bytes).unwrap().message {
            Some(pb::agent_client_message::Message::ExecClientMessage(m)) => *m,
            other => panic!("not an exec client message: {other:?}"),
        }
    }

    #[test]
    fn exec_replies_are_encoded_exactly_as_prost_would() {
        let result = pb::ReadResult {
            result: Some(pb::read_result::Result::Success(pb::ReadSuccess {
                path: "/a".into(),
                output: Some(pb::read_success::Output::Content("x".repeat(300))),
                ..Default::default()
            })),
        };
        let expected = pb::AgentClientMessage {
            message: Some(pb::agent_client_message::Message::ExecClientMessage(Box::new(pb::ExecClientMessage {
                id: 300,
                exec_id: "exec-1".into(),
                message: Some(pb::exec_client_message::Message::ReadResult(result.clone())),
                ..Default::default()
            }))),
        }
        .encode_to_vec();
        let bytes =
            exec_client_message(300, "exec-1", f::exec_client_message::READ_RESULT, &result, &ReplyExtras::NONE);
        assert_eq!(bytes.as_ref(), expected.as_slice());
        // No exec id: the field is left out, as prost leaves out an empty string.
        let no_id = exec_client_message(1, "", f::exec_client_message::READ_RESULT, &result, &ReplyExtras::NONE);
        assert_eq!(exec_client_message_of(no_id).exec_id, "");
    }

    #[test]
    fn the_execution_time_and_hook_contexts_are_encoded_as_prost_would() {
        let result = pb::GrepResult::default();
        let hook = pb::HookAdditionalContext { hook_event_name: "postToolUse".into(), content: "lint ok".into() };
        let extras = ReplyExtras { local_execution_time_ms: Some(1234), hook_additional_contexts: vec![hook.clone()] };
        let expected = pb::AgentClientMessage {
            message: Some(pb::agent_client_message::Message::ExecClientMessage(Box::new(pb::ExecClientMessage {
                id: 9,
                exec_id: "e9".into(),
                local_execution_time_ms: Some(1234),
                hook_additional_contexts: vec![hook],
                message: Some(pb::exec_client_message::Message::GrepResult(result.clone())),
            }))),
        }
        .encode_to_vec();
        let bytes = exec_client_message(9, "e9", f::exec_client_message::GREP_RESULT, &result, &extras);
        assert_eq!(bytes.as_ref(), expected.as_slice());
        let (_, _, req) = decode_exec(&exec(pb::exec_server_message::Message::GrepArgs(Default::default()))).unwrap();
        let pieces = exec_result(&req.unwrap(), serde_json::json!({}), &extras).unwrap();
        let msg = exec_client_message_of(pieces.into_bytes());
        assert_eq!((msg.local_execution_time_ms, msg.hook_additional_contexts.len()), (Some(1234), 1));
    }

    #[test]
    fn the_server_accepting_hook_contexts_is_read_from_the_request() {
        let mut m = pb::ExecServerMessage {
            id: 1,
            message: Some(pb::exec_server_message::Message::LsArgs(Default::default())),
            ..Default::default()
        };
        let (_, _, req) = decode_exec(&m.encode_to_vec()).unwrap();
        assert!(!req.unwrap().accept_hook_additional_contexts);
        m.accept_hook_additional_contexts = Some(true);
        let (_, _, req) = decode_exec(&m.encode_to_vec()).unwrap();
        assert!(req.unwrap().accept_hook_additional_contexts);
    }

    #[test]
    fn large_values_are_moved_into_the_reply_and_the_bytes_are_what_prost_encodes() {
        let (_, _, req) = decode_exec(&exec(pb::exec_server_message::Message::ReadArgs(Default::default()))).unwrap();
        let req = req.unwrap();
        let content: String = (0..200_000).map(|i| char::from(b'a' + (i % 26) as u8)).collect();
        let json =
            serde_json::json!({"success": {"path": "/big", "content": content, "totalLines": 3, "fileSize": "200000"}});
        let pieces = exec_result(&req, json.clone(), &ReplyExtras::NONE).unwrap();
        // The content is a piece of its own (moved, not copied into a bigger buffer).
        assert!(pieces.chunks().iter().any(|c| c.len() == content.len() && c[..] == *content.as_bytes()));
        // Byte for byte what prost-reflect encodes for the same message in one buffer.
        let (field, desc) = result_type(&req).unwrap();
        let message = from_json(desc, json).unwrap();
        let whole = exec_client_message(7, "e7", field, &message, &ReplyExtras::NONE);
        assert_eq!(pieces.len(), whole.len());
        let bytes = pieces.into_bytes();
        assert_eq!(bytes, whole);
        // And it decodes to the message the JSON describes.
        let msg = exec_client_message_of(bytes);
        assert_eq!((msg.id, msg.exec_id.as_str()), (7, "e7"));
        let Some(pb::exec_client_message::Message::ReadResult(pb::ReadResult {
            result: Some(pb::read_result::Result::Success(success)),
        })) = msg.message
        else {
            panic!("not a read success")
        };
        assert_eq!(success.output, Some(pb::read_success::Output::Content(content.clone())));
        assert_eq!((success.path.as_str(), success.total_lines, success.file_size), ("/big", 3, 200_000));
        // Small results stay in one piece.
        let small =
            exec_result(&req, serde_json::json!({"success": {"path": "/a", "content": "hi"}}), &ReplyExtras::NONE)
                .unwrap();
        assert_eq!(small.chunks().len(), 1);
    }

    fn exec(m: pb::exec_server_message::Message) -> Vec<u8> {
        pb::ExecServerMessage { id: 7, exec_id: "e7".into(), message: Some(m), ..Default::default() }.encode_to_vec()
    }

    #[test]
    fn exec_envelopes_that_are_not_well_formed_are_refused_by_name() {
        use f::exec_server_message::{EXEC_ID, ID, READ_ARGS};
        let read =
            exec(pb::exec_server_message::Message::ReadArgs(pb::ReadArgs { path: "/a".into(), ..Default::default() }));
        // Cut inside the read args: the length runs past the end.
        assert!(decode_exec(&read[..read.len() - 1]).is_err());
        let mut bad_id = BytesMut::new();
        put_length_delimited(&mut bad_id, EXEC_ID, &[0xff, 0xfe]);
        assert!(decode_exec(&bad_id).unwrap_err().contains("exec_id is not UTF-8"));
        let mut id_as_bytes = BytesMut::new();
        put_length_delimited(&mut id_as_bytes, ID, b"7");
        assert!(decode_exec(&id_as_bytes).unwrap_err().contains("field 1"));
        let mut args_as_varint = BytesMut::new();
        encode_key(READ_ARGS, WireType::Varint, &mut args_as_varint);
        encode_varint(1, &mut args_as_varint);
        assert!(decode_exec(&args_as_varint).unwrap_err().contains("read_args"));
        // Fixed-width encodings of known fields, which protobuf parsers refuse too.
        let mut id_as_fixed32 = BytesMut::new();
        encode_key(ID, WireType::ThirtyTwoBit, &mut id_as_fixed32);
        id_as_fixed32.extend_from_slice(&7u32.to_le_bytes());
        assert!(pb::ExecServerMessage::decode(&id_as_fixed32[..]).is_err());
        assert!(decode_exec(&id_as_fixed32).unwrap_err().contains("field 1"));
        let mut args_as_fixed64 = BytesMut::new();
        encode_key(READ_ARGS, WireType::SixtyFourBit, &mut args_as_fixed64);
        args_as_fixed64.extend_from_slice(&[0; 8]);
        assert!(decode_exec(&args_as_fixed64).unwrap_err().contains("read_args"));
        // An unknown fixed-width field is skipped, as protobuf skips it.
        let mut unknown_fixed = BytesMut::from(&read[..]);
        encode_key(3999, WireType::ThirtyTwoBit, &mut unknown_fixed);
        unknown_fixed.extend_from_slice(&[0; 4]);
        assert_eq!(decode_exec(&unknown_fixed).unwrap().2.unwrap().kind, "read");
        // Args that are not a ReadArgs: `path` (1) as a varint.
        let mut wrong_args = BytesMut::new();
        put_length_delimited(&mut wrong_args, READ_ARGS, &[0x08, 0x01]);
        assert!(decode_exec(&wrong_args).unwrap_err().contains("ExecServerMessage.read_args"));
    }

    #[test]
    fn an_exec_branch_of_a_newer_schema_is_none_and_the_last_branch_on_the_wire_wins() {
        use f::exec_server_message::LS_ARGS;
        let mut newer = BytesMut::new();
        encode_key(f::exec_server_message::ID, WireType::Varint, &mut newer);
        encode_varint(9, &mut newer);
        put_length_delimited(&mut newer, 4000, b"\x0a\x01x");
        let (id, _, request) = decode_exec(&newer).unwrap();
        assert_eq!((id, request.is_none()), (9, true));
        let mut both = BytesMut::from(&exec(pb::exec_server_message::Message::ReadArgs(Default::default()))[..]);
        put_length_delimited(&mut both, LS_ARGS, &[]);
        assert_eq!(decode_exec(&both).unwrap().2.unwrap().kind, "ls");
    }

    #[test]
    fn exec_branches_decode_with_camel_case_kinds() {
        let (id, exec_id, req) = decode_exec(&exec(pb::exec_server_message::Message::ReadArgs(pb::ReadArgs {
            path: "/a".into(),
            ..Default::default()
        })))
        .unwrap();
        let req = req.unwrap();
        assert_eq!((id, exec_id.as_str(), req.kind.as_str(), req.field), (7, "e7", "read", 7));
        assert_eq!(req.args, serde_json::json!({"path": "/a"}));
        let (_, _, req) = decode_exec(&exec(pb::exec_server_message::Message::ShellStreamArgs(pb::ShellArgs {
            command: "ls".into(),
            ..Default::default()
        })))
        .unwrap();
        let req = req.unwrap();
        assert_eq!(req.kind, "shellStream");
        assert_eq!(exec_result_type(&req).unwrap(), "agent.v1.ShellResult", "streamed shells end with shell_result");
        let (_, _, req) =
            decode_exec(&exec(pb::exec_server_message::Message::ListMcpResourcesExecArgs(Default::default()))).unwrap();
        assert_eq!(req.unwrap().kind, "listMcpResources");
    }

    #[test]
    fn every_exec_branch_is_answered_by_the_result_branch_named_after_it() {
        let server = descriptor("agent.v1.ExecServerMessage");
        let client = descriptor("agent.v1.ExecClientMessage");
        let branches = server.oneofs().find(|o| o.name() == "message").unwrap();
        for args in branches.fields() {
            let request = ExecRequest {
                id: 1,
                exec_id: String::new(),
                kind: String::new(),
                args: serde_json::Value::Null,
                accept_hook_additional_contexts: false,
                field: args.number(),
            };
            let number = result_field(&request).unwrap_or_else(|e| panic!("{}: {e}", args.name()));
            let result = client.get_field(number).unwrap();
            assert!(!result.is_list(), "{} → {}", args.name(), result.name());
            assert!(exec_result_type(&request).unwrap().ends_with("Result") || result.name().ends_with("_response"));
        }
        // Where the numbers part: 45 is hook_additional_contexts in ExecClientMessage.
        let answer = |field| {
            let request = ExecRequest {
                id: 1,
                exec_id: String::new(),
                kind: String::new(),
                args: serde_json::Value::Null,
                accept_hook_additional_contexts: false,
                field,
            };
            client.get_field(result_field(&request).unwrap()).unwrap().name().to_string()
        };
        assert_eq!(answer(45), "pi_read_result"); // pi_read_args
        assert_eq!(answer(52), "mini_swe_agent_bash_result"); // mini_swe_agent_bash_args → 55
        assert_eq!(answer(44), "git_diff_response"); // git_diff_request
        assert_eq!(answer(14), "shell_result"); // shell_stream_args
        assert_eq!(answer(29), "redacted_read_result");
    }

    #[test]
    fn unknown_exec_branch_is_none_not_an_error() {
        // id 7, exec_id "e", then field 99 (unknown) LEN 0.
        let raw = [0x08, 0x07, 0x7a, 0x01, b'e', 0x9a, 0x06, 0x00];
        let (id, exec_id, req) = decode_exec(&raw).unwrap();
        assert_eq!((id, exec_id.as_str()), (7, "e"));
        assert!(req.is_none());
    }

    #[test]
    fn result_json_becomes_the_matching_client_branch() {
        let (_, _, req) = decode_exec(&exec(pb::exec_server_message::Message::ReadArgs(Default::default()))).unwrap();
        let req = req.unwrap();
        assert_eq!(exec_result_type(&req).unwrap(), "agent.v1.ReadResult");
        let bytes = exec_result(
            &req,
            serde_json::json!({"success": {"path": "/a", "content": "hi", "totalLines": 1}}),
            &ReplyExtras::NONE,
        )
        .unwrap()
        .into_bytes();
        let msg = exec_client_message_of(bytes);
        assert_eq!((msg.id, msg.exec_id.as_str()), (7, "e7"));
        let Some(pb::exec_client_message::Message::ReadResult(r)) = msg.message else { panic!() };
        let Some(pb::read_result::Result::Success(s)) = r.result else { panic!() };
        assert_eq!(s.output, Some(pb::read_success::Output::Content("hi".into())));
        let err = exec_result(&req, serde_json::json!({"sucess": {}}), &ReplyExtras::NONE).unwrap_err();
        assert!(err.contains("ReadResult") && err.contains("sucess"), "{err}");
    }

    #[test]
    fn byte_arrays_become_base64_for_bytes_fields_and_text_for_string_fields() {
        let (_, _, req) = decode_exec(&exec(pb::exec_server_message::Message::ReadArgs(Default::default()))).unwrap();
        let req = req.unwrap();
        let path = |p: &str| p.split('.').map(str::to_string).collect::<Vec<_>>();
        assert_eq!(byte_array_json(&req, &path("success.data"), vec![0, 255]).unwrap(), "AP8=");
        assert_eq!(byte_array_json(&req, &path("success.content"), b"text".to_vec()).unwrap(), "text");
        // Proto names are accepted as well as JSON names, as in the rest of proto3 JSON.
        assert_eq!(byte_array_json(&req, &path("success.output_blob_id"), vec![1]).unwrap(), "AQ==");
        // The whole result built from them encodes the bytes as they were.
        let data = byte_array_json(&req, &path("success.data"), vec![0, 255]).unwrap();
        let bytes = exec_result(&req, serde_json::json!({"success": {"path": "/a", "data": data}}), &ReplyExtras::NONE)
            .unwrap()
            .into_bytes();
        let Some(pb::exec_client_message::Message::ReadResult(r)) = exec_client_message_of(bytes).message else {
            panic!()
        };
        let Some(pb::read_result::Result::Success(s)) = r.result else { panic!() };
        assert_eq!(s.output, Some(pb::read_success::Output::Data(vec![0, 255].into())));
        for (at, expected) in [
            ("success.content", "not UTF-8"),
            ("success.totalLines", "holds int32"),
            ("success.nope", "has no field nope"),
            ("success.path.x", "path is not a message field"),
        ] {
            let err = byte_array_json(&req, &path(at), vec![0xff]).unwrap_err();
            assert!(err.contains(&format!("`{at}`")) && err.contains(expected), "{at}: {err}");
        }
    }

    #[test]
    fn error_results_use_the_result_types_error_branch() {
        let (_, _, req) = decode_exec(&exec(pb::exec_server_message::Message::ReadArgs(pb::ReadArgs {
            path: "/a".into(),
            ..Default::default()
        })))
        .unwrap();
        let msg = exec_client_message_of(exec_error_result(&req.unwrap(), "boom", &ReplyExtras::NONE).unwrap());
        let Some(pb::exec_client_message::Message::ReadResult(pb::ReadResult {
            result: Some(pb::read_result::Result::Error(e)),
        })) = msg.message
        else {
            panic!()
        };
        assert_eq!((e.path.as_str(), e.error.as_str()), ("/a", "boom"));
    }

    #[test]
    fn every_interaction_kind_has_an_explicit_refusal() {
        use pb::interaction_query::Query as Q;
        // Every branch of the schema's InteractionQuery, each with an empty query message.
        let query = descriptor("agent.v1.InteractionQuery");
        let branches = query.oneofs().find(|o| o.name() == "query").unwrap();
        assert!(branches.fields().len() >= 11, "connect_scm (14) is among them");
        for branch in branches.fields() {
            let Kind::Message(inner) = branch.kind() else { panic!("{} is not a message", branch.name()) };
            let mut msg = DynamicMessage::new(query.clone());
            msg.set_field_by_name("id", Value::U32(3));
            msg.set_field(&branch, Value::Message(DynamicMessage::new(inner)));
            let raw = prost::Message::encode_to_vec(&msg);
            let (_, req) = decode_interaction(&raw).unwrap();
            let req = req.unwrap();
            let resp = pb::InteractionResponse::decode(interaction_rejection(&req, "no")).unwrap();
            assert_eq!(resp.id, 3);
            let text = format!("{:?}", resp.result.expect("a branch is always set"));
            if req.kind == "setupVmEnvironment" {
                // SetupVmEnvironmentResult has only `success`: the schema offers no refusal,
                // so the answer is the empty result (checked here so a newer schema that adds
                // one is noticed).
                assert_eq!(text, "SetupVmEnvironmentResult(SetupVmEnvironmentResult { result: None })");
                continue;
            }
            assert!(
                text.contains("Rejected") || text.contains("Error") || text.contains("Failure"),
                "{} → {text}",
                req.kind
            );
            assert!(text.contains("\"no\""), "the reason is given: {} → {text}", req.kind);
        }
        let raw = pb::InteractionQuery { id: 1, query: Some(Q::AskQuestionInteractionQuery(Default::default())) }
            .encode_to_vec();
        assert_eq!(decode_interaction(&raw).unwrap().1.unwrap().kind, "askQuestion");
    }

    #[test]
    fn an_answer_that_chooses_nothing_is_refused() {
        use pb::interaction_query::Query as Q;
        let query = |q: Q| {
            decode_interaction(&pb::InteractionQuery { id: 2, query: Some(q) }.encode_to_vec()).unwrap().1.unwrap()
        };
        let search = query(Q::WebSearchRequestQuery(Default::default()));
        let err = interaction_response(&search, serde_json::json!({})).unwrap_err();
        assert!(err.contains("WebSearchRequestResponse sets none"), "{err}");
        assert!(interaction_response(&search, serde_json::json!({ "approved": {} })).is_ok());
        let ask = query(Q::AskQuestionInteractionQuery(Default::default()));
        assert!(interaction_response(&ask, serde_json::json!({ "result": {} })).is_err());
        assert!(interaction_response(&ask, serde_json::json!({})).is_err());
        assert!(interaction_response(&ask, serde_json::json!({ "result": { "rejected": { "reason": "no" } } })).is_ok());
        let scm = query(Q::ConnectScmRequestQuery(Default::default()));
        let resp = pb::InteractionResponse::decode(
            interaction_response(&scm, serde_json::json!({ "failed": { "error": "x" } })).unwrap(),
        )
        .unwrap();
        assert!(matches!(resp.result, Some(pb::interaction_response::Result::ConnectScmRequestResponse(_))));
    }
}
