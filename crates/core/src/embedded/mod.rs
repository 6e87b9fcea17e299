//! The embedded backend: a loopback server for the same protocol (RunSSE + BidiAppend over
//! HTTP/1.1, Run over h2c), driven by declarative [`Scenario`]s, recording what clients send.
//!
//! It is the offline default for the README demo, the test suites and the benchmarks.

mod append;
mod client_message;
mod echo;
mod inbox;
mod record;
mod scenario;
mod script;
mod server;

pub use record::{AppendRecord, MessageRecord, RunRecord};
pub use scenario::{AppendFault, Scenario, Step};
pub use server::EmbeddedBackend;
