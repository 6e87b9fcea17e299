//! Golden tests of the Cursor → ACP translation: scenario-built message sequences in, the exact
//! ACP JSON out (message ids normalized to m1, m2, … in order of appearance).

use cursor_acp_core::proto::agent::v1 as pb;
use cursor_acp_core::protojson::from_json;
use cursor_acp_core::translate::{notification_lines, to_json, Translator};
use serde_json::{json, Value};

fn upd(v: Value) -> pb::InteractionUpdate {
    from_json("agent.v1.InteractionUpdate", &v).unwrap_or_else(|e| panic!("{e}: {v}"))
}

/// Runs the updates through one translator and returns normalized ACP JSON.
fn run(t: &mut Translator, updates: Vec<Value>) -> Vec<Value> {
    let mut out = Vec::new();
    for u in updates {
        for a in t.on_update(&upd(u)) {
            out.push(to_json(&a));
        }
    }
    normalize(out)
}

fn normalize(mut out: Vec<Value>) -> Vec<Value> {
    let mut ids: Vec<String> = Vec::new();
    for u in &mut out {
        if let Some(id) = u.get("messageId").and_then(|v| v.as_str()).map(str::to_string) {
            let n = ids.iter().position(|x| *x == id).unwrap_or_else(|| {
                ids.push(id.clone());
                ids.len() - 1
            });
            u["messageId"] = json!(format!("m{}", n + 1));
        }
    }
    out
}

fn text(t: &str) -> Value {
    json!({ "textDelta": { "text": t } })
}

fn started(id: &str, call: Value) -> Value {
    json!({ "toolCallStarted": { "callId": id, "toolCall": call } })
}

fn completed(id: &str, call: Value) -> Value {
    json!({ "toolCallCompleted": { "callId": id, "toolCall": call } })
}

#[test]
fn text_and_thinking_segments_get_message_ids_rotated_at_boundaries() {
    let mut t = Translator::new();
    let out = run(
        &mut t,
        vec![
            json!({ "thinkingDelta": { "text": "a" } }),
            json!({ "thinkingDelta": { "text": "b" } }),
            json!({ "thinkingCompleted": { "thinkingDurationMs": 5 } }),
            text("x"),
            text("y"),
            json!({ "stepStarted": {} }),
            text("z"),
            json!({ "heartbeat": {} }),
            json!({ "tokenDelta": { "tokens": 7 } }),
        ],
    );
    let ids: Vec<&str> = out.iter().map(|u| u["messageId"].as_str().unwrap()).collect();
    assert_eq!(ids, ["m1", "m1", "m2", "m2", "m3"]);
    assert_eq!(
        out[0],
        json!({ "sessionUpdate": "agent_thought_chunk", "content": { "type": "text", "text": "a" }, "messageId": "m1" })
    );
    assert_eq!(out[4]["sessionUpdate"], "agent_message_chunk");
}

#[test]
fn shell_success_streams_output_and_completes() {
    let mut t = Translator::with_cwd(Some("/w".into()));
    let out = run(
        &mut t,
        vec![
            started("s1", json!({ "shellToolCall": { "args": { "command": "make test", "workingDirectory": "/w" } } })),
            json!({ "toolCallDelta": { "callId": "s1", "toolCallDelta": { "shellToolCallDelta": { "stdout": { "content": "ok 1\n" } } } } }),
            completed(
                "s1",
                json!({ "shellToolCall": { "args": { "command": "make test" },
                "result": { "success": { "exitCode": 0, "stdout": "ok 1\nok 2\n" } } } }),
            ),
        ],
    );
    assert_eq!(
        out[0],
        json!({ "sessionUpdate": "tool_call", "toolCallId": "s1", "title": "make test", "name": "shell", "kind": "execute",
                "status": "in_progress", "rawInput": { "command": "make test", "workingDirectory": "/w" },
                "_meta": { "tool_name": "shell" } })
    );
    assert_eq!(out[1]["content"][0]["content"]["text"], "```\nok 1\n```");
    assert_eq!(out[2]["status"], "completed");
    assert_eq!(out[2]["content"][0]["content"]["text"], "```\nok 1\nok 2\n```");
    assert_eq!(out[2]["rawOutput"]["success"]["stdout"], "ok 1\nok 2\n");
}

#[test]
fn shell_non_zero_exit_and_failures_are_failed_with_a_reason() {
    let mut t = Translator::new();
    let out = run(
        &mut t,
        vec![
            completed(
                "s2",
                json!({ "shellToolCall": { "args": { "command": "false" }, "result": { "success": { "exitCode": 2 } } } }),
            ),
            completed(
                "r1",
                json!({ "readToolCall": { "args": { "path": "/nope" }, "result": { "error": { "errorMessage": "ENOENT: no such file" } } } }),
            ),
            completed("e1", json!({ "editToolCall": { "args": { "path": "/w/a" }, "result": { "rejected": {} } } })),
        ],
    );
    // Each unannounced completion is announced first.
    assert_eq!(
        out.iter().map(|u| u["sessionUpdate"].as_str().unwrap()).collect::<Vec<_>>(),
        ["tool_call", "tool_call_update", "tool_call", "tool_call_update", "tool_call", "tool_call_update"]
    );
    assert_eq!(out[1]["status"], "failed");
    assert_eq!(out[1]["content"][0]["content"]["text"], "Exited with code 2");
    assert_eq!(out[3]["status"], "failed");
    assert_eq!(out[3]["content"][0]["content"]["text"], "ENOENT: no such file");
    assert_eq!(out[5]["content"][0]["content"]["text"], "Rejected");
}

#[test]
fn file_tools_have_relative_titles_absolute_locations_and_diffs() {
    let mut t = Translator::with_cwd(Some("/w/".into()));
    let out = run(
        &mut t,
        vec![
            started("r", json!({ "readToolCall": { "args": { "path": "/w/src/lib.rs", "offset": 10, "limit": 5 } } })),
            started("e", json!({ "editToolCall": { "args": { "path": "src/new.rs" } } })),
            completed(
                "e",
                json!({ "editToolCall": { "args": { "path": "src/new.rs" },
                "result": { "success": { "path": "/w/src/new.rs", "afterFullFileContent": "fn x() {}\n" } } } }),
            ),
            completed(
                "d",
                json!({ "deleteToolCall": { "args": { "path": "/w/old.txt" },
                "result": { "success": { "path": "/w/old.txt", "prevContent": "bye" } } } }),
            ),
            started(
                "g",
                json!({ "grepToolCall": { "args": { "pattern": "TODO", "path": "/w/src", "glob": "*.rs" } } }),
            ),
            completed(
                "f",
                json!({ "globToolCall": { "args": { "globPattern": "**/*.md", "targetDirectory": "/w/docs" },
                "result": { "success": { "files": ["/w/docs/a.md"], "totalFiles": 1 } } } }),
            ),
            started("l", json!({ "lsToolCall": { "args": { "path": "/w" } } })),
        ],
    );
    assert_eq!(out[0]["title"], "Read src/lib.rs (L10–L14)");
    assert_eq!(out[0]["kind"], "read");
    assert_eq!(out[0]["locations"], json!([{ "path": "/w/src/lib.rs", "line": 10 }]));
    assert_eq!(out[1]["title"], "Edit src/new.rs");
    assert_eq!(out[1]["locations"], json!([{ "path": "/w/src/new.rs" }]));
    assert_eq!(
        out[2]["content"],
        json!([{ "type": "diff", "path": "/w/src/new.rs", "oldText": null, "newText": "fn x() {}\n" }])
    );
    assert_eq!(out[3]["title"], "Delete old.txt");
    assert_eq!(out[3]["kind"], "delete");
    assert_eq!(out[4]["content"], json!([{ "type": "diff", "path": "/w/old.txt", "oldText": "bye", "newText": "" }]));
    assert_eq!(out[5]["title"], "grep \"TODO\" src --include *.rs");
    assert_eq!(out[5]["kind"], "search");
    assert_eq!(out[6]["title"], "Find **/*.md in docs");
    assert_eq!(out[7]["content"][0]["content"]["text"], "1 file");
    assert_eq!(out[8]["title"], "List .");
}

#[test]
fn other_tools_map_kind_and_title() {
    let mut t = Translator::new();
    let cases = [
        (
            json!({ "mcpToolCall": { "args": { "providerIdentifier": "github", "toolName": "create_issue" } } }),
            "github: create_issue",
            "other",
        ),
        (json!({ "webSearchToolCall": { "args": { "searchTerm": "napi-rs" } } }), "Search web: \"napi-rs\"", "fetch"),
        (json!({ "webFetchToolCall": { "args": { "url": "https://a.b" } } }), "Fetch https://a.b", "fetch"),
        (json!({ "fetchToolCall": { "args": { "url": "https://c.d" } } }), "Fetch https://c.d", "fetch"),
        (
            json!({ "taskToolCall": { "args": { "description": "Explore the repo", "prompt": "look around" } } }),
            "Explore the repo",
            "think",
        ),
        (json!({ "switchModeToolCall": { "args": { "targetModeId": "plan" } } }), "Switch to plan mode", "switch_mode"),
        (json!({ "createPlanToolCall": { "args": { "name": "Refactor" } } }), "Plan: Refactor", "think"),
        (json!({ "askQuestionToolCall": { "args": { "title": "Which DB?" } } }), "Which DB?", "other"),
        (json!({ "readLintsToolCall": { "args": { "paths": ["/a.rs"] } } }), "Read lints /a.rs", "read"),
        (
            json!({ "writeShellStdinToolCall": { "args": { "shellId": 3, "chars": "y\n" } } }),
            "Write to shell 3",
            "execute",
        ),
        (json!({ "semSearchToolCall": { "args": {} } }), "Search codebase", "search"),
        (json!({ "reflectToolCall": {} }), "Reflect", "think"),
        (json!({ "generateImageToolCall": {} }), "Generate image", "other"),
        (json!({ "recordScreenToolCall": {} }), "Record screen", "other"),
    ];
    for (i, (call, title, kind)) in cases.into_iter().enumerate() {
        let out = run(&mut t, vec![started(&format!("c{i}"), call.clone())]);
        assert_eq!(
            (out[0]["title"].as_str().unwrap(), out[0]["kind"].as_str().unwrap_or("other")),
            (title, kind),
            "{call}"
        );
        assert!(out[0]["name"].is_string());
    }
    let out = run(
        &mut t,
        vec![started("t", json!({ "taskToolCall": { "args": { "description": "d", "prompt": "the prompt" } } }))],
    );
    assert_eq!(out[0]["content"][0]["content"]["text"], "the prompt");
}

#[test]
fn mcp_results_become_content_and_switch_mode_reports_the_mode() {
    let mut t = Translator::new();
    let out = run(
        &mut t,
        vec![
            completed(
                "m",
                json!({ "mcpToolCall": { "args": { "toolName": "t" },
                "result": { "success": { "content": [{ "text": { "text": "issue #4 created" } }] } } } }),
            ),
            completed(
                "s",
                json!({ "switchModeToolCall": { "args": { "targetModeId": "plan" }, "result": { "success": {} } } }),
            ),
        ],
    );
    assert_eq!(
        out[1]["content"],
        json!([{ "type": "content", "content": { "type": "text", "text": "issue #4 created" } }])
    );
    assert_eq!(out[3]["status"], "completed");
    assert_eq!(out[4], json!({ "sessionUpdate": "current_mode_update", "currentModeId": "plan" }));
}

#[test]
fn todos_become_the_full_plan_and_only_changes_are_sent() {
    let mut t = Translator::new();
    let todo = |id: &str, content: &str, status: &str| json!({ "id": id, "content": content, "status": status });
    let out = run(
        &mut t,
        vec![
            started(
                "u1",
                json!({ "updateTodosToolCall": { "args": { "todos": [
                todo("1", "Write tests", "TODO_STATUS_IN_PROGRESS"), todo("2", "Ship", "TODO_STATUS_PENDING"),
                todo("3", "Old idea", "TODO_STATUS_CANCELLED") ] } } }),
            ),
            completed(
                "u1",
                json!({ "updateTodosToolCall": { "args": { "todos": [
                todo("1", "Write tests", "TODO_STATUS_IN_PROGRESS"), todo("2", "Ship", "TODO_STATUS_PENDING"),
                todo("3", "Old idea", "TODO_STATUS_CANCELLED") ] } } }),
            ),
            started(
                "u2",
                json!({ "updateTodosToolCall": { "args": { "merge": true, "todos": [todo("1", "", "TODO_STATUS_COMPLETED")] } } }),
            ),
        ],
    );
    assert_eq!(out.len(), 2, "no tool cards for todos, and an unchanged plan is not re-sent: {out:#?}");
    assert_eq!(
        out[0],
        json!({ "sessionUpdate": "plan", "entries": [
            { "content": "Write tests", "priority": "medium", "status": "in_progress" },
            { "content": "Ship", "priority": "medium", "status": "pending" } ] })
    );
    assert_eq!(out[1]["entries"][0], json!({ "content": "Write tests", "priority": "medium", "status": "completed" }));
    assert_eq!(out[1]["entries"].as_array().unwrap().len(), 2, "merge keeps the full list");
}

#[test]
fn checkpoints_drive_usage_plan_and_mode() {
    use prost::Message;
    let mut t = Translator::new();
    t.set_mode(Some(pb::AgentMode::Agent as i32));
    let item = pb::TodoItem {
        id: "a".into(),
        content: "Do it".into(),
        status: pb::TodoStatus::Pending as i32,
        ..Default::default()
    };
    let state = pb::ConversationStateStructure {
        token_details: Some(pb::ConversationTokenDetails { used_tokens: 10, max_tokens: 100, ..Default::default() }),
        todos: vec![item.encode_to_vec().into()],
        mode: Some(pb::AgentMode::Plan as i32),
        ..Default::default()
    };
    let out: Vec<Value> = t.on_checkpoint(&state).into_iter().map(|u| serde_json::to_value(u).unwrap()).collect();
    assert_eq!(
        out,
        [
            json!({ "sessionUpdate": "usage_update", "used": 10, "size": 100 }),
            json!({ "sessionUpdate": "plan", "entries": [{ "content": "Do it", "priority": "medium", "status": "pending" }] }),
            json!({ "sessionUpdate": "current_mode_update", "currentModeId": "plan" }),
        ]
    );
    assert!(t.on_checkpoint(&state).is_empty(), "the same checkpoint again changes nothing");
}

#[test]
fn partial_calls_are_announced_once_then_updated() {
    let mut t = Translator::new();
    let out = run(
        &mut t,
        vec![
            json!({ "partialToolCall": { "callId": "p", "toolCall": { "shellToolCall": { "args": { "command": "l" } } } } }),
            json!({ "partialToolCall": { "callId": "p", "toolCall": { "shellToolCall": { "args": { "command": "ls -la" } } } } }),
            started("p", json!({ "shellToolCall": { "args": { "command": "ls -la" } } })),
        ],
    );
    assert_eq!(out[0]["sessionUpdate"], "tool_call");
    assert!(out[0].get("status").is_none(), "pending is ACP's default status, so it is omitted");
    assert_eq!(
        out[1],
        json!({ "sessionUpdate": "tool_call_update", "toolCallId": "p", "status": "pending", "title": "ls -la", "rawInput": { "command": "ls -la" } })
    );
    assert_eq!(out[2]["status"], "in_progress");
}

#[test]
fn sub_agent_activity_nests_under_its_task() {
    let mut t = Translator::new();
    let out = run(
        &mut t,
        vec![
            started("task", json!({ "taskToolCall": { "args": { "description": "Investigate" } } })),
            json!({ "toolCallDelta": { "callId": "task", "toolCallDelta": { "taskToolCallDelta": { "interactionUpdate":
                { "toolCallStarted": { "callId": "child", "toolCall": { "readToolCall": { "args": { "path": "/a" } } } } } } } } }),
            json!({ "toolCallDelta": { "callId": "task", "toolCallDelta": { "taskToolCallDelta": { "interactionUpdate": { "textDelta": { "text": "inner" } } } } } }),
        ],
    );
    assert_eq!(out.len(), 2, "sub-agent text stays out of the main transcript");
    assert_eq!(out[1]["toolCallId"], "child");
    assert_eq!(out[1]["_meta"], json!({ "tool_name": "read", "parentToolCallId": "task" }));
}

#[test]
fn summaries_become_a_think_card_and_sweep_closes_everything() {
    let mut t = Translator::new();
    let out = run(
        &mut t,
        vec![
            json!({ "summaryStarted": {} }),
            json!({ "summary": { "summary": "We fixed the bug." } }),
            json!({ "summaryCompleted": {} }),
            started("open", json!({ "lsToolCall": { "args": { "path": "/" } } })),
        ],
    );
    assert_eq!(out[0]["title"], "Compacting conversation");
    assert_eq!(out[0]["kind"], "think");
    assert_eq!(out[1]["content"][0]["content"]["text"], "We fixed the bug.");
    assert_eq!(out[2]["status"], "completed");
    let swept: Vec<Value> = t.sweep("Cancelled.").into_iter().map(|u| serde_json::to_value(u).unwrap()).collect();
    assert_eq!(
        swept,
        [json!({ "sessionUpdate": "tool_call_update", "toolCallId": "open", "status": "failed",
        "content": [{ "type": "content", "content": { "type": "text", "text": "Cancelled." } }] })]
    );
    assert!(t.sweep("again").is_empty());
}

#[test]
fn shell_output_delta_attaches_to_the_running_shell() {
    let mut t = Translator::new();
    let out = run(
        &mut t,
        vec![
            started("sh", json!({ "shellToolCall": { "args": { "command": "npm i" } } })),
            json!({ "shellOutputDelta": { "start": {} } }),
            json!({ "shellOutputDelta": { "stdout": { "data": "added 1 package" } } }),
        ],
    );
    assert_eq!(out.len(), 2);
    assert_eq!(out[1]["toolCallId"], "sh");
    assert_eq!(out[1]["content"][0]["content"]["text"], "```\nadded 1 package\n```");
}

#[test]
fn replayed_steps_are_completed_cards_and_chunks() {
    let mut t = Translator::new();
    let mut out = t.replay_user("hello");
    let steps: Vec<pb::ConversationStep> = vec![
        from_json("agent.v1.ConversationStep", &json!({ "thinkingMessage": { "text": "hmm" } })).unwrap(),
        from_json("agent.v1.ConversationStep", &json!({ "assistantMessage": { "text": "hi!" } })).unwrap(),
        from_json(
            "agent.v1.ConversationStep",
            &json!({ "toolCall": { "lsToolCall": { "args": { "path": "/" }, "result": { "success": {} } } } }),
        )
        .unwrap(),
    ];
    for s in &steps {
        out.extend(t.replay_step(s));
    }
    let out = normalize(out.into_iter().map(|u| serde_json::to_value(u).unwrap()).collect());
    let kinds: Vec<&str> = out.iter().map(|u| u["sessionUpdate"].as_str().unwrap()).collect();
    assert_eq!(
        kinds,
        ["user_message_chunk", "agent_thought_chunk", "agent_message_chunk", "tool_call", "tool_call_update"]
    );
    assert_eq!(out[0]["content"]["text"], "hello");
    assert_eq!(out[4]["status"], "completed");
}

#[test]
fn clients_with_compaction_support_get_compaction_updates() {
    let mut t = Translator::new();
    t.set_compaction_updates(true);
    let out = run(
        &mut t,
        vec![
            json!({ "summaryStarted": {} }),
            json!({ "summary": { "summary": "short" } }),
            json!({ "summaryCompleted": {} }),
        ],
    );
    let id = out[0]["compactionId"].clone();
    assert_eq!(out[0], json!({ "sessionUpdate": "compaction_update", "compactionId": id, "status": "in_progress" }));
    assert_eq!(
        out[1],
        json!({ "sessionUpdate": "compaction_summary_chunk", "compactionId": id, "content": { "type": "text", "text": "short" } })
    );
    assert_eq!(out[2], json!({ "sessionUpdate": "compaction_update", "compactionId": id, "status": "completed" }));
    // An interrupted compaction is reported failed by the sweep.
    run(&mut t, vec![json!({ "summaryStarted": {} })]);
    let swept = t.sweep("Cancelled.");
    assert_eq!(to_json(&swept[0])["status"], "failed");
}

/// Every ToolCall branch of the schema, with every result branch of its result type: one card,
/// a non-empty plain-text title, the Cursor key as `name`, and `completed` exactly for success.
#[test]
fn every_tool_type_and_result_branch_is_mapped() {
    use cursor_acp_core::descriptors::whole_schema as pool;
    use prost::Message;
    use prost_reflect::{DynamicMessage, Kind, Value as PValue};
    let tool_call = pool().get_message_by_name("agent.v1.ToolCall").unwrap();
    let mut checked = 0;
    for branch in tool_call.oneofs().next().unwrap().fields() {
        let Kind::Message(wrapper) = branch.kind() else { continue };
        let key = branch.name().trim_end_matches("_tool_call").to_string();
        let result_field = wrapper.get_field_by_name("result");
        let result_branches: Vec<Option<String>> = match result_field.as_ref().map(|f| f.kind()) {
            Some(Kind::Message(result)) => {
                let names: Vec<Option<String>> = result
                    .oneofs()
                    .flat_map(|o| o.fields().map(|f| Some(f.name().to_string())).collect::<Vec<_>>())
                    .collect();
                if names.is_empty() {
                    vec![None]
                } else {
                    names
                }
            }
            _ => vec![None],
        };
        for result_branch in result_branches {
            let mut w = DynamicMessage::new(wrapper.clone());
            if let (Some(rf), Some(rb)) = (&result_field, &result_branch) {
                let Kind::Message(result_desc) = rf.kind() else { unreachable!() };
                let mut r = DynamicMessage::new(result_desc.clone());
                let member = result_desc.get_field_by_name(rb).unwrap();
                let value = match member.kind() {
                    Kind::Message(m) => PValue::Message(DynamicMessage::new(m)),
                    other => PValue::default_value(&other),
                };
                r.set_field(&member, value);
                w.set_field(rf, PValue::Message(r));
            }
            let mut call = DynamicMessage::new(tool_call.clone());
            call.set_field(&branch, PValue::Message(w));
            // The call's own fields (2026) sit beside the tool, numbered below and above it.
            call.set_field_by_name("tool_call_id", PValue::String("tc-1".into()));
            call.set_field_by_name("started_at_ms", PValue::U64(1));
            call.set_field_by_name("completed_at_ms", PValue::U64(2));
            let call: pb::ToolCall = pb::ToolCall::decode(call.encode_to_vec().as_slice()).unwrap();
            let update = pb::InteractionUpdate {
                message: Some(pb::interaction_update::Message::ToolCallCompleted(Box::new(
                    pb::ToolCallCompletedUpdate {
                        call_id: format!("{key}-{result_branch:?}"),
                        tool_call: Some(call),
                        model_call_id: String::new(),
                    },
                ))),
            };
            let out: Vec<Value> = t_for(&key).on_update(&update).iter().map(to_json).collect();
            if key == "update_todos" {
                assert!(out.iter().all(|u| u["sessionUpdate"] == "plan"), "{key}: {out:?}");
                continue;
            }
            assert_eq!(out.len(), 2, "{key} {result_branch:?}: {out:#?}");
            let (card, done) = (&out[0], &out[1]);
            assert_eq!(card["sessionUpdate"], "tool_call");
            assert!(!card["title"].as_str().unwrap().is_empty() && !card["title"].as_str().unwrap().contains('`'));
            assert_eq!(card["name"], key);
            assert_eq!(card["_meta"]["tool_name"], key, "where Zed reads the tool's name");
            if let Some(kind) = newer_kind(&key) {
                // `other` is ACP's default, left out of the JSON.
                assert_eq!(card["kind"].as_str().unwrap_or("other"), kind, "{key}");
            }
            let success = matches!(result_branch.as_deref(), None | Some("success") | Some("async"));
            let expected = if success { "completed" } else { "failed" };
            assert_eq!(done["status"], expected, "{key} {result_branch:?}: {done}");
            if !success {
                assert!(
                    done["content"][0]["content"]["text"].is_string(),
                    "a failure says why: {key} {result_branch:?}"
                );
            }
            checked += 1;
        }
    }
    assert!(checked > 100, "only {checked} tool/result combinations checked");
}

/// The kinds of the tool types the 2026 schema adds.
fn newer_kind(key: &str) -> Option<&'static str> {
    Some(match key {
        "pi_read" => "read",
        "pi_edit" | "pi_write" => "edit",
        "pi_grep" | "pi_find" | "pi_ls" | "search_conversations" => "search",
        "pi_bash" => "execute",
        "fetch_cloud_agent_data" => "fetch",
        "create_goal" | "update_goal" => "think",
        "send_message" | "send_to_user" | "connect_scm" => "other",
        _ => return None,
    })
}

fn t_for(_key: &str) -> Translator {
    Translator::with_cwd(Some("/w".into()))
}

#[test]
fn server_notices_are_notices_or_a_message_of_their_own() {
    let notice = json!({ "textDelta": { "text": "Switched to a fallback model", "isServerNotice": true } });
    let mut t = Translator::new();
    let out = run(&mut t, vec![text("a"), notice.clone(), text("b")]);
    assert_eq!(out.iter().map(|u| u["messageId"].as_str().unwrap()).collect::<Vec<_>>(), ["m1", "m2", "m3"]);
    assert_eq!(out[1]["content"]["text"], "Switched to a fallback model");
    let mut t = Translator::new();
    t.set_notices(true);
    let out = run(&mut t, vec![notice]);
    assert_eq!(
        out,
        [json!({ "sessionUpdate": "notice", "severity": "info", "title": "Switched to a fallback model" })]
    );
}

#[test]
fn shells_become_display_terminals_for_clients_that_render_them() {
    let mut t = Translator::with_cwd(Some("/w".into()));
    t.set_terminal_output(true);
    let out = run(
        &mut t,
        vec![
            started(
                "sh",
                json!({ "shellToolCall": { "args": { "command": "cargo test", "workingDirectory": "crates" } } }),
            ),
            json!({ "toolCallDelta": { "callId": "sh", "toolCallDelta": { "shellToolCallDelta": { "stdout": { "content": "running 3 tests\n" } } } } }),
            completed(
                "sh",
                json!({ "shellToolCall": { "args": { "command": "cargo test" }, "result": { "success": { "exitCode": 101 } } } }),
            ),
        ],
    );
    assert_eq!(out[0]["content"], json!([{ "type": "terminal", "terminalId": "sh" }]));
    assert_eq!(
        out[0]["_meta"],
        json!({ "tool_name": "shell", "terminal_info": { "terminal_id": "sh", "cwd": "/w/crates" } })
    );
    assert_eq!(
        out[1],
        json!({ "sessionUpdate": "tool_call_update", "toolCallId": "sh",
        "_meta": { "terminal_output": { "terminal_id": "sh", "data": "running 3 tests\n" } } })
    );
    assert_eq!(out[2]["status"], "failed");
    assert!(out[2].get("content").is_none(), "the terminal stays the card's content");
    assert_eq!(out[2]["_meta"], json!({ "terminal_exit": { "terminal_id": "sh", "exit_code": 101, "signal": null } }));
}

#[test]
fn completed_cards_show_the_range_the_listing_the_matches_and_keep_raw_output_small() {
    let mut t = Translator::with_cwd(Some("/w".into()));
    let body = "line\n".repeat(20_000);
    let out = run(
        &mut t,
        vec![
            completed(
                "r",
                json!({ "readToolCall": { "args": { "path": "/w/src/lib.rs", "offset": 10, "limit": 5 },
                "result": { "success": { "path": "/w/src/lib.rs", "content": body, "totalLines": 120,
                    "readRange": { "startLine": 10, "endLine": 14 } } } } }),
            ),
            completed(
                "l",
                json!({ "lsToolCall": { "args": { "path": "/w" }, "result": { "success": { "directoryTreeRoot": {
                    "absPath": "/w",
                    "childrenDirs": [{ "absPath": "/w/src", "childrenFiles": [{ "name": "lib.rs" }] }],
                    "childrenFiles": [{ "name": "Cargo.toml" }] } } } } }),
            ),
            completed(
                "g",
                json!({ "grepToolCall": { "args": { "pattern": "TODO", "path": "/w" }, "result": { "success": {
                    "pattern": "TODO", "workspaceResults": { "/w": { "content": { "matches": [
                        { "file": "/w/src/lib.rs", "matches": [
                            { "lineNumber": 3, "content": "// TODO: a" }, { "lineNumber": 4, "content": "fn a() {}", "isContextLine": true },
                            { "lineNumber": 9, "content": "// TODO: b" }] },
                        { "file": "/w/README.md", "matches": [{ "lineNumber": 1, "content": "TODO list" }] } ] } } } } } } }),
            ),
            completed(
                "s",
                json!({ "shellToolCall": { "args": { "command": "ls" }, "result": { "success": { "exitCode": 0, "interleavedOutput": "a\nerr\nb\n", "stdout": "a\nb\n" } } } }),
            ),
        ],
    );
    let text = |u: &Value, i: usize| u["content"][i]["content"]["text"].as_str().unwrap_or_default().to_string();
    assert_eq!(text(&out[1], 0), "Lines 10–14 of 120", "the read's range, not its text");
    assert_eq!(out[1]["locations"], json!([{ "path": "/w/src/lib.rs", "line": 10 }]));
    let raw = serde_json::to_string(&out[1]["rawOutput"]).unwrap();
    assert!(raw.len() < 500, "rawOutput stays small: {} bytes", raw.len());
    assert_eq!(out[1]["rawOutput"]["success"]["totalLines"], 120);
    assert_eq!(text(&out[3], 0), "```\nsrc/\n  lib.rs\nCargo.toml\n```", "the listing");
    assert_eq!(text(&out[5], 0), "3 matches in 2 files");
    assert_eq!(
        text(&out[5], 1),
        "```\nsrc/lib.rs:3:// TODO: a\nsrc/lib.rs-4-fn a() {}\nsrc/lib.rs:9:// TODO: b\nREADME.md:1:TODO list\n```"
    );
    assert_eq!(
        out[5]["locations"],
        json!([{ "path": "/w/src/lib.rs", "line": 3 }, { "path": "/w/README.md", "line": 1 }])
    );
    assert_eq!(text(&out[7], 0), "```\na\nerr\nb\n```", "stdout and stderr as they interleaved");
}

#[test]
fn after_cancel_open_cards_fail_and_nothing_the_server_sends_about_the_turn_is_shown() {
    let mut t = Translator::new();
    let out = run(
        &mut t,
        vec![started("sh", json!({ "shellToolCall": { "args": { "command": "make" } } })), text("working")],
    );
    assert_eq!(out.len(), 2);
    let swept: Vec<Value> = t.cancel().iter().map(to_json).collect();
    assert_eq!(
        swept,
        [json!({ "sessionUpdate": "tool_call_update", "toolCallId": "sh", "status": "failed",
        "content": [{ "type": "content", "content": { "type": "text", "text": "Cancelled by the user." } }] })]
    );
    let late = run(
        &mut t,
        vec![
            completed(
                "sh",
                json!({ "shellToolCall": { "args": { "command": "make" }, "result": { "success": { "exitCode": 0 } } } }),
            ),
            text("and then I"),
            started("next", json!({ "lsToolCall": { "args": { "path": "/" } } })),
        ],
    );
    assert!(late.is_empty(), "no card flipped to completed, no text after the cancel: {late:#?}");
    t.begin_turn();
    assert_eq!(run(&mut t, vec![text("next turn")]).len(), 1, "the next turn is shown again");
}

#[test]
fn a_display_terminal_gets_the_output_of_a_result_when_nothing_streamed() {
    let mut t = Translator::with_cwd(Some("/w".into()));
    t.set_terminal_output(true);
    let out = run(
        &mut t,
        vec![
            started("sh", json!({ "shellToolCall": { "args": { "command": "uname" } } })),
            completed(
                "sh",
                json!({ "shellToolCall": { "args": { "command": "uname" }, "result": { "success": { "exitCode": 0, "stdout": "Linux\n" } } } }),
            ),
        ],
    );
    assert_eq!(out[1]["_meta"], json!({ "terminal_output": { "terminal_id": "sh", "data": "Linux\n" } }));
    assert_eq!(out[2]["status"], "completed");
    assert_eq!(out[2]["_meta"]["terminal_exit"]["exit_code"], 0);
}

#[test]
fn notification_lines_are_one_json_rpc_line_per_update_in_order() {
    let mut t = Translator::with_cwd(Some("/w/".into()));
    let updates: Vec<_> = [
        json!({ "thinkingDelta": { "text": "hmm\t" } }),
        text("line one\nline \"two\"\r\n\u{2028}é"),
        completed(
            "e",
            json!({ "editToolCall": { "args": { "path": "src/new.rs" },
            "result": { "success": { "path": "/w/src/new.rs", "afterFullFileContent": "fn x() {}\n" } } } }),
        ),
    ]
    .into_iter()
    .flat_map(|u| t.on_update(&upd(u)))
    .collect();
    assert!(updates.len() >= 3, "a thought chunk, a text chunk, then the edit's card");
    let expected: Vec<Value> = updates.iter().map(to_json).collect();
    // A session id that JSON must escape stays inside its string.
    let session = "s\"1\n";
    let bytes = notification_lines(session, updates);
    let text = std::str::from_utf8(&bytes).unwrap();
    assert!(text.ends_with('\n'));
    let lines: Vec<&str> = text.strip_suffix('\n').unwrap().split('\n').collect();
    assert_eq!(lines.len(), expected.len(), "one line per update: {text}");
    for (line, update) in lines.iter().zip(&expected) {
        let parsed: Value = serde_json::from_str(line).unwrap();
        assert_eq!(
            parsed,
            json!({ "jsonrpc": "2.0", "method": "session/update", "params": { "sessionId": session, "update": update } })
        );
    }
    // The new file's diff keeps its explicit `oldText: null`.
    assert!(text.contains(r#""oldText":null"#), "{text}");
    assert!(notification_lines(session, Vec::new()).is_empty(), "no update, no bytes");
}
