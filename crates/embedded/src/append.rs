//! Reads a `BidiAppendRequest` body as it arrives.
//!
//! Hex `data` is decoded chunk by chunk straight into the payload, so a large append never
//! exists on the server as a hex body twice the payload's size, and its decode runs while the
//! rest is still on the wire instead of after the last byte (bench/README.md, large-up). The
//! other fields are small, or (`data_binary`) taken as they are.
//!
//! The body is read exactly as prost reads a `BidiAppendRequest` (the differential test in
//! `tests/embedded_append.rs` holds it to that): keys and varints through prost's own decoders,
//! a known field in any wire type but its own refused, unknown fields skipped whatever their
//! wire type (groups too, nested up to prost's limit), fields in any order and repeated, a
//! repeated `request_id` merged into the one before it (it is a message), the others replaced.

use bytes::{Bytes, BytesMut};
use prost::encoding::{decode_key, decode_varint, encode_key, encode_varint, WireType};
use prost::Message as _;

use cursor_acp_core::descriptors::RECURSION_LIMIT;
use cursor_acp_core::proto::aiserver::v1::BidiAppendRequest;

/// The request as this server needs it.
#[derive(Debug, Default)]
pub struct Append {
    pub request_id: String,
    pub append_seqno: i64,
    /// `data`, hex-decoded.
    pub data: Bytes,
    /// `data` exactly as sent, kept only when asked for (recordings).
    pub data_hex: Option<String>,
    pub data_binary: Bytes,
}

/// Why a body is refused; the caller turns it into an `invalid_argument` error.
#[derive(Debug, PartialEq, Eq)]
pub enum AppendError {
    TooLarge(usize),
    NotHex,
    Malformed(String),
}

impl std::fmt::Display for AppendError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            AppendError::TooLarge(max) => write!(f, "request body exceeds {max} bytes"),
            AppendError::NotHex => f.write_str("BidiAppendRequest.data is not hex"),
            AppendError::Malformed(why) => write!(f, "body is not a BidiAppendRequest: {why}"),
        }
    }
}

use cursor_acp_core::field::aiserver::v1::bidi_append_request as field;

const DATA: u32 = field::DATA;
const REQUEST_ID: u32 = field::REQUEST_ID;
const APPEND_SEQNO: u32 = field::APPEND_SEQNO;
const DATA_BINARY: u32 = field::DATA_BINARY;
/// Stands for a field inside an unknown group: never read (0 is no field's number).
const IN_GROUP: u32 = 0;

/// The wire type of a field this server reads; `None` for the others.
fn wire_type_of(field: u32) -> Option<WireType> {
    match field {
        DATA | REQUEST_ID | DATA_BINARY => Some(WireType::LengthDelimited),
        APPEND_SEQNO => Some(WireType::Varint),
        _ => None,
    }
}

enum State {
    /// Reading a field key (a varint, possibly split across chunks, gathered in `varint`).
    Key,
    /// Reading a varint value of `field`.
    Varint { field: u32 },
    /// Reading the length of length-delimited `field`.
    Length { field: u32 },
    /// Inside `data`: `left` hex characters to go.
    Hex { left: usize },
    /// Inside a small or binary field, gathered whole.
    Gather { field: u32, left: usize, buf: BytesMut },
    /// Inside a field this server does not read.
    Skip { left: usize },
}

pub struct AppendReader {
    max: usize,
    seen: usize,
    keep_hex: bool,
    state: State,
    varint: Vec<u8>,
    /// The unknown groups the reader is inside, innermost last (their field numbers).
    groups: Vec<u32>,
    /// The first character of a hex pair split across chunks.
    half: Option<u8>,
    /// The current `data` field once it is found not to be hex: the rest of its bytes, kept
    /// to check that they are UTF-8 (prost refuses the body otherwise, even when a later
    /// `data` replaces this one).
    not_hex: Option<Vec<u8>>,
    /// Whether the last `data` field was hex (no `data` at all is empty hex).
    data_is_hex: bool,
    out: Append,
    data: Vec<u8>,
    hex: Vec<u8>,
    /// Every `request_id` field as it came, key included: decoded together at the end, so that
    /// prost's decode merges them (and judges them) as it would in the whole body.
    request_ids: BytesMut,
}

impl AppendReader {
    /// A reader for a body of at most `max` bytes; `keep_hex` also keeps `data` as sent.
    pub fn new(max: usize, keep_hex: bool) -> Self {
        AppendReader {
            max,
            seen: 0,
            keep_hex,
            state: State::Key,
            varint: Vec::new(),
            groups: Vec::new(),
            half: None,
            not_hex: None,
            data_is_hex: true,
            out: Append::default(),
            data: Vec::new(),
            hex: Vec::new(),
            request_ids: BytesMut::new(),
        }
    }

    /// Feeds the next piece of the body.
    pub fn push(&mut self, mut chunk: &[u8]) -> Result<(), AppendError> {
        self.seen += chunk.len();
        if self.seen > self.max {
            return Err(AppendError::TooLarge(self.max));
        }
        while !chunk.is_empty() {
            chunk = match &mut self.state {
                State::Key | State::Varint { .. } | State::Length { .. } => {
                    let Some(rest) = self.take_varint(chunk)? else { return Ok(()) };
                    self.after_varint()?;
                    rest
                }
                State::Hex { left } => {
                    let n = (*left).min(chunk.len());
                    *left -= n;
                    let done = *left == 0;
                    self.decode_hex(&chunk[..n]);
                    if done {
                        self.end_data()?;
                        self.state = State::Key;
                    }
                    &chunk[n..]
                }
                State::Gather { left, buf, .. } => {
                    let n = (*left).min(chunk.len());
                    buf.extend_from_slice(&chunk[..n]);
                    *left -= n;
                    if *left == 0 {
                        self.finish_gather();
                    }
                    &chunk[n..]
                }
                State::Skip { left } => {
                    let n = (*left).min(chunk.len());
                    *left -= n;
                    if *left == 0 {
                        self.state = State::Key;
                    }
                    &chunk[n..]
                }
            };
        }
        Ok(())
    }

    /// The request, once the whole body has been pushed.
    pub fn finish(mut self) -> Result<Append, AppendError> {
        if !matches!(self.state, State::Key) || !self.varint.is_empty() {
            return Err(AppendError::Malformed("the body ends inside a field".into()));
        }
        if !self.groups.is_empty() {
            return Err(AppendError::Malformed("the body ends inside a group".into()));
        }
        if !self.data_is_hex {
            return Err(AppendError::NotHex);
        }
        if !self.request_ids.is_empty() {
            let ids = BidiAppendRequest::decode(self.request_ids.freeze())
                .map_err(|e| AppendError::Malformed(format!("request_id: {e}")))?;
            self.out.request_id = ids.request_id.unwrap_or_default().request_id;
        }
        Ok(self.out)
    }

    /// Gathers varint bytes into `varint`; the rest of the chunk once its last byte is in.
    fn take_varint<'a>(&mut self, chunk: &'a [u8]) -> Result<Option<&'a [u8]>, AppendError> {
        for (i, &byte) in chunk.iter().enumerate() {
            self.varint.push(byte);
            if self.varint.len() > 10 {
                return Err(AppendError::Malformed("a varint is longer than 10 bytes".into()));
            }
            if byte & 0x80 == 0 {
                return Ok(Some(&chunk[i + 1..]));
            }
        }
        Ok(None)
    }

    /// Acts on the varint gathered in `varint`, decoded by prost (which refuses a tenth byte
    /// that overflows 64 bits, a key beyond 32 bits, field 0 and wire types 6 and 7).
    fn after_varint(&mut self) -> Result<(), AppendError> {
        let malformed = |e: prost::DecodeError| AppendError::Malformed(e.to_string());
        let mut bytes = &self.varint[..];
        self.state = match self.state {
            State::Key => {
                let (number, wire_type) = decode_key(&mut bytes).map_err(malformed)?;
                self.varint.clear();
                self.after_key(number, wire_type)?
            }
            State::Varint { field } => {
                let value = decode_varint(&mut bytes).map_err(malformed)?;
                self.varint.clear();
                if field == APPEND_SEQNO {
                    // int64 on the wire: two's complement in 64 bits.
                    self.out.append_seqno = value as i64;
                }
                State::Key
            }
            State::Length { field } => {
                let value = decode_varint(&mut bytes).map_err(malformed)?;
                self.varint.clear();
                let len = usize::try_from(value)
                    .ok()
                    .filter(|&len| len <= self.max)
                    .ok_or(AppendError::TooLarge(self.max))?;
                match field {
                    REQUEST_ID => {
                        self.put_request_id_head(len);
                        if len == 0 {
                            State::Key
                        } else {
                            State::Gather { field, left: len, buf: BytesMut::with_capacity(len) }
                        }
                    }
                    _ if len == 0 => {
                        self.empty_field(field);
                        State::Key
                    }
                    DATA => {
                        self.data = Vec::with_capacity(len / 2);
                        self.hex.clear();
                        self.half = None;
                        self.not_hex = None;
                        State::Hex { left: len }
                    }
                    DATA_BINARY => State::Gather { field, left: len, buf: BytesMut::with_capacity(len) },
                    _ => State::Skip { left: len },
                }
            }
            // Only the varint states gather a varint.
            State::Hex { .. } | State::Gather { .. } | State::Skip { .. } => {
                return Err(AppendError::Malformed("internal: a varint outside a varint state".into()))
            }
        };
        Ok(())
    }

    /// The state after the key of field `number` in `wire_type`.
    fn after_key(&mut self, number: u32, wire_type: WireType) -> Result<State, AppendError> {
        let field = if self.groups.is_empty() { number } else { IN_GROUP };
        if let Some(expected) = wire_type_of(field).filter(|expected| *expected != wire_type) {
            return Err(AppendError::Malformed(format!("field {field} has wire type {wire_type:?}, not {expected:?}")));
        }
        Ok(match wire_type {
            WireType::Varint => State::Varint { field },
            WireType::SixtyFourBit => State::Skip { left: 8 },
            WireType::ThirtyTwoBit => State::Skip { left: 4 },
            WireType::LengthDelimited => State::Length { field },
            WireType::StartGroup => {
                // prost's skip_field enters one level per group, from its limit at the top.
                if self.groups.len() >= RECURSION_LIMIT as usize {
                    return Err(AppendError::Malformed("recursion limit reached".into()));
                }
                self.groups.push(number);
                State::Key
            }
            WireType::EndGroup => {
                if self.groups.pop() != Some(number) {
                    return Err(AppendError::Malformed("unexpected end group tag".into()));
                }
                State::Key
            }
        })
    }

    /// Starts the copy of a `request_id` field of `len` bytes in `request_ids`.
    fn put_request_id_head(&mut self, len: usize) {
        encode_key(REQUEST_ID, WireType::LengthDelimited, &mut self.request_ids);
        encode_varint(len as u64, &mut self.request_ids);
    }

    /// A field present with an empty value replaces an earlier one (last wins).
    fn empty_field(&mut self, field: u32) {
        match field {
            DATA => {
                self.out.data = Bytes::new();
                self.out.data_hex = self.keep_hex.then(String::new);
                self.data_is_hex = true;
            }
            DATA_BINARY => self.out.data_binary = Bytes::new(),
            _ => {}
        }
    }

    fn finish_gather(&mut self) {
        if let State::Gather { field, buf, .. } = std::mem::replace(&mut self.state, State::Key) {
            if field == REQUEST_ID {
                self.request_ids.extend_from_slice(&buf);
            } else {
                self.out.data_binary = buf.freeze();
            }
        }
    }

    /// Decodes hex characters into `data`, carrying an odd last character to the next chunk.
    /// Characters that are not hex do not refuse the body yet: a later `data` may replace this
    /// one, as prost reads the last. From there on the field's bytes are only kept.
    fn decode_hex(&mut self, hex: &[u8]) {
        if let Some(rest) = &mut self.not_hex {
            rest.extend_from_slice(hex);
            return;
        }
        if self.keep_hex {
            self.hex.extend_from_slice(hex);
        }
        let mut pairs = hex;
        let carried = self.half.take();
        let decoded: Result<(), AppendError> = (|| {
            if let Some(first) = carried {
                let Some((&second, rest)) = pairs.split_first() else {
                    self.half = Some(first);
                    return Ok(());
                };
                self.decode_pairs(&[first, second])?;
                pairs = rest;
            }
            let even = pairs.len() / 2 * 2;
            self.decode_pairs(&pairs[..even])?;
            if even < pairs.len() {
                self.half = Some(pairs[even]);
            }
            Ok(())
        })();
        if decoded.is_err() {
            // Everything before `carried` decoded as hex, so is ASCII: the UTF-8 check of
            // the field needs only what follows.
            self.half = None;
            self.not_hex = Some(carried.into_iter().chain(hex.iter().copied()).collect());
        }
    }

    /// The end of a `data` field: it replaces the one before, hex or not, and is refused here
    /// only if it is not even UTF-8.
    fn end_data(&mut self) -> Result<(), AppendError> {
        let rest = match (self.not_hex.take(), self.half.take()) {
            (Some(rest), _) => Some(rest),
            // An odd number of characters: the last one is on its own.
            (None, Some(last)) => Some(vec![last]),
            (None, None) => None,
        };
        match rest {
            Some(rest) => {
                std::str::from_utf8(&rest).map_err(|_| {
                    AppendError::Malformed("data: invalid string value: data is not UTF-8 encoded".into())
                })?;
                self.data_is_hex = false;
                self.data.clear();
                self.out.data = Bytes::new();
                self.out.data_hex = None;
            }
            None => {
                self.data_is_hex = true;
                self.out.data = Bytes::from(std::mem::take(&mut self.data));
                if self.keep_hex {
                    // Hex that decoded is ASCII, so this never replaces anything.
                    self.out.data_hex = Some(String::from_utf8_lossy(&self.hex).into_owned());
                }
            }
        }
        Ok(())
    }

    fn decode_pairs(&mut self, hex: &[u8]) -> Result<(), AppendError> {
        // Checked and decoded in one pass, straight into the payload's spare capacity.
        hex_simd::decode_append(hex, &mut self.data).map_err(|_| AppendError::NotHex)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use cursor_acp_core::proto::aiserver::v1::BidiRequestId;

    fn request(data: &str, binary: &[u8]) -> Vec<u8> {
        BidiAppendRequest {
            data: data.to_string(),
            request_id: Some(BidiRequestId { request_id: "req-1".into() }),
            append_seqno: 300,
            data_binary: Bytes::copy_from_slice(binary),
        }
        .encode_to_vec()
    }

    fn read_in_chunks(body: &[u8], chunk: usize, keep_hex: bool) -> Result<Append, AppendError> {
        let mut reader = AppendReader::new(1 << 20, keep_hex);
        for piece in body.chunks(chunk.max(1)) {
            reader.push(piece)?;
        }
        reader.finish()
    }

    #[test]
    fn any_split_of_the_body_reads_as_prost_decodes_it() {
        let payload: Vec<u8> = (0..=255u8).cycle().take(700).collect();
        let hex = hex::encode(&payload);
        let body = request(&hex, b"\x01\x02");
        for chunk in 1..=body.len() {
            let append = read_in_chunks(&body, chunk, chunk % 2 == 0).expect("a valid body");
            assert_eq!(append.request_id, "req-1");
            assert_eq!(append.append_seqno, 300);
            assert_eq!(&append.data[..], &payload[..], "chunks of {chunk}");
            assert_eq!(&append.data_binary[..], b"\x01\x02");
            assert_eq!(append.data_hex.as_deref(), (chunk % 2 == 0).then_some(hex.as_str()));
        }
    }

    #[test]
    fn upper_case_hex_decodes_and_is_recorded_as_sent() {
        let body = request("0A0b", b"");
        let append = read_in_chunks(&body, 3, true).unwrap();
        assert_eq!(&append.data[..], &[0x0a, 0x0b]);
        assert_eq!(append.data_hex.as_deref(), Some("0A0b"));
    }

    #[test]
    fn fields_in_any_order_repeated_and_unknown() {
        // seqno, an unknown fixed64 and an unknown string, data twice (the last wins), then the id.
        let mut body = Vec::new();
        prost::encoding::int64::encode(3, &-1, &mut body);
        prost::encoding::fixed64::encode(9, &7, &mut body);
        prost::encoding::string::encode(10, &"ignored".to_string(), &mut body);
        prost::encoding::string::encode(1, &"ffff".to_string(), &mut body);
        prost::encoding::string::encode(1, &"0102".to_string(), &mut body);
        prost::encoding::message::encode(2, &BidiRequestId { request_id: "r".into() }, &mut body);
        for chunk in 1..=body.len() {
            let append = read_in_chunks(&body, chunk, false).unwrap();
            assert_eq!((append.request_id.as_str(), append.append_seqno, &append.data[..]), ("r", -1, &[1u8, 2][..]));
        }
    }

    #[test]
    fn bad_bodies_are_refused_with_the_reason() {
        for chunk in [1, 2, 64] {
            assert_eq!(read_in_chunks(&request("zz", b""), chunk, false).unwrap_err(), AppendError::NotHex);
            assert_eq!(read_in_chunks(&request("abc", b""), chunk, false).unwrap_err(), AppendError::NotHex);
            let garbage = read_in_chunks(&[0xff, 0xff, 0xff], chunk, false).unwrap_err();
            assert!(matches!(garbage, AppendError::Malformed(_)), "{garbage:?}");
            let truncated = request("0102", b"");
            let cut = read_in_chunks(&truncated[..truncated.len() - 1], chunk, false).unwrap_err();
            assert_eq!(cut, AppendError::Malformed("the body ends inside a field".into()));
            let group = read_in_chunks(&[0x0b], chunk, false).unwrap_err();
            assert_eq!(group, AppendError::Malformed("field 1 has wire type StartGroup, not LengthDelimited".into()));
        }
        // Over the limit: in total, or by a declared field length.
        let mut reader = AppendReader::new(8, false);
        assert_eq!(reader.push(&[0u8; 9]), Err(AppendError::TooLarge(8)));
        let mut reader = AppendReader::new(100, false);
        assert_eq!(reader.push(&[0x0a, 0xe8, 0x07]), Err(AppendError::TooLarge(100)));
        assert_eq!(AppendError::TooLarge(8).to_string(), "request body exceeds 8 bytes");
    }
}
