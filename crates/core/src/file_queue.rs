//! One thread of this process that does the small file writes a turn ends with: a session's
//! saved record, the blobs of its conversation.
//!
//! Tokio's blocking pool starts a thread for each write that finds every pool thread busy; an
//! agent ending a hundred turns at once started twenty to forty of them per burst, each a stack
//! and a scheduler round of its own, for writes of well under a millisecond. Queued on one
//! thread, the same writes take less CPU and less wall time, and they run in the order they
//! were asked for (a later save of a file is written after an earlier one).

use std::panic::AssertUnwindSafe;
use std::sync::mpsc;
use std::sync::OnceLock;

/// The thread's name, as a debugger or `top -H` shows it.
pub const THREAD_NAME: &str = "acp-files";

type Job = Box<dyn FnOnce() + Send>;

/// Why a queued job gave no result.
#[derive(Debug, thiserror::Error)]
pub enum QueueError {
    /// The thread could not be started (the system is out of threads).
    #[error("the file thread could not start: {0}")]
    Unavailable(String),
    /// The job panicked; the thread goes on with the next one.
    #[error("the file write failed unexpectedly: {0}")]
    Panicked(String),
}

/// The sender to the file thread, started on first use.
fn sender() -> Result<&'static mpsc::Sender<Job>, QueueError> {
    static QUEUE: OnceLock<Result<mpsc::Sender<Job>, String>> = OnceLock::new();
    QUEUE
        .get_or_init(|| {
            let (tx, rx) = mpsc::channel::<Job>();
            std::thread::Builder::new()
                .name(THREAD_NAME.into())
                .spawn(move || {
                    // Ends with the process: the sender lives in a static.
                    for job in rx {
                        job();
                    }
                })
                .map(|_| tx)
                .map_err(|e| e.to_string())
        })
        .as_ref()
        .map_err(|e| QueueError::Unavailable(e.clone()))
}

/// Queues `job` on the file thread now, after the jobs queued before it, and gives a future of
/// its result. The job is queued by this call, not when the future is first polled: jobs run in
/// the order of the calls, even when their futures are spawned and polled on different threads.
/// A job that panics fails alone: the thread goes on with the next.
pub fn run<T: Send + 'static>(
    job: impl FnOnce() -> T + Send + 'static,
) -> impl std::future::Future<Output = Result<T, QueueError>> + Send {
    let (done, result) = tokio::sync::oneshot::channel();
    let job: Job = Box::new(move || {
        let outcome = std::panic::catch_unwind(AssertUnwindSafe(job)).map_err(|panic| {
            panic
                .downcast_ref::<&str>()
                .map(|s| (*s).to_owned())
                .or_else(|| panic.downcast_ref::<String>().cloned())
                .unwrap_or_else(|| "a panic without a message".into())
        });
        #[allow(
            clippy::let_underscore_must_use,
            reason = "a caller that stopped waiting (its future dropped) wants no result"
        )]
        let _ = done.send(outcome);
    });
    let queued = sender()
        .and_then(|queue| queue.send(job).map_err(|_| QueueError::Unavailable("the file thread has ended".into())));
    async move {
        queued?;
        match result.await {
            Ok(Ok(value)) => Ok(value),
            Ok(Err(message)) => Err(QueueError::Panicked(message)),
            Err(_) => Err(QueueError::Unavailable("the file thread dropped the job".into())),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Mutex;

    #[tokio::test]
    async fn many_jobs_each_run_once_and_give_their_results() {
        let order = std::sync::Arc::new(Mutex::new(Vec::new()));
        let mut pending = Vec::new();
        for i in 0..50 {
            let order = order.clone();
            pending.push(tokio::spawn(run(move || {
                order.lock().unwrap().push(i);
                i * 2
            })));
        }
        let mut results = Vec::new();
        for p in pending {
            results.push(p.await.unwrap().unwrap());
        }
        assert_eq!(results, (0..50).map(|i| i * 2).collect::<Vec<_>>());
        let mut sorted = order.lock().unwrap().clone();
        sorted.sort_unstable();
        assert_eq!(sorted, (0..50).collect::<Vec<_>>(), "every job ran once");
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 4)]
    async fn jobs_run_in_the_order_of_the_calls_whatever_order_their_futures_are_polled_in() {
        let log = std::sync::Arc::new(Mutex::new(Vec::new()));
        // The first holds the thread while the rest are queued behind it.
        let first = {
            let log = log.clone();
            run(move || {
                std::thread::sleep(std::time::Duration::from_millis(20));
                log.lock().unwrap().push(0);
            })
        };
        let rest: Vec<_> = (1..50)
            .map(|i| {
                let log = log.clone();
                run(move || log.lock().unwrap().push(i))
            })
            .collect();
        // Spawned last first, each on whichever worker picks it up.
        let mut pending: Vec<_> = rest.into_iter().rev().map(tokio::spawn).collect();
        pending.push(tokio::spawn(first));
        for p in pending {
            p.await.unwrap().unwrap();
        }
        assert_eq!(*log.lock().unwrap(), (0..50).collect::<Vec<_>>());
    }

    #[tokio::test]
    async fn a_panicking_job_fails_alone() {
        let failed = run(|| -> u8 { panic!("disk on fire") }).await;
        match failed {
            Err(QueueError::Panicked(message)) => assert!(message.contains("disk on fire"), "{message}"),
            other => panic!("expected a panic to be reported, got {other:?}"),
        }
        assert_eq!(run(|| 7).await.unwrap(), 7, "the thread goes on after a panic");
    }

    #[tokio::test]
    async fn jobs_run_on_the_named_file_thread() {
        let name = run(|| std::thread::current().name().map(str::to_owned)).await.unwrap();
        assert_eq!(name.as_deref(), Some(THREAD_NAME));
    }
}
