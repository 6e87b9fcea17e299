//! The client messages a session builds: the run request that opens each attempt (with the
//! checkpoint spliced in byte-for-byte), the prewarm request, cancel, heartbeats and exec
//! control messages.

use bytes::{Bytes, BytesMut};

use crate::field::agent::v1 as f;
use crate::models;
use crate::proto::agent::v1 as pb;
use crate::wire;

/// What the first attempt of a turn asks for; resume attempts always send a resume action.
pub(super) enum FirstAction {
    User(Box<pb::UserMessage>),
    Resume,
    Raw(Box<pb::ConversationAction>),
}

pub(super) fn client_msg(m: pb::agent_client_message::Message) -> pb::AgentClientMessage {
    pb::AgentClientMessage { message: Some(m) }
}

/// Both model fields, always set: the server refuses a run request without model details.
fn model_fields(model: &pb::ModelDetails) -> (Option<pb::ModelDetails>, Option<pb::RequestedModel>) {
    (Some(model.clone()), Some(models::requested(model)))
}

/// `AgentClientMessage{run_request}` with the checkpoint spliced in byte-for-byte.
pub(super) fn run_request(
    action: pb::ConversationAction,
    checkpoint: Option<&[u8]>,
    model: &pb::ModelDetails,
    conversation_id: &str,
) -> Bytes {
    let (model_details, requested_model) = model_fields(model);
    let request = pb::AgentRunRequest {
        action: Some(action),
        model_details,
        requested_model,
        conversation_id: Some(conversation_id.to_string()),
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
