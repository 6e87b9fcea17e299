//! Pure Rust core of `cursor-acp-native`: Cursor's agent protocol (Connect-framed protobuf over
//! HTTP) — framing, generated types, transports, the turn loop and the local tools. The embedded
//! backend that serves the same protocol offline is a crate of its own (`cursor-acp-embedded`).
//! Nothing here depends on Node or napi.

pub mod bridge;
pub mod cards;
pub mod connect;
pub mod descriptors;
pub mod error;
pub mod field;
pub mod file_queue;
pub mod host;
pub mod kinds;
pub mod models;
pub mod private_files;
pub mod prompt;
pub mod proto;
pub mod protojson;
pub mod record_file;
pub mod session;
pub mod tool_schema;
pub mod tools;
pub mod translate;
pub mod transport;
mod updates;
pub mod wire;

pub use agent_client_protocol_schema::v1 as acp;
pub use error::CoreError;
pub use tokio_util::sync::CancellationToken;

/// A new random (v4) UUID string.
pub fn new_id() -> String {
    uuid::Uuid::new_v4().to_string()
}
