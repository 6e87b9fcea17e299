//! The embedded backend's model catalogue: what `GetUsableModels` answers (configurable with
//! `startEmbeddedBackend({ models })`), and the model checks the real service makes on a run
//! request: no model details is `invalid_argument` "Model details are required", a model id
//! outside the catalogue is `not_found`. `default` (Auto) is always accepted.

use prost::Message as _;

use cursor_acp_core::connect::{Code, ConnectError};
use cursor_acp_core::error::CoreError;
use cursor_acp_core::models::AUTO_MODEL_ID;
use cursor_acp_core::proto::agent::v1 as pb;
use cursor_acp_core::protojson;

pub(super) struct Models {
    list: Vec<pb::ModelDetails>,
}

/// What the backend offers when not told otherwise.
fn built_in() -> Vec<pb::ModelDetails> {
    let model = |id: &str, name: &str, thinking: bool| pb::ModelDetails {
        model_id: id.into(),
        display_model_id: id.into(),
        display_name: name.into(),
        display_name_short: name.into(),
        thinking_details: thinking.then(pb::ThinkingDetails::default),
        // The thinking model offers Max Mode, as the service's large models do.
        max_mode: thinking.then_some(true),
        ..Default::default()
    };
    vec![model("embedded-fast", "Embedded Fast", false), model("embedded-thinking", "Embedded Thinking", true)]
}

impl Models {
    /// The catalogue from `ModelDetails` in proto3 JSON, or the built-in one.
    pub(super) fn new(list: Option<&[serde_json::Value]>) -> Result<Self, CoreError> {
        let list = match list {
            None => built_in(),
            Some(list) => list
                .iter()
                .enumerate()
                .map(|(i, json)| {
                    let details: pb::ModelDetails = protojson::from_json("agent.v1.ModelDetails", json)
                        .map_err(|e| CoreError::InvalidInput(format!("models[{i}] is not a ModelDetails: {e}")))?;
                    if details.model_id.is_empty() {
                        return Err(CoreError::InvalidInput(format!("models[{i}] has no modelId")));
                    }
                    Ok(details)
                })
                .collect::<Result<_, _>>()?,
        };
        Ok(Models { list })
    }

    /// The encoded `GetUsableModelsResponse`.
    pub(super) fn usable_models(&self) -> Vec<u8> {
        pb::GetUsableModelsResponse { models: self.list.clone() }.encode_to_vec()
    }

    fn find(&self, id: &str) -> Option<&pb::ModelDetails> {
        self.list.iter().find(|m| m.model_id == id || m.aliases.iter().any(|a| a == id))
    }

    /// A run request's model fields checked as the real service checks them.
    pub(super) fn check(&self, run: &pb::AgentRunRequest) -> Result<(), ConnectError> {
        let details = run.model_details.as_ref().filter(|d| !d.model_id.is_empty());
        let Some(details) = details else {
            return Err(ConnectError::new(Code::InvalidArgument, "Model details are required"));
        };
        let requested = run.requested_model.as_ref().map(|r| r.model_id.as_str()).filter(|id| !id.is_empty());
        let id = requested.unwrap_or(&details.model_id);
        let max_mode = run.requested_model.as_ref().is_some_and(|r| r.max_mode) || details.max_mode == Some(true);
        if id == AUTO_MODEL_ID {
            return if max_mode {
                Err(ConnectError::new(Code::InvalidArgument, "Max Mode needs a model: Auto routes by itself"))
            } else {
                Ok(())
            };
        }
        let Some(model) = self.find(id) else {
            return Err(ConnectError::new(Code::NotFound, format!("Model not found: {id}")));
        };
        if max_mode && model.max_mode != Some(true) {
            return Err(ConnectError::new(Code::InvalidArgument, format!("Max Mode is not available for {id}")));
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn run(id: &str, max_mode: bool) -> pb::AgentRunRequest {
        pb::AgentRunRequest {
            model_details: Some(pb::ModelDetails {
                model_id: id.into(),
                max_mode: Some(max_mode),
                ..Default::default()
            }),
            requested_model: Some(pb::RequestedModel { model_id: id.into(), max_mode, ..Default::default() }),
            ..Default::default()
        }
    }

    #[test]
    fn max_mode_is_accepted_only_for_a_model_that_offers_it() {
        let models = Models::new(None).unwrap();
        assert!(models.check(&run("embedded-thinking", true)).is_ok());
        assert!(models.check(&run("embedded-thinking", false)).is_ok());
        assert!(models.check(&run("embedded-fast", false)).is_ok());
        let refused = models.check(&run("embedded-fast", true)).unwrap_err();
        assert_eq!(refused.code, Code::InvalidArgument);
        assert!(refused.message.contains("Max Mode is not available for embedded-fast"), "{}", refused.message);
        assert_eq!(models.check(&run(AUTO_MODEL_ID, true)).unwrap_err().code, Code::InvalidArgument);
        assert_eq!(models.check(&run("nope", false)).unwrap_err().code, Code::NotFound);
    }
}
