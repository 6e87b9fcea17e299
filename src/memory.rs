//! Gives the memory of a burst of turns back to the operating system once the last of them
//! ends.
//!
//! A thousand simultaneous turns allocate connection buffers, frames and updates on every
//! runtime thread. When they end, glibc keeps the freed memory in its per-thread arenas: small
//! live allocations pinned between the freed ones keep whole pages resident (measured after the
//! bench's burst: 122 MiB of arenas for 29 MiB in use). `malloc_trim` returns every free page,
//! so the idle process shrinks to what it uses. It runs only when no turn is active, on a
//! blocking thread, at most one at a time. Other allocators (macOS, Windows, musl) do not need
//! or offer it, so elsewhere this only counts.

use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};

use cursor_acp_core::session::Turn;

static ACTIVE_TURNS: AtomicUsize = AtomicUsize::new(0);
static TRIMMING: AtomicBool = AtomicBool::new(false);

/// Counts `turn` as active until it ends; when it was the last active turn, trims the heap.
pub(crate) fn track(turn: &Turn) {
    ACTIVE_TURNS.fetch_add(1, Ordering::SeqCst);
    // A hook rather than a task waiting for the end: spawned from the JS thread, such tasks
    // queued behind (and ahead of) the starts of a burst of turns.
    turn.on_end(Box::new(|| {
        if ACTIVE_TURNS.fetch_sub(1, Ordering::SeqCst) == 1 && !TRIMMING.swap(true, Ordering::SeqCst) {
            // The hook runs where the turn ends: normally on a runtime thread, but also while the
            // runtime shuts down (the last worker thread or the process exiting mid-turn drops
            // the turn's task). napi's `spawn_blocking` panics then, its runtime gone; a handle
            // of the runtime still shutting down refuses the work quietly, and without one
            // there is nothing left to trim for.
            let trimming = Trimming;
            let Ok(runtime) = tokio::runtime::Handle::try_current() else { return };
            // Detached: nothing waits for the trim. Work refused is dropped, and `trimming` with it.
            drop(runtime.spawn_blocking(move || {
                let _trimming = trimming;
                release_free_memory();
            }));
        }
    }));
}

/// A trim under way, until dropped: after it ran, or with the work a runtime refused.
struct Trimming;

impl Drop for Trimming {
    fn drop(&mut self) {
        TRIMMING.store(false, Ordering::SeqCst);
    }
}

#[cfg(all(target_os = "linux", target_env = "gnu"))]
fn release_free_memory() {
    // SAFETY: malloc_trim only walks the allocator's own free lists under its arena locks.
    unsafe {
        libc::malloc_trim(0);
    }
}

#[cfg(not(all(target_os = "linux", target_env = "gnu")))]
fn release_free_memory() {}
