//! The stdio agent driven by the Rust ACP SDK's client: initialize with Zed-like and minimal
//! capabilities, several prompts in one session, the permission flow, cancel with a permission
//! pending (withdrawn, or held by a client that cannot withdraw it), load and list, bad input.

use std::time::{Duration, Instant};

use agent_client_protocol::v1::schema as v1;
use agent_client_protocol::{Error, UntypedMessage};
use cursor_acp_client_tests::{
    minimal_initialize, prompt, with_agent, zed_like_initialize, Answer, Editor, Seen, Setup,
};
use serde_json::{json, Value};

type Kind = v1::PermissionOptionKind;

fn code(e: &Error) -> i32 {
    i32::from(e.code)
}

async fn new_session(editor: &Editor, cwd: &std::path::Path) -> Result<v1::SessionId, Error> {
    Ok(editor.cx.send_request(v1::NewSessionRequest::new(cwd)).block_task().await?.session_id)
}

/// Every permission request of the journal from `turn_start` to `turn_end` names a card
/// announced before it, within the same turn.
fn assert_requests_follow_their_cards(editor: &Editor, turn_start: usize, turn_end: usize) {
    for (at, request) in editor.journal.permissions(turn_start).into_iter().filter(|(at, _)| *at < turn_end) {
        let id = request["toolCall"]["toolCallId"].as_str().unwrap();
        let card = editor.journal.card_index(id, turn_start);
        assert!(card.is_some_and(|c| c < at), "the permission request about {id} (at {at}) follows its card in the same turn (card at {card:?}, turn from {turn_start})");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn initialize_with_zed_like_and_with_minimal_capabilities() -> Result<(), Error> {
    for initialize in [zed_like_initialize(), minimal_initialize()] {
        let cache = tempfile::tempdir().unwrap();
        with_agent(Setup::new(None, cache.path()), async |editor| {
            let init = editor.cx.send_request(initialize.clone()).block_task().await?;
            assert_eq!(init.protocol_version, agent_client_protocol::schema::ProtocolVersion::V1);
            assert!(init.agent_capabilities.load_session);
            let sessions = &init.agent_capabilities.session_capabilities;
            assert!(sessions.list.is_some() && sessions.resume.is_some() && sessions.close.is_some());
            assert!(!init.auth_methods.is_empty());
            let cwd = tempfile::tempdir().unwrap();
            let created = editor.cx.send_request(v1::NewSessionRequest::new(cwd.path())).block_task().await?;
            let modes = created.modes.expect("modes");
            assert_eq!(modes.current_mode_id.to_string(), "agent");
            let ids: Vec<String> = modes.available_modes.iter().map(|m| m.id.to_string()).collect();
            assert_eq!(ids, ["agent", "plan", "ask"]);
            let options = serde_json::to_value(created.config_options.expect("config options"))?;
            assert_eq!(options[0]["id"], "mode");
            assert_eq!(options[1]["id"], "model");
            Ok(())
        })
        .await?;
    }
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn several_prompts_in_one_session_keep_ids_unique_and_requests_after_their_cards() -> Result<(), Error> {
    let cache = tempfile::tempdir().unwrap();
    let cwd = tempfile::tempdir().unwrap();
    std::fs::write(cwd.path().join("notes.txt"), "hello\n").unwrap();
    with_agent(Setup::new(None, cache.path()), async |editor| {
        editor.cx.send_request(zed_like_initialize()).block_task().await?;
        let session = new_session(&editor, cwd.path()).await?;
        let mut starts = Vec::new();
        for text in ["look around", "again", "once more"] {
            starts.push(editor.journal.len());
            let response = editor.cx.send_request(prompt(&session, text)).block_task().await?;
            assert_eq!(response.stop_reason, v1::StopReason::EndTurn);
            let meta = response.meta.expect("_meta");
            assert_eq!(meta["cursor"]["usage"]["inputTokens"], 1200);
        }
        starts.push(editor.journal.len());
        for turn in starts.windows(2) {
            assert_requests_follow_their_cards(&editor, turn[0], turn[1]);
        }
        let updates = editor.journal.updates(session.0.as_ref(), 0);
        let ids: Vec<&str> = updates
            .iter()
            .filter(|u| u["sessionUpdate"] == "tool_call")
            .map(|u| u["toolCallId"].as_str().unwrap())
            .collect();
        let mut unique = ids.clone();
        unique.sort();
        unique.dedup();
        assert_eq!(ids.len(), 6);
        assert_eq!(unique.len(), ids.len(), "tool call ids are unique in the session: {ids:?}");
        assert_eq!(editor.journal.permissions(0).len(), 3);
        // The listing and the command's output are on their cards.
        let listing = updates
            .iter()
            .find(|u| u["status"] == "completed" && u["content"][0]["content"]["text"].is_string())
            .unwrap();
        assert_eq!(listing["content"][0]["content"]["text"], "```\nnotes.txt\n```");
        let output: String = updates.iter().filter_map(|u| u["_meta"]["terminal_output"]["data"].as_str()).collect();
        assert_eq!(output.matches("hello from cursor-acp-native\n").count(), 3);
        Ok(())
    })
    .await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn permission_flow_allow_always_and_reject() -> Result<(), Error> {
    let cache = tempfile::tempdir().unwrap();
    let cwd = tempfile::tempdir().unwrap();
    let dir = cwd.path().to_string_lossy().to_string();
    let scenario = json!({ "steps": [
        { "type": "toolCallStarted", "callId": "s1", "toolCall": { "shellToolCall": { "args": { "command": "touch first" } } } },
        { "type": "exec", "id": 1, "args": { "shellStreamArgs": { "command": "touch first", "workingDirectory": dir, "toolCallId": "s1" } } },
        { "type": "toolCallCompleted", "callId": "s1", "toolCall": { "shellToolCall": { "args": { "command": "touch first" } } }, "resultFromExec": 1 },
        { "type": "toolCallStarted", "callId": "s2", "toolCall": { "shellToolCall": { "args": { "command": "touch second" } } } },
        { "type": "exec", "id": 2, "args": { "shellStreamArgs": { "command": "touch second", "workingDirectory": dir, "toolCallId": "s2" } } },
        { "type": "toolCallCompleted", "callId": "s2", "toolCall": { "shellToolCall": { "args": { "command": "touch second" } } }, "resultFromExec": 2 },
        { "type": "toolCallStarted", "callId": "w1", "toolCall": { "editToolCall": { "args": { "path": "kept-out.txt" } } } },
        { "type": "exec", "id": 3, "args": { "writeArgs": { "path": "kept-out.txt", "fileText": "no\n", "toolCallId": "w1" } } },
        { "type": "text", "text": "Done." },
        { "type": "turnEnded" }
    ]});
    let setup = Setup::new(Some(scenario), cache.path()).answer(Answer::Hold { honour_withdrawal: false });
    with_agent(setup, async |editor| {
        editor.cx.send_request(zed_like_initialize()).block_task().await?;
        let session = new_session(&editor, cwd.path()).await?;
        let turn = editor.cx.send_request(prompt(&session, "go")).block_task();
        let answering = async {
            let held = editor.held.clone();
            editor.journal.wait_for(10_000, "the shell's permission request", |_| held.len() == 1).await;
            held.answer(Kind::AllowAlways)?;
            editor.journal.wait_for(10_000, "the write's permission request", |_| held.len() == 1).await;
            held.answer(Kind::RejectOnce)?;
            Ok::<_, Error>(())
        };
        let (response, answered) = futures::join!(turn, answering);
        answered?;
        assert_eq!(response?.stop_reason, v1::StopReason::EndTurn, "a rejection is not a refusal");
        let asked: Vec<Value> = editor.journal.permissions(0).into_iter().map(|(_, p)| p).collect();
        let kinds: Vec<&str> = asked.iter().map(|p| p["toolCall"]["kind"].as_str().unwrap()).collect();
        assert_eq!(kinds, ["execute", "edit"], "touch was allowed always: asked once");
        let options: Vec<&str> =
            asked[0]["options"].as_array().unwrap().iter().map(|o| o["kind"].as_str().unwrap()).collect();
        assert_eq!(options, ["allow_once", "allow_always", "reject_once"], "one option of each kind");
        assert!(cwd.path().join("first").exists() && cwd.path().join("second").exists());
        assert!(!cwd.path().join("kept-out.txt").exists());
        let updates = editor.journal.updates(session.0.as_ref(), 0);
        let rejected = updates.iter().find(|u| u["toolCallId"] == "w1" && u["status"] == "failed").unwrap();
        assert_eq!(rejected["content"][0]["content"]["text"], "Rejected by the user");
        assert!(!editor.journal.all().iter().any(|s| matches!(s, Seen::WriteTextFile(_))), "nothing written");
        Ok(())
    })
    .await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cancel_with_a_permission_pending_resolves_cancelled_and_completes_nothing() -> Result<(), Error> {
    for honour_withdrawal in [true, false] {
        let cache = tempfile::tempdir().unwrap();
        let cwd = tempfile::tempdir().unwrap();
        let setup = Setup::new(None, cache.path()).answer(Answer::Hold { honour_withdrawal });
        with_agent(setup, async |editor| {
            editor.cx.send_request(zed_like_initialize()).block_task().await?;
            let session = new_session(&editor, cwd.path()).await?;
            let turn = editor.cx.send_request(prompt(&session, "go")).block_task();
            let cancelling = async {
                editor
                    .journal
                    .wait_for(10_000, "the permission request", |seen| {
                        seen.iter().any(|s| matches!(s, Seen::Permission(_)))
                    })
                    .await;
                let at = editor.journal.len();
                editor.cx.send_notification(v1::CancelNotification::new(session.clone()))?;
                Ok::<_, Error>((at, Instant::now()))
            };
            let (response, cancelled) = futures::join!(turn, cancelling);
            let (at, started) = cancelled?;
            assert_eq!(response?.stop_reason, v1::StopReason::Cancelled, "honour_withdrawal {honour_withdrawal}");
            assert!(started.elapsed() < Duration::from_millis(1500), "cancel took {:?}", started.elapsed());
            let after = editor.journal.updates(session.0.as_ref(), at);
            assert!(after.iter().all(|u| u["status"] != "completed"), "no card completed after the cancel: {after:#?}");
            assert!(
                after.iter().all(|u| u["sessionUpdate"] != "agent_message_chunk"),
                "no text after the cancel: {after:#?}"
            );
            let shell = editor.journal.updates(session.0.as_ref(), 0);
            let last = shell.iter().rfind(|u| u["toolCallId"] == "demo-shell").unwrap();
            assert_eq!(last["status"], "failed");
            if !honour_withdrawal {
                // The editor answers the stale prompt long after: ignored, and the session goes on.
                editor.held.answer(Kind::AllowOnce)?;
            }
            let next = tokio::time::timeout(
                Duration::from_secs(20),
                editor.cx.send_request(prompt(&session, "again")).block_task(),
            );
            let held = editor.held.clone();
            let answering = async {
                if !honour_withdrawal {
                    editor.journal.wait_for(10_000, "the next turn's permission request", |_| held.len() == 1).await;
                    held.answer(Kind::AllowOnce)?;
                }
                Ok::<_, Error>(())
            };
            if honour_withdrawal {
                // This client keeps prompts open until withdrawn: cancel the next turn as well.
                let (response, _) = futures::join!(next, async {
                    editor
                        .journal
                        .wait_for(10_000, "the next permission request", |seen| {
                            seen.iter().filter(|s| matches!(s, Seen::Permission(_))).count() == 2
                        })
                        .await;
                    editor.cx.send_notification(v1::CancelNotification::new(session.clone())).unwrap();
                });
                assert_eq!(response.expect("in time")?.stop_reason, v1::StopReason::Cancelled);
            } else {
                let (response, answered) = futures::join!(next, answering);
                answered?;
                assert_eq!(response.expect("in time")?.stop_reason, v1::StopReason::EndTurn);
            }
            let second = editor.journal.permissions(0)[1].1["toolCall"]["toolCallId"].clone();
            assert_eq!(second, "demo-shell~2", "the next turn's card has an id of its own");
            Ok(())
        })
        .await?;
    }
    Ok(())
}

/// A checkpoint whose conversation has one turn: "first question" → "first answer" (the
/// `ConversationTurn` / `ConversationStep` nesting of the wire schema, built by hand).
fn checkpoint_with_one_turn() -> String {
    fn ld(field: u8, bytes: &[u8]) -> Vec<u8> {
        let mut out = vec![(field << 3) | 2, bytes.len() as u8];
        out.extend_from_slice(bytes);
        out
    }
    let user = ld(1, &ld(1, b"first question"));
    let step = ld(2, &ld(1, &ld(1, b"first answer")));
    let turn = ld(1, &[user, step].concat());
    base64(&turn)
}

fn base64(bytes: &[u8]) -> String {
    const ALPHABET: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    let mut out = String::new();
    for chunk in bytes.chunks(3) {
        let n = (u32::from(chunk[0]) << 16)
            | (u32::from(*chunk.get(1).unwrap_or(&0)) << 8)
            | u32::from(*chunk.get(2).unwrap_or(&0));
        for i in 0..4 {
            if i <= chunk.len() {
                out.push(ALPHABET[((n >> (18 - 6 * i)) & 63) as usize] as char);
            } else {
                out.push('=');
            }
        }
    }
    out
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sessions_are_listed_and_loaded_with_their_history_before_the_response() -> Result<(), Error> {
    let cache = tempfile::tempdir().unwrap();
    let cwd = tempfile::tempdir().unwrap();
    let scenario = json!({ "steps": [
        { "type": "text", "text": "first answer" },
        { "type": "checkpoint", "state": { "turns": [checkpoint_with_one_turn()] } },
        { "type": "turnEnded" }
    ]});
    let session = with_agent(Setup::new(Some(scenario.clone()), cache.path()), async |editor| {
        editor.cx.send_request(minimal_initialize()).block_task().await?;
        let session = new_session(&editor, cwd.path()).await?;
        editor.cx.send_request(prompt(&session, "first question")).block_task().await?;
        Ok(session)
    })
    .await?;
    // Another agent process on the same cache: the editor reopens its history.
    with_agent(Setup::new(Some(scenario), cache.path()), async |editor| {
        editor.cx.send_request(minimal_initialize()).block_task().await?;
        let listed = editor.cx.send_request(v1::ListSessionsRequest::new()).block_task().await?;
        let listed: Vec<(String, Option<String>)> =
            listed.sessions.iter().map(|s| (s.session_id.to_string(), s.title.clone())).collect();
        assert_eq!(listed, [(session.to_string(), Some("first question".to_string()))]);
        let loaded =
            editor.cx.send_request(v1::LoadSessionRequest::new(session.clone(), cwd.path())).block_task().await?;
        assert_eq!(loaded.modes.expect("modes").current_mode_id.to_string(), "agent");
        // Replayed before the response.
        let replayed = editor.journal.updates(session.0.as_ref(), 0);
        let text = |kind: &str| -> String {
            replayed
                .iter()
                .filter(|u| u["sessionUpdate"] == kind)
                .filter_map(|u| u["content"]["text"].as_str())
                .collect()
        };
        assert_eq!(text("user_message_chunk"), "first question");
        assert_eq!(text("agent_message_chunk"), "first answer");
        let next = editor.cx.send_request(prompt(&session, "second")).block_task().await?;
        assert_eq!(next.stop_reason, v1::StopReason::EndTurn);
        Ok(())
    })
    .await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bad_input_gets_errors_and_the_agent_goes_on() -> Result<(), Error> {
    let cache = tempfile::tempdir().unwrap();
    with_agent(Setup::new(None, cache.path()), async |editor| {
        editor.cx.send_request(minimal_initialize()).block_task().await?;
        let unknown = editor.cx.send_request(prompt(&v1::SessionId::new("no-such-session"), "hi")).block_task().await;
        assert_eq!(unknown.map(|_| ()).map_err(|e| code(&e)), Err(-32002), "an unknown session");
        let relative = editor.cx.send_request(v1::NewSessionRequest::new("relative/path")).block_task().await;
        assert_eq!(relative.map(|_| ()).map_err(|e| code(&e)), Err(-32602), "a relative cwd");
        let bad = UntypedMessage::new("session/prompt", json!({ "sessionId": "x" }))?;
        let bad = editor.cx.send_request(bad).block_task().await;
        assert_eq!(bad.map(|_| ()).map_err(|e| code(&e)), Err(-32602), "a prompt without its prompt");
        let unknown_method = UntypedMessage::new("session/frobnicate", json!({}))?;
        let unknown_method = editor.cx.send_request(unknown_method).block_task().await;
        assert_eq!(unknown_method.map(|_| ()).map_err(|e| code(&e)), Err(-32601));
        // A notification for a session nobody knows is ignored; the agent still serves.
        editor.cx.send_notification(v1::CancelNotification::new(v1::SessionId::new("no-such-session")))?;
        let cwd = tempfile::tempdir().unwrap();
        new_session(&editor, cwd.path()).await?;
        Ok(())
    })
    .await
}
