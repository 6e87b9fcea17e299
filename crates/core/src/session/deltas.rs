//! Runs of text (or thinking) deltas read in one go become one delta: the turn loop translates
//! the run once, one update instead of many.

use crate::proto::agent::v1 as pb;
use crate::transport::ServerFrame;

/// Appends `next` to `current` when both are plain text deltas (or both thinking deltas): the
/// translation of the merged delta is exactly that of the run, one update instead of many.
/// Otherwise leaves `current` as it is and says so.
pub(super) fn merge_delta(current: &mut ServerFrame, next: &pb::AgentServerMessage) -> bool {
    use pb::agent_server_message::Message as S;
    use pb::interaction_update::Message as U;
    let target = match &mut current.message.message {
        Some(S::InteractionUpdate(pb::InteractionUpdate { message: Some(u) })) => u,
        _ => return false,
    };
    match (target, &next.message) {
        (U::TextDelta(a), Some(S::InteractionUpdate(pb::InteractionUpdate { message: Some(U::TextDelta(b)) })))
            if a.is_server_notice == b.is_server_notice =>
        {
            a.text.push_str(&b.text);
            true
        }
        (
            U::ThinkingDelta(a),
            Some(S::InteractionUpdate(pb::InteractionUpdate { message: Some(U::ThinkingDelta(b)) })),
        ) if a.thinking_style == b.thinking_style => {
            a.text.push_str(&b.text);
            true
        }
        _ => false,
    }
}
