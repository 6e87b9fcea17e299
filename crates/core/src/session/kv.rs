//! Answers to the server's KV requests: blobs from the session's store.

use std::sync::Arc;
use std::time::Duration;

use crate::host::BlobStore;
use crate::proto::agent::v1 as pb;

/// The reply to one `KvServerMessage`; a store that fails or times out is an error in the reply.
pub(super) async fn answer(
    blobs: Arc<dyn BlobStore>,
    kv: pb::KvServerMessage,
    timeout: Duration,
) -> pb::KvClientMessage {
    use pb::kv_client_message::Message as C;
    let message = match kv.message {
        Some(pb::kv_server_message::Message::GetBlobArgs(args)) => {
            // A blob the store cannot give is answered as absent; the server decides what that means.
            let data = match tokio::time::timeout(timeout, blobs.get(args.blob_id)).await {
                Ok(Ok(data)) => data,
                Ok(Err(e)) => {
                    tracing::warn!(id = kv.id, error = %e, "the blob store failed a get: answered as absent");
                    None
                }
                Err(_) => {
                    tracing::warn!(
                        id = kv.id,
                        timeout_ms = timeout.as_millis() as u64,
                        "the blob store timed out on a get: answered as absent"
                    );
                    None
                }
            };
            Some(C::GetBlobResult(pb::GetBlobResult { blob_data: data, ..Default::default() }))
        }
        Some(pb::kv_server_message::Message::SetBlobArgs(args)) => {
            let error = match tokio::time::timeout(timeout, blobs.set(args.blob_id, args.blob_data)).await {
                Ok(Ok(())) => None,
                Ok(Err(e)) => Some(pb::Error { message: e.to_string() }),
                Err(_) => Some(pb::Error { message: "blob store timed out".into() }),
            };
            Some(C::SetBlobResult(pb::SetBlobResult { error }))
        }
        // An unknown KV branch: a get result with no data is the harmless answer.
        None => {
            tracing::debug!(id = kv.id, "a KV request of a kind this schema does not know: answered with an empty get");
            Some(C::GetBlobResult(pb::GetBlobResult::default()))
        }
    };
    pb::KvClientMessage { id: kv.id, message }
}
