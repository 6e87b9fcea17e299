//! Gives the memory of a burst of turns back to the operating system once the last of them
//! ends.
//!
//! A thousand simultaneous turns allocate connection buffers, frames and updates on every
//! runtime thread. When they end, glibc keeps the freed memory in its per-thread arenas: small
//! live allocations pinned between the freed ones keep whole pages resident (measured after the
//! bench's burst: 122 MiB of arenas for 29 MiB in use). `malloc_trim` returns every free page,
//! so the idle process shrinks to what it uses. It runs only when no turn is active, on a
//! blocking thread, at most one at a time. Where the addon's own allocator is jemalloc, its
//! free pages are purged the same way. Other allocators (macOS, Windows, musl) do not need or
//! offer it, so elsewhere this only counts.

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
    // glibc's heap is Node's, and the addon's where it is the addon's allocator.
    unsafe {
        libc::malloc_trim(0);
    }
    #[cfg(all(feature = "jemalloc", target_arch = "x86_64"))]
    purge_jemalloc_arenas();
}

/// jemalloc keeps freed pages for seconds, for reuse (its decay); once idle, the addon hands
/// them back at once, as `malloc_trim` does for glibc.
#[cfg(all(feature = "jemalloc", target_os = "linux", target_env = "gnu", target_arch = "x86_64"))]
fn purge_jemalloc_arenas() {
    // jemalloc's `MALLCTL_ARENAS_ALL`: the command applies to every arena.
    const ALL_ARENAS_PURGE: &std::ffi::CStr = c"arena.4096.purge";
    // SAFETY: `arena.<i>.purge` reads and writes nothing through the pointers, which are null
    // with zero lengths as mallctl's contract for a void command asks.
    let status = unsafe {
        tikv_jemalloc_sys::mallctl(
            ALL_ARENAS_PURGE.as_ptr(),
            std::ptr::null_mut(),
            std::ptr::null_mut(),
            std::ptr::null_mut(),
            0,
        )
    };
    // Refused only for a misspelt command: the pages then stay for jemalloc to reuse.
    debug_assert_eq!(status, 0, "jemalloc refused {ALL_ARENAS_PURGE:?}");
}

#[cfg(not(all(target_os = "linux", target_env = "gnu")))]
fn release_free_memory() {}
