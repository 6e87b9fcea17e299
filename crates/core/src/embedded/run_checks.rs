//! What the embedded backend checks in a run request before it plays a turn, as the real
//! service refuses such requests at turn start: the model fields (`models.rs`), and MCP tool
//! schemas with `oneOf`/`anyOf`/`allOf`, which the live service fails as `resource_exhausted`
//! (its bare "Error", Cursor's `ERROR_PROVIDER_ERROR`).

use super::models::Models;
use super::script::build_error;
use crate::connect::{Code, ConnectError};
use crate::proto::agent::v1 as pb;
use crate::tool_schema;

pub(crate) struct RunChecks {
    pub(super) models: Models,
}

impl RunChecks {
    pub(crate) fn check(&self, run: &pb::AgentRunRequest) -> Result<(), ConnectError> {
        self.models.check(run)?;
        if let Some(tool) = request_context(run).into_iter().flat_map(|c| &c.tools).find(|t| refused_schema(t)) {
            tracing::debug!(tool = %tool.name, "a tool schema with oneOf/anyOf/allOf: the turn is refused");
            return Err(build_error(
                "resource_exhausted",
                "Error".into(),
                Some("ERROR_PROVIDER_ERROR".into()),
                None,
                None,
                None,
            )
            .unwrap_or_else(|_| ConnectError::new(Code::ResourceExhausted, "Error")));
        }
        Ok(())
    }
}

fn request_context(run: &pb::AgentRunRequest) -> Option<&pb::RequestContext> {
    use pb::conversation_action::Action;
    match run.action.as_ref()?.action.as_ref()? {
        Action::UserMessageAction(a) => a.request_context.as_ref(),
        Action::ResumeAction(a) => a.request_context.as_ref(),
        _ => None,
    }
}

fn refused_schema(tool: &pb::McpToolDefinition) -> bool {
    tool.input_schema.as_ref().is_some_and(|s| tool_schema::has_combinators(&tool_schema::from_proto(s)))
        || tool
            .input_schema_json
            .as_deref()
            .and_then(|text| serde_json::from_str::<serde_json::Value>(text).ok())
            .is_some_and(|json| tool_schema::has_combinators(&json))
}
