//! N-API binding of `cursor-acp-core`: a thin layer that converts between JavaScript and the
//! core's types, hosts the JS callbacks as threadsafe functions, and maps errors to coded JS
//! errors. All protocol logic lives in the core crate.

// `#[napi]` items are reached from JavaScript, not from Rust, so plain `cargo` builds of this
// crate see them as unused.
#![allow(dead_code)]

#[macro_use]
extern crate napi_derive;

mod backend;
mod client;
mod error;
mod host;
mod json;
mod memory;
mod session;
mod settle;
mod tools;
mod turn;

/// Large buffers (exec results, checkpoints) are backed by huge pages where the OS allows:
/// first-touching fresh 4 KiB pages was most of a large upload's time (see the
/// `cursor-acp-hugepages` crate).
#[global_allocator]
static ALLOCATOR: cursor_acp_hugepages::HugePageAllocator = cursor_acp_hugepages::HugePageAllocator;
