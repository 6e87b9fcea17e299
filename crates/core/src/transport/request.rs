//! Starting requests and reading error responses, for every kind of stream and for appends.

use futures::StreamExt;
use reqwest::header::HeaderMap;
use tokio::task::JoinHandle;

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

/// Starts the request now, so the stream opens even before anyone reads from it.
pub(super) fn spawn_request(client: &reqwest::Client, request: reqwest::Request) -> ResponseTask {
    let response = client.execute(request);
    tokio::spawn(async move { ok_or_http_error(response.await.map_err(CoreError::from)?).await })
}

/// The response if its status is a success, else the error its status and body say.
pub(super) async fn ok_or_http_error(response: reqwest::Response) -> Result<reqwest::Response, CoreError> {
    let status = response.status();
    if !status.is_success() {
        let body = read_capped(response, 64 * 1024).await;
        return Err(CoreError::from_connect(ConnectError::from_http(status.as_u16(), &body)));
    }
    Ok(response)
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
