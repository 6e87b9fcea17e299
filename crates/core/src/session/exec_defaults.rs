//! The typed answers this client gives by itself to exec requests its host leaves unhandled,
//! where the schema has a truthful one: an allowlist precheck is "not allowlisted" (the server
//! then asks for approval as usual), and what a host cannot do is that result's "not
//! available" error. Every other kind is thrown, as before the schema knew it.

use serde_json::{json, Value};

use crate::host::ExecRequest;
use crate::kinds::ExecKind;

/// Exec kinds that get [`default_answer`] when no host handles them.
pub const KINDS: &[ExecKind] = &[
    ExecKind::ShellAllowlistPrecheck,
    ExecKind::McpAllowlistPrecheck,
    ExecKind::WebFetchAllowlistPrecheck,
    ExecKind::Diagnostics,
    ExecKind::CanvasDiagnostics,
    ExecKind::AgentStoreConflict,
    ExecKind::ConversationSearch,
];

/// The answer to `request` when no host handles it, or `None` (throw + close).
pub(super) fn default_answer(request: &ExecRequest) -> Option<Value> {
    let text = |key: &str| request.args.get(key).and_then(Value::as_str).unwrap_or_default().to_string();
    use ExecKind as K;
    let answer = match request.exec_kind()? {
        // Nothing is allowlisted unless the host says so: the server's own approval flow runs.
        K::ShellAllowlistPrecheck | K::McpAllowlistPrecheck | K::WebFetchAllowlistPrecheck => {
            json!({ "allowlisted": false })
        }
        K::Diagnostics => {
            json!({ "error": { "path": text("path"), "error": "Diagnostics are not available in this client." } })
        }
        K::CanvasDiagnostics => {
            json!({ "error": { "path": text("path"), "error": "Canvas diagnostics are not available in this client." } })
        }
        K::AgentStoreConflict => json!({ "error": { "error": "This client has no agent store." } }),
        K::ConversationSearch => {
            json!({ "error": { "error": "Conversation search is not available in this client: it keeps no past conversations." } })
        }
        _ => return None,
    };
    Some(answer)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::bridge::{self, ReplyExtras};
    use crate::descriptors::whole_schema as pool;
    use prost::Message as _;
    use prost_reflect::{DynamicMessage, Value as PValue};

    /// Every default is a valid message of the branch's result type, and names a branch.
    #[test]
    fn every_default_is_a_typed_result_of_its_branch() {
        let server = pool().get_message_by_name("agent.v1.ExecServerMessage").unwrap();
        let branches = server.oneofs().find(|o| o.name() == "message").unwrap();
        let mut answered = Vec::new();
        for field in branches.fields() {
            let prost_reflect::Kind::Message(args) = field.kind() else { continue };
            let mut msg = DynamicMessage::new(server.clone());
            msg.set_field_by_name("id", PValue::U32(4));
            msg.set_field(&field, PValue::Message(DynamicMessage::new(args)));
            let (_, _, request) = bridge::decode_exec(&msg.encode_to_vec()).unwrap();
            let request = request.unwrap();
            let Some(answer) = default_answer(&request) else { continue };
            assert!(answer.as_object().is_some_and(|o| o.len() == 1), "{}: {answer}", request.kind);
            bridge::exec_result(&request, answer, &ReplyExtras::NONE)
                .unwrap_or_else(|e| panic!("{}: {e}", request.kind));
            answered.push(request.kind);
        }
        answered.sort();
        let mut kinds: Vec<String> = KINDS.iter().map(|k| k.name().to_string()).collect();
        kinds.sort();
        assert_eq!(answered, kinds);
    }
}
