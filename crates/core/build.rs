//! Compiles `proto/*.proto` (the wire sheet transcribed) with protox + prost-build: no `protoc`
//! on the machine. Bytes fields decode as `bytes::Bytes` so large payloads are not copied.
use std::path::PathBuf;

fn main() {
    // Read when the script runs, not baked in when it is compiled: a build script binary may be
    // reused from another checkout sharing the target directory.
    let manifest_dir = std::env::var("CARGO_MANIFEST_DIR").expect("cargo sets CARGO_MANIFEST_DIR");
    let proto_dir = PathBuf::from(manifest_dir).join("../../proto");
    let files = [proto_dir.join("agent_v1.proto"), proto_dir.join("aiserver_v1.proto")];
    for f in &files {
        println!("cargo:rerun-if-changed={}", f.display());
    }
    let descriptors = protox::compile(&files, [&proto_dir]).expect("proto/ must compile");
    // The descriptor set is embedded too: proto3 JSON (scenarios, recordings, exec results) is
    // driven by it. Without source info (comment locations): the runtime never reads them, and
    // they made up most of the pool's memory (5.4 MiB live in every process after the first exec).
    let mut embedded = descriptors.clone();
    for file in &mut embedded.file {
        file.source_code_info = None;
    }
    let out = PathBuf::from(std::env::var("OUT_DIR").expect("OUT_DIR"));
    std::fs::write(out.join("descriptors.bin"), prost::Message::encode_to_vec(&embedded)).expect("write descriptors");
    let mut config = prost_build::Config::new();
    config.bytes(["."]);
    config.include_file("protos.rs");
    // Secrets: these get hand-written, redacting Debug impls in src/proto.rs.
    config.skip_debug([".agent.v1.ApiKeyCredentials", ".agent.v1.AzureCredentials", ".agent.v1.BedrockCredentials"]);
    // A oneof is as large as its largest branch, and every frame decodes into one: boxing the
    // rare, large branches (tool calls, exec requests, checkpoints, run requests; 0.8–3.6 KiB
    // each) keeps the frequent ones (text deltas, heartbeats, appends) small to allocate and move.
    for field in [
        ".agent.v1.AgentServerMessage.message.exec_server_message",
        ".agent.v1.AgentServerMessage.message.conversation_checkpoint_update",
        // Not in the oneof, but in every server frame: the rare timing breakdown (56 bytes inline).
        ".agent.v1.AgentServerMessage.ttft_breakdown",
        ".agent.v1.InteractionUpdate.message.partial_tool_call",
        ".agent.v1.InteractionUpdate.message.tool_call_started",
        ".agent.v1.InteractionUpdate.message.tool_call_completed",
        ".agent.v1.InteractionUpdate.message.user_message_appended",
        ".agent.v1.AgentClientMessage.message.run_request",
        ".agent.v1.AgentClientMessage.message.exec_client_message",
        ".agent.v1.AgentClientMessage.message.conversation_action",
        ".agent.v1.AgentClientMessage.message.prewarm_request",
    ] {
        config.boxed(field);
    }
    config.compile_fds(descriptors).expect("prost-build codegen");
}
