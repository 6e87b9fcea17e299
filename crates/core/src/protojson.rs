//! proto3 JSON for any message of `proto/`, driven by its descriptors (`crate::descriptors`).
//!
//! The embedded backend uses it so scenarios can state any server message in JSON
//! (`{"interactionUpdate":{"textDelta":{"text":"hi"}}}`) and recordings can show exactly what the
//! client sent, decoded, without a hand-written mapping per message.

use prost_reflect::{DeserializeOptions, DynamicMessage, SerializeOptions};

use crate::descriptors;

/// Decodes `bytes` as `message_name` (e.g. `agent.v1.AgentClientMessage`) and renders proto3 JSON.
/// Bytes are valid here exactly when prost's decode of the generated type accepts them
/// (`descriptors::check`), so a recording never shows a message the client refused, or the
/// other way round.
pub fn to_json(message_name: &str, bytes: &[u8]) -> Result<serde_json::Value, String> {
    let desc = descriptors::message(message_name).ok_or_else(|| format!("unknown message {message_name}"))?;
    descriptors::check(&desc, bytes, descriptors::RECURSION_LIMIT).map_err(|e| format!("{message_name}: {e}"))?;
    let msg = DynamicMessage::decode(desc, bytes).map_err(|e| format!("{message_name}: {e}"))?;
    let options = SerializeOptions::new().skip_default_fields(true);
    msg.serialize_with_options(serde_json::value::Serializer, &options).map_err(|e| e.to_string())
}

/// Encodes proto3 JSON as `message_name` and decodes it into the prost type `M`.
pub fn from_json<M: prost::Message + Default>(message_name: &str, json: &serde_json::Value) -> Result<M, String> {
    let desc = descriptors::message(message_name).ok_or_else(|| format!("unknown message {message_name}"))?;
    let options = DeserializeOptions::new().deny_unknown_fields(true);
    let msg = DynamicMessage::deserialize_with_options(desc, json, &options)
        .map_err(|e| format!("not a valid {message_name}: {e}"))?;
    M::decode(prost::Message::encode_to_vec(&msg).as_slice()).map_err(|e| e.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::proto::agent::v1::{agent_server_message, interaction_update, AgentServerMessage};

    #[test]
    fn json_round_trips_through_prost_types() {
        let json = serde_json::json!({"interactionUpdate": {"textDelta": {"text": "hi"}}});
        let msg: AgentServerMessage = from_json("agent.v1.AgentServerMessage", &json).unwrap();
        let Some(agent_server_message::Message::InteractionUpdate(u)) = &msg.message else { panic!() };
        assert!(matches!(&u.message, Some(interaction_update::Message::TextDelta(t)) if t.text == "hi"));
        let back = to_json("agent.v1.AgentServerMessage", &prost::Message::encode_to_vec(&msg)).unwrap();
        assert_eq!(back, json);
    }

    #[test]
    fn unknown_json_fields_are_rejected_with_the_field_named() {
        let json = serde_json::json!({"interactionUpdate": {"textDeltaa": {}}});
        let err = from_json::<AgentServerMessage>("agent.v1.AgentServerMessage", &json).unwrap_err();
        assert!(err.contains("textDeltaa"), "{err}");
    }
}
