//! Reads a `BidiAppendRequest` body as it arrives.
//!
//! Hex `data` is decoded chunk by chunk straight into the payload, so a large append never
//! exists on the server as a hex body twice the payload's size, and its decode runs while the
//! rest is still on the wire instead of after the last byte (bench/README.md, large-up). The
//! other fields are small, or (`data_binary`) taken as they are. Fields may come in any order
//! and repeat, the last one winning, as protobuf allows.

use bytes::{Bytes, BytesMut};
use prost::Message as _;

use crate::proto::aiserver::v1::BidiRequestId;

/// The request as this server needs it.
#[derive(Debug, Default)]
pub(crate) struct Append {
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
pub(crate) enum AppendError {
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

use crate::field::aiserver::v1::bidi_append_request as field;

const DATA: u64 = field::DATA as u64;
const REQUEST_ID: u64 = field::REQUEST_ID as u64;
const APPEND_SEQNO: u64 = field::APPEND_SEQNO as u64;
const DATA_BINARY: u64 = field::DATA_BINARY as u64;

enum State {
    /// Reading a field key (a varint, possibly split across chunks, gathered in `varint`).
    Key,
    /// Reading a varint value of `field`.
    Varint { field: u64 },
    /// Reading the length of length-delimited `field`.
    Length { field: u64 },
    /// Inside `data`: `left` hex characters to go.
    Hex { left: usize },
    /// Inside a small or binary field, gathered whole.
    Gather { field: u64, left: usize, buf: BytesMut },
    /// Inside a field this server does not read.
    Skip { left: usize },
}

pub(crate) struct AppendReader {
    max: usize,
    seen: usize,
    keep_hex: bool,
    state: State,
    varint: Vec<u8>,
    /// The first character of a hex pair split across chunks.
    half: Option<u8>,
    out: Append,
    data: Vec<u8>,
    hex: Vec<u8>,
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
            half: None,
            out: Append::default(),
            data: Vec::new(),
            hex: Vec::new(),
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
                    let Some((value, rest)) = self.take_varint(chunk)? else { return Ok(()) };
                    self.after_varint(value)?;
                    rest
                }
                State::Hex { left } => {
                    let n = (*left).min(chunk.len());
                    *left -= n;
                    let done = *left == 0;
                    self.decode_hex(&chunk[..n])?;
                    if done {
                        if self.half.is_some() {
                            return Err(AppendError::NotHex);
                        }
                        self.out.data = Bytes::from(std::mem::take(&mut self.data));
                        if self.keep_hex {
                            // Hex that decoded is ASCII, so this never replaces anything.
                            self.out.data_hex = Some(String::from_utf8_lossy(&self.hex).into_owned());
                        }
                        self.state = State::Key;
                    }
                    &chunk[n..]
                }
                State::Gather { left, buf, .. } => {
                    let n = (*left).min(chunk.len());
                    buf.extend_from_slice(&chunk[..n]);
                    *left -= n;
                    if *left == 0 {
                        self.finish_gather()?;
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
    pub fn finish(self) -> Result<Append, AppendError> {
        match self.state {
            State::Key if self.varint.is_empty() => Ok(self.out),
            _ => Err(AppendError::Malformed("the body ends inside a field".into())),
        }
    }

    /// Gathers varint bytes; the value and the rest of the chunk once its last byte is in.
    fn take_varint<'a>(&mut self, chunk: &'a [u8]) -> Result<Option<(u64, &'a [u8])>, AppendError> {
        for (i, &byte) in chunk.iter().enumerate() {
            self.varint.push(byte);
            if self.varint.len() > 10 {
                return Err(AppendError::Malformed("a varint is longer than 10 bytes".into()));
            }
            if byte & 0x80 == 0 {
                let value = self.varint.iter().rev().fold(0u64, |v, b| (v << 7) | u64::from(b & 0x7f));
                self.varint.clear();
                return Ok(Some((value, &chunk[i + 1..])));
            }
        }
        Ok(None)
    }

    fn after_varint(&mut self, value: u64) -> Result<(), AppendError> {
        self.state = match self.state {
            State::Key => {
                let field = value >> 3;
                match value & 7 {
                    0 => State::Varint { field },
                    1 => State::Skip { left: 8 },
                    2 => State::Length { field },
                    5 => State::Skip { left: 4 },
                    wire => return Err(AppendError::Malformed(format!("field {field} has wire type {wire}"))),
                }
            }
            State::Varint { field } => {
                if field == APPEND_SEQNO {
                    // int64 on the wire: two's complement in 64 bits.
                    self.out.append_seqno = value as i64;
                }
                State::Key
            }
            State::Length { field } => {
                let len = usize::try_from(value)
                    .ok()
                    .filter(|&len| len <= self.max)
                    .ok_or(AppendError::TooLarge(self.max))?;
                match field {
                    _ if len == 0 => {
                        self.empty_field(field);
                        State::Key
                    }
                    DATA => {
                        self.data = Vec::with_capacity(len / 2);
                        self.hex.clear();
                        self.half = None;
                        State::Hex { left: len }
                    }
                    REQUEST_ID | DATA_BINARY => State::Gather { field, left: len, buf: BytesMut::with_capacity(len) },
                    _ => State::Skip { left: len },
                }
            }
            _ => unreachable!("only called after a varint state"),
        };
        Ok(())
    }

    /// A field present with an empty value replaces an earlier one (last wins).
    fn empty_field(&mut self, field: u64) {
        match field {
            DATA => {
                self.out.data = Bytes::new();
                self.out.data_hex = self.keep_hex.then(String::new);
            }
            REQUEST_ID => self.out.request_id.clear(),
            DATA_BINARY => self.out.data_binary = Bytes::new(),
            _ => {}
        }
    }

    fn finish_gather(&mut self) -> Result<(), AppendError> {
        let State::Gather { field, buf, .. } = std::mem::replace(&mut self.state, State::Key) else {
            unreachable!("called from the gather state")
        };
        if field == REQUEST_ID {
            let id = BidiRequestId::decode(buf.freeze()).map_err(|e| AppendError::Malformed(e.to_string()))?;
            self.out.request_id = id.request_id;
        } else {
            self.out.data_binary = buf.freeze();
        }
        Ok(())
    }

    /// Decodes hex characters into `data`, carrying an odd last character to the next chunk.
    fn decode_hex(&mut self, mut hex: &[u8]) -> Result<(), AppendError> {
        if self.keep_hex {
            self.hex.extend_from_slice(hex);
        }
        if let Some(first) = self.half.take() {
            let Some((&second, rest)) = hex.split_first() else {
                self.half = Some(first);
                return Ok(());
            };
            self.decode_pairs(&[first, second])?;
            hex = rest;
        }
        let even = hex.len() / 2 * 2;
        self.decode_pairs(&hex[..even])?;
        if even < hex.len() {
            self.half = Some(hex[even]);
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
    use crate::proto::aiserver::v1::BidiAppendRequest;

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
            assert_eq!(group, AppendError::Malformed("field 1 has wire type 3".into()));
        }
        // Over the limit: in total, or by a declared field length.
        let mut reader = AppendReader::new(8, false);
        assert_eq!(reader.push(&[0u8; 9]), Err(AppendError::TooLarge(8)));
        let mut reader = AppendReader::new(100, false);
        assert_eq!(reader.push(&[0x0a, 0xe8, 0x07]), Err(AppendError::TooLarge(100)));
        assert_eq!(AppendError::TooLarge(8).to_string(), "request body exceeds 8 bytes");
    }
}
