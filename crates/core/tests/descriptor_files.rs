//! The descriptors the core embeds (build.rs's descriptor files, JSON names left to the reader
//! where protobuf's rule gives them, the whole schema built from them at run time) describe
//! every message and enum exactly as protox's compile of proto/ does. A JSON name dropped where
//! the rule gives another, or a type lost between the files, fails here.

use std::collections::BTreeMap;

use cursor_acp_core::descriptors::whole_schema;
use prost_reflect::{DescriptorPool, EnumDescriptor, Kind, MessageDescriptor};

#[path = "common/compiled_schema.rs"]
mod compiled_schema;
use compiled_schema::compiled;

/// Everything a reader of a message's descriptor relies on, field by field.
fn shape(message: &MessageDescriptor) -> Vec<String> {
    let mut rows: Vec<String> = message
        .fields()
        .map(|f| {
            let kind = match f.kind() {
                Kind::Message(m) => m.full_name().to_string(),
                Kind::Enum(e) => e.full_name().to_string(),
                other => format!("{other:?}"),
            };
            let oneof = f.containing_oneof().map(|o| (o.name().to_string(), o.is_synthetic()));
            format!(
                "{} {} json={} {kind} {:?} packed={} presence={} oneof={oneof:?} default={:?} map={}",
                f.number(),
                f.name(),
                f.json_name(),
                f.cardinality(),
                f.is_packed(),
                f.supports_presence(),
                f.field_descriptor_proto().default_value,
                f.is_map(),
            )
        })
        .collect();
    rows.push(format!("map_entry={} oneofs={}", message.is_map_entry(), message.oneofs().count()));
    rows
}

fn values(enumeration: &EnumDescriptor) -> Vec<(String, i32)> {
    enumeration.values().map(|v| (v.name().to_string(), v.number())).collect()
}

#[test]
fn the_whole_schema_is_protoxs_compile_of_proto() {
    let compiled = compiled();
    let ours = whole_schema();
    let messages = |pool: &DescriptorPool| -> BTreeMap<String, Vec<String>> {
        pool.all_messages().map(|m| (m.full_name().to_string(), shape(&m))).collect()
    };
    let enums = |pool: &DescriptorPool| -> BTreeMap<String, Vec<(String, i32)>> {
        pool.all_enums().map(|e| (e.full_name().to_string(), values(&e))).collect()
    };
    let (theirs, mine) = (messages(compiled), messages(ours));
    assert!(theirs.len() > 900, "protox compiled {} messages", theirs.len());
    for (name, shape) in &theirs {
        assert_eq!(mine.get(name), Some(shape), "{name}");
    }
    assert_eq!(mine.len(), theirs.len(), "the embedded schema has messages proto/ does not");
    assert_eq!(enums(ours), enums(compiled));
}
