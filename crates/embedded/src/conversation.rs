//! The conversation in the embedded backend's checkpoints, kept as Cursor's server keeps it.
//!
//! Cursor's server does not keep a conversation for the client: every checkpoint it sends holds
//! the conversation so far as blob ids, and the blobs themselves are stored with the client
//! (KV `set`, before the checkpoint naming them goes out). A client that saves the checkpoint
//! and its blob store can replay the conversation in a new process (ACP `session/load`) and send
//! it back to continue. The entries are:
//!
//! - `turns`: one per turn, the sha256 id of a `ConversationTurnStructure` whose
//!   `agent_conversation_turn` names the turn's `UserMessage` and its steps (`ConversationStep`:
//!   assistant text, thinking, completed tool calls) by blob id too, with the turn's run id as
//!   `request_id`;
//! - `root_prompt_messages_json`: what the model is fed, the ids of JSON messages in the shape
//!   the schema notes give (`{"role":"user","content":[{"type":"text","text":…}]}`, assistant
//!   messages of text, reasoning and tool-call parts, a `tool` message per tool result).
//!
//! A turn's checkpoint is the previous checkpoint's entries (the run request's
//! `conversation_state`, as the client sent it) plus this turn's. A resumed run (a
//! `resume_action`) continues the turn its first attempt checkpointed: the backend reads that
//! turn back from the client (KV `get`), as Cursor's server reads the blobs it needs, and keeps
//! its user message and steps.

use std::collections::HashSet;

use bytes::Bytes;
use prost::Message as _;
use serde_json::{json, Value};
use sha2::Digest as _;

use cursor_acp_core::proto::agent::v1 as pb;
use cursor_acp_core::protojson;

/// A blob for the client to store: its id is the sha256 of its bytes, as for every blob the
/// schema notes describe.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Blob {
    pub id: Bytes,
    pub data: Bytes,
}

impl Blob {
    fn of(data: Vec<u8>) -> Self {
        Blob { id: Bytes::from(sha2::Sha256::digest(&data).to_vec()), data: Bytes::from(data) }
    }
}

/// One step of the turn as played, with the call id of a tool call (the root prompt's tool-call
/// and tool-result parts are tied by it; a `ConversationStep` has none).
struct Played {
    step: pb::ConversationStep,
    call_id: Option<String>,
    /// Whether more deltas of its kind still extend it (a thinking step is closed by its
    /// `thinking_completed`).
    open: bool,
}

/// What a resumed run continues.
enum Continues {
    /// Nothing: a new turn (or a resumed run whose turn was never checkpointed).
    Nothing,
    /// A resumed run whose earlier turn has not been read back yet.
    NotLookedUp,
    /// The turn the first attempt checkpointed: its user message and steps, by blob id.
    Turn { user_message: Bytes, steps: Vec<Bytes> },
}

/// The conversation of one run, as the scenario plays it.
pub(crate) struct Conversation {
    /// `turns` of the checkpoint the run request carried, without a turn this run continues.
    earlier_turns: Vec<Bytes>,
    /// `root_prompt_messages_json` of that checkpoint.
    earlier_root: Vec<Bytes>,
    /// The user message of a new turn.
    user_message: Option<pb::UserMessage>,
    /// The turn's run id (the same for every attempt), kept in the turn as its `request_id`.
    run_id: String,
    continues: Continues,
    played: Vec<Played>,
    /// Blob ids the client has been asked to store in this run: not asked again.
    stored: HashSet<Bytes>,
    next_kv_id: u32,
}

impl Conversation {
    /// The conversation as `run` begins it. The backend's KV requests take ids from
    /// `first_kv_id` on, clear of those the scenario's own steps use.
    pub(crate) fn begin(run: &pb::AgentRunRequest, first_kv_id: u32) -> Self {
        use pb::conversation_action::Action;
        let state = run.conversation_state.clone().unwrap_or_default();
        let run_id = run.run_id.clone().unwrap_or_default();
        let (user_message, continues) = match run.action.as_ref().and_then(|a| a.action.as_ref()) {
            Some(Action::UserMessageAction(a)) => (a.user_message.clone(), Continues::Nothing),
            // Only a turn named by this run's id can be the one it continues.
            Some(Action::ResumeAction(_)) if !state.turns.is_empty() && !run_id.is_empty() => {
                (None, Continues::NotLookedUp)
            }
            _ => (None, Continues::Nothing),
        };
        Conversation {
            earlier_turns: state.turns,
            earlier_root: state.root_prompt_messages_json,
            user_message,
            run_id,
            continues,
            played: Vec::new(),
            stored: HashSet::new(),
            next_kv_id: first_kv_id,
        }
    }

    /// An id for the backend's next KV request.
    pub(crate) fn next_kv_id(&mut self) -> u32 {
        let id = self.next_kv_id;
        self.next_kv_id = self.next_kv_id.wrapping_add(1);
        id
    }

    /// Notes an update the scenario sent: text, thinking and completed tool calls are the
    /// turn's steps; anything else (server notices included) is not part of the conversation.
    pub(crate) fn observe(&mut self, update: &pb::interaction_update::Message) {
        use pb::conversation_step::Message as S;
        use pb::interaction_update::Message as U;
        match update {
            U::TextDelta(d) if !d.is_server_notice => self.extend_text(&d.text, 1),
            U::ThinkingDelta(d) => match self.played.last_mut() {
                Some(Played {
                    step: pb::ConversationStep { message: Some(S::ThinkingMessage(m)) },
                    open: true,
                    ..
                }) => m.text.push_str(&d.text),
                _ => self.played.push(Played {
                    step: pb::ConversationStep {
                        message: Some(S::ThinkingMessage(pb::ThinkingMessage { text: d.text.clone(), duration_ms: 0 })),
                    },
                    call_id: None,
                    open: true,
                }),
            },
            U::ThinkingCompleted(c) => {
                if let Some(Played {
                    step: pb::ConversationStep { message: Some(S::ThinkingMessage(m)) }, open, ..
                }) = self.played.last_mut()
                {
                    m.duration_ms = u32::try_from(c.thinking_duration_ms).unwrap_or(0);
                    *open = false;
                }
            }
            U::ToolCallCompleted(c) => {
                if let Some(call) = &c.tool_call {
                    self.played.push(Played {
                        step: pb::ConversationStep { message: Some(S::ToolCall(call.clone())) },
                        call_id: Some(c.call_id.clone()),
                        open: false,
                    });
                }
            }
            _ => {}
        }
    }

    /// Notes `count` text deltas of `text` (a burst), as one assistant message.
    pub(crate) fn observe_text(&mut self, text: &str, count: u64) {
        self.extend_text(text, count);
    }

    fn extend_text(&mut self, text: &str, count: u64) {
        use pb::conversation_step::Message as S;
        let count = usize::try_from(count).unwrap_or(usize::MAX);
        match self.played.last_mut() {
            Some(Played { step: pb::ConversationStep { message: Some(S::AssistantMessage(m)) }, .. }) => {
                (0..count).for_each(|_| m.text.push_str(text))
            }
            _ => self.played.push(Played {
                step: pb::ConversationStep {
                    message: Some(S::AssistantMessage(pb::AssistantMessage { text: text.repeat(count) })),
                },
                call_id: None,
                open: true,
            }),
        }
    }

    /// The blob id of the turn a resumed run may continue (the last one of the checkpoint it
    /// was sent), while it has not been read back.
    pub(crate) fn turn_to_look_up(&self) -> Option<Bytes> {
        match self.continues {
            Continues::NotLookedUp => self.earlier_turns.last().cloned(),
            _ => None,
        }
    }

    /// The client's answer for [`turn_to_look_up`](Self::turn_to_look_up): a turn that names
    /// this run is continued (and leaves the earlier turns); anything else, a blob the client
    /// does not have included, begins a turn of its own.
    pub(crate) fn looked_up(&mut self, blob: Option<Bytes>) {
        use pb::conversation_turn_structure::Turn;
        self.continues = Continues::Nothing;
        let Some(Turn::AgentConversationTurn(turn)) =
            blob.and_then(|b| pb::ConversationTurnStructure::decode(b).ok()).and_then(|t| t.turn)
        else {
            return;
        };
        if turn.request_id.as_deref() == Some(self.run_id.as_str()) {
            self.earlier_turns.pop();
            self.continues = Continues::Turn { user_message: turn.user_message, steps: turn.steps };
        }
    }

    /// Fills `state`'s `turns` and `root_prompt_messages_json` with the conversation so far,
    /// and returns the blobs they name that the client has not been asked to store in this run,
    /// in the order they are to be stored (a turn's parts before the turn).
    pub(crate) fn checkpoint(&mut self, state: &mut pb::ConversationStateStructure) -> Vec<Blob> {
        let mut blobs = Vec::new();
        let (user_message, mut steps) = match &self.continues {
            Continues::Turn { user_message, steps } => (user_message.clone(), steps.clone()),
            Continues::Nothing | Continues::NotLookedUp => match &self.user_message {
                Some(m) => {
                    let blob = Blob::of(m.encode_to_vec());
                    let id = blob.id.clone();
                    blobs.push(blob);
                    (id, Vec::new())
                }
                // A turn without its user message (a resumed run whose first attempt left no
                // checkpoint, another action): its steps still count.
                None => (Bytes::new(), Vec::new()),
            },
        };
        for played in &self.played {
            let blob = Blob::of(played.step.encode_to_vec());
            steps.push(blob.id.clone());
            blobs.push(blob);
        }
        let turn = pb::ConversationTurnStructure {
            turn: Some(pb::conversation_turn_structure::Turn::AgentConversationTurn(
                pb::AgentConversationTurnStructure {
                    user_message,
                    steps,
                    request_id: (!self.run_id.is_empty()).then(|| self.run_id.clone()),
                    encrypted_model: None,
                },
            )),
        };
        let turn = Blob::of(turn.encode_to_vec());
        state.turns = self.earlier_turns.clone();
        state.turns.push(turn.id.clone());
        blobs.push(turn);

        // A continued turn's user message is in the root prompt already (the earlier
        // checkpoint's), with the steps it had then; this attempt adds its own.
        let user = match self.continues {
            Continues::Turn { .. } => None,
            _ => self.user_message.as_ref(),
        };
        state.root_prompt_messages_json = self.earlier_root.clone();
        for entry in root_prompt_entries(user, &self.played) {
            let blob = Blob::of(canonical_json(&entry).into_bytes());
            state.root_prompt_messages_json.push(blob.id.clone());
            blobs.push(blob);
        }

        let mut seen = HashSet::new();
        blobs.retain(|b| seen.insert(b.id.clone()) && !self.stored.contains(&b.id));
        self.stored.extend(blobs.iter().map(|b| b.id.clone()));
        blobs
    }
}

/// This turn's messages as the model is fed them: the user's text, then assistant messages
/// (text, reasoning and tool-call parts), each tool call followed by a `tool` message with
/// its result.
fn root_prompt_entries(user: Option<&pb::UserMessage>, played: &[Played]) -> Vec<Value> {
    use pb::conversation_step::Message as S;
    let mut out = Vec::new();
    if let Some(user) = user {
        out.push(json!({ "role": "user", "content": [{ "type": "text", "text": user.text }] }));
    }
    let mut parts = Vec::new();
    for p in played {
        match &p.step.message {
            Some(S::AssistantMessage(m)) => parts.push(json!({ "type": "text", "text": m.text })),
            Some(S::ThinkingMessage(m)) => parts.push(json!({ "type": "reasoning", "text": m.text })),
            Some(S::ToolCall(call)) => {
                let (name, args, result) = tool_call_parts(call);
                let id = p.call_id.clone().unwrap_or_default();
                parts.push(json!({ "type": "tool-call", "toolCallId": id, "toolName": name, "args": args }));
                out.push(json!({ "role": "assistant", "content": std::mem::take(&mut parts) }));
                out.push(json!({ "role": "tool", "id": id, "content": [
                    { "type": "tool-result", "toolCallId": id, "toolName": name, "result": result }
                ] }));
            }
            None => {}
        }
    }
    if !parts.is_empty() {
        out.push(json!({ "role": "assistant", "content": parts }));
    }
    out
}

/// `value` as JSON text with every object's keys in sorted order: a blob's id is the hash of its
/// bytes, so they must not depend on how a build orders maps (serde_json's `preserve_order`,
/// which another crate of the build may turn on). Nesting is bounded by the proto decoding the
/// values came from.
fn canonical_json(value: &Value) -> String {
    fn write(value: &Value, out: &mut String) {
        match value {
            Value::Object(map) => {
                let mut entries: Vec<_> = map.iter().collect();
                entries.sort_by(|a, b| a.0.cmp(b.0));
                out.push('{');
                for (i, (key, item)) in entries.into_iter().enumerate() {
                    if i > 0 {
                        out.push(',');
                    }
                    out.push_str(&Value::String(key.clone()).to_string());
                    out.push(':');
                    write(item, out);
                }
                out.push('}');
            }
            Value::Array(items) => {
                out.push('[');
                for (i, item) in items.iter().enumerate() {
                    if i > 0 {
                        out.push(',');
                    }
                    write(item, out);
                }
                out.push(']');
            }
            scalar => out.push_str(&scalar.to_string()),
        }
    }
    let mut out = String::new();
    write(value, &mut out);
    out
}

/// A tool call's name (its branch, `readToolCall` → `read`), arguments and result, in proto3
/// JSON.
fn tool_call_parts(call: &pb::ToolCall) -> (String, Value, Value) {
    let json = protojson::to_json("agent.v1.ToolCall", &call.encode_to_vec()).unwrap_or(Value::Null);
    let Some((branch, tool)) = json.as_object().and_then(|o| o.iter().next()) else {
        return (String::new(), Value::Null, Value::Null);
    };
    let name = branch.strip_suffix("ToolCall").unwrap_or(branch).to_string();
    (name, tool.get("args").cloned().unwrap_or(Value::Null), tool.get("result").cloned().unwrap_or(Value::Null))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn run(action: pb::conversation_action::Action, state: pb::ConversationStateStructure) -> pb::AgentRunRequest {
        pb::AgentRunRequest {
            conversation_state: Some(state),
            action: Some(pb::ConversationAction { action: Some(action), ..Default::default() }),
            run_id: Some("run-1".into()),
            ..Default::default()
        }
    }

    fn user(text: &str) -> pb::conversation_action::Action {
        pb::conversation_action::Action::UserMessageAction(pb::UserMessageAction {
            user_message: Some(pb::UserMessage { text: text.into(), ..Default::default() }),
            ..Default::default()
        })
    }

    fn text(t: &str) -> pb::interaction_update::Message {
        pb::interaction_update::Message::TextDelta(pb::TextDeltaUpdate { text: t.into(), is_server_notice: false })
    }

    fn find<'a>(blobs: &'a [Blob], id: &Bytes) -> &'a Bytes {
        &blobs.iter().find(|b| b.id == *id).expect("the id names a blob sent with it").data
    }

    #[test]
    fn a_checkpoint_names_the_earlier_turns_and_this_one_by_blob_ids_sent_with_it() {
        let earlier = pb::ConversationStateStructure {
            turns: vec![Bytes::from_static(&[1; 32])],
            root_prompt_messages_json: vec![Bytes::from_static(&[2; 32])],
            ..Default::default()
        };
        let mut c = Conversation::begin(&run(user("hello"), earlier), 10);
        c.observe(&pb::interaction_update::Message::ThinkingDelta(pb::ThinkingDeltaUpdate {
            text: "hm".into(),
            thinking_style: None,
        }));
        c.observe(&pb::interaction_update::Message::ThinkingCompleted(pb::ThinkingCompletedUpdate {
            thinking_duration_ms: 7,
        }));
        c.observe(&text("hi "));
        c.observe_text("there", 2);
        c.observe(&pb::interaction_update::Message::TextDelta(pb::TextDeltaUpdate {
            text: "a notice".into(),
            is_server_notice: true,
        }));
        let mut state = pb::ConversationStateStructure::default();
        let blobs = c.checkpoint(&mut state);
        assert!(blobs.iter().all(|b| b.id.as_ref() == sha2::Sha256::digest(&b.data).as_slice()), "content-addressed");
        assert_eq!(state.turns.len(), 2);
        assert_eq!(state.turns[0].as_ref(), &[1; 32], "the earlier turn, as it was");
        let turn = pb::ConversationTurnStructure::decode(find(&blobs, &state.turns[1]).clone()).unwrap();
        let Some(pb::conversation_turn_structure::Turn::AgentConversationTurn(turn)) = turn.turn else { panic!() };
        assert_eq!(turn.request_id.as_deref(), Some("run-1"));
        assert_eq!(pb::UserMessage::decode(find(&blobs, &turn.user_message).clone()).unwrap().text, "hello");
        let steps: Vec<_> =
            turn.steps.iter().map(|id| pb::ConversationStep::decode(find(&blobs, id).clone()).unwrap()).collect();
        use pb::conversation_step::Message as S;
        assert!(matches!(&steps[0].message, Some(S::ThinkingMessage(m)) if m.text == "hm" && m.duration_ms == 7));
        assert!(matches!(&steps[1].message, Some(S::AssistantMessage(m)) if m.text == "hi therethere"));
        assert_eq!(steps.len(), 2, "a server notice is no step");
        let root: Vec<Value> = state.root_prompt_messages_json[1..]
            .iter()
            .map(|id| serde_json::from_slice(find(&blobs, id)).unwrap())
            .collect();
        assert_eq!(
            root,
            [
                json!({ "role": "user", "content": [{ "type": "text", "text": "hello" }] }),
                json!({ "role": "assistant", "content": [{ "type": "reasoning", "text": "hm" }, { "type": "text", "text": "hi therethere" }] }),
            ]
        );
        assert_eq!(state.root_prompt_messages_json[0].as_ref(), &[2; 32]);
        let user_entry = find(&blobs, &state.root_prompt_messages_json[1]);
        assert_eq!(
            std::str::from_utf8(user_entry).unwrap(),
            r#"{"content":[{"text":"hello","type":"text"}],"role":"user"}"#,
            "keys sorted, whatever the build's map order"
        );

        // A later checkpoint of the same run asks only for the blobs that changed.
        c.observe(&text("!"));
        let mut later = pb::ConversationStateStructure::default();
        let more = c.checkpoint(&mut later);
        assert!(!more.iter().any(|b| b.id == turn.user_message), "the user message is stored already");
        assert!(more.iter().any(|b| b.id == later.turns[1]), "the grown turn is new");
        assert_eq!((c.next_kv_id(), c.next_kv_id()), (10, 11));
    }

    #[test]
    fn a_tool_call_is_a_step_and_an_assistant_and_tool_message_pair() {
        let mut c = Conversation::begin(&run(user("ls"), Default::default()), 1);
        let call = pb::ToolCall {
            tool: Some(pb::tool_call::Tool::LsToolCall(pb::LsToolCall {
                args: Some(pb::LsArgs { path: "/w".into(), ..Default::default() }),
                ..Default::default()
            })),
            ..Default::default()
        };
        c.observe(&pb::interaction_update::Message::ToolCallCompleted(Box::new(pb::ToolCallCompletedUpdate {
            call_id: "c1".into(),
            tool_call: Some(call),
            model_call_id: String::new(),
        })));
        c.observe(&text("done"));
        let mut state = pb::ConversationStateStructure::default();
        let blobs = c.checkpoint(&mut state);
        let root: Vec<Value> = state
            .root_prompt_messages_json
            .iter()
            .map(|id| serde_json::from_slice(find(&blobs, id)).unwrap())
            .collect();
        assert_eq!(root.len(), 4, "{root:#?}");
        assert_eq!(root[1]["content"][0]["type"], "tool-call");
        assert_eq!(root[1]["content"][0]["toolName"], "ls");
        assert_eq!(root[1]["content"][0]["args"]["path"], "/w");
        assert_eq!(root[2]["role"], "tool");
        assert_eq!(root[2]["content"][0]["toolCallId"], "c1");
        assert_eq!(root[3], json!({ "role": "assistant", "content": [{ "type": "text", "text": "done" }] }));
    }

    #[test]
    fn a_resumed_run_continues_the_turn_it_checkpointed_and_no_other() {
        let resume = pb::conversation_action::Action::ResumeAction(Default::default());
        let mut first = Conversation::begin(&run(user("go"), Default::default()), 1);
        first.observe(&text("par"));
        let mut state = pb::ConversationStateStructure::default();
        let blobs = first.checkpoint(&mut state);
        let turn_blob = find(&blobs, &state.turns[0]).clone();

        let mut resumed = Conversation::begin(&run(resume.clone(), state.clone()), 1);
        assert_eq!(resumed.turn_to_look_up(), Some(state.turns[0].clone()));
        resumed.looked_up(Some(turn_blob.clone()));
        assert_eq!(resumed.turn_to_look_up(), None, "looked up once");
        resumed.observe(&text("tial"));
        let mut after = pb::ConversationStateStructure::default();
        let more = resumed.checkpoint(&mut after);
        assert_eq!(after.turns.len(), 1, "the same turn, continued");
        let turn = pb::ConversationTurnStructure::decode(find(&more, &after.turns[0]).clone()).unwrap();
        let Some(pb::conversation_turn_structure::Turn::AgentConversationTurn(turn)) = turn.turn else { panic!() };
        assert_eq!(turn.steps.len(), 2, "the checkpointed step and the resumed one");
        assert!(!more.iter().any(|b| b.id == turn.user_message), "the user message was stored by the first attempt");
        assert_eq!(after.root_prompt_messages_json.len(), 3, "user + par, then tial");

        // Another run's turn (or none the client has) is not continued.
        let mut other = run(resume, state.clone());
        other.run_id = Some("run-2".into());
        let mut c = Conversation::begin(&other, 1);
        c.looked_up(Some(turn_blob));
        let mut s = pb::ConversationStateStructure::default();
        c.checkpoint(&mut s);
        assert_eq!(s.turns.len(), 2);
        let mut c = Conversation::begin(&run(user("x"), state), 1);
        assert_eq!(c.turn_to_look_up(), None, "a new turn reads nothing back");
        c.looked_up(None);
    }
}
