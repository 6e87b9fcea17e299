//! Measurement helpers for `bench/` (not part of the client API): the decode ceiling, i.e. how
//! fast the core's codec alone turns a received byte stream into server messages.

use std::time::{Duration, Instant};

use prost::Message;

use crate::connect::{encode_message, Frame, FrameDecoder};
use crate::proto::agent::v1 as pb;

/// What [`decode_text_frames`] measured.
#[derive(Debug, Clone, Copy)]
pub struct DecodeStats {
    pub frames: usize,
    pub bytes: usize,
    pub elapsed: Duration,
}

/// Builds a stream of `count` `text_delta` frames of `text`, then times decoding it as the turn
/// loop does (envelopes from 64 KiB reads, each payload decoded as an `AgentServerMessage`).
pub fn decode_text_frames(count: usize, text: &str) -> DecodeStats {
    let message = pb::AgentServerMessage {
        message: Some(pb::agent_server_message::Message::InteractionUpdate(pb::InteractionUpdate {
            message: Some(pb::interaction_update::Message::TextDelta(pb::TextDeltaUpdate {
                text: text.to_string(),
                is_server_notice: false,
            })),
        })),
    };
    let frame = encode_message(&message, false, 0);
    let mut stream = Vec::with_capacity(frame.len() * count);
    for _ in 0..count {
        stream.extend_from_slice(&frame);
    }
    let started = Instant::now();
    let mut decoder = FrameDecoder::default();
    let mut frames = 0usize;
    for chunk in stream.chunks(64 * 1024) {
        decoder.push(chunk);
        while let Ok(Some(Frame::Message(payload))) = decoder.next_frame() {
            let decoded = pb::AgentServerMessage::decode(payload).expect("frames built above decode");
            std::hint::black_box(&decoded);
            frames += 1;
        }
    }
    DecodeStats { frames, bytes: stream.len(), elapsed: started.elapsed() }
}

#[cfg(test)]
mod tests {
    #[test]
    fn every_frame_is_decoded() {
        let stats = super::decode_text_frames(10_000, "word ");
        assert_eq!(stats.frames, 10_000);
        // 5-byte envelope + 11-byte message (three nested tags and lengths around the 5 text bytes).
        assert_eq!(stats.bytes, 10_000 * 16);
    }
}
