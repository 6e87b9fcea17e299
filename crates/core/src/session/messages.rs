//! The client messages a session builds: the run request that opens each attempt (with the
//! checkpoint spliced in byte-for-byte), the prewarm request, cancel, heartbeats and exec
//! control messages.

use bytes::{Bytes, BytesMut};

use crate::error::CoreError;
use crate::field::agent::v1 as f;
use crate::models;
use crate::proto::agent::v1 as pb;
use crate::wire;

/// What the first attempt of a turn asks for; resume attempts always send a resume action.
pub(super) enum FirstAction {
    /// A user message, and the large context parts sent by blob reference, if any. The message
    /// is kept encoded (tens of bytes for a short prompt): the struct takes 1.7 KiB, held by
    /// every turn in flight for the whole turn although only its first attempt reads it.
    User {
        message: Bytes,
        parts: Option<Box<pb::RequestContextPartReferences>>,
    },
    Resume,
    Raw(Box<pb::ConversationAction>),
}

/// The action an attempt sends, with `context` where the action carries a request context and
/// the caller left it out: the first attempt's action, or (`None`) a resume.
pub(super) fn action(
    first: Option<&FirstAction>,
    context: pb::RequestContext,
) -> Result<pb::ConversationAction, CoreError> {
    use pb::conversation_action::Action as A;
    Ok(match first {
        Some(FirstAction::User { message, parts }) => pb::ConversationAction {
            action: Some(A::UserMessageAction(pb::UserMessageAction {
                user_message: Some(decode_own(message)?),
                request_context: Some(context),
                ..Default::default()
            })),
            request_context_parts: parts.as_deref().cloned(),
            ..Default::default()
        },
        Some(FirstAction::Raw(action)) => {
            let mut action = (**action).clone();
            let slot = match &mut action.action {
                Some(A::UserMessageAction(a)) => Some(&mut a.request_context),
                Some(A::ResumeAction(a)) => Some(&mut a.request_context),
                Some(A::StartPlanAction(a)) => Some(&mut a.request_context),
                Some(A::ExecutePlanAction(a)) => Some(&mut a.request_context),
                Some(A::SubscriptionNotificationAction(a)) => Some(&mut a.request_context),
                _ => None,
            };
            if let Some(slot @ None) = slot {
                *slot = Some(context);
            }
            action
        }
        Some(FirstAction::Resume) | None => pb::ConversationAction {
            action: Some(A::ResumeAction(pb::ResumeAction { request_context: Some(context) })),
            ..Default::default()
        },
    })
}

/// A user message this process encoded (prost reads back what it wrote).
fn decode_own(message: &Bytes) -> Result<pb::UserMessage, CoreError> {
    use prost::Message as _;
    pb::UserMessage::decode(message.as_ref()).map_err(|e| CoreError::Protocol(format!("the turn's user message: {e}")))
}

pub(super) fn client_msg(m: pb::agent_client_message::Message) -> pb::AgentClientMessage {
    pb::AgentClientMessage { message: Some(m) }
}

/// Both model fields, always set: the server refuses a run request without model details.
fn model_fields(model: &pb::ModelDetails) -> (Option<pb::ModelDetails>, Option<pb::RequestedModel>) {
    (Some(model.clone()), Some(models::requested(model)))
}

/// `AgentClientMessage{run_request}` with the checkpoint spliced in byte-for-byte. `run_id`
/// names the run: one per turn, the same on its resume attempts, never the request id.
pub(super) fn run_request(
    action: pb::ConversationAction,
    checkpoint: Option<&[u8]>,
    model: &pb::ModelDetails,
    conversation_id: &str,
    run_id: &str,
) -> Bytes {
    let (model_details, requested_model) = model_fields(model);
    let request = pb::AgentRunRequest {
        action: Some(action),
        model_details,
        requested_model,
        conversation_id: Some(conversation_id.to_string()),
        run_id: Some(run_id.to_string()),
        ..Default::default()
    };
    let state = f::agent_run_request::CONVERSATION_STATE;
    with_checkpoint(&request, state, checkpoint, f::agent_client_message::RUN_REQUEST)
}

/// `AgentClientMessage{prewarm_request}` (model, conversation state) with the checkpoint spliced
/// in byte-for-byte.
pub(super) fn prewarm_request(checkpoint: Option<&[u8]>, model: &pb::ModelDetails, conversation_id: &str) -> Bytes {
    let (model_details, requested_model) = model_fields(model);
    let request = pb::PrewarmRequest {
        model_details,
        requested_model,
        conversation_id: Some(conversation_id.to_string()),
        ..Default::default()
    };
    let state = f::prewarm_request::CONVERSATION_STATE;
    with_checkpoint(&request, state, checkpoint, f::agent_client_message::PREWARM_REQUEST)
}

/// `request` with the checkpoint appended as its field `state` (the server's bytes, never
/// re-encoded: prost would drop what it does not know), as field `branch` of an
/// `AgentClientMessage`.
fn with_checkpoint(request: &impl prost::Message, state: u32, checkpoint: Option<&[u8]>, branch: u32) -> Bytes {
    let mut body = BytesMut::from(&request.encode_to_vec()[..]);
    wire::put_length_delimited(&mut body, state, checkpoint.unwrap_or_default());
    wire::wrap(branch, &body)
}

/// `conversation_action{cancel_action}`: what ACP `session/cancel` sends to the server.
pub(super) fn cancel_action() -> pb::AgentClientMessage {
    client_msg(pb::agent_client_message::Message::ConversationAction(Box::new(pb::ConversationAction {
        action: Some(pb::conversation_action::Action::CancelAction(pb::CancelAction {
            reason: "user cancelled".into(),
            interrupted_pending_tool_call_resolutions: None,
        })),
        ..Default::default()
    })))
}

pub(super) fn client_heartbeat() -> pb::AgentClientMessage {
    client_msg(pb::agent_client_message::Message::ClientHeartbeat(pb::ClientHeartbeat {}))
}

/// An `exec_client_control_message` (heartbeat, throw, stream_close).
pub(super) fn exec_control(m: pb::exec_client_control_message::Message) -> pb::AgentClientMessage {
    client_msg(pb::agent_client_message::Message::ExecClientControlMessage(pb::ExecClientControlMessage {
        message: Some(m),
    }))
}
