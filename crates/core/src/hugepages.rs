//! A global allocator for the addon: the system allocator, with large blocks backed by huge
//! pages.
//!
//! A large exec result or checkpoint passes through a few buffers of its full size (the string
//! N-API copies out of V8, the embedded backend's request body and decoded message). Each is new
//! memory, and on a VM every 4 KiB page of new memory costs a fault that exits to the hypervisor
//! on first touch: about 1 ms per MiB here, most of a 12 MiB upload's time (bench/README.md,
//! large-up). Linux's transparent huge pages take one fault per 2 MiB instead. In THP's
//! `madvise` mode (the usual default) a region gets them only when asked, so blocks of at least
//! [`HUGE_BLOCK_MIN`] are advised as they are allocated or grown. Small allocations, nearly all
//! of them, are left alone, and where THP is off or absent nothing changes.

use std::alloc::{GlobalAlloc, Layout, System};

/// Blocks smaller than this span too few huge pages to matter.
pub const HUGE_BLOCK_MIN: usize = 4 << 20;
const HUGE_PAGE: usize = 2 << 20;

/// Use as `#[global_allocator] static A: HugePageAllocator = HugePageAllocator;`.
pub struct HugePageAllocator;

// SAFETY: every call is forwarded to `System` unchanged; the advice only changes how the kernel
// backs pages the block already owns, never their contents.
unsafe impl GlobalAlloc for HugePageAllocator {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        advised(System.alloc(layout), layout.size())
    }

    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        advised(System.alloc_zeroed(layout), layout.size())
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        System.dealloc(ptr, layout)
    }

    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        advised(System.realloc(ptr, layout, new_size), new_size)
    }
}

/// Asks for huge pages on the whole 2 MiB pages inside a large block; returns the block.
fn advised(block: *mut u8, len: usize) -> *mut u8 {
    if len >= HUGE_BLOCK_MIN && !block.is_null() {
        let start = (block as usize).next_multiple_of(HUGE_PAGE);
        let end = (block as usize + len) / HUGE_PAGE * HUGE_PAGE;
        if end > start {
            advise_huge_pages(start, end - start);
        }
    }
    block
}

#[cfg(target_os = "linux")]
fn advise_huge_pages(start: usize, len: usize) {
    // SAFETY: the range lies inside a block just handed out, and MADV_HUGEPAGE only sets a flag
    // on the mapping. It fails only where THP is compiled out, which leaves ordinary pages.
    unsafe {
        libc::madvise(start as *mut libc::c_void, len, libc::MADV_HUGEPAGE);
    }
}

#[cfg(not(target_os = "linux"))]
fn advise_huge_pages(_start: usize, _len: usize) {}

#[cfg(all(test, target_os = "linux"))]
mod tests {
    use super::*;

    /// The `VmFlags` of the mapping holding `addr`, from /proc/self/smaps.
    fn vm_flags(addr: usize) -> String {
        let smaps = std::fs::read_to_string("/proc/self/smaps").expect("smaps");
        let mut inside = false;
        for line in smaps.lines() {
            if let Some((range, _)) = line.split_once(' ').filter(|(r, _)| r.contains('-') && !r.ends_with(':')) {
                let (lo, hi) = range.split_once('-').expect("range");
                let (lo, hi) = (usize::from_str_radix(lo, 16).unwrap(), usize::from_str_radix(hi, 16).unwrap());
                inside = (lo..hi).contains(&addr);
            } else if inside {
                if let Some(flags) = line.strip_prefix("VmFlags:") {
                    return flags.trim().to_string();
                }
            }
        }
        panic!("no mapping holds {addr:#x}");
    }

    fn thp_available() -> bool {
        std::path::Path::new("/sys/kernel/mm/transparent_hugepage/enabled").exists()
    }

    #[test]
    fn large_blocks_are_advised_small_ones_are_not_and_contents_survive() {
        if !thp_available() {
            eprintln!("skipped: this kernel has no transparent huge pages");
            return;
        }
        let a = HugePageAllocator;
        let advised = |flags: String| flags.split(' ').any(|f| f == "hg");
        unsafe {
            let small = Layout::from_size_align(64 << 10, 8).unwrap();
            let p = a.alloc(small);
            assert!(!p.is_null());
            p.write_bytes(7, small.size());
            assert!(!advised(vm_flags(p as usize)), "a 64 KiB block must be left alone");

            // Growing it past the threshold advises the grown block and keeps its contents.
            let big = 8 << 20;
            let q = a.realloc(p, small, big);
            assert!(!q.is_null());
            assert!((0..small.size()).all(|i| *q.add(i) == 7), "realloc kept the contents");
            let inner = (q as usize).next_multiple_of(HUGE_PAGE);
            assert!(advised(vm_flags(inner)), "an 8 MiB block is advised for huge pages");
            q.write_bytes(1, big);
            a.dealloc(q, Layout::from_size_align(big, 8).unwrap());

            let zeroed = Layout::from_size_align(6 << 20, 64).unwrap();
            let z = a.alloc_zeroed(zeroed);
            assert!((0..zeroed.size()).step_by(4096).all(|i| *z.add(i) == 0));
            assert!(advised(vm_flags((z as usize).next_multiple_of(HUGE_PAGE))));
            a.dealloc(z, zeroed);
        }
    }
}
