//! New memory for large buffers, made cheaper: a global allocator for the addon (another
//! allocator, the system's by default, with large blocks backed by huge pages), and
//! [`populate_during`], which faults a large destination in on another thread while the copy
//! into it still waits.
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

/// `A` with huge pages for its large blocks. Use as
/// `#[global_allocator] static ALLOCATOR: HugePageAllocator = HugePageAllocator(System);`.
pub struct HugePageAllocator<A = System>(pub A);

// SAFETY: every call is forwarded to `A` unchanged; the advice only changes how the kernel
// backs pages the block already owns, never their contents.
unsafe impl<A: GlobalAlloc> GlobalAlloc for HugePageAllocator<A> {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        // SAFETY: the caller's contract for `alloc` (a layout of non-zero size) is `A`'s, passed on
        // unchanged.
        advised(unsafe { self.0.alloc(layout) }, layout.size())
    }

    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        // SAFETY: as for `alloc`: the caller's layout goes to `A` unchanged.
        advised(unsafe { self.0.alloc_zeroed(layout) }, layout.size())
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        // SAFETY: `ptr` came from this allocator, that is from `A` (every block is `A`'s), with
        // `layout`, as the caller guarantees.
        unsafe { self.0.dealloc(ptr, layout) }
    }

    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        // SAFETY: `ptr` is `A`'s block of `layout` (see `dealloc`), and `new_size` meets `realloc`'s
        // contract as the caller guarantees.
        advised(unsafe { self.0.realloc(ptr, layout, new_size) }, new_size)
    }
}

/// Asks for huge pages on the whole 2 MiB pages inside a large block; returns the block.
fn advised(block: *mut u8, len: usize) -> *mut u8 {
    if len >= HUGE_BLOCK_MIN && !block.is_null() {
        if let Some((start, len)) = whole_pages(block, len, HUGE_PAGE) {
            advise_huge_pages(start, len);
        }
    }
    block
}

/// The start and length of the whole `page`-sized, `page`-aligned pages inside
/// `block..block + len`, if there are any.
fn whole_pages(block: *const u8, len: usize, page: usize) -> Option<(usize, usize)> {
    let start = (block as usize).next_multiple_of(page);
    let end = (block as usize + len) / page * page;
    (end > start).then(|| (start, end - start))
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

/// Buffers smaller than this are faulted in by their writer: a helper thread costs more than
/// the faults it would take over.
pub const POPULATE_MIN: usize = 2 << 20;

/// Runs `work` on this thread while another thread faults in the pages of `len` bytes at
/// `block`, and returns what `work` returns once both are done.
///
/// Made for a large copy that has to wait for something else first: N-API copies a string out of
/// V8 only after V8 has flattened it (11–20 ms for 12 MiB here), and the copy's own page faults
/// are then a third of its time. Faulting the destination in meanwhile, on the core that is
/// otherwise idle, takes them off the JavaScript thread. The pages are populated with
/// `MADV_POPULATE_WRITE` (Linux 5.14), which never changes their contents, so `work` may write
/// into the block while it runs. Where that is unavailable, or the block is small, `work` just
/// runs.
///
/// # Safety
/// `block..block + len` must stay allocated to the caller until this returns.
pub unsafe fn populate_during<R>(block: *mut u8, len: usize, work: impl FnOnce() -> R) -> R {
    if len < POPULATE_MIN || !populate::supported() {
        return work();
    }
    // Whole pages only: madvise needs an aligned start, and a partial page at either end is
    // faulted by its writer.
    let Some((start, len)) = whole_pages(block, len, populate::page_size()) else {
        return work();
    };
    std::thread::scope(|scope| {
        // A thread that cannot start leaves the faults to the writer, as without it.
        let _helper = std::thread::Builder::new()
            .name("populate".into())
            .spawn_scoped(scope, move || populate::write_fault(start, len));
        work()
    })
}

#[cfg(target_os = "linux")]
mod populate {
    use std::sync::atomic::{AtomicBool, Ordering};
    use std::sync::OnceLock;

    static UNSUPPORTED: AtomicBool = AtomicBool::new(false);

    /// The base page size: 4 KiB on x86-64, 4, 16 or 64 KiB on arm64 kernels.
    pub fn page_size() -> usize {
        static PAGE: OnceLock<usize> = OnceLock::new();
        // SAFETY: sysconf only reads a system constant.
        *PAGE.get_or_init(|| usize::try_from(unsafe { libc::sysconf(libc::_SC_PAGESIZE) }).unwrap_or(4096).max(4096))
    }

    pub fn supported() -> bool {
        !UNSUPPORTED.load(Ordering::Relaxed)
    }

    pub fn write_fault(start: usize, len: usize) {
        // SAFETY: the caller of `populate_during` keeps the range allocated until this thread is
        // joined; MADV_POPULATE_WRITE faults pages in as a write would, without writing.
        let rc = unsafe { libc::madvise(start as *mut libc::c_void, len, libc::MADV_POPULATE_WRITE) };
        if rc != 0 && std::io::Error::last_os_error().raw_os_error() == Some(libc::EINVAL) {
            // A kernel before 5.14: don't spawn helpers that cannot help.
            UNSUPPORTED.store(true, Ordering::Relaxed);
        }
    }
}

#[cfg(not(target_os = "linux"))]
mod populate {
    pub fn page_size() -> usize {
        4096
    }

    pub fn supported() -> bool {
        false
    }

    pub fn write_fault(_start: usize, _len: usize) {}
}

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
        let a = HugePageAllocator(System);
        let advised = |flags: String| flags.split(' ').any(|f| f == "hg");
        // SAFETY: each block is used within the layout it was allocated with (or grown to), and
        // freed once, with that layout.
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

    /// How many of the whole pages in `block..block + len` are resident.
    fn resident_pages(block: *const u8, len: usize) -> (usize, usize) {
        let page = populate::page_size();
        let (start, len) = whole_pages(block, len, page).expect("the block spans whole pages");
        let mut vec = vec![0u8; len / page];
        // SAFETY: the range is mapped (inside a live block) and `vec` has a byte per page.
        let rc = unsafe { libc::mincore(start as *mut libc::c_void, len, vec.as_mut_ptr()) };
        assert_eq!(rc, 0, "mincore: {}", std::io::Error::last_os_error());
        (vec.iter().filter(|b| **b & 1 == 1).count(), vec.len())
    }

    #[test]
    fn a_large_block_is_faulted_in_while_work_writes_into_it() {
        // Above glibc's largest mmap threshold (32 MiB), so the block is a fresh mapping.
        let len = 40 << 20;
        let mut untouched: Vec<u8> = Vec::with_capacity(len);
        let (before, pages) = resident_pages(untouched.as_ptr(), len);
        assert!(before < pages / 2, "a fresh block starts mostly unfaulted ({before} of {pages})");
        // SAFETY: `untouched` owns the `len` bytes until the end of the test.
        let ran = unsafe { populate_during(untouched.as_mut_ptr(), len, || 42) };
        assert_eq!(ran, 42, "work's result comes back");
        let (after, _) = resident_pages(untouched.as_ptr(), len);
        if !populate::supported() {
            eprintln!("skipped: this kernel has no MADV_POPULATE_WRITE");
            return;
        }
        assert_eq!(after, pages, "every whole page is resident once populate_during returns");

        // Work that writes the block while it is being populated keeps every byte it wrote.
        let mut written: Vec<u8> = Vec::with_capacity(len);
        let dest = written.as_mut_ptr();
        // SAFETY: `written` owns the `len` bytes until the end of the test, and the work writes
        // every one of them before `set_len` says so.
        unsafe {
            populate_during(dest, len, || {
                for page in 0..len / 4096 {
                    dest.add(page * 4096).write_bytes((page % 251) as u8, 4096);
                }
            });
            written.set_len(len);
        }
        let intact =
            written.chunks(4096).enumerate().all(|(page, bytes)| bytes.iter().all(|b| *b == (page % 251) as u8));
        assert!(intact, "contents survive populating");
    }

    #[test]
    fn a_small_block_is_left_to_its_writer() {
        let len = POPULATE_MIN - populate::page_size();
        let mut small: Vec<u8> = Vec::with_capacity(len);
        let before = resident_pages(small.as_ptr(), len).0;
        // SAFETY: `small` owns the `len` bytes until the end of the test.
        unsafe { populate_during(small.as_mut_ptr(), len, || ()) };
        assert_eq!(resident_pages(small.as_ptr(), len).0, before, "nothing below POPULATE_MIN is populated");
    }
}
