//! Descriptors are built for the messages a process converts, not for the whole schema. A test
//! binary of its own: a test here that started an embedded backend (which builds the whole
//! schema's pool) would make the measurement below meaningless.

#[path = "common/counting.rs"]
mod counting;
use counting::this_thread;

#[test]
fn an_exec_round_trip_builds_descriptors_for_its_own_messages_only() {
    // Every process using the addon converts exec requests and results through descriptors. A
    // pool of the whole 2026 schema (900 messages, 2,900 fields) keeps 4.7 MiB, and its build
    // peaks near 6.5; a read request and its result need 8 messages.
    use cursor_acp_core::bridge;
    use cursor_acp_core::proto::agent::v1 as pb;
    use prost::Message as _;
    let request = pb::ExecServerMessage {
        id: 1,
        exec_id: "e1".into(),
        message: Some(pb::exec_server_message::Message::ReadArgs(pb::ReadArgs {
            path: "/a".into(),
            ..Default::default()
        })),
        ..Default::default()
    }
    .encode_to_vec();
    let before = this_thread();
    let (_, _, read) = bridge::decode_exec(&request).unwrap();
    let answer = serde_json::json!({"success": {"path": "/a", "content": "hi"}});
    let reply = bridge::exec_result(&read.unwrap(), answer, &bridge::ReplyExtras::NONE).unwrap();
    drop(reply);
    let kept = this_thread() - before;
    assert!(kept < 256 << 10, "a read's round trip keeps {} KiB of descriptors", kept / 1024);
}
