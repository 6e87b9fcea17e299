//! Starting requests and reading error responses, for every kind of stream, appends and unary
//! calls.

use std::sync::Arc;
use std::time::{Duration, SystemTime};

use futures::StreamExt;
use reqwest::header::HeaderMap;
use tokio::task::JoinHandle;

use super::credentials::StreamAuth;
use crate::connect::ConnectError;
use crate::error::CoreError;

/// A POST with exactly these headers (the client adds only its defaults, `user-agent`).
pub(super) fn post(url: reqwest::Url, headers: HeaderMap, body: reqwest::Body) -> reqwest::Request {
    let mut request = reqwest::Request::new(reqwest::Method::POST, url);
    *request.headers_mut() = headers;
    *request.body_mut() = Some(body);
    request
}

pub(super) type ResponseTask = JoinHandle<Result<reqwest::Response, CoreError>>;

/// Starts the request now, so the stream opens even before anyone reads from it. The stream's
/// token is asked for first.
pub(super) fn spawn_request(
    client: &reqwest::Client,
    request: reqwest::Request,
    auth: Arc<StreamAuth>,
) -> ResponseTask {
    let client = client.clone();
    tokio::spawn(async move { ok_or_http_error(send(&client, request, &auth).await?).await })
}

/// Sends `request` with the stream's `authorization`.
pub(super) async fn send(
    client: &reqwest::Client,
    mut request: reqwest::Request,
    auth: &StreamAuth,
) -> Result<reqwest::Response, CoreError> {
    auth.apply(request.headers_mut()).await?;
    client.execute(request).await.map_err(CoreError::from)
}

/// The response if its status is a success, else the error its status and body say.
pub(super) async fn ok_or_http_error(response: reqwest::Response) -> Result<reqwest::Response, CoreError> {
    let status = response.status();
    if !status.is_success() {
        let retry_after = retry_after(response.headers());
        let body = read_capped(response, 64 * 1024).await;
        let mut err = ConnectError::from_http(status.as_u16(), &body);
        err.retry_after = retry_after;
        return Err(CoreError::from_connect(err));
    }
    Ok(response)
}

/// `Retry-After`: seconds, or an HTTP date (RFC 9110 §10.2.3).
fn retry_after(headers: &HeaderMap) -> Option<Duration> {
    let value = headers.get(reqwest::header::RETRY_AFTER)?.to_str().ok()?.trim();
    if let Ok(seconds) = value.parse::<u64>() {
        return Some(Duration::from_secs(seconds));
    }
    let at = httpdate::parse_http_date(value).ok()?;
    Some(at.duration_since(SystemTime::now()).unwrap_or(Duration::ZERO))
}

/// At most `max` bytes of a response's body (an error body, an append's answer).
pub(super) async fn read_capped(response: reqwest::Response, max: usize) -> Vec<u8> {
    let mut out = Vec::new();
    let mut body = response.bytes_stream();
    while let Some(Ok(chunk)) = body.next().await {
        out.extend_from_slice(&chunk[..chunk.len().min(max - out.len())]);
        if out.len() >= max {
            break;
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn retry_after_is_seconds_or_a_date() {
        let mut h = HeaderMap::new();
        assert_eq!(retry_after(&h), None);
        h.insert("retry-after", "3600".parse().unwrap());
        assert_eq!(retry_after(&h), Some(Duration::from_secs(3600)));
        let later = SystemTime::now() + Duration::from_secs(120);
        h.insert("retry-after", httpdate::fmt_http_date(later).parse().unwrap());
        let d = retry_after(&h).unwrap();
        assert!(d > Duration::from_secs(100) && d <= Duration::from_secs(120), "{d:?}");
        h.insert("retry-after", "Wed, 21 Oct 2015 07:28:00 GMT".parse().unwrap());
        assert_eq!(retry_after(&h), Some(Duration::ZERO), "a date in the past: now");
        h.insert("retry-after", "soon".parse().unwrap());
        assert_eq!(retry_after(&h), None);
    }
}
