//! What the embedded backend saw, for tests to assert on.

use std::collections::BTreeMap;

use serde::Serialize;

/// One stream (one request id): its headers, every append as sent, and the decoded messages.
#[derive(Debug, Clone, Serialize, Default)]
#[serde(rename_all = "camelCase")]
pub struct RunRecord {
    pub request_id: String,
    /// `"sse"` or `"h2"`; empty until the stream request itself arrives.
    pub transport: String,
    /// Which scenario turn this stream played.
    pub turn_index: Option<usize>,
    /// Headers of the stream request (RunSSE or Run), names lower-case.
    pub headers: BTreeMap<String, String>,
    /// RunSSE: whether the request's one envelope (its `BidiRequestId`) came compressed.
    pub request_id_compressed: bool,
    /// BidiAppend calls in arrival order (SSE only).
    pub appends: Vec<AppendRecord>,
    /// Client messages in delivery order (seqno order for SSE), decoded to proto3 JSON.
    pub messages: Vec<MessageRecord>,
    /// How the server side ended: `end`, `error: …`, `drop`, `close`, `client gone`, …
    pub outcome: Option<String>,
}

#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct AppendRecord {
    pub seqno: i64,
    /// `BidiAppendRequest.data` exactly as received (lower-case hex), empty in binary mode.
    pub data: String,
    /// Whether the payload came in `data_binary`.
    pub data_binary: bool,
    /// `content-encoding` of the append request, if any.
    pub content_encoding: Option<String>,
    pub headers: BTreeMap<String, String>,
}

#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct MessageRecord {
    /// The append seqno (SSE) or `None` (h2).
    pub seqno: Option<i64>,
    /// The `AgentClientMessage` branch, proto3 JSON name (`runRequest`, `clientHeartbeat`, …).
    pub kind: String,
    /// Whether the h2 envelope carrying it was gzip-compressed (always false for SSE).
    pub compressed: bool,
    /// The whole message in proto3 JSON.
    pub message: serde_json::Value,
}

pub(crate) fn header_map(headers: &http::HeaderMap) -> BTreeMap<String, String> {
    headers.iter().map(|(k, v)| (k.as_str().to_string(), String::from_utf8_lossy(v.as_bytes()).into_owned())).collect()
}
