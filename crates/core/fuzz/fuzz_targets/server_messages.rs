//! Server messages through everything the client does with one: prost's decode, the
//! translation into ACP updates, and the descriptor-driven reading of exec requests and
//! interaction queries handed to JavaScript. Never a panic.
#![no_main]

use cursor_acp_core::proto::agent::v1 as pb;
use cursor_acp_core::translate::Translator;
use cursor_acp_core::{bridge, translate};
use libfuzzer_sys::fuzz_target;
use prost::Message;

fuzz_target!(|data: &[u8]| {
    let mut translator = Translator::new();
    // The input is a run of length-prefixed messages (one byte of length), so that one turn
    // can hold several updates that depend on one another (a tool call started, then ended).
    let mut rest = data;
    while let Some((&len, tail)) = rest.split_first() {
        let (bytes, tail) = tail.split_at(usize::from(len).min(tail.len()));
        rest = tail;
        let Ok(message) = pb::AgentServerMessage::decode(bytes) else { continue };
        use pb::agent_server_message::Message as S;
        match &message.message {
            Some(S::InteractionUpdate(update)) => {
                for update in translator.on_update(update) {
                    let _ = translate::to_json(&update);
                }
            }
            Some(S::ConversationCheckpointUpdate(state)) => {
                let _ = translator.on_checkpoint(state);
            }
            Some(S::ExecServerMessage(exec)) => {
                let decoded = bridge::decode_exec(&exec.encode_to_vec());
                assert!(decoded.is_ok(), "prost read it, the bridge refused it: {decoded:?}");
            }
            Some(S::InteractionQuery(query)) => {
                let decoded = bridge::decode_interaction(&query.encode_to_vec());
                assert!(decoded.is_ok(), "prost read it, the bridge refused it: {decoded:?}");
            }
            _ => {}
        }
    }
});
