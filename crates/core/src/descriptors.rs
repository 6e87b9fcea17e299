//! Message descriptors of `proto/`, built for the messages a process actually converts.
//!
//! The client reads exec requests, interaction queries and tool calls, and writes their answers,
//! through descriptors (proto3 JSON, names of branches). A descriptor pool of the whole schema
//! keeps about 5 MiB for its 900 messages, in every process, for the few dozen a session meets.
//! So build.rs splits the schema into small descriptor files (one per group of top-level types
//! that refer to each other in a cycle, each importing the files of the types it uses), and the
//! first use of a message builds a pool of its file and that file's imports only: a read result
//! is 8 messages. Each such pool is kept for the next use.
//!
//! The embedded backend and the schema's tests look at every message: they use
//! [`whole_schema`], and once it is built every lookup is answered from it.

use std::ops::Range;
use std::sync::OnceLock;

use bytes::BytesMut;
use prost_reflect::{DescriptorPool, DynamicMessage, MessageDescriptor};

use crate::wire::{put_length_delimited, read_fields, Field};

/// One of build.rs's descriptor files: where its encoded `FileDescriptorProto` lies in the
/// embedded bytes, and the files it imports (indexes into the same table).
pub struct DescriptorFile {
    pub bytes: Range<usize>,
    pub imports: &'static [usize],
}

/// A member of a oneof the client dispatches on (see [`branches`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Branch {
    pub number: u32,
    /// The field's name in `proto/`, e.g. `read_args`.
    pub name: &'static str,
    /// Its proto3 JSON name, e.g. `readArgs`.
    pub json_name: &'static str,
    /// The full name of its message type, e.g. `agent.v1.ReadArgs`.
    pub message: &'static str,
}

mod index {
    use super::{Branch, DescriptorFile};
    include!(concat!(env!("OUT_DIR"), "/descriptor_index.rs"));
}

static FILE_BYTES: &[u8] = include_bytes!(concat!(env!("OUT_DIR"), "/descriptor_files.bin"));
static WHOLE: OnceLock<DescriptorPool> = OnceLock::new();
static POOLS: OnceLock<Box<[OnceLock<DescriptorPool>]>> = OnceLock::new();

/// The pool of every message of `agent.v1` and `aiserver.v1`, built once per process.
pub fn whole_schema() -> &'static DescriptorPool {
    WHOLE.get_or_init(build_whole_schema)
}

/// A new pool of the whole schema, not kept (`whole_schema()` keeps one); for measuring it.
pub fn build_whole_schema() -> DescriptorPool {
    DescriptorPool::decode(&include_bytes!(concat!(env!("OUT_DIR"), "/descriptors.bin"))[..])
        .expect("embedded descriptor set is valid")
}

/// The descriptor of message `full_name` (e.g. `agent.v1.ReadResult`), or `None` when the schema
/// has no such message.
pub fn message(full_name: &str) -> Option<MessageDescriptor> {
    if let Some(whole) = WHOLE.get() {
        return whole.get_message_by_name(full_name);
    }
    let file = index::MESSAGES.binary_search_by(|(name, _)| (*name).cmp(full_name)).ok()?;
    let file = index::MESSAGES[file].1;
    let pools = POOLS.get_or_init(|| index::FILES.iter().map(|_| OnceLock::new()).collect());
    pools[file].get_or_init(|| pool_of_file(file)).get_message_by_name(full_name)
}

/// The members of oneof `oneof` of message `container`: one of build.rs's `DISPATCH_ONEOFS`.
pub fn branches(container: &str, oneof: &str) -> &'static [Branch] {
    index::DISPATCH
        .iter()
        .find(|(message, name, _)| *message == container && *name == oneof)
        .map(|(_, _, members)| *members)
        .unwrap_or_else(|| panic!("{container}.{oneof} is not listed in build.rs's DISPATCH_ONEOFS"))
}

/// Member `number` of oneof `oneof` of message `container` (see [`branches`]), if it has one.
pub fn branch(container: &str, oneof: &str, number: u32) -> Option<&'static Branch> {
    branches(container, oneof).iter().find(|b| b.number == number)
}

/// The member set of oneof `oneof` (one of [`branches`]) in `raw`, an encoded `container`,
/// decoded through its type's descriptor; the message's other fields go to `other`.
pub fn dispatch<'a>(
    container: &str,
    oneof: &str,
    raw: &'a [u8],
    mut other: impl FnMut(u32, Field<'a>) -> Result<(), String>,
) -> Result<Option<(&'static Branch, DynamicMessage)>, String> {
    let mut set = None;
    read_fields(raw, |number, value| match (branch(container, oneof, number), value) {
        // The last member on the wire is the one set, as protobuf parsers read a oneof.
        (Some(branch), Field::LengthDelimited(bytes)) => {
            set = Some((branch, bytes));
            Ok(())
        }
        (Some(branch), _) => Err(format!("{container}.{}: not a message on the wire", branch.name)),
        (None, value) => other(number, value),
    })?;
    let Some((branch, bytes)) = set else { return Ok(None) };
    let decoded = DynamicMessage::decode(
        message(branch.message).ok_or_else(|| format!("{} is not in proto/", branch.message))?,
        bytes,
    )
    .map_err(|e| format!("{container}.{}: {e}", branch.name))?;
    Ok(Some((branch, decoded)))
}

/// A pool of descriptor file `root` and everything it imports, directly or not.
fn pool_of_file(root: usize) -> DescriptorPool {
    let mut wanted = vec![false; index::FILES.len()];
    let mut stack = vec![root];
    while let Some(file) = stack.pop() {
        if !std::mem::replace(&mut wanted[file], true) {
            stack.extend(index::FILES[file].imports);
        }
    }
    // A `FileDescriptorSet` (field 1: its files), written from the files' bytes as they are.
    let mut set = BytesMut::new();
    for (file, _) in wanted.iter().enumerate().filter(|(_, wanted)| **wanted) {
        put_length_delimited(&mut set, 1, &FILE_BYTES[index::FILES[file].bytes.clone()]);
    }
    DescriptorPool::decode(&set[..]).expect("build.rs writes descriptor files that import what they use")
}

#[cfg(test)]
mod tests {
    use super::*;

    /// What a descriptor says of a message's fields, to compare two pools' descriptors by.
    fn shape(message: &MessageDescriptor) -> Vec<String> {
        message
            .fields()
            .map(|f| {
                let kind = match f.kind() {
                    prost_reflect::Kind::Message(m) => m.full_name().to_string(),
                    prost_reflect::Kind::Enum(e) => e.full_name().to_string(),
                    other => format!("{other:?}"),
                };
                let oneof = f.containing_oneof().map(|o| o.name().to_string());
                format!(
                    "{} {} {} {kind} {:?} {oneof:?} {}",
                    f.number(),
                    f.name(),
                    f.json_name(),
                    f.cardinality(),
                    f.supports_presence()
                )
            })
            .collect()
    }

    #[test]
    fn every_message_is_in_its_files_pool_as_in_the_whole_schema() {
        // Through `pool_of_file`, not `message`, which answers from the whole schema once built.
        for file in 0..index::FILES.len() {
            let pool = pool_of_file(file);
            for (name, _) in index::MESSAGES.iter().filter(|(_, f)| *f == file) {
                let lean = pool.get_message_by_name(name).unwrap_or_else(|| panic!("{name} is not in its file's pool"));
                let whole = whole_schema().get_message_by_name(name).unwrap();
                assert_eq!(shape(&lean), shape(&whole), "{name}");
            }
        }
        let messages = whole_schema().all_messages().filter(|m| !m.full_name().starts_with("google.protobuf."));
        let listed: std::collections::HashSet<&str> = index::MESSAGES.iter().map(|(name, _)| *name).collect();
        for message in messages {
            assert!(listed.contains(message.full_name()), "{} has no descriptor file", message.full_name());
        }
    }

    #[test]
    fn a_read_result_needs_a_handful_of_messages() {
        let file = index::MESSAGES.iter().find(|(name, _)| *name == "agent.v1.ReadResult").unwrap().1;
        let count = pool_of_file(file).all_messages().count();
        assert!(count < 20, "a ReadResult's pool has {count} messages");
    }

    #[test]
    fn the_dispatch_tables_are_the_oneofs_members() {
        let exec = branches("agent.v1.ExecServerMessage", "message");
        let read = exec.iter().find(|b| b.name == "read_args").unwrap();
        assert_eq!(*read, Branch { number: 7, name: "read_args", json_name: "readArgs", message: "agent.v1.ReadArgs" });
        assert!(exec.iter().all(|b| b.name != "exec_id" && b.name != "span_context"), "only the oneof's members");
    }
}
