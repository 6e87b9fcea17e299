//! Client messages as the embedded backend queues them for a script.
//!
//! An exec reply is queued as its head: its `id` and `exec_id`, without its result. Nothing in
//! a script reads a result, and building one copies every string in it into new memory: 12 MiB
//! of it for a 12 MiB read result, which on a VM costs as much as the transfer that brought it
//! (bench/README.md, large-up). The reply is still checked against the schema as strictly as
//! prost's decode checks it (wire types, lengths, UTF-8, nesting), in place, so a malformed reply
//! is refused all the same. Every other message is decoded with prost. Recordings are made from
//! the payload's bytes, so they keep the whole reply either way.

use bytes::{Buf, Bytes};
use prost::encoding::{decode_key, skip_field, DecodeContext, WireType};
use prost::Message as _;
use prost_reflect::MessageDescriptor;

use super::inbox::Queued;
use cursor_acp_core::proto::agent::v1::{agent_client_message, AgentClientMessage, ExecClientMessage};

use cursor_acp_core::field::agent::v1::agent_client_message::EXEC_CLIENT_MESSAGE;

use cursor_acp_core::descriptors::{check, RECURSION_LIMIT};

/// Decodes `payload` for a script; the error says why it is not an `AgentClientMessage`.
/// (Decoded from `Bytes`, prost slices `bytes` fields out of the payload instead of copying.)
pub(crate) fn decode(payload: &Bytes) -> Result<Queued, String> {
    if !is_exec_reply(payload) {
        return AgentClientMessage::decode(payload.clone()).map(Box::new).map_err(|e| e.to_string());
    }
    check(&descriptor("agent.v1.AgentClientMessage"), payload, RECURSION_LIMIT)?;
    let head = ReplyHead::decode(&payload[..]).map_err(|e| e.to_string())?.exec_client_message.unwrap_or_default();
    let reply = ExecClientMessage { id: head.id, exec_id: head.exec_id, ..Default::default() };
    Ok(Box::new(AgentClientMessage {
        message: Some(agent_client_message::Message::ExecClientMessage(Box::new(reply))),
    }))
}

/// `payload` decoded whole, results included (for a scenario that reports them).
pub(crate) fn decode_whole(payload: &[u8]) -> Option<Queued> {
    AgentClientMessage::decode(payload).ok().map(Box::new)
}

/// The part of an exec reply a script reads. prost skips the fields it does not name without
/// copying them. (prost's derive takes only literal tags: `exec_client_message`, then its `id`
/// and `exec_id`; `an_exec_reply_is_queued_as_its_head` decodes a real reply through them.)
#[derive(Clone, PartialEq, prost::Message)]
struct ReplyHead {
    #[prost(message, optional, tag = "2")]
    exec_client_message: Option<ExecHead>,
}

#[derive(Clone, PartialEq, prost::Message)]
struct ExecHead {
    #[prost(uint32, tag = "1")]
    id: u32,
    #[prost(string, tag = "15")]
    exec_id: String,
}

/// Whether every top-level field is `exec_client_message` (a malformed payload is not: prost
/// decodes it, and reports the error).
fn is_exec_reply(mut buf: &[u8]) -> bool {
    let mut any = false;
    while buf.has_remaining() {
        match decode_key(&mut buf) {
            Ok((EXEC_CLIENT_MESSAGE, WireType::LengthDelimited)) => {}
            _ => return false,
        }
        if skip_field(WireType::LengthDelimited, EXEC_CLIENT_MESSAGE, &mut buf, DecodeContext::default()).is_err() {
            return false;
        }
        any = true;
    }
    any
}

fn descriptor(name: &str) -> MessageDescriptor {
    cursor_acp_core::descriptors::whole_schema().get_message_by_name(name).expect("the embedded schema has the message")
}

#[cfg(test)]
mod tests {
    use super::*;
    use cursor_acp_core::proto::agent::v1::{exec_client_message, read_result, ReadResult, ReadSuccess};
    use cursor_acp_core::protojson;

    /// A read reply like the client sends, with a multi-byte character in its content.
    fn read_reply(content: &str) -> Vec<u8> {
        let json = serde_json::json!({
            "execClientMessage": {
                "id": 7,
                "execId": "exec-7",
                "readResult": { "success": { "path": "/w/a.txt", "content": content, "totalLines": 3, "fileSize": "42" } }
            }
        });
        protojson::from_json::<AgentClientMessage>("agent.v1.AgentClientMessage", &json)
            .expect("a valid reply")
            .encode_to_vec()
    }

    #[test]
    fn an_exec_reply_is_queued_as_its_head() {
        let queued = decode(&read_reply("héllo\n").into()).expect("a valid reply");
        let Some(agent_client_message::Message::ExecClientMessage(reply)) = &queued.message else {
            panic!("not an exec reply: {queued:?}")
        };
        assert_eq!((reply.id, reply.exec_id.as_str(), reply.message.is_none()), (7, "exec-7", true));
    }

    #[test]
    fn other_messages_are_decoded_whole() {
        let close = serde_json::json!({ "execClientControlMessage": { "streamClose": { "id": 7 } } });
        let msg: AgentClientMessage = protojson::from_json("agent.v1.AgentClientMessage", &close).unwrap();
        assert_eq!(*decode(&msg.encode_to_vec().into()).expect("valid"), msg);
        // An exec reply next to another top-level field is decoded by prost too (the last
        // member of the oneof wins there), and so keeps its result.
        let mut both = read_reply("x");
        both.extend(msg.encode_to_vec());
        assert_eq!(*decode(&both.clone().into()).expect("valid"), AgentClientMessage::decode(&both[..]).unwrap());
    }

    /// Asserts that the check and prost's decode of `M` give `bytes` the same verdict.
    fn agrees<M: prost::Message + Default>(name: &str, bytes: &[u8]) -> bool {
        let prost = M::decode(bytes).is_ok();
        let ours = check(&descriptor(name), bytes, RECURSION_LIMIT).is_ok();
        assert_eq!(ours, prost, "{name}: prost {prost}, check {ours} for {bytes:02x?}");
        ours
    }

    /// The check refuses exactly what prost refuses: every truncation and every single-byte
    /// change of a reply (which covers wire types, lengths, varints, UTF-8 and unknown fields).
    #[test]
    fn the_check_agrees_with_prost_on_every_truncation_and_corruption() {
        let reply = read_reply("héllo ✓\n");
        let agrees = |bytes: &[u8]| agrees::<AgentClientMessage>("agent.v1.AgentClientMessage", bytes);
        for len in 0..=reply.len() {
            agrees(&reply[..len]);
        }
        let mut refused = 0;
        for at in 0..reply.len() {
            for byte in [0x00, 0x01, 0x02, 0x07, 0x0a, 0x12, 0x1a, 0x7f, 0x80, 0xc3, 0xff] {
                let mut changed = reply.clone();
                changed[at] = byte;
                refused += usize::from(!agrees(&changed));
            }
        }
        assert!(refused > 50, "the corruptions should include many malformed payloads ({refused})");
    }

    #[test]
    fn a_malformed_reply_is_refused_with_the_reason() {
        let mut reply = read_reply("abc\n");
        let at = reply.windows(3).position(|w| w == b"abc").expect("the content is in the reply");
        reply[at] = 0xff;
        let err = decode(&reply.into()).expect_err("not UTF-8");
        assert!(err.contains("ReadSuccess.content") && err.contains("UTF-8"), "{err}");
    }

    #[test]
    fn packed_and_repeated_numbers_are_checked() {
        use cursor_acp_core::proto::agent::v1::shell_command_parsing_result::Redirect;
        let name = "agent.v1.ShellCommandParsingResult.Redirect";
        let fds = Redirect { destination_fds: vec![1, 300, 2], ..Default::default() }.encode_to_vec();
        assert_eq!(fds[0], 0x12, "destination_fds = 2, packed");
        assert!(agrees::<Redirect>(name, &fds));
        // Unpacked, one varint each, is accepted too.
        assert!(agrees::<Redirect>(name, &[0x10, 0x01, 0x10, 0xac, 0x02]));
        // A packed run whose last varint is cut off, and a number where a string belongs.
        assert!(!agrees::<Redirect>(name, &[0x12, 0x02, 0x01, 0x80]));
        assert!(!agrees::<Redirect>(name, &[0x08, 0x01]));
    }

    #[test]
    fn nesting_is_limited_where_prost_limits_it() {
        let descriptor = descriptor("agent.v1.AgentClientMessage");
        // AgentClientMessage > ExecClientMessage > ReadResult > ReadSuccess: three levels.
        let reply = ExecClientMessage {
            id: 1,
            exec_id: String::new(),
            message: Some(exec_client_message::Message::ReadResult(ReadResult {
                result: Some(read_result::Result::Success(ReadSuccess { path: "p".into(), ..Default::default() })),
            })),
            ..Default::default()
        };
        let bytes =
            AgentClientMessage { message: Some(agent_client_message::Message::ExecClientMessage(Box::new(reply))) }
                .encode_to_vec();
        assert!(check(&descriptor, &bytes, 3).is_ok());
        assert!(check(&descriptor, &bytes, 2).unwrap_err().contains("recursion limit"));
    }
}
