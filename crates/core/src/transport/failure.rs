//! The first error of a stream, shared by its two halves: a failed append, or a `Run` request
//! that shows the server has no HTTP/2, fails later sends and wakes the receiver.

use std::sync::Arc;

use tokio::sync::watch;

use crate::error::CoreError;

/// Where a stream's first error is kept (the receiver holds the other end).
pub(super) type FailureSlot = Arc<watch::Sender<Option<CoreError>>>;

/// Keeps `err` unless the stream has failed already (the first error is the one reported).
pub(super) fn record_failure(failure: &watch::Sender<Option<CoreError>>, err: CoreError) {
    failure.send_if_modified(|slot| {
        if slot.is_none() {
            *slot = Some(err);
            true
        } else {
            tracing::debug!(error = %err, "a later error of a stream that has failed already");
            false
        }
    });
}
