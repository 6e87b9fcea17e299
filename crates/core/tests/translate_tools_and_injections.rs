//! Golden ACP output of the newer protocol: the tool types the 2026 schema adds (the `pi_*`
//! family, conversation search, cloud-agent data, messages to the user, SCM, goals), what
//! became of a message injected into the running turn, and response comparisons.

use cursor_acp_core::proto::agent::v1 as pb;
use cursor_acp_core::protojson::from_json;
use cursor_acp_core::translate::{to_json, InjectedMessages, Translator};
use serde_json::{json, Value};

fn run(t: &mut Translator, updates: Vec<Value>) -> Vec<Value> {
    let mut out = Vec::new();
    for u in updates {
        let update: pb::InteractionUpdate =
            from_json("agent.v1.InteractionUpdate", &u).unwrap_or_else(|e| panic!("{e}: {u}"));
        out.extend(t.on_update(&update).iter().map(to_json));
    }
    out
}

/// A tool call started then completed: its two cards (the second without `toolCallId`s
/// repeated in the assertion).
fn card(call_id: &str, started: Value, completed: Value) -> (Value, Value) {
    let mut t = Translator::with_cwd(Some("/w".into()));
    let out = run(
        &mut t,
        vec![
            json!({ "toolCallStarted": { "callId": call_id, "toolCall": started } }),
            json!({ "toolCallCompleted": { "callId": call_id, "toolCall": completed } }),
        ],
    );
    assert_eq!(out.len(), 2, "{out:#?}");
    (out[0].clone(), out[1].clone())
}

#[test]
fn pi_read_bash_and_ls() {
    let args = json!({ "path": "/w/src/main.rs", "offset": 10, "limit": 5 });
    let (start, end) = card(
        "r1",
        json!({ "piReadToolCall": { "args": args } }),
        json!({ "piReadToolCall": { "args": args, "result": { "success": { "output": "fn main() {}" } } } }),
    );
    assert_eq!(
        start,
        json!({ "sessionUpdate": "tool_call", "toolCallId": "r1", "title": "Read src/main.rs (L10–L14)", "name": "pi_read",
            "kind": "read", "status": "in_progress", "locations": [{ "path": "/w/src/main.rs", "line": 10 }],
            "rawInput": { "path": "/w/src/main.rs", "offset": 10, "limit": 5 }, "_meta": { "tool_name": "pi_read" } })
    );
    assert_eq!(
        end,
        json!({ "sessionUpdate": "tool_call_update", "toolCallId": "r1", "status": "completed",
            "content": [{ "type": "content", "content": { "type": "text", "text": "```\nfn main() {}\n```" } }],
            "rawOutput": { "success": { "output": "fn main() {}" } } })
    );
    let args = json!({ "command": "cargo test", "timeout": 60.0 });
    let (start, end) = card(
        "b1",
        json!({ "piBashToolCall": { "args": args } }),
        json!({ "piBashToolCall": { "args": args, "result": { "error": { "error": "1 failed\n\nCommand exited with code 101" } } } }),
    );
    assert_eq!((start["title"].as_str(), start["kind"].as_str()), (Some("cargo test"), Some("execute")));
    assert_eq!(end["status"], "failed");
    assert_eq!(end["content"][0]["content"]["text"], "```\n1 failed\n\nCommand exited with code 101\n```");
    let (start, _) = card("l1", json!({ "piLsToolCall": { "args": {} } }), json!({ "piLsToolCall": { "args": {} } }));
    assert_eq!((start["title"].as_str(), start["kind"].as_str()), (Some("List ."), Some("search")));
}

#[test]
fn pi_edit_shows_its_patch_and_pi_write_a_diff() {
    let args = json!({ "path": "src/lib.rs", "edits": [{ "oldText": "a", "newText": "b" }] });
    let patch = "--- a/src/lib.rs\n+++ b/src/lib.rs\n@@ -1 +1 @@\n-a\n+b\n";
    let (start, end) = card(
        "e1",
        json!({ "piEditToolCall": { "args": args } }),
        json!({ "piEditToolCall": { "args": args, "result": { "success": {
            "output": "Successfully replaced text in src/lib.rs.", "diff": "-1 a\n+1 b", "patch": patch } } } }),
    );
    assert_eq!((start["title"].as_str(), start["kind"].as_str()), (Some("Edit src/lib.rs"), Some("edit")));
    assert_eq!(start["locations"], json!([{ "path": "/w/src/lib.rs" }]));
    assert_eq!(
        end["content"],
        json!([
            { "type": "content", "content": { "type": "text", "text": "Successfully replaced text in src/lib.rs." } },
            { "type": "content", "content": { "type": "text", "text": format!("```diff\n{}\n```", patch.trim_end()) } }
        ])
    );
    let args = json!({ "path": "notes/todo.md", "content": "- ship it\n" });
    let (start, end) = card(
        "w1",
        json!({ "piWriteToolCall": { "args": args } }),
        json!({ "piWriteToolCall": { "args": args, "result": { "success": { "output": "Successfully wrote 10 bytes to notes/todo.md" } } } }),
    );
    assert_eq!(start["title"], "Write notes/todo.md");
    assert_eq!(
        end["content"],
        json!([{ "type": "diff", "path": "/w/notes/todo.md", "oldText": null, "newText": "- ship it\n" }])
    );
    let (_, rejected) = card(
        "w2",
        json!({ "piWriteToolCall": { "args": args } }),
        json!({ "piWriteToolCall": { "args": args, "result": { "rejected": { "reason": "outside the workspace" } } } }),
    );
    assert_eq!(rejected["status"], "failed");
    assert_eq!(rejected["content"][0]["content"]["text"], "outside the workspace");
}

#[test]
fn pi_grep_and_find_titles_read_like_commands() {
    let grep = json!({ "pattern": "TODO", "path": "/w/src", "glob": "*.rs" });
    let (start, end) = card(
        "g1",
        json!({ "piGrepToolCall": { "args": grep } }),
        json!({ "piGrepToolCall": { "args": grep, "result": { "success": { "output": "a.rs:3: // TODO" } } } }),
    );
    assert_eq!(
        (start["title"].as_str(), start["kind"].as_str()),
        (Some("grep \"TODO\" src --include *.rs"), Some("search"))
    );
    assert_eq!(end["content"][0]["content"]["text"], "```\na.rs:3: // TODO\n```");
    let (start, _) = card(
        "f1",
        json!({ "piFindToolCall": { "args": { "pattern": "*.spec.ts", "path": "/w/web" } } }),
        json!({ "piFindToolCall": { "args": { "pattern": "*.spec.ts" } } }),
    );
    assert_eq!(start["title"], "Find *.spec.ts in web");
}

#[test]
fn search_cloud_data_messages_scm_and_goals() {
    let args = json!({ "query": "flaky login test", "toolCallId": "t" });
    let (start, end) = card(
        "s1",
        json!({ "searchConversationsToolCall": { "args": args } }),
        json!({ "searchConversationsToolCall": { "args": args, "result": { "success": { "hits": [
            { "conversationId": "c1", "title": "Fix login", "source": "CONVERSATION_SEARCH_SOURCE_LOCAL", "updatedAtMs": "5" },
            { "conversationId": "c2", "title": "Retry flaky tests" }
        ] } } } }),
    );
    assert_eq!(
        (start["title"].as_str(), start["kind"].as_str()),
        (Some("Search conversations: \"flaky login test\""), Some("search"))
    );
    assert_eq!(end["content"][0]["content"]["text"], "2 conversations\n- Fix login\n- Retry flaky tests");
    let (start, end) = card(
        "d1",
        json!({ "fetchCloudAgentDataToolCall": { "args": { "limit": 5 } } }),
        json!({ "fetchCloudAgentDataToolCall": { "args": {}, "result": { "success": { "summary": "3 agents ran today", "agentCount": 3 } } } }),
    );
    assert_eq!((start["title"].as_str(), start["kind"].as_str()), (Some("Fetch cloud agent data"), Some("fetch")));
    assert_eq!(end["content"][0]["content"]["text"], "3 agents ran today");
    let (start, end) = card(
        "u1",
        json!({ "sendToUserToolCall": { "args": { "message": "Build is green." } } }),
        json!({ "sendToUserToolCall": { "args": { "message": "Build is green." }, "result": { "success": {} } } }),
    );
    assert_eq!(start["title"], "Message to user");
    assert_eq!(start["content"][0]["content"]["text"], "Build is green.");
    assert!(start.get("kind").is_none(), "other");
    assert_eq!(end["status"], "completed");
    let (start, _) = card(
        "m1",
        json!({ "sendMessageToolCall": { "args": { "text": { "content": "deploying" } } } }),
        json!({ "sendMessageToolCall": { "args": {} } }),
    );
    assert_eq!(
        (start["title"].as_str(), start["content"][0]["content"]["text"].as_str()),
        (Some("Send message"), Some("deploying"))
    );
    let scm = json!({ "github": { "repository": { "owner": "acme", "repo": "api" } } });
    let (start, end) = card(
        "c1",
        json!({ "connectScmToolCall": { "args": scm } }),
        json!({ "connectScmToolCall": { "args": scm, "result": { "rejected": { "reason": "not available in this client" } } } }),
    );
    assert_eq!(start["title"], "Connect GitHub acme/api");
    assert_eq!(
        (end["status"].as_str(), end["content"][0]["content"]["text"].as_str()),
        (Some("failed"), Some("not available in this client"))
    );
    let (start, _) = card(
        "g1",
        json!({ "createGoalToolCall": { "args": { "objective": "Ship v2" } } }),
        json!({ "createGoalToolCall": { "args": { "objective": "Ship v2" }, "result": { "success": {} } } }),
    );
    assert_eq!((start["title"].as_str(), start["kind"].as_str()), (Some("Goal: Ship v2"), Some("think")));
    let (start, end) = card(
        "g2",
        json!({ "updateGoalToolCall": { "args": { "status": "GOAL_STATUS_COMPLETE" } } }),
        json!({ "updateGoalToolCall": { "args": { "status": "GOAL_STATUS_COMPLETE" }, "result": { "success": { "status": "GOAL_STATUS_COMPLETE" } } } }),
    );
    assert_eq!(start["title"], "Goal complete");
    assert_eq!(end["content"][0]["content"]["text"], "Goal complete");
}

#[test]
fn the_tool_is_the_oneof_member_not_the_calls_other_fields() {
    // tool_call_id (57) and started_at_ms (59) come before pi_read (61) by number.
    let call = json!({ "toolCallId": "tc", "startedAtMs": "1", "hookAdditionalContexts": [{ "hookEventName": "x", "content": "y" }],
        "piReadToolCall": { "args": { "path": "/w/a" } } });
    let (start, _) = card("x", call.clone(), call);
    assert_eq!((start["name"].as_str(), start["title"].as_str()), (Some("pi_read"), Some("Read a")));
}

#[test]
fn an_injected_user_message_appears_where_it_was_delivered() {
    let injected = InjectedMessages::default();
    let mut t = Translator::new();
    t.set_injected_messages(injected.clone());
    injected.insert("i1".into(), "also update the docs".into());
    injected.insert("i2".into(), "and the changelog".into());
    injected.insert("i3".into(), "never mind".into());
    let state = |id: &str, state: Value| json!({ "contextInjectionState": { "injectionId": id, "state": state } });
    let out = run(
        &mut t,
        vec![
            json!({ "textDelta": { "text": "Working" } }),
            state("i1", json!({ "queued": {} })),
            state("i1", json!({ "delivered": { "step": 2 } })),
            json!({ "textDelta": { "text": "Docs too." } }),
            state("i2", json!({ "queuedForNextTurn": {} })),
            state("i3", json!({ "rejected": { "reason": "the run already ended" } })),
            state("system-1", json!({ "delivered": {} })),
        ],
    );
    let kinds: Vec<&str> = out.iter().map(|u| u["sessionUpdate"].as_str().unwrap()).collect();
    assert_eq!(
        kinds,
        [
            "agent_message_chunk",
            "user_message_chunk",
            "agent_message_chunk",
            "agent_message_chunk",
            "agent_message_chunk"
        ]
    );
    assert_eq!(out[1]["content"]["text"], "also update the docs");
    assert_ne!(out[0]["messageId"], out[2]["messageId"], "the agent's text after it is a new message");
    assert_eq!(out[3]["content"]["text"], "Your message will reach the agent with the next turn.");
    assert_eq!(out[4]["content"]["text"], "Your message was not delivered: the run already ended");
    // Delivered with the next turn after all: shown then.
    let later = run(&mut t, vec![state("i2", json!({ "delivered": {} }))]);
    assert_eq!(later[0]["content"]["text"], "and the changelog");
    // With notices, the warnings are notices.
    let mut t = Translator::new();
    t.set_notices(true);
    t.set_injected_messages(injected.clone());
    injected.insert("i4".into(), "x".into());
    let out = run(&mut t, vec![state("i4", json!({ "cancelled": {} }))]);
    assert_eq!(
        out,
        [
            json!({ "sessionUpdate": "notice", "severity": "warning", "title": "Your message was not delivered: the injection was cancelled." })
        ]
    );
}

#[test]
fn a_response_comparison_is_a_card_of_the_alternate_text() {
    let mut t = Translator::new();
    let cmp = |mut event: Value| {
        event["comparisonId"] = json!("k");
        json!({ "responseComparison": event })
    };
    let out = run(
        &mut t,
        vec![
            cmp(
                json!({ "started": { "alternateModelId": "model-b", "displayOrder": "RESPONSE_COMPARISON_DISPLAY_ORDER_PARENT_FIRST" } }),
            ),
            cmp(json!({ "textDelta": { "text": "Another " } })),
            cmp(json!({ "textDelta": { "text": "answer." } })),
            cmp(json!({ "completed": {} })),
        ],
    );
    assert_eq!(
        out,
        [
            json!({ "sessionUpdate": "tool_call", "toolCallId": "comparison-k", "title": "Alternate response (model-b)",
                "name": "response_comparison", "kind": "think", "status": "in_progress" }),
            json!({ "sessionUpdate": "tool_call_update", "toolCallId": "comparison-k",
                "content": [{ "type": "content", "content": { "type": "text", "text": "Another " } }] }),
            json!({ "sessionUpdate": "tool_call_update", "toolCallId": "comparison-k",
                "content": [{ "type": "content", "content": { "type": "text", "text": "Another answer." } }] }),
            json!({ "sessionUpdate": "tool_call_update", "toolCallId": "comparison-k", "status": "completed" }),
        ]
    );
    let skipped = run(
        &mut t,
        vec![
            json!({ "responseComparison": { "comparisonId": "s", "skipped": { "reason": "RESPONSE_COMPARISON_SKIP_REASON_TIMEOUT" } } }),
        ],
    );
    assert_eq!(skipped[1]["content"][0]["content"]["text"], "Skipped: the alternate model timed out.");
    // One left open is closed by the sweep, like any card.
    run(&mut t, vec![json!({ "responseComparison": { "comparisonId": "o", "textDelta": { "text": "…" } } })]);
    let swept = t.sweep("Cancelled.");
    assert_eq!(
        swept.iter().map(to_json).filter(|u| u["toolCallId"] == "comparison-o" && u["status"] == "failed").count(),
        1
    );
}
