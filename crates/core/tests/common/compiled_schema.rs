//! proto/ compiled by protox, as build.rs starts from it: what the embedded descriptors are
//! checked against, and what the schema's tests read proto/ through (services included).

use std::sync::OnceLock;

use prost_reflect::DescriptorPool;

/// The pool of protox's compile of proto/, built once per test binary.
pub fn compiled() -> &'static DescriptorPool {
    static POOL: OnceLock<DescriptorPool> = OnceLock::new();
    POOL.get_or_init(|| {
        let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../proto");
        let set = protox::compile([dir.join("agent_v1.proto"), dir.join("aiserver_v1.proto")], [&dir])
            .expect("proto/ compiles");
        DescriptorPool::from_file_descriptor_set(set).expect("protox's descriptors make a pool")
    })
}
