//! Cursor stream → ACP `session/update`s (pure: protobuf in, ACP values out).
//!
//! Rules kept here (docs/architecture.md, "Translation"): one `messageId` per contiguous text
//! or thought segment (rotated at tool calls, `thinking_completed` and step boundaries);
//! `tool_call` is announced before any `tool_call_update` of that id; every announced tool call
//! is closed (`completed` or `failed`), swept at turn end and on cancel (after which nothing
//! the server sends about the turn is shown); titles are plain text
//! (commands verbatim, workspace-relative paths), `locations` and diff paths absolute; todos
//! become a full `plan`; heartbeats, token deltas and unknown branches produce nothing.
//!
//! One [`Translator`] (translator.rs: its state, the dispatch of each update, cancel) is
//! extended by family: text.rs (text, thinking, notices), cards.rs (a tool call's wire branch
//! read as JSON; its title, kind, locations and outcome come from the one card source,
//! `crate::cards`, which hosts use for exec requests too), tool_calls.rs (announce, complete,
//! sweep), shell.rs (live output, terminals), plan.rs (todos, checkpoint usage and mode),
//! compaction.rs, replay.rs, injection_state.rs (injected messages' fate, with
//! injected_messages.rs, the record the session shares), comparison.rs (an alternate model's
//! response); content.rs holds the small helpers they share.

mod cards;
mod compaction;
mod comparison;
mod content;
mod injected_messages;
mod injection_state;
mod plan;
mod replay;
mod shell;
mod text;
mod tool_calls;
mod translator;

use agent_client_protocol_schema::v1 as acp;
use serde_json::Value;

pub use injected_messages::InjectedMessages;
pub use plan::mode_id;
pub use translator::{Translator, CANCELLED_BY_USER};

/// An update as ACP JSON. New files are shown as diffs with an explicit `oldText: null`
/// (the schema crate omits `None`; editors key "new file" rendering on the null).
pub fn to_json(update: &acp::SessionUpdate) -> Value {
    crate::cards::acp_json(update)
}

/// `updates` as ACP's stdio transport carries them: for each, a `session/update` notification
/// of session `session_id`, as JSON-RPC on one line (the update as [`to_json`] gives it), each
/// line ending in `\n`. JSON never holds a raw line break (it escapes them in strings), so each
/// notification is exactly one line. An agent writes these bytes as they are: no JavaScript
/// object of each update is made and serialized again.
pub fn notification_lines(session_id: &str, updates: impl IntoIterator<Item = acp::SessionUpdate>) -> Vec<u8> {
    let mut head = br#"{"jsonrpc":"2.0","method":"session/update","params":{"sessionId":"#.to_vec();
    if serde_json::to_writer(&mut head, session_id).is_err() {
        // A string always serializes, and a `Vec` always takes the bytes.
        return Vec::new();
    }
    head.extend_from_slice(br#","update":"#);
    let mut out = Vec::new();
    for update in updates {
        let start = out.len();
        out.extend_from_slice(&head);
        match crate::cards::write_acp_json(&mut out, &update) {
            Ok(()) => out.extend_from_slice(b"}}\n"),
            // Values of the schema always serialize; were one not to, no half line is left.
            Err(_) => out.truncate(start),
        }
    }
    out
}
