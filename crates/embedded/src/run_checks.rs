//! What the embedded backend checks in a run request before it plays a turn, as the real
//! service refuses such requests at turn start: the model fields (`models.rs`), and MCP tool
//! schemas with `oneOf`/`anyOf`/`allOf`, which the live service fails as `resource_exhausted`
//! (its bare "Error", Cursor's `ERROR_PROVIDER_ERROR`), and the skills: every skill of the
//! request context and every skill a user message selects names its `SKILL.md` and carries
//! its text, and a selected skill is one the request context offers.

use super::cursor_error::build_error;
use super::models::Models;
use cursor_acp_core::connect::{Code, ConnectError};
use cursor_acp_core::proto::agent::v1 as pb;
use cursor_acp_core::tool_schema;

pub(crate) struct RunChecks {
    pub(super) models: Models,
}

impl RunChecks {
    pub(crate) fn check(&self, run: &pb::AgentRunRequest) -> Result<(), ConnectError> {
        self.models.check(run)?;
        check_skills(run)?;
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

/// The skills the request context offers and those the user message selects.
fn check_skills(run: &pb::AgentRunRequest) -> Result<(), ConnectError> {
    use pb::conversation_action::Action;
    let invalid = |message: String| Err(ConnectError::new(Code::InvalidArgument, message));
    let offered: Vec<&pb::AgentSkill> =
        request_context(run).map(|c| c.agent_skills.iter().collect()).unwrap_or_default();
    let selected: Vec<&pb::AgentSkill> = match run.action.as_ref().and_then(|a| a.action.as_ref()) {
        Some(Action::UserMessageAction(a)) => a
            .user_message
            .as_ref()
            .and_then(|m| m.selected_context.as_ref())
            .map(|c| c.selected_skills.iter().collect())
            .unwrap_or_default(),
        _ => Vec::new(),
    };
    for (what, skill) in
        offered.iter().map(|s| ("agent_skills", *s)).chain(selected.iter().map(|s| ("selected_skills", *s)))
    {
        if skill.full_path.is_empty() {
            return invalid(format!("{what}: a skill without full_path"));
        }
        if skill.content.trim().is_empty() {
            return invalid(format!("{what}: the skill {} has no content", skill.full_path));
        }
    }
    if let Some(unknown) = selected.iter().find(|s| !offered.iter().any(|o| o.full_path == s.full_path)) {
        return invalid(format!(
            "selected_skills: {} is not among the request context's agent_skills",
            unknown.full_path
        ));
    }
    Ok(())
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

#[cfg(test)]
mod tests {
    use super::*;

    fn run(offered: Vec<pb::AgentSkill>, selected: Vec<pb::AgentSkill>) -> pb::AgentRunRequest {
        use pb::conversation_action::Action;
        let message = pb::UserMessage {
            selected_context: Some(pb::SelectedContext { selected_skills: selected, ..Default::default() }),
            ..Default::default()
        };
        let action = pb::UserMessageAction {
            user_message: Some(message),
            request_context: Some(pb::RequestContext { agent_skills: offered, ..Default::default() }),
            ..Default::default()
        };
        pb::AgentRunRequest {
            action: Some(pb::ConversationAction {
                action: Some(Action::UserMessageAction(action)),
                ..Default::default()
            }),
            ..Default::default()
        }
    }

    fn skill(path: &str, content: &str) -> pb::AgentSkill {
        pb::AgentSkill { full_path: path.into(), content: content.into(), ..Default::default() }
    }

    #[test]
    fn skills_name_their_file_carry_their_text_and_selected_ones_are_offered() {
        let review = skill("/w/.cursor/skills/review/SKILL.md", "---\nname: review\n---\nReview it.");
        assert!(check_skills(&run(vec![review.clone()], vec![review.clone()])).is_ok());
        assert!(check_skills(&run(vec![review.clone()], vec![])).is_ok());
        let err = |r: pb::AgentRunRequest| check_skills(&r).unwrap_err().message;
        assert!(err(run(vec![], vec![review.clone()])).contains("not among the request context's agent_skills"));
        assert!(err(run(vec![skill("", "x")], vec![])).contains("without full_path"));
        assert!(err(run(vec![skill("/w/SKILL.md", " ")], vec![])).contains("has no content"));
    }
}
