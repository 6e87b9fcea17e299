//! Byte-level protobuf helpers for the places where the core must not re-encode through prost:
//! the checkpoint is kept as the exact bytes the server sent (prost would drop unknown fields),
//! and it is spliced back into the next run request unchanged. [`read_fields`] is the one walk
//! over an encoded message's fields: envelopes read field by field, runs of deltas read from
//! their bytes, and a field sliced out of a frame.

use bytes::{Buf, BufMut, Bytes, BytesMut};
use prost::encoding::{decode_key, decode_varint, encode_key, encode_varint, skip_field, WireType};

/// A field of an encoded message, as [`read_fields`] hands it over.
pub enum Field<'a> {
    Varint(u64),
    LengthDelimited(&'a [u8]),
    /// A fixed-width field or a group: skipped, and reported so that a known field given with
    /// such a wire type can be refused, as protobuf parsers refuse it.
    Other,
}

/// Walks the fields of encoded message `raw` in order, handing each to `on_field`, which may
/// refuse one with an error.
pub fn read_fields<'a>(
    mut raw: &'a [u8],
    mut on_field: impl FnMut(u32, Field<'a>) -> Result<(), String>,
) -> Result<(), String> {
    let malformed = |e: prost::DecodeError| e.to_string();
    while !raw.is_empty() {
        let (number, wire_type) = decode_key(&mut raw).map_err(malformed)?;
        match wire_type {
            WireType::Varint => on_field(number, Field::Varint(decode_varint(&mut raw).map_err(malformed)?))?,
            WireType::LengthDelimited => {
                let len = decode_varint(&mut raw).map_err(malformed)?;
                let len =
                    usize::try_from(len).ok().filter(|&len| len <= raw.len()).ok_or("a field runs past the end")?;
                let (value, rest) = raw.split_at(len);
                raw = rest;
                on_field(number, Field::LengthDelimited(value))?;
            }
            other => {
                skip_field(other, number, &mut raw, Default::default()).map_err(malformed)?;
                on_field(number, Field::Other)?;
            }
        }
    }
    Ok(())
}

/// The payload of the last occurrence of length-delimited field `field` in `message`, sliced
/// out of `message` without copying. `None` when absent or when `message` is malformed.
pub fn length_delimited_field(message: &Bytes, field: u32) -> Option<Bytes> {
    let mut found = None;
    read_fields(message, |number, value| {
        if let (true, Field::LengthDelimited(payload)) = (number == field, value) {
            found = Some(message.slice_ref(payload));
        }
        Ok(())
    })
    .ok()?;
    found
}

/// Appends length-delimited field `field` holding `payload` to `out`.
pub fn put_length_delimited(out: &mut BytesMut, field: u32, payload: &[u8]) {
    encode_key(field, WireType::LengthDelimited, out);
    encode_varint(payload.len() as u64, out);
    out.put_slice(payload);
}

/// An encoded message as pieces whose concatenation is the message, so that large string and
/// bytes values can be moved into it rather than copied (see `bridge::exec_result`).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Pieces {
    chunks: Vec<Bytes>,
    len: usize,
}

impl Pieces {
    /// Total length in bytes.
    pub fn len(&self) -> usize {
        self.len
    }

    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    pub fn chunks(&self) -> &[Bytes] {
        &self.chunks
    }

    pub fn into_chunks(self) -> Vec<Bytes> {
        self.chunks
    }

    pub fn push(&mut self, chunk: Bytes) {
        if !chunk.is_empty() {
            self.len += chunk.len();
            self.chunks.push(chunk);
        }
    }

    /// Reads the message in place, piece after piece (for decoding without joining them).
    pub fn reader(&self) -> PiecesReader<'_> {
        PiecesReader { chunks: &self.chunks, offset: 0, remaining: self.len }
    }

    /// The message in one buffer: free for a single piece, a copy otherwise.
    pub fn into_bytes(mut self) -> Bytes {
        match self.chunks.len() {
            0 => Bytes::new(),
            1 => self.chunks.pop().expect("one chunk"),
            _ => {
                let mut out = BytesMut::with_capacity(self.len);
                for chunk in &self.chunks {
                    out.put_slice(chunk);
                }
                out.freeze()
            }
        }
    }
}

impl From<Bytes> for Pieces {
    fn from(chunk: Bytes) -> Self {
        let mut pieces = Pieces::default();
        pieces.push(chunk);
        pieces
    }
}

/// A [`Buf`] over [`Pieces`]: prost can decode straight from it, and it skips the fields it
/// does not want (a shell's captured output, say) by advancing past them instead of copying.
pub struct PiecesReader<'a> {
    chunks: &'a [Bytes],
    /// Read position inside `chunks[0]`.
    offset: usize,
    remaining: usize,
}

impl Buf for PiecesReader<'_> {
    fn remaining(&self) -> usize {
        self.remaining
    }

    fn chunk(&self) -> &[u8] {
        self.chunks.first().map_or(&[], |c| &c[self.offset..])
    }

    fn advance(&mut self, mut cnt: usize) {
        assert!(cnt <= self.remaining, "advance past the end of the pieces");
        self.remaining -= cnt;
        while let Some(first) = self.chunks.first() {
            let left = first.len() - self.offset;
            if cnt < left {
                self.offset += cnt;
                return;
            }
            cnt -= left;
            self.chunks = &self.chunks[1..];
            self.offset = 0;
        }
    }
}

/// `payload` wrapped as length-delimited field `field` of a new message.
pub fn wrap(field: u32, payload: &[u8]) -> Bytes {
    let mut out = BytesMut::with_capacity(payload.len() + 11);
    put_length_delimited(&mut out, field, payload);
    out.freeze()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::proto::agent::v1 as pb;
    use prost::Message;

    #[test]
    fn slices_the_checkpoint_out_of_a_server_message_byte_for_byte() {
        // A checkpoint with an unknown field (99) that prost would drop on re-encode.
        let mut state =
            pb::ConversationStateStructure { read_paths: vec!["/a".into()], ..Default::default() }.encode_to_vec();
        state.extend_from_slice(&[0x9a, 0x06, 0x02, 0xde, 0xad]); // field 99, LEN 2
        use crate::field::agent::v1::agent_server_message::{CONVERSATION_CHECKPOINT_UPDATE, INTERACTION_UPDATE};
        let msg = wrap(CONVERSATION_CHECKPOINT_UPDATE, &state);
        assert_eq!(length_delimited_field(&msg, CONVERSATION_CHECKPOINT_UPDATE).unwrap(), Bytes::from(state.clone()));
        assert!(length_delimited_field(&msg, INTERACTION_UPDATE).is_none());
        // Decoding still works and the unknown field survives only in the raw bytes.
        let decoded = pb::AgentServerMessage::decode(msg.clone()).unwrap();
        assert!(matches!(decoded.message, Some(pb::agent_server_message::Message::ConversationCheckpointUpdate(_))));
    }

    #[test]
    fn pieces_read_in_place_like_the_joined_message() {
        let message = pb::ShellResult {
            result: Some(pb::shell_result::Result::Failure(pb::ShellFailure {
                command: "make".into(),
                exit_code: 2,
                stdout: "x".repeat(1000),
                aborted: true,
                ..Default::default()
            })),
            ..Default::default()
        }
        .encode_to_vec();
        // Every split point, including empty pieces (dropped) and one-byte pieces.
        for cut in 0..=message.len() {
            let mut pieces = Pieces::default();
            pieces.push(Bytes::copy_from_slice(&message[..cut]));
            pieces.push(Bytes::new());
            for byte in &message[cut..] {
                pieces.push(Bytes::copy_from_slice(&[*byte]));
            }
            let mut reader = pieces.reader();
            assert_eq!(reader.remaining(), message.len());
            assert_eq!(
                pb::ShellResult::decode(pieces.reader()).unwrap(),
                pb::ShellResult::decode(&message[..]).unwrap()
            );
            assert_eq!(reader.copy_to_bytes(message.len()), Bytes::from(message.clone()));
            assert_eq!((reader.remaining(), reader.chunk()), (0, &[][..]));
        }
    }

    #[test]
    fn other_wire_types_are_skipped_as_prost_skips_them() {
        // field 5 as a group holding a varint, field 6 as a fixed32, then field 3 = "ok".
        let message = Bytes::from_static(&[0x2b, 0x08, 0x01, 0x2c, 0x35, 0, 0, 0, 0, 0x1a, 2, b'o', b'k']);
        assert_eq!(length_delimited_field(&message, 3).unwrap(), Bytes::from_static(b"ok"));
    }

    #[test]
    fn malformed_input_gives_none_not_a_panic() {
        for bad in [
            &[0x1a, 0x05, 0x00][..],
            &[0x1a],
            &[0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01],
            &[0x0b],
        ] {
            assert!(length_delimited_field(&Bytes::copy_from_slice(bad), 3).is_none());
        }
    }
}
