//! Pure Rust core of `cursor-acp-native`: Cursor's agent protocol (Connect-framed protobuf over
//! HTTP) — framing, generated types, transports, and an embedded backend for offline use.
//! Nothing here depends on Node or napi.

pub mod connect;
pub mod embedded;
pub mod error;
pub mod proto;
pub mod protojson;
pub mod transport;

pub use error::CoreError;
