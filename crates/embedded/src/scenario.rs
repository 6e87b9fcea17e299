//! Declarative scenarios that drive the embedded backend.
//!
//! A scenario is JSON: options plus `turns`, a list of step lists. The n-th stream the backend
//! sees (a new request id: a turn or a resume attempt) plays `turns[n]`, and the last turn repeats
//! once they run out. `steps` is shorthand for a single turn. Server messages inside steps are
//! proto3 JSON of the message named in each step's doc, so any branch of the schema can be sent.

use prost::Message as _;
use serde::Deserialize;

use cursor_acp_core::error::CoreError;
use cursor_acp_core::proto::agent::v1 as pb;
use cursor_acp_core::proto::aiserver::v1 as ai;
use cursor_acp_core::protojson;

#[derive(Debug, Clone, Deserialize, Default)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Scenario {
    /// Send `interaction_update.heartbeat` every this many ms while a turn runs (0 = never).
    #[serde(default)]
    pub heartbeat_ms: u64,
    /// `content-type` of stream responses. Cursor labels them `text/event-stream` although the
    /// body is Connect envelopes; clients must not gate on it.
    #[serde(default)]
    pub response_content_type: Option<String>,
    /// Gzip response frames (flag 0x01) when the client accepts gzip.
    #[serde(default)]
    pub gzip_responses: bool,
    /// How long a step waits for the client's answer before failing the stream.
    #[serde(default)]
    pub wait_timeout_ms: Option<u64>,
    /// Record what clients send (default true; benchmarks turn it off).
    #[serde(default)]
    pub record: Option<bool>,
    /// Fail or delay one BidiAppend (by seqno, in every run).
    #[serde(default)]
    pub append_fault: Option<AppendFault>,
    /// HTTP/2 streams one connection may carry at once (`SETTINGS_MAX_CONCURRENT_STREAMS`);
    /// hyper's default, 200, when absent.
    #[serde(default)]
    pub h2_max_concurrent_streams: Option<u32>,
    /// Speak HTTP/1.1 only, like a gateway or proxy without h2c: a client's HTTP/2 connection
    /// preface is refused.
    #[serde(default)]
    pub http1_only: bool,
    /// The turns; see the module docs.
    #[serde(default)]
    pub turns: Vec<Vec<Step>>,
    /// Shorthand for `turns: [steps]`.
    #[serde(default)]
    pub steps: Option<Vec<Step>>,
}

#[derive(Debug, Clone, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct AppendFault {
    /// The seqno to fault; absent = every append.
    #[serde(default)]
    pub seqno: Option<i64>,
    /// Answer this HTTP status (with a Connect error body) instead of accepting the append.
    #[serde(default)]
    pub status: Option<u16>,
    /// Wait this long before answering.
    #[serde(default)]
    pub delay_ms: Option<u64>,
}

/// One step of a turn.
#[derive(Debug, Clone, Deserialize)]
#[serde(tag = "type", rename_all = "camelCase", deny_unknown_fields)]
pub enum Step {
    /// `interaction_update.text_delta`.
    Text { text: String },
    /// Many `text_delta`s at once: `count` deltas of `text` (for load tests).
    TextBurst { text: String, count: u64 },
    /// `interaction_update.thinking_delta`.
    Thinking { text: String },
    /// `interaction_update.thinking_completed`.
    #[serde(rename_all = "camelCase")]
    ThinkingCompleted {
        #[serde(default)]
        duration_ms: i32,
    },
    /// `tool_call_started`; `toolCall` is an `agent.v1.ToolCall` in proto JSON.
    #[serde(rename_all = "camelCase")]
    ToolCallStarted {
        call_id: String,
        tool_call: serde_json::Value,
        #[serde(default)]
        model_call_id: String,
    },
    /// `tool_call_completed`; `toolCall` is an `agent.v1.ToolCall` in proto JSON. With
    /// `resultFromExec`, its result is the one the client answered that exec with, as Cursor's
    /// server reports a tool the client ran (a `read`'s `ReadResult` becomes the read tool's
    /// `ReadToolResult`).
    #[serde(rename_all = "camelCase")]
    ToolCallCompleted {
        call_id: String,
        tool_call: serde_json::Value,
        #[serde(default)]
        model_call_id: String,
        #[serde(default)]
        result_from_exec: Option<u32>,
    },
    /// Any `agent.v1.InteractionUpdate`, in proto JSON.
    Update { update: serde_json::Value },
    /// Any `agent.v1.AgentServerMessage`, in proto JSON.
    Send { message: serde_json::Value },
    /// `exec_server_message`: `args` is the oneof branch in proto JSON (`{"readArgs":{…}}`).
    /// Unless `wait` is false, waits for the client's `stream_close` for this id.
    #[serde(rename_all = "camelCase")]
    Exec {
        id: u32,
        #[serde(default)]
        exec_id: Option<String>,
        args: serde_json::Value,
        #[serde(default)]
        wait: Option<bool>,
    },
    /// `exec_server_control_message.abort{id}`.
    AbortExec { id: u32 },
    /// Waits for the client's `stream_close` of an exec sent with `wait: false`.
    AwaitExec { id: u32 },
    /// `kv_server_message.get_blob_args`; waits for the reply. `blobId` is hex.
    #[serde(rename_all = "camelCase")]
    KvGet { id: u32, blob_id: String },
    /// `kv_server_message.set_blob_args`; waits for the reply. `blobId` (hex) defaults to
    /// sha256(data). `data` is text; `dataBase64` is raw bytes.
    #[serde(rename_all = "camelCase")]
    KvSet {
        id: u32,
        #[serde(default)]
        blob_id: Option<String>,
        #[serde(default)]
        data: Option<String>,
        #[serde(default)]
        data_base64: Option<String>,
    },
    /// `interaction_query`: `query` is the oneof branch in proto JSON; waits for the response.
    Interaction { id: u32, query: serde_json::Value },
    /// `conversation_checkpoint_update`: `state` is a `ConversationStateStructure` in proto JSON.
    /// Encoded once when the scenario is loaded (`message` is the whole `AgentServerMessage`),
    /// so playing it costs no conversion and no copy of a large state.
    ///
    /// Unless `state` names `turns` or `rootPromptMessagesJson` itself (then it is sent as it
    /// is, `[]` included), the backend fills both with the conversation so far, as Cursor's
    /// server does: the run request's checkpoint and this turn (the user's message, the text,
    /// thinking and completed tool calls played before this step), every entry the sha256 id
    /// of a blob the client is asked to store (KV `set`) before the checkpoint goes out
    /// (`conversation.rs`).
    Checkpoint {
        state: serde_json::Value,
        #[serde(skip)]
        message: bytes::Bytes,
        /// Whether the backend fills in the conversation (see above).
        #[serde(skip)]
        with_conversation: bool,
    },
    /// One `interaction_update.heartbeat`.
    Heartbeat,
    /// `interaction_update.turn_ended` with token counts.
    #[serde(rename_all = "camelCase")]
    TurnEnded {
        #[serde(default)]
        input_tokens: Option<i64>,
        #[serde(default)]
        output_tokens: Option<i64>,
        #[serde(default)]
        cache_read_tokens: Option<i64>,
        #[serde(default)]
        cache_write_tokens: Option<i64>,
        #[serde(default)]
        reasoning_tokens: Option<i64>,
    },
    /// Waits (heartbeats go on).
    Sleep { ms: u64 },
    /// Waits until the client sends a message of this kind (e.g. `conversationAction`).
    AwaitClient { kind: String },
    /// Waits for the client's next `inject_context_action` and answers it, as Cursor's server
    /// does, with `context_injection_state` updates naming its injection id: `states` are
    /// `ContextInjectionState`s in proto3 JSON (`{"queued":{}}`, `{"delivered":{"step":1}}`).
    InjectionState { states: Vec<serde_json::Value> },
    /// Fault: the connection is cut mid-stream.
    Drop,
    /// Fault: nothing at all (not even heartbeats) for `ms`.
    Stall { ms: u64 },
    /// Fault: a well-formed frame whose payload is not an `AgentServerMessage`.
    Garbage,
    /// Fault: a frame header announcing `length` bytes (larger than the client's limit).
    Oversize { length: u32 },
    /// Fault: a gzip frame that inflates to `decompressedBytes` (with `gzipResponses`, so that
    /// the stream agreed on gzip; without it, a compressed frame nobody agreed to).
    #[serde(rename_all = "camelCase")]
    GzipBomb { decompressed_bytes: u64 },
    /// Fault: a frame with reserved flag bits (default 0x04).
    ReservedFlag {
        #[serde(default)]
        flags: Option<u8>,
    },
    /// Raw bytes on the wire (base64), for anything else.
    RawBytes { base64: String },
    /// Fault: end the stream with a Connect error; `cursorError` (an `ErrorDetails.Error` name)
    /// adds `aiserver.v1.ErrorDetails` to the details.
    #[serde(rename_all = "camelCase")]
    Error {
        code: String,
        #[serde(default)]
        message: String,
        #[serde(default)]
        cursor_error: Option<String>,
        #[serde(default)]
        title: Option<String>,
        #[serde(default)]
        detail: Option<String>,
        #[serde(default)]
        is_retryable: Option<bool>,
        /// Adds a `google.rpc.RetryInfo` detail asking the client to wait this long.
        #[serde(default)]
        retry_delay_ms: Option<u64>,
    },
    /// Fault (first step only): answer the stream request with this HTTP status and body
    /// (and a `Retry-After` header, when given).
    #[serde(rename_all = "camelCase")]
    HttpError {
        status: u16,
        #[serde(default)]
        body: Option<String>,
        #[serde(default)]
        retry_after: Option<String>,
    },
    /// Ends the body without an end-of-stream frame.
    Close,
    /// Ends the stream cleanly (`{}`); also what happens after the last step.
    End,
}

impl Scenario {
    /// Parses and validates a scenario.
    pub fn from_json(value: &serde_json::Value) -> Result<Self, CoreError> {
        let mut s: Scenario = serde_json::from_value(value.clone())
            .map_err(|e| CoreError::InvalidInput(format!("invalid scenario: {e}")))?;
        if let Some(steps) = s.steps.take() {
            if !s.turns.is_empty() {
                return Err(CoreError::InvalidInput("invalid scenario: give either steps or turns, not both".into()));
            }
            s.turns.push(steps);
        }
        if s.turns.is_empty() {
            return Err(CoreError::InvalidInput("invalid scenario: no turns".into()));
        }
        for (t, turn) in s.turns.iter_mut().enumerate() {
            for (i, step) in turn.iter_mut().enumerate() {
                check(step)
                    .map_err(|e| CoreError::InvalidInput(format!("invalid scenario: turn {t} step {i}: {e}")))?;
                prepare(step)
                    .map_err(|e| CoreError::InvalidInput(format!("invalid scenario: turn {t} step {i}: {e}")))?;
                if matches!(step, Step::HttpError { .. }) && i != 0 {
                    return Err(CoreError::InvalidInput(format!(
                        "invalid scenario: turn {t}: httpError must be the first step"
                    )));
                }
            }
        }
        Ok(s)
    }

    pub fn turn(&self, index: usize) -> &[Step] {
        &self.turns[index.min(self.turns.len() - 1)]
    }

    pub fn records(&self) -> bool {
        self.record.unwrap_or(true)
    }

    /// Whether a tool call reports an exec's result (`resultFromExec`): then the backend keeps
    /// exec results whole instead of only their heads.
    pub fn echoes_exec_results(&self) -> bool {
        self.turns.iter().flatten().any(|s| matches!(s, Step::ToolCallCompleted { result_from_exec: Some(_), .. }))
    }
}

/// An `agent.v1` message from its proto3 JSON (`name` without the package).
pub(super) fn agent_message<M: prost::Message + Default>(name: &str, value: &serde_json::Value) -> Result<M, String> {
    protojson::from_json(&format!("agent.v1.{name}"), value)
}

/// The checkpoint fields that hold the conversation, by their proto3 JSON and proto names.
const CONVERSATION_FIELDS: [&str; 3] = ["turns", "rootPromptMessagesJson", "root_prompt_messages_json"];

/// Does once, at load, the work a step would otherwise repeat on every play: encodes
/// checkpoints (and drops their JSON, which every turn would clone otherwise). A checkpoint
/// whose JSON is not a `ConversationStateStructure` fails here.
fn prepare(step: &mut Step) -> Result<(), String> {
    if let Step::Checkpoint { state, message, with_conversation } = step {
        // Asked for by name before parsing: an empty list parses as no list at all.
        *with_conversation = !CONVERSATION_FIELDS.iter().any(|name| state.get(name).is_some());
        let parsed: pb::ConversationStateStructure = agent_message("ConversationStateStructure", state)?;
        let update = pb::agent_server_message::Message::ConversationCheckpointUpdate(Box::new(parsed));
        *message = pb::AgentServerMessage { message: Some(update), ..Default::default() }.encode_to_vec().into();
        *state = serde_json::Value::Null;
    }
    Ok(())
}

/// Checks a step's embedded proto JSON and names, so a bad scenario fails when it is loaded
/// rather than mid-stream. (Checkpoints are checked by [`prepare`], which converts them anyway.)
fn check(step: &Step) -> Result<(), String> {
    match step {
        Step::ToolCallStarted { tool_call, .. } | Step::ToolCallCompleted { tool_call, .. } => {
            agent_message::<pb::ToolCall>("ToolCall", tool_call).map(drop)
        }
        Step::Update { update } => agent_message::<pb::InteractionUpdate>("InteractionUpdate", update).map(drop),
        Step::Send { message } => agent_message::<pb::AgentServerMessage>("AgentServerMessage", message).map(drop),
        Step::Exec { args, .. } => {
            let msg = agent_message::<pb::ExecServerMessage>("ExecServerMessage", args)?;
            if msg.message.is_none() {
                return Err("exec args must name one ExecServerMessage branch, e.g. {\"readArgs\":{…}}".into());
            }
            Ok(())
        }
        Step::Interaction { query, .. } => {
            let msg = agent_message::<pb::InteractionQuery>("InteractionQuery", query)?;
            if msg.query.is_none() {
                return Err("interaction query must name one InteractionQuery branch".into());
            }
            Ok(())
        }
        Step::InjectionState { states } => states
            .iter()
            .try_for_each(|s| agent_message::<pb::ContextInjectionState>("ContextInjectionState", s).map(drop)),
        Step::KvGet { blob_id, .. } => hex::decode(blob_id).map(drop).map_err(|e| format!("kvGet blobId: {e}")),
        Step::KvSet { blob_id, data, data_base64, .. } => {
            if data.is_some() == data_base64.is_some() {
                return Err("kvSet needs exactly one of data / dataBase64".into());
            }
            if let Some(h) = blob_id {
                hex::decode(h).map_err(|e| format!("kvSet blobId: {e}"))?;
            }
            Ok(())
        }
        Step::Error { cursor_error: Some(name), .. } if ai::error_details::Error::from_str_name(name).is_none() => {
            Err(format!("cursorError {name:?} is not an ErrorDetails.Error name"))
        }
        _ => Ok(()),
    }
}

#[cfg(test)]
mod tests {
    use super::{Scenario, Step};

    #[test]
    fn checkpoints_are_encoded_at_load_and_a_bad_one_is_refused_naming_its_step() {
        let bad = serde_json::json!({ "steps": [{ "type": "text", "text": "hi" }, { "type": "checkpoint", "state": { "noSuchField": 1 } }] });
        let err = Scenario::from_json(&bad).expect_err("refused").to_string();
        assert!(err.contains("turn 0 step 1") && err.contains("noSuchField"), "{err}");
        let good = serde_json::json!({ "steps": [{ "type": "checkpoint", "state": { "turns": ["AQI="] } }] });
        let scenario = Scenario::from_json(&good).expect("a valid checkpoint");
        let Step::Checkpoint { message, .. } = &scenario.turn(0)[0] else { panic!("a checkpoint step") };
        assert!(!message.is_empty(), "encoded when loaded");
    }
}
