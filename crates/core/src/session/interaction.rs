//! Answers to the server's interaction queries (web search, questions, mode switches, plans):
//! the host's answer, or an explicit rejection when it has none, fails, times out or the turn
//! is cancelled.

use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use prost::Message as _;
use tokio_util::sync::CancellationToken;

use crate::bridge;
use crate::host::Host;
use crate::proto::agent::v1 as pb;

/// `InteractionResponse` bytes for a query; `None` only when the query cannot be decoded.
pub(super) async fn answer(
    host: Arc<dyn Host>,
    raw: &[u8],
    cancel: CancellationToken,
    timeout: Duration,
) -> Option<Bytes> {
    let (id, query) = match bridge::decode_interaction(raw) {
        Ok(decoded) => decoded,
        Err(e) => {
            tracing::warn!(bytes = raw.len(), error = %e, "dropped an interaction query that does not decode (no id to answer)");
            return None;
        }
    };
    let Some(query) = query else {
        // A kind this schema does not know: answer "approved" with the empty message of that
        // number is impossible to name, so answer with an InteractionResponse that carries
        // only the id (the server sees a reply rather than silence).
        return Some(wire_id_only(id));
    };
    let answer = tokio::select! {
        r = tokio::time::timeout(timeout, host.interaction(query.clone(), cancel.clone())) => match r {
            Ok(Ok(Some(json))) => bridge::interaction_response(&query, json)
                .unwrap_or_else(|e| bridge::interaction_rejection(&query, &format!("invalid answer from the client: {e}"))),
            Ok(Ok(None)) => bridge::interaction_rejection(&query, "This client does not handle this request."),
            Ok(Err(e)) => bridge::interaction_rejection(&query, &e.to_string()),
            Err(_) => bridge::interaction_rejection(&query, "The client did not answer in time."),
        },
        _ = cancel.cancelled() => bridge::interaction_rejection(&query, "Cancelled by the user."),
    };
    Some(answer)
}

fn wire_id_only(id: u32) -> Bytes {
    pb::InteractionResponse { id, result: None }.encode_to_vec().into()
}
