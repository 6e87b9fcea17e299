//! The client configuration the turn tests start from.

use cursor_acp_core::session::{ClientConfig, Timing};
use cursor_acp_core::transport::{TransportConfig, TransportKind};

/// A client of `base_url` over `kind` with `timing`, and none of the optional updates
/// (compaction, notices, terminal output): a test sees only the updates it asserts on.
pub fn plain_config(base_url: String, kind: TransportKind, timing: Timing) -> ClientConfig {
    ClientConfig {
        transport: TransportConfig { base_url, kind, ..Default::default() },
        timing,
        compaction_updates: false,
        notices: false,
        terminal_output: false,
        ..Default::default()
    }
}
