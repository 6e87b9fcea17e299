//! The typed (prost) and the descriptor-driven (prost-reflect) readings of a server message
//! agree: the same bytes are valid for both or for neither, and an exec request or interaction
//! query reads the same. prost's reading is the one that counts (it is what the turn uses);
//! `bridge::decode_exec` / `decode_interaction` (what JavaScript is handed) and
//! `protojson::to_json` (records) follow it. A differential property test feeds both the same
//! bytes; each disagreement it found has a regression test here.

use cursor_acp_core::proto::agent::v1 as pb;
use cursor_acp_core::{bridge, descriptors, protojson};
use proptest::prelude::*;
use prost::encoding::{encode_key, encode_varint, WireType};
use prost::Message;
use serde_json::Value;

const EXEC: &str = "agent.v1.ExecServerMessage";
const QUERY: &str = "agent.v1.InteractionQuery";

/// The member set in a prost-decoded message, as proto3 JSON, read through prost's encoding.
fn prost_member<M: Message>(name: &str, oneof: &str, msg: &M) -> Value {
    let json = protojson::to_json(name, &msg.encode_to_vec()).expect("prost's own encoding is valid");
    descriptors::branches(name, oneof)
        .iter()
        .find_map(|b| json.get(b.json_name).cloned())
        .unwrap_or_else(|| serde_json::json!({}))
}

/// Asserts that prost and the bridge agree on `bytes` as an `ExecServerMessage`; whether valid.
fn exec_agrees(bytes: &[u8]) -> bool {
    let theirs = pb::ExecServerMessage::decode(bytes);
    let ours = bridge::decode_exec(bytes);
    let json = protojson::to_json(EXEC, bytes);
    assert_eq!(json.is_ok(), theirs.is_ok(), "to_json vs prost on {bytes:02x?}: {json:?} {theirs:?}");
    match (theirs, ours) {
        (Err(_), Err(_)) => false,
        (Ok(theirs), Ok((id, exec_id, request))) => {
            assert_eq!((id, exec_id.as_str()), (theirs.id, theirs.exec_id.as_str()), "{bytes:02x?}");
            assert_eq!(theirs.message.is_some(), request.is_some(), "{bytes:02x?}");
            if let Some(request) = request {
                assert_eq!(request.args, prost_member(EXEC, "message", &theirs), "{bytes:02x?}");
                assert_eq!(
                    request.accept_hook_additional_contexts,
                    theirs.accept_hook_additional_contexts.unwrap_or(false)
                );
            }
            true
        }
        (theirs, ours) => panic!("prost {:?}, bridge {:?} on {bytes:02x?}", theirs.err(), ours.err()),
    }
}

/// The same for an `InteractionQuery`.
fn query_agrees(bytes: &[u8]) -> bool {
    let theirs = pb::InteractionQuery::decode(bytes);
    let ours = bridge::decode_interaction(bytes);
    assert_eq!(protojson::to_json(QUERY, bytes).is_ok(), theirs.is_ok(), "{bytes:02x?}");
    match (theirs, ours) {
        (Err(_), Err(_)) => false,
        (Ok(theirs), Ok((id, query))) => {
            assert_eq!(id, theirs.id);
            assert_eq!(theirs.query.is_some(), query.is_some(), "{bytes:02x?}");
            if let Some(query) = query {
                assert_eq!(query.query, prost_member(QUERY, "query", &theirs), "{bytes:02x?}");
            }
            true
        }
        (theirs, ours) => panic!("prost {:?}, bridge {:?} on {bytes:02x?}", theirs.err(), ours.err()),
    }
}

/// `to_json` and prost agree on `bytes` as a message of type `M` named `name`.
fn json_agrees<M: Message + Default + std::fmt::Debug>(name: &str, bytes: &[u8]) {
    let theirs = M::decode(bytes);
    let ours = protojson::to_json(name, bytes);
    assert_eq!(ours.is_ok(), theirs.is_ok(), "{name} on {bytes:02x?}: {ours:?} {theirs:?}");
}

fn exec(id: u32, message: pb::exec_server_message::Message) -> pb::ExecServerMessage {
    pb::ExecServerMessage { id, exec_id: format!("e{id}"), message: Some(message), ..Default::default() }
}

fn read_args(path: &str) -> pb::exec_server_message::Message {
    pb::exec_server_message::Message::ReadArgs(pb::ReadArgs { path: path.into(), ..Default::default() })
}

fn field(out: &mut Vec<u8>, number: u32, bytes: &[u8]) {
    encode_key(number, WireType::LengthDelimited, out);
    encode_varint(bytes.len() as u64, out);
    out.extend_from_slice(bytes);
}

/// An `McpArgs` whose `args` nest `depth` objects deep, with `unknown` (an encoded field)
/// inside the innermost `Value`.
fn nested_mcp_args(depth: usize, unknown: &[u8]) -> Vec<u8> {
    // Value { string_value = 3: "x" } + unknown.
    let mut value = Vec::new();
    field(&mut value, 3, b"x");
    value.extend_from_slice(unknown);
    for _ in 0..depth {
        // Struct { fields = 1: entry { key = 1: "a", value = 2: value } }, in Value.struct_value = 5.
        let mut entry = Vec::new();
        field(&mut entry, 1, b"a");
        field(&mut entry, 2, &value);
        let mut structure = Vec::new();
        field(&mut structure, 1, &entry);
        value.clear();
        field(&mut value, 5, &structure);
    }
    // McpArgs.args = 2: map<string, Value>.
    let mut entry = Vec::new();
    field(&mut entry, 1, b"k");
    field(&mut entry, 2, &value);
    let mut args = Vec::new();
    field(&mut args, 2, &entry);
    let mut msg = Vec::new();
    encode_key(1, WireType::Varint, &mut msg);
    encode_varint(3, &mut msg);
    field(&mut msg, descriptors::branch(EXEC, "message", 11).expect("mcp_args").number, &args);
    msg
}

#[test]
fn a_member_given_twice_is_merged_as_prost_merges_it() {
    // read_args { path } then read_args { limit }: prost reads one ReadArgs with both.
    let mut bytes = exec(1, read_args("/w/a.txt")).encode_to_vec();
    let limit = pb::ReadArgs { limit: Some(5), ..Default::default() }.encode_to_vec();
    field(&mut bytes, 7, &limit);
    assert!(exec_agrees(&bytes));
    let (_, _, request) = bridge::decode_exec(&bytes).unwrap();
    let args = request.unwrap().args;
    assert_eq!((args["path"].as_str(), args["limit"].as_i64()), (Some("/w/a.txt"), Some(5)), "{args}");
}

#[test]
fn a_replaced_member_must_still_be_valid() {
    // An ls_args whose path is not UTF-8, then a valid read_args: prost refuses the message.
    let mut bytes = Vec::new();
    field(&mut bytes, 8, &[0x0a, 0x01, 0xff]);
    bytes.extend(exec(1, read_args("/w/a")).encode_to_vec());
    assert!(!exec_agrees(&bytes));
    assert!(bridge::decode_exec(&bytes).unwrap_err().contains("ls_args"));
}

#[test]
fn a_malformed_span_context_refuses_the_exec_message() {
    let mut bytes = exec(1, read_args("/w/a")).encode_to_vec();
    field(&mut bytes, 19, &[0x0a, 0x05, b'x']);
    assert!(!exec_agrees(&bytes));
    assert!(bridge::decode_exec(&bytes).unwrap_err().contains("span_context"));
    let mut number = exec(1, read_args("/w/a")).encode_to_vec();
    number.extend([0x98, 0x01, 0x01]); // span_context as a varint
    assert!(!exec_agrees(&number));
}

#[test]
fn nesting_is_counted_as_prost_counts_it() {
    // prost counts a map entry as a level, prost-reflect does not: deep `args` are valid for
    // the descriptors' decode alone until the check counts them as prost does.
    let unknown_varint = [0xf8, 0x07, 0x01]; // field 127, varint 1
    let mut valid = 0;
    for depth in 26..40 {
        for unknown in [&[][..], &unknown_varint[..]] {
            let bytes = nested_mcp_args(depth, unknown);
            valid += usize::from(exec_agrees(&bytes));
            json_agrees::<pb::McpArgs>("agent.v1.McpArgs", &bytes[bytes.len() - nested_len(&bytes)..]);
        }
    }
    assert!(valid > 0 && valid < 28, "the ladder crosses prost's limit ({valid} of 28 valid)");
}

/// The length of the McpArgs payload at the end of `nested_mcp_args`'s message.
fn nested_len(bytes: &[u8]) -> usize {
    let mut rest = &bytes[2..];
    let _ = prost::encoding::decode_key(&mut rest).unwrap();
    prost::encoding::decode_varint(&mut rest).unwrap() as usize
}

#[test]
fn a_map_entry_in_another_wire_type_is_refused_as_prost_refuses_it() {
    // prost-reflect reads a map field's entry as length-delimited whatever wire type the key
    // names; prost refuses it.
    let mut bytes = Vec::new();
    encode_key(2, WireType::Varint, &mut bytes);
    let entry = [0x0a, 0x01, b'k'];
    encode_varint(entry.len() as u64, &mut bytes);
    bytes.extend(entry);
    json_agrees::<pb::McpArgs>("agent.v1.McpArgs", &bytes);
    assert!(protojson::to_json("agent.v1.McpArgs", &bytes).unwrap_err().contains("wire type"));
    let mut msg = Vec::new();
    field(&mut msg, 11, &bytes);
    assert!(!exec_agrees(&msg));
}

/// Sample messages the client reads, encoded by prost.
fn samples() -> Vec<Vec<u8>> {
    let args = [(
        "q".to_string(),
        cursor_acp_core::tool_schema::to_proto(serde_json::json!({ "a": [1, "two", { "b": null }], "c": true })),
    )]
    .into_iter()
    .collect();
    vec![
        exec(1, read_args("/w/a.txt")).encode_to_vec(),
        exec(
            2,
            pb::exec_server_message::Message::McpArgs(pb::McpArgs {
                name: "fs-read".into(),
                args,
                tool_call_id: "t1".into(),
                ..Default::default()
            }),
        )
        .encode_to_vec(),
        pb::ExecServerMessage {
            span_context: Some(pb::SpanContext { trace_id: "t".into(), span_id: "s".into(), ..Default::default() }),
            accept_hook_additional_contexts: Some(true),
            ..exec(
                3,
                pb::exec_server_message::Message::ShellArgs(pb::ShellArgs {
                    command: "ls -la".into(),
                    working_directory: "/w".into(),
                    timeout: 3000,
                    ..Default::default()
                }),
            )
        }
        .encode_to_vec(),
        exec(
            4,
            pb::exec_server_message::Message::GrepArgs(pb::GrepArgs { pattern: "x+".into(), ..Default::default() }),
        )
        .encode_to_vec(),
    ]
}

fn query_samples() -> Vec<Vec<u8>> {
    let ask = pb::AskQuestionInteractionQuery {
        args: Some(pb::AskQuestionArgs {
            title: "Pick".into(),
            questions: vec![pb::ask_question_args::Question {
                id: "q".into(),
                prompt: "Which?".into(),
                options: vec![pb::ask_question_args::Option { id: "a".into(), label: "A".into() }],
                allow_multiple: false,
            }],
            ..Default::default()
        }),
        ..Default::default()
    };
    vec![pb::InteractionQuery { id: 9, query: Some(pb::interaction_query::Query::AskQuestionInteractionQuery(ask)) }
        .encode_to_vec()]
}

/// A mutation of an encoded message: what a fuzzer does to it.
#[derive(Debug, Clone)]
enum Mutation {
    Set(prop::sample::Index, u8),
    Insert(prop::sample::Index, Vec<u8>),
    Cut(prop::sample::Index),
    /// A copy of a stretch of the message appended (fields given twice, merged).
    Repeat(prop::sample::Index, prop::sample::Index),
}

fn mutation() -> impl Strategy<Value = Mutation> {
    prop_oneof![
        (any::<prop::sample::Index>(), any::<u8>()).prop_map(|(i, b)| Mutation::Set(i, b)),
        (any::<prop::sample::Index>(), prop::collection::vec(any::<u8>(), 1..4))
            .prop_map(|(i, b)| Mutation::Insert(i, b)),
        any::<prop::sample::Index>().prop_map(Mutation::Cut),
        (any::<prop::sample::Index>(), any::<prop::sample::Index>()).prop_map(|(a, b)| Mutation::Repeat(a, b)),
    ]
}

fn mutate(mut bytes: Vec<u8>, mutations: &[Mutation]) -> Vec<u8> {
    for m in mutations {
        if bytes.is_empty() {
            break;
        }
        match m {
            Mutation::Set(at, b) => {
                let at = at.index(bytes.len());
                bytes[at] = *b;
            }
            Mutation::Insert(at, more) => {
                let at = at.index(bytes.len() + 1);
                bytes.splice(at..at, more.iter().copied());
            }
            Mutation::Cut(at) => bytes.truncate(at.index(bytes.len())),
            Mutation::Repeat(a, b) => {
                let (a, b) = (a.index(bytes.len()), b.index(bytes.len()));
                let copy = bytes[a.min(b)..=a.max(b)].to_vec();
                bytes.extend(copy);
            }
        }
    }
    bytes
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 1500, ..ProptestConfig::default() })]

    #[test]
    fn exec_messages_read_alike(
        sample in any::<prop::sample::Index>(),
        second in prop::option::of(any::<prop::sample::Index>()),
        mutations in prop::collection::vec(mutation(), 0..4),
    ) {
        let samples = samples();
        let mut bytes = samples[sample.index(samples.len())].clone();
        if let Some(second) = second {
            bytes.extend(&samples[second.index(samples.len())]);
        }
        let bytes = mutate(bytes, &mutations);
        exec_agrees(&bytes);
        let mut server = Vec::new();
        field(&mut server, 2, &bytes);
        json_agrees::<pb::AgentServerMessage>("agent.v1.AgentServerMessage", &server);
    }

    #[test]
    fn interaction_queries_read_alike(
        mutations in prop::collection::vec(mutation(), 0..4),
        twice in any::<bool>(),
    ) {
        let mut bytes = query_samples().remove(0);
        if twice {
            bytes.extend(bytes.clone());
        }
        let bytes = mutate(bytes, &mutations);
        query_agrees(&bytes);
        let mut server = Vec::new();
        field(&mut server, 7, &bytes);
        json_agrees::<pb::AgentServerMessage>("agent.v1.AgentServerMessage", &server);
    }
}
