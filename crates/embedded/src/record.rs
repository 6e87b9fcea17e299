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

/// What a stream turned out to be, known from its first message as soon as it is recorded.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StreamKind {
    /// Opened, and neither a message nor an outcome yet: it may still become either.
    Opening,
    /// It began with a `prewarm_request` and plays no turn.
    Prewarm,
    /// A turn: its first message was anything else, or it ended before sending one (an HTTP
    /// error, a client that went away).
    Turn,
}

impl RunRecord {
    pub fn kind(&self) -> StreamKind {
        match self.messages.first() {
            Some(m) if m.kind == "prewarmRequest" => StreamKind::Prewarm,
            Some(_) => StreamKind::Turn,
            None if self.outcome.is_some() => StreamKind::Turn,
            None => StreamKind::Opening,
        }
    }
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

/// A request's headers as recorded: names lower-case, credentials redacted (see
/// [`recorded_value`]). `issued_here` names a bearer token this backend issued (`access token 3`:
/// its kind and serial number, nothing derived from the secret part), so a record can tell which
/// token was sent without holding it.
pub(crate) fn header_map(
    headers: &http::HeaderMap,
    issued_here: impl Fn(&str) -> Option<String>,
) -> BTreeMap<String, String> {
    headers.iter().map(|(k, v)| (k.as_str().to_string(), recorded_value(k.as_str(), v, &issued_here))).collect()
}

/// What a record keeps of one header value. Records end up in files (`--record`) and test logs,
/// so no credential is kept, not even a hash of one (a short credential could be guessed back from
/// it): `authorization`-like headers keep their scheme (`Bearer <redacted>`), other credential
/// headers (cookies, API keys, tokens, secrets, passwords) only `<redacted>`.
pub(crate) fn recorded_value(
    name: &str,
    value: &http::HeaderValue,
    issued_here: impl Fn(&str) -> Option<String>,
) -> String {
    const CREDENTIAL_NAMES: [&str; 7] = ["auth", "cookie", "key", "token", "secret", "passw", "credential"];
    let name = name.to_ascii_lowercase();
    if !CREDENTIAL_NAMES.iter().any(|c| name.contains(c)) {
        return String::from_utf8_lossy(value.as_bytes()).into_owned();
    }
    let text = String::from_utf8_lossy(value.as_bytes());
    match name.ends_with("authorization").then(|| text.split_once(' ')).flatten() {
        Some((scheme, credential)) => match issued_here(credential.trim()) {
            Some(token) => format!("{scheme} <redacted: {token} issued by this backend>"),
            None => format!("{scheme} <redacted>"),
        },
        None => "<redacted>".into(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn recorded(pairs: &[(&'static str, &'static str)]) -> BTreeMap<String, String> {
        let mut headers = http::HeaderMap::new();
        for &(name, value) in pairs {
            headers.append(name, http::HeaderValue::from_static(value));
        }
        header_map(&headers, |token| (token == "issued-1").then(|| "access token 1".to_string()))
    }

    #[test]
    fn a_stream_is_a_turn_or_a_prewarm_only_once_its_first_message_or_end_is_known() {
        let message = |kind: &str| MessageRecord {
            seqno: Some(1),
            kind: kind.to_string(),
            compressed: false,
            message: serde_json::Value::Null,
        };
        let mut record = RunRecord::default();
        assert_eq!(record.kind(), StreamKind::Opening, "a stream opened a moment ago is neither yet");
        record.messages.push(message("prewarmRequest"));
        assert_eq!(record.kind(), StreamKind::Prewarm);
        record.messages[0] = message("runRequest");
        assert_eq!(record.kind(), StreamKind::Turn);
        let refused = RunRecord { outcome: Some("http 503".into()), ..Default::default() };
        assert_eq!(refused.kind(), StreamKind::Turn, "a stream refused before any message still counts");
    }

    #[test]
    fn credentials_never_reach_a_record_and_authorization_keeps_its_scheme() {
        let r = recorded(&[
            ("authorization", "Bearer tok-abc"),
            ("proxy-authorization", "Basic dXNlcjpwYXNz"),
            ("cookie", "session=s3cret"),
            ("x-api-key", "key_123"),
            ("x-goog-api-key", "AIza-secret"),
            ("x-refresh-token", "r-456"),
            ("x-client-secret", "cs-789"),
            ("authorization-extra", "Bearer"),
            ("x-cursor-client-version", "cli-2026.08.11-e8db854"),
            ("x-request-id", "req-1"),
        ]);
        assert_eq!(r["authorization"], "Bearer <redacted>");
        assert_eq!(r["proxy-authorization"], "Basic <redacted>");
        for name in
            ["cookie", "x-api-key", "x-goog-api-key", "x-refresh-token", "x-client-secret", "authorization-extra"]
        {
            assert_eq!(r[name], "<redacted>", "{name}");
        }
        assert_eq!(r["x-cursor-client-version"], "cli-2026.08.11-e8db854", "other headers as sent");
        assert_eq!(r["x-request-id"], "req-1");
        let all = serde_json::to_string(&r).unwrap();
        for secret in ["tok-abc", "dXNlcjpwYXNz", "s3cret", "key_123", "AIza", "r-456", "cs-789"] {
            assert!(!all.contains(secret), "{secret} in {all}");
        }
        let issued = recorded(&[("authorization", "Bearer issued-1")]);
        assert_eq!(issued["authorization"], "Bearer <redacted: access token 1 issued by this backend>");
    }
}
