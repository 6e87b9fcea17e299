//! Connect unary calls (`GetUsableModels`): the raw request message as the body
//! (`application/proto`), the raw response message back, or a Connect error JSON with a
//! non-2xx status. Like a stream, a call asks for its token first, and once more after the
//! server refuses it.

use bytes::Bytes;

use super::credentials::TokenReason;
use super::headers::RequestIds;
use super::request::{ok_or_http_error, post, send};
use super::{Connections, Transport};
use crate::connect::{Frame, FrameDecoder, Limits};
use crate::error::CoreError;

/// Largest unary answer read (a model list is a few KiB).
const MAX_UNARY_RESPONSE: usize = 4 * 1024 * 1024;

impl Transport {
    /// Calls the unary method at `path` (`/package.Service/Method`) with an encoded request.
    /// A refused token is asked for again once; a second refusal is `E_AUTH` with the
    /// client's sign-in hint.
    pub async fn unary(&self, path: &str, request: Bytes) -> Result<Bytes, CoreError> {
        match self.unary_once(path, request.clone(), TokenReason::Request).await {
            Err(CoreError::Auth(_)) => self
                .unary_once(path, request, TokenReason::Unauthenticated)
                .await
                .map_err(|e| e.with_sign_in_hint(&self.inner.config.sign_in_hint)),
            other => other.map_err(|e| e.with_sign_in_hint(&self.inner.config.sign_in_hint)),
        }
    }

    async fn unary_once(&self, path: &str, body: Bytes, reason: TokenReason) -> Result<Bytes, CoreError> {
        let base = self.inner.config.base_url.trim_end_matches('/');
        let url = reqwest::Url::parse(&format!("{base}{path}"))
            .map_err(|e| CoreError::InvalidInput(format!("{path:?} does not make a URL with baseUrl: {e}")))?;
        let request_id = uuid::Uuid::new_v4().to_string();
        let headers = RequestIds::new(&request_id, None).apply(&self.inner.headers.unary);
        let request = post(url, headers, reqwest::Body::from(body));
        // Unary calls go over HTTP/1.1 unless HTTP/2 is all the client may use: every Connect
        // server takes them that way, proxies included.
        let client = match &self.inner.connections {
            Connections::Http1(client) => client.clone(),
            Connections::Auto(auto) => auto.http1.clone(),
            Connections::H2(connections) => connections.checkout().0,
        };
        let response = ok_or_http_error(send(&client, request, &self.stream_auth(reason)).await?).await?;
        let mut body = Vec::new();
        let mut stream = response;
        while let Some(chunk) = stream.chunk().await.map_err(CoreError::from)? {
            if body.len() + chunk.len() > MAX_UNARY_RESPONSE {
                return Err(CoreError::Protocol(format!("the answer to {path} exceeds {MAX_UNARY_RESPONSE} bytes")));
            }
            body.extend_from_slice(&chunk);
        }
        unwrap_envelope(Bytes::from(body), path)
    }
}

/// A unary answer is the raw message, but some servers wrap it in a Connect envelope anyway.
/// A protobuf message never starts with 0x00–0x03 (no field number 0), an envelope always does.
fn unwrap_envelope(body: Bytes, path: &str) -> Result<Bytes, CoreError> {
    if body.first().is_none_or(|&b| b > 0x03) {
        return Ok(body);
    }
    let mut decoder = FrameDecoder::new(Limits::uniform(MAX_UNARY_RESPONSE));
    decoder.push(&body);
    match decoder.next_frame()? {
        Some(Frame::Message(message)) => Ok(message),
        Some(Frame::End(end)) => match end.error {
            Some(err) => Err(CoreError::from_connect(err)),
            None => Err(CoreError::Protocol(format!("the answer to {path} has no message"))),
        },
        None => Err(CoreError::Protocol(format!("the answer to {path} is a cut-off envelope"))),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::connect;

    #[test]
    fn raw_and_enveloped_answers_are_both_read() {
        let raw = Bytes::from_static(b"\x0a\x03abc");
        assert_eq!(unwrap_envelope(raw.clone(), "/x").unwrap(), raw);
        assert_eq!(unwrap_envelope(Bytes::new(), "/x").unwrap(), Bytes::new(), "an empty message");
        let framed = connect::encode_frame(0, &raw);
        assert_eq!(unwrap_envelope(framed, "/x").unwrap(), raw);
        let cut = connect::encode_frame(0, &raw).slice(..4);
        assert!(matches!(unwrap_envelope(cut, "/x"), Err(CoreError::Protocol(_))));
    }
}
