//! Runs of text (or thinking) deltas read in one go become one delta: the turn loop translates
//! the run once, one update instead of many.
//!
//! The deltas after the first are read from their frame's bytes, not decoded: a decoded delta
//! costs a message and a string on the heap, freed again as soon as its text is appended, and
//! a turn is mostly deltas (a model streams a few characters per frame).

use crate::field::agent::v1 as f;
use crate::proto::agent::v1 as pb;
use crate::transport::ServerFrame;
use crate::wire::{read_fields, Field};

/// Appends the delta in `next` (an encoded `AgentServerMessage`) to `current` when both are
/// plain text deltas with the same `is_server_notice`, or both thinking deltas of one style:
/// the translation of the merged delta is exactly that of the run, one update instead of many.
/// Otherwise leaves `current` as it is and says so (the frame is then decoded on its own).
pub(super) fn merge_delta(current: &mut ServerFrame, next: &[u8]) -> bool {
    use pb::agent_server_message::Message as S;
    use pb::interaction_update::Message as U;
    let Some(S::InteractionUpdate(pb::InteractionUpdate { message: Some(update) })) = &mut current.message.message
    else {
        return false;
    };
    match (update, encoded_delta(next)) {
        (U::TextDelta(a), Some(EncodedDelta::Text { text, is_server_notice }))
            if a.is_server_notice == is_server_notice =>
        {
            a.text.push_str(text);
            true
        }
        (U::ThinkingDelta(a), Some(EncodedDelta::Thinking { text, thinking_style }))
            if a.thinking_style == thinking_style =>
        {
            a.text.push_str(text);
            true
        }
        _ => false,
    }
}

/// A text or thinking delta, as its encoded `AgentServerMessage` carries it.
#[derive(Debug, PartialEq)]
enum EncodedDelta<'a> {
    Text { text: &'a str, is_server_notice: bool },
    Thinking { text: &'a str, thinking_style: Option<i32> },
}

/// The delta in encoded `AgentServerMessage` `raw`, read as prost would decode it; `None` for
/// any other message, and for any encoding this reader does not take on itself (a member given
/// twice, a known field of the wrong wire type, text that is not UTF-8), which decoding judges.
fn encoded_delta(raw: &[u8]) -> Option<EncodedDelta<'_>> {
    use f::interaction_update::{TEXT_DELTA, THINKING_DELTA};
    let update = only_field(raw, f::agent_server_message::INTERACTION_UPDATE)?;
    let (branch, delta) = single_length_delimited(update)?;
    match branch {
        TEXT_DELTA => {
            use f::text_delta_update::{IS_SERVER_NOTICE, TEXT};
            let (text, notice) = text_and_varint(delta, TEXT, IS_SERVER_NOTICE)?;
            Some(EncodedDelta::Text { text, is_server_notice: notice.is_some_and(|v| v != 0) })
        }
        THINKING_DELTA => {
            use f::thinking_delta_update::{TEXT, THINKING_STYLE};
            let (text, style) = text_and_varint(delta, TEXT, THINKING_STYLE)?;
            // An enum is an int32 on the wire: prost keeps the low 32 bits.
            Some(EncodedDelta::Thinking { text, thinking_style: style.map(|v| v as i32) })
        }
        _ => None,
    }
}

/// The payload of `raw`'s only field, when that is length-delimited field `number`.
fn only_field(raw: &[u8], number: u32) -> Option<&[u8]> {
    match single_length_delimited(raw)? {
        (n, payload) if n == number => Some(payload),
        _ => None,
    }
}

/// The number and payload of `raw`'s only field, when it is length-delimited.
fn single_length_delimited(raw: &[u8]) -> Option<(u32, &[u8])> {
    let mut only = None;
    read_fields(raw, |number, value| match (only, value) {
        (None, Field::LengthDelimited(payload)) => {
            only = Some((number, payload));
            Ok(())
        }
        // A second field, or one of another wire type (the error is not kept).
        _ => Err(String::new()),
    })
    .ok()?;
    only
}

/// A delta message's string field `text` (empty when absent) and varint field `flag`; the last
/// of each on the wire wins, and unknown fields are skipped, as prost decodes.
fn text_and_varint(raw: &[u8], text: u32, flag: u32) -> Option<(&str, Option<u64>)> {
    let (mut text_value, mut flag_value) = (&b""[..], None);
    read_fields(raw, |number, value| {
        match (number, value) {
            (n, Field::LengthDelimited(bytes)) if n == text => text_value = bytes,
            (n, Field::Varint(v)) if n == flag => flag_value = Some(v),
            (n, _) if n == text || n == flag => return Err(String::new()),
            _ => {}
        }
        Ok(())
    })
    .ok()?;
    Some((std::str::from_utf8(text_value).ok()?, flag_value))
}

#[cfg(test)]
mod tests {
    use prost::Message as _;

    use super::*;
    use pb::agent_server_message::Message as S;
    use pb::interaction_update::Message as U;

    fn server(update: U) -> pb::AgentServerMessage {
        pb::AgentServerMessage {
            message: Some(S::InteractionUpdate(pb::InteractionUpdate { message: Some(update) })),
            ..Default::default()
        }
    }

    fn text(text: &str, is_server_notice: bool) -> pb::AgentServerMessage {
        server(U::TextDelta(pb::TextDeltaUpdate { text: text.into(), is_server_notice }))
    }

    fn thinking(text: &str, thinking_style: Option<i32>) -> pb::AgentServerMessage {
        server(U::ThinkingDelta(pb::ThinkingDeltaUpdate { text: text.into(), thinking_style }))
    }

    fn frame(message: pb::AgentServerMessage) -> ServerFrame {
        let raw = message.encode_to_vec().into();
        ServerFrame { message: Box::new(message), raw }
    }

    fn text_of(frame: &ServerFrame) -> &str {
        match &frame.message.message {
            Some(S::InteractionUpdate(pb::InteractionUpdate { message: Some(U::TextDelta(d)) })) => &d.text,
            Some(S::InteractionUpdate(pb::InteractionUpdate { message: Some(U::ThinkingDelta(d)) })) => &d.text,
            other => panic!("not a delta: {other:?}"),
        }
    }

    #[test]
    fn deltas_read_from_their_bytes_are_what_prost_decodes() {
        for message in [text("héllo", false), text("", true), thinking("hm", None), thinking("hm", Some(2))] {
            let encoded = message.encode_to_vec();
            let decoded = pb::AgentServerMessage::decode(&encoded[..]).unwrap();
            let Some(S::InteractionUpdate(pb::InteractionUpdate { message: Some(update) })) = decoded.message else {
                panic!("{decoded:?}")
            };
            match (encoded_delta(&encoded), update) {
                (Some(EncodedDelta::Text { text, is_server_notice }), U::TextDelta(d)) => {
                    assert_eq!((text, is_server_notice), (d.text.as_str(), d.is_server_notice));
                }
                (Some(EncodedDelta::Thinking { text, thinking_style }), U::ThinkingDelta(d)) => {
                    assert_eq!((text, thinking_style), (d.text.as_str(), d.thinking_style));
                }
                (read, update) => panic!("read {read:?}, decoded {update:?}"),
            }
        }
    }

    #[test]
    fn the_last_value_on_the_wire_wins_and_unknown_fields_are_skipped() {
        // TextDeltaUpdate{text:"a", is_server_notice:true, 9:fixed32, text:"b", is_server_notice:false}
        let delta = [0x0a, 1, b'a', 0x10, 1, 0x4d, 0, 0, 0, 0, 0x0a, 1, b'b', 0x10, 0];
        let update = [&[0x0a, delta.len() as u8][..], &delta].concat();
        let raw = [&[0x0a, update.len() as u8][..], &update].concat();
        assert_eq!(encoded_delta(&raw), Some(EncodedDelta::Text { text: "b", is_server_notice: false }));
        let decoded = pb::AgentServerMessage::decode(&raw[..]).unwrap();
        assert_eq!(decoded, text("b", false));
    }

    #[test]
    fn anything_else_is_left_to_decoding() {
        let delta = text("a", false).encode_to_vec();
        let refused: Vec<(&str, Vec<u8>)> = vec![
            ("not a delta", server(U::TokenDelta(pb::TokenDeltaUpdate::default())).encode_to_vec()),
            (
                "another member",
                pb::AgentServerMessage { message: Some(S::KvServerMessage(Default::default())), ..Default::default() }
                    .encode_to_vec(),
            ),
            (
                "a delta beside another field of the message",
                pb::AgentServerMessage { ttft_breakdown: Some(Default::default()), ..text("a", false) }.encode_to_vec(),
            ),
            ("the update given twice (prost merges them)", [&delta[..], &delta[..]].concat()),
            ("text that is not UTF-8", vec![0x0a, 5, 0x0a, 3, 0x0a, 1, 0xff]),
            ("text as a varint", vec![0x0a, 4, 0x0a, 2, 0x08, 1]),
            ("text as a fixed32", vec![0x0a, 7, 0x0a, 5, 0x0d, 0, 0, 0, 0]),
            ("the update as a fixed64", vec![0x09, 0, 0, 0, 0, 0, 0, 0, 0]),
            ("a flag as a length-delimited field", vec![0x0a, 6, 0x0a, 4, 0x12, 2, 0, 0]),
            ("a length past the end", vec![0x0a, 5, 0x0a, 3, 0x0a, 9, b'a']),
            ("a truncated key", vec![0x0a, 1, 0x8a]),
            ("nothing", vec![]),
        ];
        for (what, raw) in refused {
            assert_eq!(encoded_delta(&raw), None, "{what}");
        }
    }

    #[test]
    fn runs_merge_only_deltas_of_one_kind_and_flag() {
        let mut current = frame(text("a", false));
        assert!(merge_delta(&mut current, &text("b", false).encode_to_vec()));
        assert!(!merge_delta(&mut current, &text("notice", true).encode_to_vec()));
        assert!(!merge_delta(&mut current, &thinking("t", None).encode_to_vec()));
        assert!(merge_delta(&mut current, &text("c", false).encode_to_vec()));
        assert_eq!(text_of(&current), "abc");

        let mut current = frame(thinking("x", Some(1)));
        assert!(!merge_delta(&mut current, &thinking("y", None).encode_to_vec()));
        assert!(merge_delta(&mut current, &thinking("y", Some(1)).encode_to_vec()));
        assert!(!merge_delta(&mut current, &text("z", false).encode_to_vec()));
        assert_eq!(text_of(&current), "xy");

        let mut not_a_delta = frame(server(U::TokenDelta(pb::TokenDeltaUpdate::default())));
        assert!(!merge_delta(&mut not_a_delta, &text("a", false).encode_to_vec()));
    }
}
