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
            // Detached: nothing waits for the trim.
            drop(napi::bindgen_prelude::spawn_blocking(|| {
                release_free_memory();
                TRIMMING.store(false, Ordering::SeqCst);
            }));
        }
    }));
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
