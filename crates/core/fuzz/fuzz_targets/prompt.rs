//! Prompt conversion: ACP content blocks as JSON into the user message sent to Cursor. A clear
//! error or a message, never a panic.
#![no_main]

use cursor_acp_core::prompt;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Ok(json) = serde_json::from_slice::<serde_json::Value>(data) else { return };
    if let Ok(blocks) = prompt::parse_content(&json) {
        let _ = prompt::user_message(&blocks, None);
    }
    if let Some(mode) = json.as_str() {
        let _ = prompt::mode_value(mode);
    }
});
