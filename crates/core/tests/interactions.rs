//! Every interaction query through the embedded backend on both transports gets the response of
//! its own kind: the host's answer, or an explicit refusal with the reason (never an empty
//! message) when there is no host, the host has no answer, or its answer chooses nothing.

use std::sync::Arc;
use std::time::Duration;

#[path = "common/plain_config.rs"]
mod plain_config;
use cursor_acp_core::acp;
use cursor_acp_core::host::{ExecContext, ExecRequest, Host, InteractionRequest, NoHost};
use cursor_acp_core::session::{AgentClient, SessionOptions, Timing};
use cursor_acp_core::transport::TransportKind;
use cursor_acp_core::{CancellationToken, CoreError};
use cursor_acp_embedded::{EmbeddedBackend, RunRecord, Scenario};
use futures::future::BoxFuture;
use plain_config::plain_config;
use serde_json::{json, Value};

const KINDS: [TransportKind; 2] = [TransportKind::Sse, TransportKind::H2];

/// Every query of the schema, with real fields: (query branch, response branch).
fn queries() -> Vec<(Value, &'static str)> {
    vec![
        (json!({ "webSearchRequestQuery": { "args": { "searchTerm": "acp" } } }), "webSearchRequestResponse"),
        (
            json!({ "askQuestionInteractionQuery": { "args": { "title": "Which?" }, "toolCallId": "t" } }),
            "askQuestionInteractionResponse",
        ),
        (json!({ "switchModeRequestQuery": { "args": { "targetModeId": "plan" } } }), "switchModeRequestResponse"),
        (json!({ "createPlanRequestQuery": { "args": { "plan": "1. do" } } }), "createPlanRequestResponse"),
        (json!({ "setupVmEnvironmentArgs": { "installCommand": "npm ci" } }), "setupVmEnvironmentResult"),
        (json!({ "webFetchRequestQuery": { "args": { "url": "https://docs.rs" } } }), "webFetchRequestResponse"),
        (
            json!({ "prManagementRequestQuery": { "args": { "toolCallId": "t", "createPr": {} } } }),
            "prManagementResult",
        ),
        (json!({ "mcpAuthRequestQuery": { "args": { "serverIdentifier": "github" } } }), "mcpAuthRequestResponse"),
        (
            json!({ "generateImageRequestQuery": { "args": { "description": "a cat" }, "toolCallId": "t" } }),
            "generateImageRequestResponse",
        ),
        (json!({ "replaceEnvArgs": { "config": {} } }), "replaceEnvResult"),
        (
            json!({ "connectScmRequestQuery": { "args": { "toolCallId": "t", "github": { "repository": { "owner": "acme", "repo": "api" } } } } }),
            "connectScmRequestResponse",
        ),
    ]
}

async fn play(host: Arc<dyn Host>, kind: TransportKind) -> RunRecord {
    let mut steps: Vec<Value> = queries()
        .into_iter()
        .enumerate()
        .map(|(i, (query, _))| json!({ "type": "interaction", "id": i + 1, "query": query }))
        .collect();
    steps.push(json!({ "type": "turnEnded" }));
    let backend = EmbeddedBackend::start(Scenario::from_json(&json!({ "steps": steps })).unwrap()).await.unwrap();
    let config = plain_config(backend.url(), kind, Timing { callback: Duration::from_secs(5), ..Timing::default() });
    let client = AgentClient::new(config, host, None).unwrap();
    let turn = client
        .new_session(SessionOptions::default())
        .unwrap()
        .prompt(vec![acp::ContentBlock::Text(acp::TextContent::new("go"))])
        .unwrap();
    while tokio::time::timeout(Duration::from_secs(20), turn.next()).await.unwrap().is_some() {}
    assert_eq!(turn.result().await.unwrap().stop_reason, acp::StopReason::EndTurn);
    backend.records().remove(0)
}

fn response(record: &RunRecord, id: usize) -> Value {
    record
        .messages
        .iter()
        .find(|m| m.message["interactionResponse"]["id"] == id)
        .map(|m| m.message["interactionResponse"].clone())
        .unwrap_or_else(|| panic!("no response to query {id}"))
}

/// The refusal a response holds, wherever its type keeps it.
fn refusal(body: &Value) -> Option<String> {
    let body = body.get("result").unwrap_or(body);
    ["rejected", "error", "failure", "failed"].iter().find_map(|branch| {
        let b = body.get(branch)?;
        ["reason", "error", "errorMessage"].iter().find_map(|k| b.get(k)?.as_str().map(str::to_string))
    })
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn without_a_host_every_query_is_refused_in_its_own_response_type() {
    for kind in KINDS {
        let r = play(Arc::new(NoHost), kind).await;
        for (i, (_, branch)) in queries().into_iter().enumerate() {
            let answer = response(&r, i + 1);
            let body = &answer[branch];
            assert!(body.is_object(), "{kind:?} {branch}: {answer}");
            if branch == "setupVmEnvironmentResult" {
                // Its type offers only `success`: the only honest answer is one without it.
                assert_eq!(body, &json!({}));
                continue;
            }
            assert_eq!(refusal(body).as_deref(), Some("This client does not handle this request."), "{branch}: {body}");
        }
    }
}

/// Answers web searches with `{}` (chooses nothing) and connect_scm with `failed`.
struct Careless;

impl Host for Careless {
    fn exec(&self, _: ExecRequest, _: ExecContext) -> BoxFuture<'static, Result<Option<Value>, CoreError>> {
        Box::pin(async { Ok(None) })
    }

    fn interaction(
        &self,
        query: InteractionRequest,
        _: CancellationToken,
    ) -> BoxFuture<'static, Result<Option<Value>, CoreError>> {
        Box::pin(async move {
            Ok(match query.kind.as_str() {
                "webSearch" => Some(json!({})),
                "connectScm" => {
                    assert_eq!(query.query["args"]["github"]["repository"]["repo"], "api");
                    Some(json!({ "failed": { "error": "no GitHub app here" } }))
                }
                "generateImage" => Some(json!({ "approved": { "description": "a cat" } })),
                _ => None,
            })
        })
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_hosts_answer_is_sent_unless_it_chooses_nothing() {
    for kind in KINDS {
        let r = play(Arc::new(Careless), kind).await;
        let search = response(&r, 1);
        let why = refusal(&search["webSearchRequestResponse"]).unwrap();
        assert!(why.contains("sets none of its branches"), "{search}");
        assert_eq!(
            response(&r, 11)["connectScmRequestResponse"],
            json!({ "failed": { "error": "no GitHub app here" } })
        );
        assert_eq!(response(&r, 9)["generateImageRequestResponse"], json!({ "approved": { "description": "a cat" } }));
        let env = response(&r, 10);
        assert_eq!(refusal(&env["replaceEnvResult"]).as_deref(), Some("This client does not handle this request."));
    }
}
