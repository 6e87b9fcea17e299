//! What a client and its sessions are made with ([`ClientConfig`], [`Timing`],
//! [`SessionOptions`], [`SavedSession`]) and what a turn returns ([`TurnResult`]).

use std::time::Duration;

use agent_client_protocol_schema::v1 as acp;
use bytes::Bytes;

use crate::proto::agent::v1 as pb;
use crate::transport::TransportConfig;

/// Timers and bounds of the turn loop. Defaults follow the real CLI.
#[derive(Debug, Clone)]
pub struct Timing {
    pub client_heartbeat: Duration,
    pub exec_heartbeat: Duration,
    /// No inbound frame for this long = stall (then resume).
    pub stall: Duration,
    /// After cancel, how long to wait for the server before resolving `cancelled` anyway.
    pub cancel_grace: Duration,
    /// Bound on a host callback (exec, interaction, request context, KV override).
    pub callback: Duration,
    /// After `turn_ended`, how long in-flight handlers may take to finish.
    pub drain: Duration,
    pub resume_attempts: u32,
    pub resume_backoff: Duration,
    pub resume_backoff_max: Duration,
    /// The longest `Retry-After` (or `RetryInfo`) a turn waits for before resuming; a server
    /// that asks for longer fails the turn at once, saying how long it asked for.
    pub retry_after_max: Duration,
    /// Capacity of the update queue (back-pressure beyond it).
    pub queue: usize,
}

impl Default for Timing {
    fn default() -> Self {
        Timing {
            client_heartbeat: Duration::from_secs(5),
            exec_heartbeat: Duration::from_secs(3),
            stall: Duration::from_secs(30),
            cancel_grace: Duration::from_secs(2),
            callback: Duration::from_secs(300),
            drain: Duration::from_secs(5),
            resume_attempts: 3,
            resume_backoff: Duration::from_secs(1),
            resume_backoff_max: Duration::from_secs(60),
            retry_after_max: Duration::from_secs(60),
            queue: 256,
        }
    }
}

/// Client-wide configuration.
#[derive(Debug, Clone, Default)]
pub struct ClientConfig {
    pub transport: TransportConfig,
    pub timing: Timing,
    /// Report summarization as ACP compaction updates (the client advertised `session.compaction`).
    pub compaction_updates: bool,
    /// Report server notices as ACP `notice` updates (the client advertised `session.notices`).
    pub notices: bool,
    /// Show shells as Zed display-only terminals (the client advertised `_meta.terminal_output`).
    pub terminal_output: bool,
}

/// Options of a new session.
#[derive(Debug, Clone, Default)]
pub struct SessionOptions {
    pub conversation_id: Option<String>,
    /// A model id (`default`, Auto, when neither this nor `model_details` is given).
    pub model: Option<String>,
    /// The server's details of the model (from `GetUsableModels`), sent as they are.
    pub model_details: Option<pb::ModelDetails>,
    pub mode: Option<String>,
    pub cwd: Option<String>,
}

/// What `Session::save` returns and `AgentClient::load_session` takes.
#[derive(Debug, Clone, Default)]
pub struct SavedSession {
    pub conversation_id: String,
    /// The latest checkpoint exactly as the server sent it.
    pub checkpoint: Option<Bytes>,
    /// Blobs of the session's store (id, data), when the store can enumerate them.
    pub blobs: Vec<(Bytes, Bytes)>,
    pub model: Option<String>,
    pub model_details: Option<pb::ModelDetails>,
    pub mode: Option<String>,
    pub cwd: Option<String>,
    /// The ACP tool call ids the session has shown its client: kept so that a card of a later
    /// turn, after a restart too, never takes one of them.
    pub card_ids: Vec<String>,
}

/// Token counts of one turn (`turn_ended`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct TurnUsage {
    pub input_tokens: i64,
    pub output_tokens: i64,
    pub cache_read_tokens: i64,
    pub cache_write_tokens: i64,
    pub reasoning_tokens: i64,
}

impl TurnUsage {
    pub fn total(&self) -> i64 {
        self.input_tokens + self.output_tokens + self.cache_read_tokens + self.cache_write_tokens
    }
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TurnResult {
    pub stop_reason: acp::StopReason,
    pub usage: Option<TurnUsage>,
}

/// What a prompt may carry besides its content, as proto3 JSON.
#[derive(Debug, Clone, Default)]
pub struct PromptExtras {
    /// `UserMessage` fields merged over the message built from the content (protobuf merge:
    /// what is set here wins, lists are appended): `hookAdditionalContexts`,
    /// `customModeIntent`, `projectDetails`, `richText`, …
    pub user_message: Option<serde_json::Value>,
    /// `ConversationAction.request_context_parts`: large context parts by blob reference.
    pub request_context_parts: Option<serde_json::Value>,
}
