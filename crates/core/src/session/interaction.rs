//! Answers to the server's interaction queries (web search, questions, mode switches, plans):
//! the host's own answer (its `interaction` callback), else the core's with what the host
//! decides (`interaction_runs`), else an explicit rejection; a rejection too when it fails,
//! times out or the turn is cancelled.

use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use prost::Message as _;
use tokio_util::sync::CancellationToken;

use super::inner::SessionInner;
use super::interaction_runs;
use crate::bridge;
use crate::host::InteractionRequest;
use crate::proto::agent::v1 as pb;

/// `InteractionResponse` bytes for a query; `None` only when the query cannot be decoded.
pub(super) async fn answer(
    session: Arc<SessionInner>,
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
        r = tokio::time::timeout(timeout, answered(&session, &query, &cancel)) => match r {
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

/// The host's answer, else the core's with what the host decides.
async fn answered(
    session: &SessionInner,
    query: &InteractionRequest,
    cancel: &CancellationToken,
) -> Result<Option<serde_json::Value>, crate::error::CoreError> {
    match session.host.interaction(query.clone(), cancel.clone()).await? {
        Some(answer) => Ok(Some(answer)),
        None => interaction_runs::run(session, query, cancel).await,
    }
}

fn wire_id_only(id: u32) -> Bytes {
    pb::InteractionResponse { id, result: None }.encode_to_vec().into()
}
