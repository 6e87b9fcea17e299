//! `describeExec`, `describeExecResult`, `describeInteraction`: the core's one card source
//! (`cursor_acp_core::cards`) for hosts that show the server's requests themselves (the stdio
//! agent's permission prompts and cards of its own), so they show what the translation shows.

use cursor_acp_core::cards::{self, Paths};
use napi::bindgen_prelude::*;
use serde_json::Value;

/// How cards show paths, and what a write or delete replaces.
#[napi(object, object_to_js = false)]
pub struct CardOptions {
    /// The session's folder: titles show paths relative to it, locations and diffs absolute.
    pub cwd: Option<String>,
    /// A `write` or `delete`'s file text before it (absent or `null`: a new file, or not text),
    /// shown as the old side of the card's diff.
    #[napi(ts_type = "string | null")]
    pub previous_text: Option<Either<String, Null>>,
}

fn paths(options: &Option<CardOptions>) -> Paths {
    Paths::new(options.as_ref().and_then(|o| o.cwd.as_deref()))
}

fn field<'a>(value: &'a Value, key: &str) -> Result<&'a Value> {
    value.get(key).ok_or_else(|| Error::new(Status::InvalidArg, format!("the request has no {key:?}")))
}

fn kind(value: &Value) -> Result<&str> {
    field(value, "kind")?.as_str().ok_or_else(|| Error::new(Status::InvalidArg, "\"kind\" is not a string"))
}

/// The card of an exec request (`{ kind, args }`, as the `exec` callback gets it): title, kind,
/// locations, content (a write's or delete's diff) and `rawInput`, with the tool's key as
/// `name` and `_meta.tool_name`. `null` for a request that is not a tool call
/// (`requestContext`).
#[napi(ts_args_type = "request: ExecRequest, options?: CardOptions", ts_return_type = "ToolCard | null")]
pub fn describe_exec(request: Value, options: Option<CardOptions>) -> Result<Option<Value>> {
    let empty = Value::Object(Default::default());
    let args = request.get("args").unwrap_or(&empty);
    let previous = match options.as_ref().and_then(|o| o.previous_text.as_ref()) {
        Some(Either::A(text)) => Some(text.as_str()),
        _ => None,
    };
    Ok(cards::exec_card(kind(&request)?, args, &paths(&options), previous).map(|card| card.to_json()))
}

/// How an exec request's card ends, from the result it was answered with (the result message
/// in proto3 JSON): `status` (`completed` or `failed`), the content showing what the tool did
/// (a read's range, the listing, the matches, the output), `locations`, and a small
/// `rawOutput`.
#[napi(
    ts_args_type = "request: ExecRequest, result: ExecResult, options?: CardOptions",
    ts_return_type = "ToolCardOutcome"
)]
pub fn describe_exec_result(request: Value, result: Value, options: Option<CardOptions>) -> Result<Value> {
    let empty = Value::Object(Default::default());
    let args = request.get("args").unwrap_or(&empty);
    Ok(cards::exec_outcome(kind(&request)?, args, &result, &paths(&options)).to_json())
}

/// The card of an interaction query (`{ kind, query }`, as the `interaction` callback gets it):
/// what a permission prompt or a question shows.
#[napi(ts_args_type = "query: InteractionQuery, options?: CardOptions", ts_return_type = "ToolCard")]
pub fn describe_interaction(query: Value, options: Option<CardOptions>) -> Result<Value> {
    let empty = Value::Object(Default::default());
    let message = query.get("query").unwrap_or(&empty);
    Ok(cards::interaction_card(kind(&query)?, message, &paths(&options)).to_json())
}
