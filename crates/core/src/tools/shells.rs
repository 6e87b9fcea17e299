//! The background shells of one tool set, by shell id: killed, their process groups with them,
//! when the tools are closed or dropped.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use tokio::process::ChildStdin;

use super::process::GroupKill;

/// Background shells started by this tool set; killed when it is dropped or closed.
#[derive(Default)]
pub struct Shells {
    pub(super) next_id: AtomicU32,
    pub(super) background: Mutex<HashMap<u32, Background>>,
    /// How many times [`Shells::kill_all`] ran: a shell whose start straddles one is killed
    /// rather than registered after the table was emptied.
    pub(super) kills: AtomicU64,
}

pub(super) struct Background {
    pub(super) pid: Option<u32>,
    pub(super) stdin: Option<Arc<tokio::sync::Mutex<ChildStdin>>>,
    pub(super) output_len: Arc<AtomicU64>,
    pub(super) _kill: GroupKill,
}

impl Shells {
    /// Kills every background shell (and its process group), those still starting included.
    pub fn kill_all(&self) {
        let mut table = self.background.lock().expect("shell table");
        // Counted under the table's lock, which a starting shell takes to register: it sees
        // either its entry cleared here or the count moved.
        self.kills.fetch_add(1, Ordering::AcqRel);
        table.clear();
    }

    pub fn background_count(&self) -> usize {
        self.background.lock().expect("shell table").len()
    }

    /// Process id of a background shell (for tests and hosts that show it).
    pub fn background_pid(&self, shell_id: u32) -> Option<u32> {
        self.background.lock().expect("shell table").get(&shell_id).and_then(|b| b.pid)
    }
}
