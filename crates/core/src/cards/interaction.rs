//! Interaction queries as cards: what a permission prompt (web search, fetch, mode switch,
//! plan) or a question shows, the same card the server's tool call for it gets.

use serde_json::{json, Value};

use super::paths::Paths;
use super::render::{camel_to_snake, str_arg, text_content};
use super::tools::tool_card;
use super::Card;

/// The card of an interaction query: `kind` as the host gets it (`webSearch`, `switchMode`,
/// …), `query` its message in proto3 JSON (`WebSearchRequestQuery`, …).
pub fn interaction_card(kind: &str, query: &Value, paths: &Paths) -> Card {
    let args = query.get("args").cloned().unwrap_or_else(|| json!({}));
    match kind {
        "webSearch" => tool_card("web_search", &args, paths),
        "webFetch" => tool_card("web_fetch", &args, paths),
        "switchMode" => {
            let mut card = tool_card("switch_mode", &args, paths);
            card.content = str_arg(&args, "explanation").map(|e| vec![text_content(e)]).unwrap_or_default();
            card
        }
        "createPlan" => {
            let mut card = tool_card("create_plan", &args, paths);
            card.raw_input = json!({ "name": args.get("name"), "overview": args.get("overview") });
            card
        }
        "askQuestion" => {
            let mut card = tool_card("ask_question", &args, paths);
            let first_prompt = args.pointer("/questions/0/prompt").and_then(|p| p.as_str()).filter(|p| !p.is_empty());
            card.title = str_arg(&args, "title").or(first_prompt).unwrap_or("Question").to_string();
            card
        }
        // What the server would make; the user decides whether it may.
        "generateImage" => tool_card("generate_image", &args, paths),
        other => {
            let mut card = tool_card(&camel_to_snake(other), &args, paths);
            card.raw_input = query.clone();
            card
        }
    }
}
