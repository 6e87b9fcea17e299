//! The account's models: the list the server offers (`GetUsableModels`, the official client's
//! source for its model picker), and the model a session runs with — the `ModelDetails` and
//! `RequestedModel` every run request and prewarm carries. Nothing chosen means Auto: model id
//! `default` (display name "Auto") in both fields, which lets the server route the request.

use bytes::Bytes;
use prost::Message as _;

use crate::error::CoreError;
use crate::proto::agent::v1 as pb;
use crate::transport::Transport;

pub const GET_USABLE_MODELS_PATH: &str = "/agent.v1.AgentService/GetUsableModels";
/// The model id of Auto.
pub const AUTO_MODEL_ID: &str = "default";

/// The models the account may use, as the server describes them.
pub async fn usable_models(transport: &Transport) -> Result<Vec<pb::ModelDetails>, CoreError> {
    let request = Bytes::from(pb::GetUsableModelsRequest::default().encode_to_vec());
    let answer = transport.unary(GET_USABLE_MODELS_PATH, request).await?;
    let response = pb::GetUsableModelsResponse::decode(answer)
        .map_err(|e| CoreError::Protocol(format!("GetUsableModels answered with something else: {e}")))?;
    Ok(response.models)
}

/// `ModelDetails` from its proto3 JSON (what `listModels()` gives as `details`).
pub fn details_from_json(value: &serde_json::Value) -> Result<pb::ModelDetails, CoreError> {
    crate::protojson::from_json("agent.v1.ModelDetails", value)
        .map_err(|e| CoreError::InvalidInput(format!("modelDetails is not a ModelDetails: {e}")))
}

/// The proto3 JSON of `details`.
pub fn details_json(details: &pb::ModelDetails) -> serde_json::Value {
    crate::protojson::to_json("agent.v1.ModelDetails", &details.encode_to_vec()).unwrap_or_default()
}

/// Auto's details.
pub fn auto() -> pb::ModelDetails {
    pb::ModelDetails {
        model_id: AUTO_MODEL_ID.into(),
        display_model_id: AUTO_MODEL_ID.into(),
        display_name: "Auto".into(),
        display_name_short: "Auto".into(),
        ..Default::default()
    }
}

/// The details a session runs with, from a model id and/or the server's details for it: Auto
/// when neither is given; details made from the id alone when only the id is (the server
/// accepts catalog ids that way).
pub fn choose(model: Option<&str>, details: Option<pb::ModelDetails>) -> Result<pb::ModelDetails, CoreError> {
    let model = model.map(str::trim).filter(|m| !m.is_empty());
    match (model, details) {
        (None, None) => Ok(auto()),
        (Some(AUTO_MODEL_ID), None) => Ok(auto()),
        (Some(id), None) => Ok(pb::ModelDetails {
            model_id: id.into(),
            display_model_id: id.into(),
            display_name: id.into(),
            ..Default::default()
        }),
        (model, Some(mut details)) => {
            if details.model_id.is_empty() {
                details.model_id =
                    model.ok_or_else(|| CoreError::InvalidInput("modelDetails has no modelId".into()))?.into();
            }
            if let Some(id) = model.filter(|id| *id != details.model_id) {
                return Err(CoreError::InvalidInput(format!(
                    "model {id:?} and modelDetails.modelId {:?} differ",
                    details.model_id
                )));
            }
            if details.display_model_id.is_empty() {
                details.display_model_id = details.model_id.clone();
            }
            if details.display_name.is_empty() {
                details.display_name = details.model_id.clone();
            }
            Ok(details)
        }
    }
}

/// The `RequestedModel` that goes with `details`.
pub fn requested(details: &pb::ModelDetails) -> pb::RequestedModel {
    pb::RequestedModel {
        model_id: details.model_id.clone(),
        max_mode: details.max_mode.unwrap_or(false),
        ..Default::default()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nothing_chosen_is_auto_and_details_keep_what_the_server_said() {
        assert_eq!(choose(None, None).unwrap(), auto());
        assert_eq!(choose(Some(" "), None).unwrap(), auto());
        assert_eq!(choose(Some("default"), None).unwrap().display_name, "Auto");
        let bare = choose(Some("gpt-x"), None).unwrap();
        assert_eq!((bare.model_id.as_str(), bare.display_name.as_str()), ("gpt-x", "gpt-x"));
        let server = pb::ModelDetails {
            model_id: "claude-x-thinking".into(),
            display_name: "Claude X Thinking".into(),
            max_mode: Some(true),
            ..Default::default()
        };
        let chosen = choose(Some("claude-x-thinking"), Some(server.clone())).unwrap();
        assert_eq!(chosen.display_name, "Claude X Thinking");
        assert_eq!(chosen.display_model_id, "claude-x-thinking");
        let requested = requested(&chosen);
        assert_eq!((requested.model_id.as_str(), requested.max_mode), ("claude-x-thinking", true));
        assert!(matches!(choose(Some("other"), Some(server)), Err(CoreError::InvalidInput(_))));
        assert!(matches!(choose(None, Some(pb::ModelDetails::default())), Err(CoreError::InvalidInput(_))));
    }
}
