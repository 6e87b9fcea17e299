//! The [`Turn`] handle: an ordered stream of ACP updates, then a result. Its readers share
//! [`TurnShared`] with the turn loop: the update queue, the cancel token, the result, and what
//! the readers want done with updates that do not fit the queue.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use agent_client_protocol_schema::v1 as acp;
use tokio::sync::watch;
use tokio_util::sync::CancellationToken;

use super::config::TurnResult;
use super::readers::Readers;
use crate::error::CoreError;
use crate::updates::{DeliverBatch, Updates};

/// The handle of one running turn: an ordered stream of ACP updates, then a result.
#[derive(Clone)]
pub struct Turn {
    shared: Arc<TurnShared>,
    _owner: Arc<TurnOwner>,
}

/// Dropped with the last handle of a turn: nobody can read its updates any more, so the loop
/// drops them instead of blocking on a full queue (the turn still runs to its end, and the
/// session is freed).
struct TurnOwner(Arc<TurnShared>);

impl Drop for TurnOwner {
    fn drop(&mut self) {
        self.0.readers.abandon();
    }
}

/// What a turn's handles share with its loop.
pub(super) struct TurnShared {
    pub(super) updates: Updates,
    pub(super) cancel: CancellationToken,
    result: watch::Receiver<Option<TurnOutcome>>,
    /// What the handles want done with updates that do not fit the queue.
    pub(super) readers: Readers,
    pub(super) dropped: AtomicU64,
    /// Run once the turn is over (see [`Turn::on_end`]); `None` once they have run.
    end_hooks: Mutex<Option<Vec<EndHook>>>,
}

impl TurnShared {
    /// Watches for the turn's end (its outcome is `Some` once the loop is over).
    pub(super) fn ended(&self) -> watch::Receiver<Option<TurnOutcome>> {
        self.result.clone()
    }
}

/// How a turn ended, as its loop reports it.
pub(super) type TurnOutcome = Result<TurnResult, CoreError>;

impl TurnShared {
    pub(super) fn new(
        updates: Updates,
        cancel: CancellationToken,
        result: watch::Receiver<Option<TurnOutcome>>,
    ) -> Self {
        TurnShared {
            updates,
            cancel,
            result,
            readers: Readers::new(),
            dropped: AtomicU64::new(0),
            end_hooks: Mutex::new(Some(Vec::new())),
        }
    }
}

/// Called once when a turn is over, on the thread that ends it.
pub type EndHook = Box<dyn FnOnce() + Send>;

/// Runs a turn's end hooks when dropped, at the end of the turn's task.
pub(super) struct RunEndHooks(pub(super) Arc<TurnShared>);

impl Drop for RunEndHooks {
    fn drop(&mut self) {
        let hooks = self.0.end_hooks.lock().unwrap_or_else(|poisoned| poisoned.into_inner()).take();
        for hook in hooks.into_iter().flatten() {
            hook();
        }
    }
}

impl Turn {
    /// The first handle of a turn whose loop shares `shared`.
    pub(super) fn new(shared: Arc<TurnShared>) -> Self {
        let owner = Arc::new(TurnOwner(shared.clone()));
        Turn { shared, _owner: owner }
    }

    /// The next update; `None` once the turn has delivered everything.
    pub async fn next(&self) -> Option<acp::SessionUpdate> {
        self.next_batch(1).await.pop()
    }

    /// Up to `max` updates at once (waits for the first; never splits coalescing). Empty once
    /// the turn has delivered everything.
    pub async fn next_batch(&self, max: usize) -> Vec<acp::SessionUpdate> {
        self.shared.readers.read();
        self.shared.updates.next_batch(max).await
    }

    /// Like [`next_batch`](Self::next_batch), without a task: `deliver` gets the batch on this
    /// thread if updates are queued, or else on the turn's thread as soon as it queues one.
    /// Reads are served in the order they are made, whichever way they were made.
    pub fn read_batch(&self, max: usize, deliver: DeliverBatch) {
        self.shared.readers.read();
        self.shared.updates.read_with(max, deliver);
    }

    /// Cancels the turn (ACP `session/cancel`): it resolves `cancelled` within the grace bound.
    pub fn cancel(&self) {
        self.shared.cancel.cancel();
    }

    /// The consumer stopped iterating (`break`): cancel, and drop updates nobody will read.
    pub fn release(&self) {
        // Cancelled first: a loop woken by the release then sees the cancel too.
        self.shared.cancel.cancel();
        self.shared.readers.release();
    }

    /// Updates dropped because nobody read them (see [`Turn::result`]).
    pub fn dropped_updates(&self) -> u64 {
        self.shared.dropped.load(Ordering::SeqCst)
    }

    /// Calls `hook` once the turn is over (at once if it is over already), without a task to
    /// wait for it: a thousand turns starting together would otherwise each spawn one more.
    /// Like [`ended`](Self::ended), it neither holds the turn nor changes what readers see.
    pub fn on_end(&self, hook: EndHook) {
        let mut hooks = self.shared.end_hooks.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
        match hooks.as_mut() {
            Some(waiting) => waiting.push(hook),
            None => {
                drop(hooks);
                hook();
            }
        }
    }

    /// Resolves once the turn is over. Unlike [`result`](Self::result) it neither discards
    /// queued updates nor holds the turn: a watcher that outlives every handle does not keep
    /// the turn's updates alive or change what readers see.
    pub fn ended(&self) -> impl std::future::Future<Output = ()> + Send + 'static {
        let mut result = self.shared.result.clone();
        async move {
            if result.wait_for(|r| r.is_some()).await.is_err() {
                tracing::warn!("the turn's task ended without a result");
            }
        }
    }

    /// The turn's outcome, once the turn is over: every update it produced has been queued
    /// before this resolves (and stays readable from [`next`](Self::next)). When nobody has
    /// iterated, queued updates are discarded so a full queue cannot hold the turn open.
    pub async fn result(&self) -> Result<TurnResult, CoreError> {
        self.shared.readers.result_awaited();
        let mut result = self.shared.result.clone();
        let outcome = loop {
            if let Some(r) = result.borrow().clone() {
                break r;
            }
            if result.changed().await.is_err() {
                break Err(no_result());
            }
        };
        outcome
    }

    /// Like [`result`](Self::result), without a task: `deliver` gets the outcome once the turn
    /// is over (at once if it is over already), on the thread that ends it.
    pub fn result_with(&self, deliver: Box<dyn FnOnce(Result<TurnResult, CoreError>) + Send>) {
        self.shared.readers.result_awaited();
        let result = self.shared.result.clone();
        self.on_end(Box::new(move || {
            // Set before the end hooks run, unless the turn's task panicked.
            let outcome = result.borrow().clone().unwrap_or_else(|| Err(no_result()));
            deliver(outcome);
        }));
    }
}

fn no_result() -> CoreError {
    CoreError::Closed("the turn task ended without a result".into())
}
