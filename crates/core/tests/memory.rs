//! Memory the core keeps for the life of a process, measured by counting allocations (this test
//! binary has one test, so nothing else allocates while it measures).

use std::alloc::{GlobalAlloc, Layout, System};
use std::sync::atomic::{AtomicUsize, Ordering};

struct Counting;
static LIVE: AtomicUsize = AtomicUsize::new(0);

// SAFETY: forwards to System; only counts.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        LIVE.fetch_add(layout.size(), Ordering::SeqCst);
        System.alloc(layout)
    }
    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        LIVE.fetch_sub(layout.size(), Ordering::SeqCst);
        System.dealloc(ptr, layout)
    }
}

#[global_allocator]
static ALLOCATOR: Counting = Counting;

#[test]
fn the_descriptor_pool_stays_small() {
    // Built on the first exec result (proto3 JSON), then kept: every process using the addon
    // pays it. With source info (comment locations) it was 5.4 MiB; without, under 3.
    let before = LIVE.load(Ordering::SeqCst);
    let pool = cursor_acp_core::protojson::pool();
    let kept = LIVE.load(Ordering::SeqCst) - before;
    assert!(pool.get_message_by_name("agent.v1.AgentClientMessage").is_some());
    assert!(kept < 4 << 20, "the descriptor pool keeps {} KiB", kept / 1024);
}
