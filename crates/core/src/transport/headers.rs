//! The headers of every request (docs/protocol.md, "Headers"): the protocol's, the
//! configured extras, and the request ids of each stream. The token is not among them: each
//! stream adds its own `authorization`, marked sensitive (`credentials.rs`).

use reqwest::header::{HeaderMap, HeaderName, HeaderValue};

use super::config::{Compression, TransportConfig};
use crate::error::CoreError;

pub(super) fn protocol_headers(config: &TransportConfig) -> Result<HeaderMap, CoreError> {
    let mut h = HeaderMap::new();
    let value = |name: &str, v: &str| {
        HeaderValue::from_str(v).map_err(|_| CoreError::InvalidInput(format!("{name} is not a valid header value")))
    };
    h.insert("x-cursor-client-version", value("clientVersion", &config.client_version)?);
    h.insert("x-cursor-client-type", value("clientType", &config.client_type)?);
    h.insert("x-ghost-mode", HeaderValue::from_static(if config.ghost_mode { "true" } else { "false" }));
    h.insert("connect-protocol-version", HeaderValue::from_static("1"));
    for (name, v) in &config.headers {
        let lower = name.to_ascii_lowercase();
        if lower == "host" || lower == "content-length" || lower.starts_with(':') {
            return Err(CoreError::InvalidInput(format!("header {name:?} is set by the transport")));
        }
        let name = HeaderName::from_bytes(lower.as_bytes())
            .map_err(|_| CoreError::InvalidInput(format!("{name:?} is not a valid header name")))?;
        let mut v = value("header", v)?;
        if name == reqwest::header::AUTHORIZATION || name.as_str().contains("key") || name.as_str().contains("token") {
            v.set_sensitive(true);
        }
        h.insert(name, v);
    }
    Ok(h)
}

const X_REQUEST_ID: HeaderName = HeaderName::from_static("x-request-id");
const X_ORIGINAL_REQUEST_ID: HeaderName = HeaderName::from_static("x-original-request-id");

/// The headers of each kind of request, apart from the request ids.
#[derive(Clone)]
pub(super) struct RequestHeaders {
    pub(super) sse_stream: HeaderMap,
    pub(super) sse_append: HeaderMap,
    pub(super) h2_run: HeaderMap,
    /// Connect unary calls (`GetUsableModels`): the raw message, `application/proto`.
    pub(super) unary: HeaderMap,
}

impl RequestHeaders {
    pub(super) fn new(protocol: HeaderMap, compression: Compression) -> Self {
        let with = |base: &HeaderMap, extra: &[(&'static str, &'static str)]| {
            let mut h = base.clone();
            for &(name, value) in extra {
                h.insert(HeaderName::from_static(name), HeaderValue::from_static(value));
            }
            h
        };
        let mut connect_stream =
            with(&protocol, &[("content-type", "application/connect+proto"), ("connect-accept-encoding", "gzip")]);
        if compression == Compression::Gzip {
            connect_stream = with(&connect_stream, &[("connect-content-encoding", "gzip")]);
        }
        RequestHeaders {
            sse_stream: with(&connect_stream, &[("x-cursor-streaming", "true")]),
            sse_append: with(
                &protocol,
                &[("x-cursor-streaming", "true"), ("content-type", "application/proto"), ("accept-encoding", "gzip")],
            ),
            h2_run: with(&connect_stream, &[("te", "trailers")]),
            unary: with(&protocol, &[("content-type", "application/proto")]),
        }
    }
}

/// `x-request-id` and `x-original-request-id` of one stream, as header values.
pub(super) struct RequestIds {
    request_id: Option<HeaderValue>,
    original: Option<HeaderValue>,
}

impl RequestIds {
    pub(super) fn new(request_id: &str, original: Option<&str>) -> Self {
        RequestIds {
            request_id: HeaderValue::from_str(request_id).ok(),
            original: original.and_then(|v| HeaderValue::from_str(v).ok()),
        }
    }

    /// `headers` with the ids added.
    pub(super) fn apply(&self, headers: &HeaderMap) -> HeaderMap {
        let mut out = headers.clone();
        if let Some(v) = &self.request_id {
            out.insert(X_REQUEST_ID, v.clone());
        }
        if let Some(v) = &self.original {
            out.insert(X_ORIGINAL_REQUEST_ID, v.clone());
        }
        out
    }
}
