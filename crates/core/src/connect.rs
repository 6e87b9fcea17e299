//! Connect protocol envelopes: `[flags: u8][length: u32 BE][payload]`.
//!
//! The decoder is incremental (feed it any chunking of the byte stream) and strict: reserved flag
//! bits, oversize frames, oversize decompressed payloads, malformed end-stream JSON and bytes after
//! the end-stream frame are all typed errors. Limits are checked on the 5-byte header, before the
//! payload is buffered, so a hostile length never makes us allocate it.

use std::collections::BTreeMap;
use std::io::{Read, Write};

use base64::Engine as _;
use bytes::{Buf, Bytes, BytesMut};
use prost::Message as _;

use crate::proto::aiserver::v1::ErrorDetails;
use crate::wire::Pieces;

/// Payload compressed with the stream's `connect-content-encoding` (gzip here).
pub const FLAG_COMPRESSED: u8 = 0x01;
/// End-of-stream frame: the payload is JSON (`{"error":…,"metadata":…}`), not a message.
pub const FLAG_END_STREAM: u8 = 0x02;
const KNOWN_FLAGS: u8 = FLAG_COMPRESSED | FLAG_END_STREAM;
/// Envelope header size.
pub const HEADER_LEN: usize = 5;
/// Default cap for one frame's payload and for its decompressed size.
pub const DEFAULT_MAX_FRAME: usize = 16 * 1024 * 1024;
/// Fully qualified name of Cursor's error detail message.
pub const CURSOR_ERROR_DETAILS: &str = "aiserver.v1.ErrorDetails";
/// The standard detail by which a server says how long to wait before retrying.
pub const RETRY_INFO_DETAILS: &str = "google.rpc.RetryInfo";

/// Size caps applied while decoding.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Limits {
    /// Largest payload length accepted in a frame header.
    pub max_frame: usize,
    /// Largest payload accepted after gunzip.
    pub max_decompressed: usize,
}

impl Default for Limits {
    fn default() -> Self {
        Limits { max_frame: DEFAULT_MAX_FRAME, max_decompressed: DEFAULT_MAX_FRAME }
    }
}

impl Limits {
    /// The same cap for raw and decompressed payloads.
    pub fn uniform(max: usize) -> Self {
        Limits { max_frame: max, max_decompressed: max }
    }
}

/// What was wrong with the bytes on the wire.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum FrameError {
    #[error("frame has reserved flag bits set (flags 0x{flags:02x})")]
    ReservedFlags { flags: u8 },
    #[error("frame payload of {len} bytes exceeds the {max}-byte limit")]
    FrameTooLarge { len: usize, max: usize },
    #[error("decompressed payload exceeds the {max}-byte limit")]
    DecompressedTooLarge { max: usize },
    #[error("compressed frame is not valid gzip: {0}")]
    BadGzip(String),
    #[error("{0} byte(s) received after the end-of-stream frame")]
    DataAfterEndStream(usize),
    #[error("stream ended inside a frame ({buffered} of {expected} bytes received)")]
    Truncated { buffered: usize, expected: usize },
    #[error("end-of-stream frame is not valid Connect JSON: {0}")]
    BadEndStream(String),
    #[error("compressed frame (flags 0x{flags:02x}) on a stream that agreed on no compression")]
    CompressedWithoutEncoding { flags: u8 },
    #[error("compressed frame in an encoding this client does not support ({0:?})")]
    UnsupportedEncoding(String),
}

/// How the compressed frames (flag 0x01) of a stream are encoded, as its headers agreed
/// (`connect-content-encoding`, or gRPC's `grpc-encoding`). Connect's rule: a frame marked
/// compressed on a stream that named no encoding is a protocol error, never guessed at.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub enum Encoding {
    /// No encoding agreed (or `identity`): no frame may be compressed.
    #[default]
    Identity,
    Gzip,
    /// An encoding named that this client does not decode; a compressed frame is an error.
    Other(String),
}

impl Encoding {
    /// The encoding a header value names; `None` (no header) is [`Encoding::Identity`].
    pub fn from_header(value: Option<&str>) -> Encoding {
        match value.map(str::trim) {
            None | Some("") => Encoding::Identity,
            Some(v) if v.eq_ignore_ascii_case("identity") => Encoding::Identity,
            Some(v) if v.eq_ignore_ascii_case("gzip") => Encoding::Gzip,
            Some(v) => Encoding::Other(v.to_string()),
        }
    }

    /// The encoding of a stream's messages from its headers: `connect-content-encoding`, or
    /// `grpc-encoding`.
    pub fn of_stream(headers: &http::HeaderMap) -> Encoding {
        let named = ["connect-content-encoding", "grpc-encoding"]
            .iter()
            .find_map(|name| headers.get(*name))
            .map(|v| v.to_str().unwrap_or("(not text)"));
        Encoding::from_header(named)
    }
}

/// One decoded envelope.
#[derive(Debug, Clone, PartialEq)]
pub enum Frame {
    /// A protobuf message payload (already decompressed).
    Message(Bytes),
    /// The end-of-stream frame.
    End(EndStream),
}

/// The parsed end-of-stream JSON. `error: None` is a clean end.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct EndStream {
    pub error: Option<ConnectError>,
    /// Trailers (`metadata`), names lower-cased.
    pub metadata: BTreeMap<String, Vec<String>>,
}

/// Connect error codes (gRPC numbers 1–16).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Code {
    Canceled,
    Unknown,
    InvalidArgument,
    DeadlineExceeded,
    NotFound,
    AlreadyExists,
    PermissionDenied,
    ResourceExhausted,
    FailedPrecondition,
    Aborted,
    OutOfRange,
    Unimplemented,
    Internal,
    Unavailable,
    DataLoss,
    Unauthenticated,
}

impl Code {
    const ALL: [Code; 16] = [
        Code::Canceled,
        Code::Unknown,
        Code::InvalidArgument,
        Code::DeadlineExceeded,
        Code::NotFound,
        Code::AlreadyExists,
        Code::PermissionDenied,
        Code::ResourceExhausted,
        Code::FailedPrecondition,
        Code::Aborted,
        Code::OutOfRange,
        Code::Unimplemented,
        Code::Internal,
        Code::Unavailable,
        Code::DataLoss,
        Code::Unauthenticated,
    ];

    /// The snake_case name used on the wire.
    pub fn as_str(self) -> &'static str {
        match self {
            Code::Canceled => "canceled",
            Code::Unknown => "unknown",
            Code::InvalidArgument => "invalid_argument",
            Code::DeadlineExceeded => "deadline_exceeded",
            Code::NotFound => "not_found",
            Code::AlreadyExists => "already_exists",
            Code::PermissionDenied => "permission_denied",
            Code::ResourceExhausted => "resource_exhausted",
            Code::FailedPrecondition => "failed_precondition",
            Code::Aborted => "aborted",
            Code::OutOfRange => "out_of_range",
            Code::Unimplemented => "unimplemented",
            Code::Internal => "internal",
            Code::Unavailable => "unavailable",
            Code::DataLoss => "data_loss",
            Code::Unauthenticated => "unauthenticated",
        }
    }

    /// Parses a wire name; anything unrecognised is `unknown` (per the Connect spec).
    pub fn from_name(name: &str) -> Code {
        Code::ALL.into_iter().find(|c| c.as_str() == name).unwrap_or(Code::Unknown)
    }

    /// The HTTP status a Connect server uses for this code (current spec).
    pub fn http_status(self) -> u16 {
        match self {
            Code::Canceled => 499,
            Code::Unknown | Code::Internal | Code::DataLoss => 500,
            Code::InvalidArgument | Code::FailedPrecondition | Code::OutOfRange => 400,
            Code::DeadlineExceeded => 504,
            Code::NotFound => 404,
            Code::AlreadyExists | Code::Aborted => 409,
            Code::PermissionDenied => 403,
            Code::ResourceExhausted => 429,
            Code::Unimplemented => 501,
            Code::Unavailable => 503,
            Code::Unauthenticated => 401,
        }
    }

    /// Maps an HTTP status without a Connect error body to a code (docs/protocol.md, "Connect
    /// envelopes").
    pub fn from_http_status(status: u16) -> Code {
        match status {
            400 => Code::Internal,
            401 => Code::Unauthenticated,
            403 => Code::PermissionDenied,
            404 => Code::Unimplemented,
            408 => Code::DeadlineExceeded,
            412 => Code::FailedPrecondition,
            413 | 431 => Code::ResourceExhausted,
            429 | 502 | 503 | 504 => Code::Unavailable,
            _ => Code::Unknown,
        }
    }
}

impl std::fmt::Display for Code {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// One entry of a Connect error's `details`.
#[derive(Debug, Clone, PartialEq)]
pub struct ErrorDetail {
    /// Fully qualified protobuf type name.
    pub type_name: String,
    /// The serialized message.
    pub value: Bytes,
    /// Optional JSON rendering supplied by the server.
    pub debug: Option<serde_json::Value>,
}

/// A Connect error (from an end-stream frame, a unary error body or an HTTP status).
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[error("{code}: {message}{}", self.cursor_error_name().map(|n| format!(" ({n})")).unwrap_or_default())]
pub struct ConnectError {
    pub code: Code,
    pub message: String,
    pub details: Vec<ErrorDetail>,
    /// HTTP status when the error came from a non-2xx response.
    pub http_status: Option<u16>,
    /// The wait a non-2xx response asked for in its `Retry-After` header.
    pub retry_after: Option<std::time::Duration>,
}

impl ConnectError {
    pub fn new(code: Code, message: impl Into<String>) -> Self {
        ConnectError { code, message: message.into(), details: Vec::new(), http_status: None, retry_after: None }
    }

    /// Cursor's `aiserver.v1.ErrorDetails`, decoded from the first detail of that type.
    pub fn cursor_details(&self) -> Option<ErrorDetails> {
        self.details
            .iter()
            .filter(|d| d.type_name == CURSOR_ERROR_DETAILS)
            .find_map(|d| ErrorDetails::decode(d.value.clone()).ok())
    }

    /// The Cursor error enum name (`ERROR_MAX_TOKENS`, …) when the details carry one.
    pub fn cursor_error_name(&self) -> Option<&'static str> {
        let details = self.cursor_details()?;
        let name = crate::proto::aiserver::v1::error_details::Error::try_from(details.error).ok()?.as_str_name();
        Some(name)
    }

    /// How long the server asked the client to wait before trying again: the response's
    /// `Retry-After` header, else a `google.rpc.RetryInfo` detail.
    pub fn retry_delay(&self) -> Option<std::time::Duration> {
        self.retry_after.or_else(|| {
            self.details.iter().filter(|d| d.type_name == RETRY_INFO_DETAILS).find_map(|d| {
                let info = RetryInfo::decode(d.value.clone()).ok()?;
                let delay = info.retry_delay?;
                let seconds = u64::try_from(delay.seconds).ok()?;
                let nanos = u32::try_from(delay.nanos).ok().filter(|n| *n < 1_000_000_000)?;
                Some(std::time::Duration::new(seconds, nanos))
            })
        })
    }

    /// Parses a Connect error JSON object (`{"code","message","details"}`).
    pub fn from_json(value: &serde_json::Value) -> Result<Self, String> {
        let obj = value.as_object().ok_or("error is not a JSON object")?;
        let code = match obj.get("code") {
            Some(serde_json::Value::String(s)) => Code::from_name(s),
            Some(_) => return Err("error.code is not a string".into()),
            None => Code::Unknown,
        };
        let message = match obj.get("message") {
            Some(serde_json::Value::String(s)) => percent_decode(s),
            Some(serde_json::Value::Null) | None => String::new(),
            Some(_) => return Err("error.message is not a string".into()),
        };
        let mut details = Vec::new();
        if let Some(list) = obj.get("details") {
            let list = list.as_array().ok_or("error.details is not an array")?;
            for entry in list {
                let type_name = entry
                    .get("type")
                    .and_then(|t| t.as_str())
                    .ok_or("error detail has no string \"type\"")?
                    .to_string();
                let raw = entry.get("value").and_then(|v| v.as_str()).unwrap_or("");
                let value = decode_base64_lenient(raw).map_err(|e| format!("error detail value is not base64: {e}"))?;
                details.push(ErrorDetail { type_name, value: Bytes::from(value), debug: entry.get("debug").cloned() });
            }
        }
        Ok(ConnectError { code, message, details, http_status: None, retry_after: None })
    }

    /// Renders the Connect error JSON (used by the embedded backend).
    pub fn to_json(&self) -> serde_json::Value {
        let mut obj = serde_json::json!({ "code": self.code.as_str(), "message": self.message });
        if !self.details.is_empty() {
            obj["details"] = self
                .details
                .iter()
                .map(|d| {
                    let mut e = serde_json::json!({
                        "type": d.type_name,
                        "value": base64::engine::general_purpose::STANDARD_NO_PAD.encode(&d.value),
                    });
                    if let Some(debug) = &d.debug {
                        e["debug"] = debug.clone();
                    }
                    e
                })
                .collect();
        }
        obj
    }

    /// Error for a non-2xx HTTP response: prefer the Connect JSON body, else map the status.
    pub fn from_http(status: u16, body: &[u8]) -> Self {
        let parsed = serde_json::from_slice::<serde_json::Value>(body)
            .ok()
            .filter(|v| v.get("code").is_some())
            .and_then(|v| ConnectError::from_json(&v).ok());
        let mut err = parsed.unwrap_or_else(|| {
            let text = String::from_utf8_lossy(&body[..body.len().min(512)]).trim().to_string();
            let message = if text.is_empty() { format!("HTTP {status}") } else { format!("HTTP {status}: {text}") };
            ConnectError::new(Code::from_http_status(status), message)
        });
        err.http_status = Some(status);
        err
    }
}

/// A `google.rpc.RetryInfo` detail asking the client to wait `delay`.
pub fn retry_info_detail(delay: std::time::Duration) -> ErrorDetail {
    let retry_delay = prost_types::Duration { seconds: delay.as_secs() as i64, nanos: delay.subsec_nanos() as i32 };
    ErrorDetail {
        type_name: RETRY_INFO_DETAILS.into(),
        value: RetryInfo { retry_delay: Some(retry_delay) }.encode_to_vec().into(),
        debug: None,
    }
}

/// `google.rpc.RetryInfo`: field 1 is the delay, a `google.protobuf.Duration`.
#[derive(Clone, PartialEq, prost::Message)]
struct RetryInfo {
    #[prost(message, optional, tag = "1")]
    retry_delay: Option<prost_types::Duration>,
}

/// Connect allows padded or unpadded, standard or URL-safe base64.
fn decode_base64_lenient(s: &str) -> Result<Vec<u8>, base64::DecodeError> {
    use base64::engine::general_purpose::{STANDARD_NO_PAD, URL_SAFE_NO_PAD};
    let trimmed = s.trim_end_matches('=');
    STANDARD_NO_PAD.decode(trimmed).or_else(|_| URL_SAFE_NO_PAD.decode(trimmed))
}

/// gRPC convention: error messages may be percent-encoded.
fn percent_decode(s: &str) -> String {
    if !s.contains('%') {
        return s.to_string();
    }
    let bytes = s.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] == b'%'
            && i + 2 < bytes.len()
            && bytes[i + 1].is_ascii_hexdigit()
            && bytes[i + 2].is_ascii_hexdigit()
        {
            let hi = (bytes[i + 1] as char).to_digit(16).unwrap_or(0) as u8;
            let lo = (bytes[i + 2] as char).to_digit(16).unwrap_or(0) as u8;
            out.push(hi << 4 | lo);
            i += 3;
            continue;
        }
        out.push(bytes[i]);
        i += 1;
    }
    String::from_utf8(out).unwrap_or_else(|_| s.to_string())
}

/// Parses an end-of-stream payload.
pub fn parse_end_stream(payload: &[u8]) -> Result<EndStream, FrameError> {
    let value: serde_json::Value =
        serde_json::from_slice(payload).map_err(|e| FrameError::BadEndStream(e.to_string()))?;
    let obj = value.as_object().ok_or_else(|| FrameError::BadEndStream("not a JSON object".into()))?;
    let error = match obj.get("error") {
        None | Some(serde_json::Value::Null) => None,
        Some(e) => Some(ConnectError::from_json(e).map_err(FrameError::BadEndStream)?),
    };
    let mut metadata = BTreeMap::new();
    if let Some(serde_json::Value::Object(m)) = obj.get("metadata") {
        for (k, v) in m {
            let values = v
                .as_array()
                .map(|a| a.iter().filter_map(|x| x.as_str().map(str::to_string)).collect())
                .unwrap_or_default();
            metadata.insert(k.to_ascii_lowercase(), values);
        }
    }
    Ok(EndStream { error, metadata })
}

/// Gunzips `data`, failing as soon as the output would exceed `max` bytes.
pub fn gunzip_capped(data: &[u8], max: usize) -> Result<Vec<u8>, FrameError> {
    let mut out = Vec::with_capacity(data.len().saturating_mul(2).min(max).min(1 << 20));
    let mut decoder = flate2::read::GzDecoder::new(data).take(max as u64 + 1);
    decoder.read_to_end(&mut out).map_err(|e| FrameError::BadGzip(e.to_string()))?;
    if out.len() > max {
        return Err(FrameError::DecompressedTooLarge { max });
    }
    Ok(out)
}

/// Gzips `data` (fast level: payloads are mostly protobuf and text).
pub fn gzip(data: &[u8]) -> Vec<u8> {
    gzip_parts(data.len(), [data])
}

/// Gzips a message held in pieces, without joining them first.
pub fn gzip_pieces(payload: &Pieces) -> Vec<u8> {
    gzip_parts(payload.len(), payload.chunks())
}

/// Gzips `parts` as one stream (`len`, their total, sizes the output), without joining them.
pub fn gzip_parts<P: AsRef<[u8]>>(len: usize, parts: impl IntoIterator<Item = P>) -> Vec<u8> {
    let mut enc = flate2::write::GzEncoder::new(Vec::with_capacity(len / 2 + 64), flate2::Compression::fast());
    for part in parts {
        enc.write_all(part.as_ref()).expect("writing to a Vec cannot fail");
    }
    enc.finish().expect("writing to a Vec cannot fail")
}

/// Incremental envelope decoder.
#[derive(Debug)]
pub struct FrameDecoder {
    buf: BytesMut,
    limits: Limits,
    encoding: Encoding,
    ended: bool,
    last_flags: u8,
}

impl Default for FrameDecoder {
    fn default() -> Self {
        FrameDecoder::new(Limits::default())
    }
}

impl FrameDecoder {
    /// A decoder for a stream that agreed on no compression (see [`set_encoding`](Self::set_encoding)).
    pub fn new(limits: Limits) -> Self {
        FrameDecoder { buf: BytesMut::new(), limits, encoding: Encoding::Identity, ended: false, last_flags: 0 }
    }

    /// The encoding the stream's headers agreed on for compressed frames.
    pub fn set_encoding(&mut self, encoding: Encoding) {
        self.encoding = encoding;
    }

    /// Appends received bytes.
    pub fn push(&mut self, chunk: &[u8]) {
        self.buf.extend_from_slice(chunk);
    }

    /// True once the end-of-stream frame has been decoded.
    pub fn is_ended(&self) -> bool {
        self.ended
    }

    /// Flags of the last frame returned (e.g. to tell whether it was compressed).
    pub fn last_flags(&self) -> u8 {
        self.last_flags
    }

    /// Bytes buffered but not yet decoded.
    pub fn buffered(&self) -> usize {
        self.buf.len()
    }

    /// Decodes the next complete frame, or `Ok(None)` when more bytes are needed.
    pub fn next_frame(&mut self) -> Result<Option<Frame>, FrameError> {
        if self.ended {
            return if self.buf.is_empty() { Ok(None) } else { Err(FrameError::DataAfterEndStream(self.buf.len())) };
        }
        if self.buf.len() < HEADER_LEN {
            return Ok(None);
        }
        let flags = self.buf[0];
        if flags & !KNOWN_FLAGS != 0 {
            return Err(FrameError::ReservedFlags { flags });
        }
        let len = u32::from_be_bytes([self.buf[1], self.buf[2], self.buf[3], self.buf[4]]) as usize;
        if len > self.limits.max_frame {
            return Err(FrameError::FrameTooLarge { len, max: self.limits.max_frame });
        }
        if self.buf.len() < HEADER_LEN + len {
            // Reserve once so a large frame arriving in small chunks is not re-copied each time.
            self.buf.reserve(HEADER_LEN + len - self.buf.len());
            return Ok(None);
        }
        self.buf.advance(HEADER_LEN);
        self.last_flags = flags;
        let raw = self.buf.split_to(len).freeze();
        let payload = if flags & FLAG_COMPRESSED != 0 {
            match &self.encoding {
                Encoding::Gzip => Bytes::from(gunzip_capped(&raw, self.limits.max_decompressed)?),
                Encoding::Identity => return Err(FrameError::CompressedWithoutEncoding { flags }),
                Encoding::Other(name) => return Err(FrameError::UnsupportedEncoding(name.clone())),
            }
        } else {
            raw
        };
        if flags & FLAG_END_STREAM != 0 {
            self.ended = true;
            let end = parse_end_stream(&payload)?;
            if !self.buf.is_empty() {
                return Err(FrameError::DataAfterEndStream(self.buf.len()));
            }
            return Ok(Some(Frame::End(end)));
        }
        Ok(Some(Frame::Message(payload)))
    }

    /// Call at end of input: a partial frame left in the buffer is an error.
    pub fn finish(&self) -> Result<(), FrameError> {
        if self.buf.is_empty() {
            return Ok(());
        }
        if self.ended {
            return Err(FrameError::DataAfterEndStream(self.buf.len()));
        }
        let expected = if self.buf.len() >= HEADER_LEN {
            HEADER_LEN + u32::from_be_bytes([self.buf[1], self.buf[2], self.buf[3], self.buf[4]]) as usize
        } else {
            HEADER_LEN
        };
        Err(FrameError::Truncated { buffered: self.buf.len(), expected })
    }
}

/// The 5-byte envelope header: flags, then the payload length big-endian.
pub fn frame_header(flags: u8, len: u32) -> [u8; HEADER_LEN] {
    let mut header = [flags, 0, 0, 0, 0];
    header[1..].copy_from_slice(&len.to_be_bytes());
    header
}

/// Encodes one envelope with the given flags around `payload`.
pub fn encode_frame(flags: u8, payload: &[u8]) -> Bytes {
    let mut out = BytesMut::with_capacity(HEADER_LEN + payload.len());
    out.extend_from_slice(&frame_header(flags, payload.len() as u32));
    out.extend_from_slice(payload);
    out.freeze()
}

/// Pieces at least this large go into a frame as they are; smaller ones are copied.
const SHARED_PIECE_MIN: usize = 64 * 1024;

/// `payload` (one message, in pieces) as an envelope, in buffers to write in order. The header
/// and the small pieces are copied into shared buffers; large pieces (a file's content moved into
/// an exec result) are passed along as they are, so a 12 MiB upload is not copied into a
/// 12 MiB frame, and a small message is still one buffer.
pub fn encode_frame_pieces(flags: u8, payload: Pieces) -> Vec<Bytes> {
    let small_len: usize = payload.chunks().iter().map(Bytes::len).filter(|&len| len < SHARED_PIECE_MIN).sum();
    let mut small = BytesMut::with_capacity(HEADER_LEN + small_len);
    small.extend_from_slice(&frame_header(flags, payload.len() as u32));
    let mut out = Vec::new();
    for chunk in payload.into_chunks() {
        if chunk.len() < SHARED_PIECE_MIN {
            small.extend_from_slice(&chunk);
        } else {
            if !small.is_empty() {
                out.push(small.split().freeze());
            }
            out.push(chunk);
        }
    }
    if !small.is_empty() {
        out.push(small.freeze());
    }
    out
}

/// Encodes a protobuf message as a data envelope, gzip-compressing it when `compress` is set and
/// the payload is at least `min_compress` bytes (tiny frames grow under gzip).
pub fn encode_message<M: prost::Message>(msg: &M, compress: bool, min_compress: usize) -> Bytes {
    let raw = msg.encode_to_vec();
    if compress && raw.len() >= min_compress {
        encode_frame(FLAG_COMPRESSED, &gzip(&raw))
    } else {
        encode_frame(0, &raw)
    }
}

/// Encodes an end-of-stream envelope (`{}` when `error` is `None`).
pub fn encode_end_stream(error: Option<&ConnectError>) -> Bytes {
    let json = match error {
        Some(e) => serde_json::json!({ "error": e.to_json() }),
        None => serde_json::json!({}),
    };
    encode_frame(FLAG_END_STREAM, json.to_string().as_bytes())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn percent_decoding_follows_grpc_convention() {
        assert_eq!(percent_decode("a%20b%3Ac"), "a b:c");
        assert_eq!(percent_decode("100%"), "100%");
        assert_eq!(percent_decode("%zz"), "%zz");
        assert_eq!(percent_decode("%+1x"), "%+1x");
    }

    #[test]
    fn http_status_mapping_matches_spec() {
        assert_eq!(Code::from_http_status(401), Code::Unauthenticated);
        assert_eq!(Code::from_http_status(429), Code::Unavailable);
        assert_eq!(Code::from_http_status(404), Code::Unimplemented);
        assert_eq!(Code::from_http_status(464), Code::Unknown);
        for c in Code::ALL {
            assert_eq!(Code::from_name(c.as_str()), c);
        }
        assert_eq!(Code::ResourceExhausted.http_status(), 429);
    }
}
