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

// `#[napi]` items are reached from JavaScript, not from Rust, so plain `cargo` builds of this
// crate see them as unused.
#![allow(dead_code)]

#[macro_use]
extern crate napi_derive;

mod js_backend;
mod js_bench;
mod js_cards;
mod js_client;
mod js_error;
mod js_host;
mod js_log;
mod js_models;
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
#[global_allocator]
static ALLOCATOR: cursor_acp_hugepages::HugePageAllocator = cursor_acp_hugepages::HugePageAllocator;
