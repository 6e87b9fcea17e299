//! A global allocator that counts the bytes live, for the tests that measure memory.
//!
//! `LIVE` counts every thread, so it suits a measurement over a whole runtime, and only while no
//! other test runs. The test harness allocates and frees on its own threads while a test runs (a
//! finished test's output, a runtime's threads winding down), so a measurement made on one thread
//! reads `this_thread()`: what this thread allocated and has not freed.

use std::alloc::{GlobalAlloc, Layout, System};
use std::cell::Cell;
use std::sync::atomic::{AtomicUsize, Ordering};

struct Counting;
/// Bytes allocated and not yet freed, by every thread.
pub static LIVE: AtomicUsize = AtomicUsize::new(0);

thread_local! {
    // Const-initialised, so reading it never allocates (the allocator itself uses it).
    static THIS_THREAD: Cell<isize> = const { Cell::new(0) };
}

/// Bytes this thread allocated less the bytes it freed (memory another thread allocated and this
/// one freed counts against it).
pub fn this_thread() -> isize {
    THIS_THREAD.with(Cell::get)
}

fn count_here(bytes: isize) {
    // `try_with`: a thread that is exiting has dropped its locals but may still free.
    #[allow(
        clippy::let_underscore_must_use,
        reason = "a thread that is exiting has dropped its counter: its frees are not counted"
    )]
    let _ = THIS_THREAD.try_with(|live| live.set(live.get() + bytes));
}

// SAFETY: forwards to System; only counts.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        LIVE.fetch_add(layout.size(), Ordering::SeqCst);
        count_here(layout.size() as isize);
        // SAFETY: the caller's layout goes to System unchanged.
        unsafe { System.alloc(layout) }
    }
    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        LIVE.fetch_sub(layout.size(), Ordering::SeqCst);
        count_here(-(layout.size() as isize));
        // SAFETY: every block is System's (see `alloc`), freed with the layout the caller gives.
        unsafe { System.dealloc(ptr, layout) }
    }
}

#[global_allocator]
static ALLOCATOR: Counting = Counting;
