//! The embedded backend: a loopback server for the same protocol (RunSSE + BidiAppend over
//! HTTP/1.1, Run over h2c), driven by declarative [`Scenario`]s, recording what clients send.
//!
//! It is the offline default for the README demo, the test suites and the benchmarks. Besides
//! the agent streams it serves the account side of the real service where a test needs it:
//! sign-in, API-key exchange and token refresh with expiring tokens (`auth.rs`), the model
//! catalogue (`models.rs`), and the checks the service makes before a turn (`run_checks.rs`).

mod append;
mod auth;
mod client_message;
mod conversation;
mod cursor_error;
mod echo;
mod inbox;
mod models;
mod record;
mod run_checks;
mod scenario;
mod script;
mod server;

/// The append body reader, public for the differential test and the fuzz target that hold it
/// to prost's reading of a `BidiAppendRequest`; not an interface of the backend.
#[doc(hidden)]
pub use append::{Append, AppendError, AppendReader};
pub use auth::AuthOptions;
pub use record::{AppendRecord, MessageRecord, RunRecord, StreamKind};
pub use scenario::{AppendFault, Scenario, Step};
pub use server::{BackendOptions, EmbeddedBackend};
