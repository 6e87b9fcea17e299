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
            let data = tokio::time::timeout(timeout, blobs.get(args.blob_id)).await.ok().and_then(Result::ok).flatten();
            Some(C::GetBlobResult(pb::GetBlobResult { blob_data: data }))
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
        None => Some(C::GetBlobResult(pb::GetBlobResult { blob_data: None })),
    };
    pb::KvClientMessage { id: kv.id, message }
}
