//! prost and the descriptor-driven reading agree on arbitrary bytes: the same verdict for an
//! `ExecServerMessage`, an `InteractionQuery` and an `AgentServerMessage`, and the same id.
#![no_main]

use cursor_acp_core::proto::agent::v1 as pb;
use cursor_acp_core::{bridge, protojson};
use libfuzzer_sys::fuzz_target;
use prost::Message;

fuzz_target!(|data: &[u8]| {
    let theirs = pb::ExecServerMessage::decode(data);
    let ours = bridge::decode_exec(data);
    assert_eq!(
        theirs.is_ok(),
        ours.is_ok(),
        "exec: prost {:?}, bridge {:?}",
        theirs.as_ref().err(),
        ours.as_ref().err()
    );
    if let (Ok(theirs), Ok((id, exec_id, request))) = (&theirs, &ours) {
        assert_eq!((theirs.id, theirs.exec_id.as_str()), (*id, exec_id.as_str()));
        assert_eq!(theirs.message.is_some(), request.is_some());
    }
    let json = protojson::to_json("agent.v1.ExecServerMessage", data);
    assert_eq!(json.is_ok(), theirs.is_ok(), "exec to_json: {json:?}");

    let theirs = pb::InteractionQuery::decode(data);
    let ours = bridge::decode_interaction(data);
    assert_eq!(
        theirs.is_ok(),
        ours.is_ok(),
        "query: prost {:?}, bridge {:?}",
        theirs.as_ref().err(),
        ours.as_ref().err()
    );
    if let (Ok(theirs), Ok((id, query))) = (&theirs, &ours) {
        assert_eq!(theirs.id, *id);
        assert_eq!(theirs.query.is_some(), query.is_some());
    }

    let theirs = pb::AgentServerMessage::decode(data);
    let json = protojson::to_json("agent.v1.AgentServerMessage", data);
    assert_eq!(json.is_ok(), theirs.is_ok(), "server message: prost {:?}, to_json {json:?}", theirs.err());
});
