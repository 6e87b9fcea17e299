//! proto3 JSON as JavaScript hands it over (a request context, an exec result): a clear error
//! or a message, never a panic, and what is accepted encodes to bytes prost reads back.
#![no_main]

use cursor_acp_core::proto::agent::v1 as pb;
use cursor_acp_core::protojson;
use libfuzzer_sys::fuzz_target;
use prost::Message;

fuzz_target!(|data: &[u8]| {
    let Ok(json) = serde_json::from_slice::<serde_json::Value>(data) else { return };
    if let Ok(ctx) = protojson::from_json::<pb::RequestContext>("agent.v1.RequestContext", &json) {
        let bytes = ctx.encode_to_vec();
        assert!(protojson::to_json("agent.v1.RequestContext", &bytes).is_ok());
    }
    if let Ok(reply) = protojson::from_json::<pb::ExecClientMessage>("agent.v1.ExecClientMessage", &json) {
        let bytes = reply.encode_to_vec();
        assert!(protojson::to_json("agent.v1.ExecClientMessage", &bytes).is_ok());
    }
});
