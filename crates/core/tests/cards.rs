//! Golden tests of the one card source: exec requests and interaction queries described as the
//! cards a host shows (the stdio agent's permission prompts and cards of its own), and the
//! outcome of an exec from the result the host answered with — the same titles, kinds and
//! content the translation gives the server's tool calls.

use cursor_acp_core::cards::{exec_card, exec_outcome, interaction_card, tool_card, Paths};
use serde_json::{json, Value};

fn paths() -> Paths {
    Paths::new(Some("/w"))
}

fn exec(kind: &str, args: Value, previous: Option<&str>) -> Value {
    exec_card(kind, &args, &paths(), previous).expect("a tool call").to_json()
}

#[test]
fn exec_requests_get_the_cards_of_their_tools() {
    assert_eq!(
        exec("write", json!({ "path": "/w/out/b.txt", "fileText": "new\n", "toolCallId": "c2" }), None),
        json!({
            "title": "Write out/b.txt", "name": "edit", "kind": "edit",
            "content": [{ "type": "diff", "path": "/w/out/b.txt", "oldText": null, "newText": "new\n" }],
            "locations": [{ "path": "/w/out/b.txt" }],
            "rawInput": { "path": "/w/out/b.txt" },
            "_meta": { "tool_name": "edit" },
        })
    );
    assert_eq!(
        exec("write", json!({ "path": "a.txt", "fileText": "b\n" }), Some("a\n"))["content"][0]["oldText"],
        "a\n",
        "an existing file's text is the diff's old side"
    );
    assert_eq!(
        exec("write", json!({ "path": "logo.png", "fileBytes": "iVBORw0KGgo=" }), None)["content"],
        Value::Null,
        "no diff of bytes"
    );
    assert_eq!(
        exec("delete", json!({ "path": "/w/keep.txt" }), Some("precious\n")),
        json!({
            "title": "Delete keep.txt", "name": "delete", "kind": "delete",
            "content": [{ "type": "diff", "path": "/w/keep.txt", "oldText": "precious\n", "newText": "" }],
            "locations": [{ "path": "/w/keep.txt" }],
            "rawInput": { "path": "/w/keep.txt" },
            "_meta": { "tool_name": "delete" },
        })
    );
    assert_eq!(
        exec("shellStream", json!({ "command": "echo one; echo two >&2", "workingDirectory": "crates" }), None),
        json!({
            "title": "echo one; echo two >&2", "name": "shell", "kind": "execute",
            "rawInput": { "command": "echo one; echo two >&2", "cwd": "/w/crates" },
            "_meta": { "tool_name": "shell" },
        })
    );
    assert_eq!(exec("shell", json!({ "command": "ls" }), None)["rawInput"], json!({ "command": "ls", "cwd": "/w" }));
    assert_eq!(
        exec("backgroundShellSpawn", json!({ "command": "npm run dev" }), None)["rawInput"],
        json!({ "command": "npm run dev", "cwd": "/w", "background": true })
    );
    let read = exec("read", json!({ "path": "/w/src/lib.rs", "offset": 10, "limit": 5 }), None);
    assert_eq!((read["title"].as_str(), read["kind"].as_str()), (Some("Read src/lib.rs (L10–L14)"), Some("read")));
    assert_eq!(read["locations"], json!([{ "path": "/w/src/lib.rs", "line": 10 }]));
    assert_eq!(exec("ls", json!({ "path": "/w/src" }), None)["title"], "List src");
    assert_eq!(
        exec("grep", json!({ "pattern": "TODO", "glob": "*.rs" }), None)["title"],
        "grep \"TODO\" --include *.rs"
    );
    let fetch = exec("fetch", json!({ "url": "https://example.com", "toolCallId": "f" }), None);
    assert_eq!(
        (fetch["title"].as_str(), fetch["kind"].as_str(), &fetch["rawInput"]),
        (Some("Fetch https://example.com"), Some("fetch"), &json!({ "url": "https://example.com" }))
    );
    let mcp = exec("mcp", json!({ "providerIdentifier": "calc", "toolName": "add", "args": { "a": 2 } }), None);
    assert_eq!((mcp["title"].as_str(), &mcp["rawInput"]), (Some("calc: add"), &json!({ "a": 2 })));
    assert_eq!(exec("writeShellStdin", json!({ "shellId": 3, "chars": "y\n" }), None)["title"], "Write to shell 3");
    assert!(exec_card("requestContext", &json!({}), &paths(), None).is_none(), "not a tool call");
}

#[test]
fn an_exec_card_and_the_servers_card_for_the_same_call_agree() {
    let args = json!({ "path": "/w/src/lib.rs", "offset": 3 });
    let from_exec = exec_card("read", &args, &paths(), None).unwrap();
    let from_tool = tool_card("read", &args, &paths());
    assert_eq!(
        (from_exec.title, from_exec.kind, from_exec.locations),
        (from_tool.title, from_tool.kind, from_tool.locations)
    );
}

#[test]
fn exec_results_settle_the_card_with_what_the_tool_did() {
    let outcome = |kind: &str, args: Value, result: Value| exec_outcome(kind, &args, &result, &paths()).to_json();
    let read = outcome(
        "read",
        json!({ "path": "/w/a.txt", "offset": 2, "limit": 2 }),
        json!({ "success": { "path": "/w/a.txt", "content": "two\nthree\n", "totalLines": 9, "fileSize": "40" } }),
    );
    assert_eq!(
        read,
        json!({
            "status": "completed",
            "content": [{ "type": "content", "content": { "type": "text", "text": "Lines 2–3 of 9" } }],
            "locations": [{ "path": "/w/a.txt", "line": 2 }],
            "rawOutput": { "success": { "path": "/w/a.txt", "content": "two\nthree\n", "totalLines": 9, "fileSize": "40" } },
        })
    );
    let shell = outcome(
        "shellStream",
        json!({ "command": "make" }),
        json!({ "success": { "exitCode": 2, "stdout": "building\n", "stderr": "error: nope\n" } }),
    );
    assert_eq!(shell["status"], "failed");
    assert_eq!(shell["content"][0]["content"]["text"], "```\nbuilding\nerror: nope\n```");
    assert_eq!(shell["content"][1]["content"]["text"], "Exited with code 2");
    let background =
        outcome("backgroundShellSpawn", json!({ "command": "npm run dev" }), json!({ "success": { "shellId": 4 } }));
    assert_eq!(background["content"][0]["content"]["text"], "Started in the background (shell 4)");
    let write =
        outcome("write", json!({ "path": "/w/b" }), json!({ "success": { "path": "/w/b", "linesCreated": 1 } }));
    assert_eq!(write["status"], "completed");
    assert!(write.get("content").is_none(), "the card keeps the diff it asked about");
    let rejected = outcome(
        "write",
        json!({ "path": "/w/b" }),
        json!({ "rejected": { "path": "/w/b", "reason": "User rejected" } }),
    );
    assert_eq!(
        (rejected["status"].as_str(), rejected["content"][0]["content"]["text"].as_str()),
        (Some("failed"), Some("User rejected"))
    );
    let fetched = outcome(
        "fetch",
        json!({ "url": "https://a.b" }),
        json!({ "success": { "url": "https://a.b", "content": "<html>", "statusCode": 200, "contentType": "text/html" } }),
    );
    assert_eq!(fetched["content"][0]["content"]["text"], "HTTP 200 · text/html · 6 characters");
    let big = "x".repeat(1 << 20);
    let read = outcome(
        "read",
        json!({ "path": "/w/big" }),
        json!({ "success": { "path": "/w/big", "content": big, "totalLines": 1 } }),
    );
    assert!(serde_json::to_string(&read["rawOutput"]).unwrap().len() < 400, "never the whole file");
}

#[test]
fn interaction_queries_get_the_cards_of_their_tools() {
    let card = |kind: &str, query: Value| interaction_card(kind, &query, &paths()).to_json();
    assert_eq!(
        card("webSearch", json!({ "args": { "searchTerm": "napi-rs", "toolCallId": "w" } })),
        json!({ "title": "Search web: \"napi-rs\"", "name": "web_search", "kind": "fetch",
                "rawInput": { "searchTerm": "napi-rs", "toolCallId": "w" }, "_meta": { "tool_name": "web_search" } })
    );
    assert_eq!(card("webFetch", json!({ "args": { "url": "https://a.b" } }))["title"], "Fetch https://a.b");
    assert_eq!(
        card("switchMode", json!({ "args": { "targetModeId": "plan", "explanation": "Planning first" } })),
        json!({ "title": "Switch to plan mode", "name": "switch_mode", "kind": "switch_mode",
                "content": [{ "type": "content", "content": { "type": "text", "text": "Planning first" } }],
                "rawInput": { "targetModeId": "plan", "explanation": "Planning first" }, "_meta": { "tool_name": "switch_mode" } })
    );
    let plan = card(
        "createPlan",
        json!({ "toolCallId": "p1", "args": { "name": "Refactor", "plan": "1. split", "overview": "o" } }),
    );
    assert_eq!((plan["title"].as_str(), plan["kind"].as_str()), (Some("Plan: Refactor"), Some("think")));
    assert_eq!(plan["content"][0]["content"]["text"], "1. split");
    assert_eq!(plan["rawInput"], json!({ "name": "Refactor", "overview": "o" }));
    let question =
        card("askQuestion", json!({ "args": { "questions": [{ "id": "db", "prompt": "Which database?" }] } }));
    assert_eq!(question["title"], "Which database?");
    assert_eq!(card("askQuestion", json!({ "args": { "title": "Setup" } }))["title"], "Setup");
    assert_eq!(card("prManagement", json!({}))["title"], "Pr management");
}
