//! proto/ holds exactly what the wire-schema sheets list. `proto/schema-digest.json` is the
//! generator's record of the sheets (every message, field, enum value and rpc); these tests
//! compare it with proto/ as it compiles (the core embeds the same messages and enums:
//! tests/descriptor_files.rs). A field deleted from (or changed in) a .proto file fails the first
//! test, a hand-added one the second: proto/ stays generated (docs/proto.md).

use std::collections::{BTreeMap, BTreeSet};

use prost_reflect::{FieldDescriptor, Kind, MessageDescriptor};

#[path = "common/compiled_schema.rs"]
mod compiled_schema;
// proto/ as protox compiles it; tests/descriptor_files.rs checks that the core embeds the same.
use compiled_schema::compiled as pool;
use serde_json::Value;

const DIGEST: &str = include_str!("../../../proto/schema-digest.json");

fn digest() -> Value {
    serde_json::from_str(DIGEST).expect("proto/schema-digest.json is JSON")
}

/// A field as the digest writes it: (name, type, label, oneof).
type Row = (String, String, String, Option<String>);

fn kind_name(kind: &Kind) -> String {
    match kind {
        Kind::Message(m) => m.full_name().to_string(),
        Kind::Enum(e) => e.full_name().to_string(),
        Kind::Double => "double".into(),
        Kind::Float => "float".into(),
        Kind::Int32 => "int32".into(),
        Kind::Int64 => "int64".into(),
        Kind::Uint32 => "uint32".into(),
        Kind::Uint64 => "uint64".into(),
        Kind::Sint32 => "sint32".into(),
        Kind::Sint64 => "sint64".into(),
        Kind::Fixed32 => "fixed32".into(),
        Kind::Fixed64 => "fixed64".into(),
        Kind::Sfixed32 => "sfixed32".into(),
        Kind::Sfixed64 => "sfixed64".into(),
        Kind::Bool => "bool".into(),
        Kind::String => "string".into(),
        Kind::Bytes => "bytes".into(),
    }
}

/// The compiled field in the digest's terms.
fn row(field: &FieldDescriptor) -> Row {
    let real_oneof = field.containing_oneof().filter(|o| !o.is_synthetic());
    let (type_, label) = match field.kind() {
        Kind::Message(entry) if field.is_map() => (
            format!(
                "map<{}, {}>",
                kind_name(&entry.map_entry_key_field().kind()),
                kind_name(&entry.map_entry_value_field().kind())
            ),
            "map",
        ),
        kind if field.is_list() => (kind_name(&kind), "repeated"),
        kind if real_oneof.is_some() => (kind_name(&kind), "oneof"),
        kind if field.field_descriptor_proto().proto3_optional() => (kind_name(&kind), "optional"),
        kind => (kind_name(&kind), "singular"),
    };
    (field.name().to_string(), type_, label.to_string(), real_oneof.map(|o| o.name().to_string()))
}

fn digest_row(entry: &Value) -> (u32, Row) {
    let text = |i: usize| entry[i].as_str().unwrap_or_else(|| panic!("digest row {entry}")).to_string();
    let number = entry[1].as_u64().unwrap_or_else(|| panic!("digest row {entry}")) as u32;
    (number, (text(0), text(2), text(3), entry[4].as_str().map(str::to_string)))
}

/// The messages of proto/ the digest describes (map entries are the compiler's, not ours).
fn compiled_messages() -> impl Iterator<Item = MessageDescriptor> {
    pool().all_messages().filter(|m| !m.is_map_entry() && !m.full_name().starts_with("google.protobuf."))
}

fn report(problems: &[String]) -> String {
    let shown: Vec<&str> = problems.iter().take(40).map(String::as_str).collect();
    format!(
        "{} difference(s) between proto/ and proto/schema-digest.json (regenerate with \
         `python3 tools/gen_proto.py --from-digest`, never by hand):\n  {}",
        problems.len(),
        shown.join("\n  ")
    )
}

#[test]
fn every_field_the_sheets_list_is_in_proto_with_its_number_type_label_and_oneof() {
    let digest = digest();
    let mut problems = Vec::new();
    let mut fields = 0;
    for (name, body) in digest["messages"].as_object().expect("messages") {
        let Some(message) = pool().get_message_by_name(name) else {
            problems.push(format!("message {name} is missing"));
            continue;
        };
        for entry in body["fields"].as_array().expect("fields") {
            let (number, expected) = digest_row(entry);
            fields += 1;
            match message.get_field(number) {
                None => problems.push(format!("{name}.{} = {number} is missing", expected.0)),
                Some(field) if row(&field) != expected => problems
                    .push(format!("{name} field {number}: proto/ has {:?}, the sheets {expected:?}", row(&field))),
                Some(_) => {}
            }
        }
        let reserved: BTreeSet<u32> = body
            .get("reserved")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
            .filter_map(Value::as_u64)
            .map(|n| n as u32)
            .collect();
        let compiled: BTreeSet<u32> = message.reserved_ranges().flatten().collect();
        if reserved != compiled {
            problems.push(format!("{name}: reserved {compiled:?} in proto/, {reserved:?} in the sheets"));
        }
    }
    for (name, body) in digest["enums"].as_object().expect("enums") {
        let Some(enumeration) = pool().get_enum_by_name(name) else {
            problems.push(format!("enum {name} is missing"));
            continue;
        };
        for entry in body["values"].as_array().expect("values") {
            let (value, number) = (entry[0].as_str().unwrap(), entry[1].as_i64().unwrap() as i32);
            match enumeration.get_value(number) {
                Some(v) if v.name() == value => {}
                other => problems
                    .push(format!("{name}.{value} = {number}: proto/ has {:?}", other.map(|v| v.name().to_string()))),
            }
        }
    }
    for (name, methods) in digest["services"].as_object().expect("services") {
        let Some(service) = pool().services().find(|s| s.full_name() == name) else {
            problems.push(format!("service {name} is missing"));
            continue;
        };
        for entry in methods.as_array().expect("methods") {
            let expected: Vec<&str> = entry.as_array().unwrap().iter().filter_map(Value::as_str).collect();
            let Some(method) = service.methods().find(|m| m.name() == expected[0]) else {
                problems.push(format!("{name}.{} is missing", expected[0]));
                continue;
            };
            let end = |streaming: bool, m: MessageDescriptor| {
                format!("{}{}", if streaming { "stream " } else { "" }, m.full_name())
            };
            let compiled = [
                method.name().to_string(),
                end(method.is_client_streaming(), method.input()),
                end(method.is_server_streaming(), method.output()),
            ];
            if compiled.iter().map(String::as_str).ne(expected.iter().copied()) {
                problems.push(format!("{name}.{}: proto/ has {compiled:?}, the sheets {expected:?}", expected[0]));
            }
        }
    }
    assert!(problems.is_empty(), "{}", report(&problems));
    // The digest is the whole 2026 sheet (1,881 fields) merged with the older one.
    assert!(fields > 2_900, "the digest lists only {fields} fields");
}

#[test]
fn proto_has_nothing_the_sheets_do_not_list() {
    let digest = digest();
    let listed: BTreeMap<&str, BTreeSet<u32>> = digest["messages"]
        .as_object()
        .unwrap()
        .iter()
        .map(|(name, body)| {
            let numbers = body["fields"].as_array().unwrap().iter().map(|e| digest_row(e).0).collect();
            (name.as_str(), numbers)
        })
        .collect();
    let mut problems = Vec::new();
    for message in compiled_messages() {
        let Some(numbers) = listed.get(message.full_name()) else {
            problems.push(format!("message {} is in no sheet", message.full_name()));
            continue;
        };
        for field in message.fields() {
            if !numbers.contains(&field.number()) {
                problems.push(format!("{}.{} = {} is in no sheet", message.full_name(), field.name(), field.number()));
            }
        }
    }
    let enums = digest["enums"].as_object().unwrap();
    for enumeration in pool().all_enums().filter(|e| !e.full_name().starts_with("google.protobuf.")) {
        let Some(body) = enums.get(enumeration.full_name()) else {
            problems.push(format!("enum {} is in no sheet", enumeration.full_name()));
            continue;
        };
        let values: BTreeSet<i64> = body["values"].as_array().unwrap().iter().filter_map(|v| v[1].as_i64()).collect();
        for value in enumeration.values() {
            if !values.contains(&(value.number() as i64)) {
                problems.push(format!("{}.{} is in no sheet", enumeration.full_name(), value.name()));
            }
        }
    }
    let services = digest["services"].as_object().unwrap();
    for service in pool().services() {
        let methods: BTreeSet<&str> = services
            .get(service.full_name())
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
            .filter_map(|m| m[0].as_str())
            .collect();
        for method in service.methods() {
            if !methods.contains(method.name()) {
                problems.push(format!("{}.{} is in no sheet", service.full_name(), method.name()));
            }
        }
    }
    assert!(problems.is_empty(), "{}", report(&problems));
}

#[test]
fn the_newer_exec_branches_and_queries_are_typed() {
    // What the 2026 sheet adds on the exec and interaction channels, spot-checked by name and
    // number: hosts can read these requests' arguments.
    let exec_server = pool().get_message_by_name("agent.v1.ExecServerMessage").unwrap();
    let exec_client = pool().get_message_by_name("agent.v1.ExecClientMessage").unwrap();
    let args = |n: u32| exec_server.get_field(n).map(|f| (f.name().to_string(), kind_name(&f.kind())));
    let result = |n: u32| exec_client.get_field(n).map(|f| (f.name().to_string(), kind_name(&f.kind())));
    assert_eq!(args(45), Some(("pi_read_args".into(), "agent.v1.PiReadExecArgs".into())));
    assert_eq!(result(46), Some(("pi_read_result".into(), "agent.v1.PiReadExecResult".into())));
    assert_eq!(args(52), Some(("mini_swe_agent_bash_args".into(), "agent.v1.ShellArgs".into())));
    assert_eq!(result(55), Some(("mini_swe_agent_bash_result".into(), "agent.v1.ShellResult".into())));
    assert_eq!(args(44), Some(("git_diff_request".into(), "agent.v1.GetDiffRequest".into())));
    let query = pool().get_message_by_name("agent.v1.InteractionQuery").unwrap();
    assert_eq!(query.get_field(14).unwrap().name(), "connect_scm_request_query");
    let run = pool().get_message_by_name("agent.v1.AgentRunRequest").unwrap();
    assert_eq!(row(&run.get_field(25).unwrap()), ("run_id".into(), "string".into(), "optional".into(), None));
    // Messages the older sheet did not expand (declared empty before) have their fields.
    let action = pool().get_message_by_name("agent.v1.ComputerUseAction").unwrap();
    assert!(action.fields().len() >= 11, "{}", action.fields().len());
}
