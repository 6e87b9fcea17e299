//! N-API binding of `cursor-acp-core`: a thin layer that converts between JavaScript and the
//! core's types, hosts the JS callbacks as threadsafe functions, and maps errors to coded JS
//! errors. All protocol logic lives in the core crate.
//!
//! Naming: a `js_*` file holds what JavaScript sees or calls (`js_session.rs`: the `Session`
//! class), so no file shares a name with a core module. A JS class keeps its JavaScript name in
//! Rust (napi-rs would also export a `js_name`-renamed class under its Rust name), and the core
//! type it wraps is always named through its module: the binding's `Session` holds a
//! `session::Session`, its `AgentClient` a `session::AgentClient`, never an `as` alias.
//! `json.rs`, `saved.rs`, `settle.rs` and `memory.rs` are the plumbing under them.

// napi-rs registers the `#[napi]` exports only outside cfg(test), so in a test build (which
// `cargo clippy --all-targets` checks, though `test = false` never runs one) every export looks
// unused. Outside tests, dead code is an error like any other lint.
#![cfg_attr(test, allow(dead_code, reason = "napi-rs registers the exports only outside cfg(test)"))]

#[macro_use]
extern crate napi_derive;

mod js_account;
#[cfg(feature = "embedded")]
mod js_backend;
#[cfg(feature = "bench")]
mod js_bench;
mod js_cards;
mod js_client;
mod js_error;
mod js_files;
mod js_host;
mod js_log;
mod js_models;
mod js_record_file;
mod js_session;
mod js_token;
mod js_tools;
mod js_turn;
mod json;
mod memory;
mod saved;
mod settle;

/// Large buffers (exec results, checkpoints) are backed by huge pages where the OS allows:
/// first-touching fresh 4 KiB pages was most of a large upload's time (see the
/// `cursor-acp-hugepages` crate).
///
/// On x86-64 Linux with glibc the blocks come from jemalloc. With thousands of turns in flight,
/// glibc's malloc spent a fifth of the client's time coalescing and sorting its free lists
/// (`malloc_consolidate`, `unlink_chunk`), more per turn the more turns were live; jemalloc's
/// size classes and per-thread caches do not (bench/README.md, many-10k). Only the addon's own
/// allocations move: Node and V8 keep the system's allocator.
#[cfg(all(feature = "jemalloc", target_os = "linux", target_env = "gnu", target_arch = "x86_64"))]
#[global_allocator]
static ALLOCATOR: cursor_acp_hugepages::HugePageAllocator<tikv_jemallocator::Jemalloc> =
    cursor_acp_hugepages::HugePageAllocator(tikv_jemallocator::Jemalloc);

/// Elsewhere, or built without the `jemalloc` feature, the system's allocator, with the same
/// huge-page advice.
#[cfg(not(all(feature = "jemalloc", target_os = "linux", target_env = "gnu", target_arch = "x86_64")))]
#[global_allocator]
static ALLOCATOR: cursor_acp_hugepages::HugePageAllocator = cursor_acp_hugepages::HugePageAllocator(std::alloc::System);
