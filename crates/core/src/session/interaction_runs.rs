//! The server's interaction queries, answered by the core with what the host decides: approvals
//! (web search, web fetch, image generation) from the host's permission policy, a mode switch or
//! a plan from a choice the host's user makes, questions from the host's form or conversation.
//! Which kind goes where is one exhaustive table, [`route`]; the answers' shapes are the
//! schema's, written here once. Each question is about a card the client already shows: the
//! server's tool call, or one the core opens and settles.

use agent_client_protocol_schema::v1 as acp;
use serde_json::{json, Value};
use tokio_util::sync::CancellationToken;

use super::inner::{QuestionCard as Shown, SessionInner, ANNOUNCE_WAIT};
use super::tool_runs::{CANCELLED_BY_USER, REJECTED_BY_USER};
use crate::cards::{self, Card, Paths};
use crate::error::CoreError;
use crate::host::{
    Answers, ChoiceOption, ChoiceRequest, InteractionRequest, Permission, PermissionRequest, QuestionsRequest,
};
use crate::kinds::InteractionKind;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Route {
    /// The permission policy says whether it may: the rule it is kept under.
    Approval(&'static str),
    /// A choice between going on and staying.
    Choice,
    Questions,
    /// Nothing this client can do (a VM, a PR, an MCP server's sign-in…): the explicit refusal.
    Refused,
}

fn route(kind: InteractionKind) -> Route {
    use InteractionKind as K;
    match kind {
        K::WebSearch => Route::Approval("web_search"),
        K::WebFetch => Route::Approval("fetch"),
        K::GenerateImage => Route::Approval("generate_image"),
        K::SwitchMode | K::CreatePlan => Route::Choice,
        K::AskQuestion => Route::Questions,
        K::SetupVmEnvironment | K::PrManagement | K::McpAuth | K::ReplaceEnv | K::ConnectScm => Route::Refused,
    }
}

/// The answer to `query` (its response message in proto3 JSON), or `None` for the explicit
/// refusal: a kind this client cannot do, or a host that asks nothing of the kind.
pub(super) async fn run(
    session: &SessionInner,
    query: &InteractionRequest,
    cancel: &CancellationToken,
) -> Result<Option<Value>, CoreError> {
    let Some(kind) = InteractionKind::from_name(&query.kind) else { return Ok(None) };
    let asking = Asking { session, query, kind, cancel };
    match route(kind) {
        Route::Approval(rule) => asking.approval(rule).await,
        Route::Choice => asking.choice().await,
        Route::Questions => asking.questions().await,
        Route::Refused => Ok(None),
    }
}

struct Asking<'a> {
    session: &'a SessionInner,
    query: &'a InteractionRequest,
    kind: InteractionKind,
    cancel: &'a CancellationToken,
}

impl Asking<'_> {
    fn args(&self) -> &Value {
        self.query.query.get("args").unwrap_or(&Value::Null)
    }

    fn text(&self, at: &Value, key: &str) -> String {
        at.get(key).and_then(Value::as_str).unwrap_or_default().to_string()
    }

    /// The server's tool call the query is about, if it names one.
    fn server_call(&self) -> String {
        let at_args = self.text(self.args(), "toolCallId");
        if at_args.is_empty() {
            self.text(&self.query.query, "toolCallId")
        } else {
            at_args
        }
    }

    fn card(&self) -> Card {
        let paths = Paths::new(self.session.lock().cwd.as_deref());
        cards::interaction_card(&self.query.kind, &self.query.query, &paths)
    }

    /// The card the client shows for this query (see `SessionInner::card_for_question`).
    async fn show(&self, card: &Card) -> Option<Shown> {
        let own_id = format!("interaction-{}-{}", self.query.kind, self.query.id);
        self.session.card_for_question(&self.server_call(), own_id, card).await
    }

    fn settle(&self, shown: &Shown, status: acp::ToolCallStatus, text: Option<&str>) {
        let mut fields = acp::ToolCallUpdateFields::new().status(status);
        if let Some(text) = text {
            fields = fields.content(vec![cards::text_content(text)]);
        }
        self.session.settle_card(acp::ToolCallUpdate::new(shown.local.clone(), fields));
    }

    /// Web search, web fetch, image generation: may it? The policy answers, or asks its user.
    async fn approval(&self, rule: &'static str) -> Result<Option<Value>, CoreError> {
        let host = &self.session.host;
        if !host.has_permission_policy() {
            return Ok(None);
        }
        if self.kind == InteractionKind::WebFetch
            && self.query.query.get("skipApproval").and_then(Value::as_bool) == Some(true)
        {
            return Ok(Some(json!({ "approved": {} })));
        }
        let card = self.card();
        let rejected = |reason: &str| json!({ "rejected": { "reason": reason } });
        let Some(shown) = self.show(&card).await else { return Ok(Some(rejected(CANCELLED_BY_USER))) };
        let url = self.text(self.args(), "url");
        let question = PermissionRequest {
            tool_call: cards::acp_json(&card.tool_call(shown.id.clone(), acp::ToolCallStatus::Pending)),
            kind: rule.to_string(),
            command: None,
            programs: Vec::new(),
            paths: Vec::new(),
            url: (!url.is_empty()).then_some(url),
            mcp: None,
            may_ask: true,
        };
        match host.permission(question, self.cancel.clone()).await? {
            Permission::Allow => {
                if shown.own {
                    self.settle(&shown, acp::ToolCallStatus::Completed, None);
                }
                Ok(Some(match self.kind {
                    InteractionKind::GenerateImage => {
                        json!({ "approved": { "description": self.text(self.args(), "description") } })
                    }
                    _ => json!({ "approved": {} }),
                }))
            }
            Permission::Reject(reason) => {
                self.settle(&shown, acp::ToolCallStatus::Failed, Some("Rejected by the user"));
                Ok(Some(rejected(reason.as_deref().unwrap_or(REJECTED_BY_USER))))
            }
            Permission::Cancelled => {
                if shown.own {
                    self.settle(&shown, acp::ToolCallStatus::Failed, Some("Cancelled by the user."));
                }
                Ok(Some(rejected(CANCELLED_BY_USER)))
            }
        }
    }

    /// A mode switch or a plan: go on, or stay. Accepted, the session's mode changes (a plan is
    /// implemented in agent mode) and the host's picker follows.
    async fn choice(&self) -> Result<Option<Value>, CoreError> {
        let plan = self.kind == InteractionKind::CreatePlan;
        let current = self.session.lock().mode.clone().unwrap_or_else(|| "agent".into());
        let target = if plan { "agent".to_string() } else { self.text(self.args(), "targetModeId") };
        let refused = |reason: &str| {
            if plan {
                json!({ "result": { "error": { "error": reason } } })
            } else {
                json!({ "rejected": { "reason": reason } })
            }
        };
        if !plan && crate::prompt::mode_value(&target).is_err() {
            return Ok(Some(refused(&format!("unknown mode {target}"))));
        }
        let option = |id: &str, name: String, kind: &str| ChoiceOption { id: id.into(), name, kind: kind.into() };
        let options = if plan {
            vec![
                option("implement", "Yes, implement this plan".into(), "allow_once"),
                option("keep-planning", "No, keep planning".into(), "reject_once"),
            ]
        } else {
            vec![
                option("switch", format!("Yes, switch to {target}"), "allow_once"),
                option("stay", format!("No, stay in {current}"), "reject_once"),
            ]
        };
        let card = self.card();
        let Some(shown) = self.show(&card).await else { return Ok(Some(refused(CANCELLED_BY_USER))) };
        let request = ChoiceRequest {
            tool_call: cards::acp_json(&card.tool_call(shown.id.clone(), acp::ToolCallStatus::Pending)),
            options,
        };
        let Some(chosen) = self.session.host.choose(request, self.cancel.clone()).await? else {
            // The host asks nothing of the kind: the card goes, and the query is refused.
            if shown.own {
                self.settle(&shown, acp::ToolCallStatus::Failed, None);
            }
            return Ok(None);
        };
        let accepted = chosen == if plan { "implement" } else { "switch" };
        if shown.own {
            let status = if accepted { acp::ToolCallStatus::Completed } else { acp::ToolCallStatus::Failed };
            self.settle(&shown, status, None);
        }
        if !accepted {
            let reason = match (chosen.is_empty() || self.cancel.is_cancelled(), plan) {
                (true, _) => CANCELLED_BY_USER,
                (false, true) => "The user chose to keep planning",
                (false, false) => "The user chose to stay in the current mode",
            };
            return Ok(Some(refused(reason)));
        }
        if target != current {
            // The host's picker first: a mode it refuses (a mode of the schema it does not
            // offer) is an error answer, and the session's mode stays as it was.
            self.session.host.mode_switched(target.clone()).await?;
            self.session.lock().mode = Some(target);
        }
        Ok(Some(if plan { json!({ "result": { "success": {} } }) } else { json!({ "approved": {} }) }))
    }

    /// The server's questions: the host's form answers them, or it shows them in the
    /// conversation for the next prompt.
    async fn questions(&self) -> Result<Option<Value>, CoreError> {
        let rejected = |reason: &str| json!({ "result": { "rejected": { "reason": reason } } });
        let server_call = self.server_call();
        let tool_call_id =
            if server_call.is_empty() { None } else { self.session.card_announced(&server_call, ANNOUNCE_WAIT).await };
        if self.cancel.is_cancelled() {
            return Ok(Some(rejected(CANCELLED_BY_USER)));
        }
        let args = self.args();
        let request = QuestionsRequest {
            tool_call_id,
            title: self.text(args, "title"),
            questions: args.get("questions").cloned().unwrap_or_else(|| json!([])),
        };
        let Some(answers) = self.session.host.ask_questions(request, self.cancel.clone()).await? else {
            return Ok(None);
        };
        Ok(Some(match answers {
            Answers::Answered(answers) => {
                let answers: Vec<Value> = answers
                    .into_iter()
                    .map(|(question, options)| json!({ "questionId": question, "selectedOptionIds": options }))
                    .collect();
                json!({ "result": { "success": { "answers": answers } } })
            }
            Answers::Declined => rejected("The user declined to answer"),
            Answers::Cancelled => rejected(CANCELLED_BY_USER),
            Answers::InConversation => {
                rejected("This editor cannot show the questions; the user will answer in the next message")
            }
        }))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_interaction_kind_has_a_route_and_the_answered_ones_have_a_card() {
        let paths = Paths::new(Some("/w"));
        for &kind in InteractionKind::ALL {
            if route(kind) != Route::Refused {
                let card = cards::interaction_card(kind.name(), &json!({ "args": {} }), &paths);
                assert!(!card.title.is_empty(), "{}", kind.name());
            }
        }
    }
}
