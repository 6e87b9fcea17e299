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
//! [`whole_schema`], and once it is built every lookup is answered from it. It is built from the
//! same files (one per package), so the schema is embedded once; JSON names protobuf's rule
//! gives are left out of the files, and filled in by prost-reflect as it builds a pool.

use std::ops::Range;
use std::sync::OnceLock;

use bytes::{Buf, BytesMut};
use prost::encoding::{decode_key, decode_varint, WireType};
use prost_reflect::{DescriptorPool, DynamicMessage, FieldDescriptor, Kind, MessageDescriptor};

use crate::wire::{put_length_delimited, read_fields, Field};

/// One of build.rs's descriptor files: where its encoded `FileDescriptorProto` lies in the
/// embedded bytes, where its body (its messages and enums, the end of those bytes) starts, its
/// package (an index into `PACKAGES`), and the files it imports (indexes into the same table).
pub struct DescriptorFile {
    pub bytes: Range<usize>,
    pub body: Range<usize>,
    pub package: usize,
    pub imports: &'static [usize],
}

/// A package of the schema: in [`whole_schema`], one file of the bodies of its descriptor files.
pub struct Package {
    pub name: &'static str,
    pub syntax: &'static str,
    /// The packages its types refer to (indexes into the same table).
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
    use super::{Branch, DescriptorFile, Package};
    include!(concat!(env!("OUT_DIR"), "/descriptor_index.rs"));
}

static FILES_DEFLATED: &[u8] = include_bytes!(concat!(env!("OUT_DIR"), "/descriptor_files.deflate"));
static WHOLE: OnceLock<DescriptorPool> = OnceLock::new();
static POOLS: OnceLock<Box<[OnceLock<DescriptorPool>]>> = OnceLock::new();

/// The pool of every message of `agent.v1` and `aiserver.v1`, built once per process.
pub fn whole_schema() -> &'static DescriptorPool {
    WHOLE.get_or_init(build_whole_schema)
}

/// A new pool of the whole schema, not kept (`whole_schema()` keeps one); for measuring it.
///
/// Built from the same descriptor files as the lean pools, so the schema is embedded once: one
/// file per package, its header written here and its body the bodies of the package's files one
/// after another (repeated fields of an encoded message append).
pub fn build_whole_schema() -> DescriptorPool {
    let package_file = |package: &Package| format!("{}.proto", package.name);
    let bytes = inflated_files();
    let mut set = BytesMut::new();
    for (number, package) in index::PACKAGES.iter().enumerate() {
        let mut file = BytesMut::new();
        put_length_delimited(&mut file, FILE_NAME, package_file(package).as_bytes());
        put_length_delimited(&mut file, FILE_PACKAGE, package.name.as_bytes());
        for &import in package.imports {
            put_length_delimited(&mut file, FILE_DEPENDENCY, package_file(&index::PACKAGES[import]).as_bytes());
        }
        put_length_delimited(&mut file, FILE_SYNTAX, package.syntax.as_bytes());
        for descriptor in index::FILES.iter().filter(|f| f.package == number) {
            file.extend_from_slice(&bytes[descriptor.body.clone()]);
        }
        put_length_delimited(&mut set, SET_FILE, &file);
    }
    DescriptorPool::decode(&set[..]).expect("build.rs writes descriptor files that import what they use")
}

/// The descriptor files' bytes, inflated for one pool's build. build.rs deflates them: 236 KB in
/// every download against 52. They are not kept: a pool is built once per descriptor file a
/// process meets, the inflate takes 0.4–0.5 ms, and the bytes kept would be 236 KB of memory in
/// every process that converts a message.
fn inflated_files() -> Vec<u8> {
    let mut bytes = Vec::with_capacity(index::FILES_LEN);
    std::io::Read::read_to_end(&mut flate2::read::DeflateDecoder::new(FILES_DEFLATED), &mut bytes)
        .expect("build.rs deflates the descriptor files");
    assert_eq!(bytes.len(), index::FILES_LEN, "the descriptor files inflate to the length build.rs wrote");
    bytes
}

// Field numbers of descriptor.proto's `FileDescriptorSet` and `FileDescriptorProto`.
const SET_FILE: u32 = 1;
const FILE_NAME: u32 = 1;
const FILE_PACKAGE: u32 = 2;
const FILE_DEPENDENCY: u32 = 3;
const FILE_SYNTAX: u32 = 12;

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
///
/// Read as prost reads the generated type: a member that comes again is merged into the one
/// read so far, a different member replaces it, and every member on the wire, replaced or not,
/// must be valid ([`check`], nested one level below the container), so that these bytes are a
/// valid `container` here exactly when they are for prost. `other` must refuse what prost
/// refuses in the other fields.
pub fn dispatch<'a>(
    container: &str,
    oneof: &str,
    raw: &'a [u8],
    mut other: impl FnMut(u32, Field<'a>) -> Result<(), String>,
) -> Result<Option<(&'static Branch, DynamicMessage)>, String> {
    let mut set: Option<(&'static Branch, DynamicMessage)> = None;
    read_fields(raw, |number, value| match (branch(container, oneof, number), value) {
        (Some(branch), Field::LengthDelimited(bytes)) => {
            let desc = message(branch.message).ok_or_else(|| format!("{} is not in proto/", branch.message))?;
            let named = |e: String| format!("{container}.{}: {e}", branch.name);
            check(&desc, bytes, RECURSION_LIMIT - 1).map_err(named)?;
            match &mut set {
                Some((current, msg)) if current.number == branch.number => {
                    prost::Message::merge(msg, bytes).map_err(|e| named(e.to_string()))?
                }
                _ => set = Some((branch, DynamicMessage::decode(desc, bytes).map_err(|e| named(e.to_string()))?)),
            }
            Ok(())
        }
        (Some(branch), _) => Err(format!("{container}.{}: not a message on the wire", branch.name)),
        (None, value) => other(number, value),
    })?;
    Ok(set)
}

/// How deeply prost lets messages nest in a decode: the depth [`check`] is given at the top.
pub const RECURSION_LIMIT: u32 = 100;

/// Checks that `buf` is a valid encoding of `message` as prost's decode of the generated type
/// judges it, without building anything: wire types, lengths, varints, UTF-8, and nesting
/// (`depth_left`: how many more levels prost would enter, [`RECURSION_LIMIT`] at the top). The
/// descriptor-driven decode (prost-reflect) is laxer in places (it reads a map entry whatever
/// the wire type, does not count a map entry as a level, nor refuses an unknown field at the
/// deepest level), so every descriptor-driven
/// read of received bytes runs this first, and a message is valid or not whichever reads it.
pub fn check(message: &MessageDescriptor, mut buf: &[u8], depth_left: u32) -> Result<(), String> {
    while buf.has_remaining() {
        let (tag, wire_type) = decode_key(&mut buf).map_err(|e| e.to_string())?;
        let Some(field) = message.get_field(tag) else {
            skip_unknown(wire_type, tag, &mut buf, depth_left)?;
            continue;
        };
        let kind = field.kind();
        let expected = native_wire_type(&kind);
        if wire_type == expected {
            check_value(&field, &kind, &mut buf, depth_left)?;
        } else if wire_type == WireType::LengthDelimited && field.is_list() && expected != WireType::LengthDelimited {
            check_packed(&mut buf, expected)?;
        } else {
            return Err(format!(
                "{}.{}: invalid wire type: {wire_type:?} (expected {expected:?})",
                message.name(),
                field.name()
            ));
        }
    }
    Ok(())
}

/// Skips an unknown field as prost's `skip_field` does, which counts a group as a level and
/// refuses any unknown field once no level is left.
fn skip_unknown(wire_type: WireType, tag: u32, buf: &mut &[u8], depth_left: u32) -> Result<(), String> {
    if depth_left == 0 {
        return Err("recursion limit reached".into());
    }
    match wire_type {
        WireType::Varint => decode_varint(buf).map(drop).map_err(|e| e.to_string()),
        WireType::SixtyFourBit => advance(buf, 8),
        WireType::ThirtyTwoBit => advance(buf, 4),
        WireType::LengthDelimited => length_delimited(buf).map(drop),
        WireType::StartGroup => loop {
            let (inner_tag, inner_wire_type) = decode_key(buf).map_err(|e| e.to_string())?;
            if inner_wire_type == WireType::EndGroup {
                if inner_tag != tag {
                    return Err("unexpected end group tag".into());
                }
                return Ok(());
            }
            skip_unknown(inner_wire_type, inner_tag, buf, depth_left - 1)?;
        },
        WireType::EndGroup => Err("unexpected end group tag".into()),
    }
}

/// One value of `field` (of `kind`) in its own wire type.
fn check_value(field: &FieldDescriptor, kind: &Kind, buf: &mut &[u8], depth_left: u32) -> Result<(), String> {
    match native_wire_type(kind) {
        WireType::Varint => decode_varint(buf).map(drop).map_err(|e| e.to_string()),
        WireType::SixtyFourBit => advance(buf, 8),
        WireType::ThirtyTwoBit => advance(buf, 4),
        _ => {
            let value = length_delimited(buf)?;
            match kind {
                Kind::String => std::str::from_utf8(value)
                    .map(drop)
                    .map_err(|_| format!("{}: invalid string value: data is not UTF-8 encoded", field.full_name())),
                Kind::Message(nested) if depth_left == 0 => {
                    Err(format!("{}: recursion limit reached", nested.full_name()))
                }
                Kind::Message(nested) => check(nested, value, depth_left - 1),
                _ => Ok(()),
            }
        }
    }
}

/// A packed run of numbers whose own wire type is `element`.
fn check_packed(buf: &mut &[u8], element: WireType) -> Result<(), String> {
    let mut values = length_delimited(buf)?;
    match element {
        WireType::Varint => {
            while values.has_remaining() {
                decode_varint(&mut values).map_err(|e| e.to_string())?;
            }
            Ok(())
        }
        WireType::SixtyFourBit if values.len() % 8 == 0 => Ok(()),
        WireType::ThirtyTwoBit if values.len() % 4 == 0 => Ok(()),
        _ => Err("packed values end inside a value".into()),
    }
}

fn length_delimited<'a>(buf: &mut &'a [u8]) -> Result<&'a [u8], String> {
    let len = decode_varint(buf).map_err(|e| e.to_string())?;
    let len = usize::try_from(len).ok().filter(|&len| len <= buf.len()).ok_or("buffer underflow")?;
    let (value, rest) = buf.split_at(len);
    *buf = rest;
    Ok(value)
}

fn advance(buf: &mut &[u8], len: usize) -> Result<(), String> {
    if buf.len() < len {
        return Err("buffer underflow".into());
    }
    buf.advance(len);
    Ok(())
}

fn native_wire_type(kind: &Kind) -> WireType {
    match kind {
        Kind::Double | Kind::Fixed64 | Kind::Sfixed64 => WireType::SixtyFourBit,
        Kind::Float | Kind::Fixed32 | Kind::Sfixed32 => WireType::ThirtyTwoBit,
        Kind::String | Kind::Bytes | Kind::Message(_) => WireType::LengthDelimited,
        Kind::Int32
        | Kind::Int64
        | Kind::Uint32
        | Kind::Uint64
        | Kind::Sint32
        | Kind::Sint64
        | Kind::Bool
        | Kind::Enum(_) => WireType::Varint,
    }
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
    // A `FileDescriptorSet`, written from the files' bytes as they are.
    let bytes = inflated_files();
    let mut set = BytesMut::new();
    for (file, _) in wanted.iter().enumerate().filter(|(_, wanted)| **wanted) {
        put_length_delimited(&mut set, SET_FILE, &bytes[index::FILES[file].bytes.clone()]);
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
