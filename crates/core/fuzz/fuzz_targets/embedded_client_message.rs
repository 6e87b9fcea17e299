//! The embedded backend's reading of a client message (the exec-reply check it makes without
//! building the reply) against prost's decode of an `AgentClientMessage`: the same verdict.
#![no_main]

use cursor_acp_core::proto::agent::v1 as pb;
use cursor_acp_core::protojson;
use libfuzzer_sys::fuzz_target;
use prost::Message;

fuzz_target!(|data: &[u8]| {
    let theirs = pb::AgentClientMessage::decode(data);
    let ours = protojson::to_json("agent.v1.AgentClientMessage", data);
    assert_eq!(theirs.is_ok(), ours.is_ok(), "prost {:?}, descriptors {ours:?}", theirs.err());
});
