//! The user messages a session sent into its running turn, kept until the server says what
//! became of them (`injection_state.rs` shows that).

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

/// User messages sent into a running turn, by injection id: shared by the session that sends
/// them and the translator that shows them once their state is known.
#[derive(Debug, Clone, Default)]
pub struct InjectedMessages(Arc<Mutex<HashMap<String, String>>>);

impl InjectedMessages {
    pub fn insert(&self, injection_id: String, text: String) {
        self.0.lock().expect("injections lock").insert(injection_id, text);
    }

    /// Drops a message whose injection could not be sent.
    pub fn forget(&self, injection_id: &str) {
        self.take(injection_id);
    }

    pub(super) fn get(&self, injection_id: &str) -> Option<String> {
        self.0.lock().expect("injections lock").get(injection_id).cloned()
    }

    pub(super) fn take(&self, injection_id: &str) -> Option<String> {
        self.0.lock().expect("injections lock").remove(injection_id)
    }
}
