//! Drives the stdio agent (`bin/cursor-acp-native.mjs`) the way an editor does, with a client
//! implementation other than the TypeScript SDK the agent is written on: the Rust ACP SDK
//! (`agent-client-protocol`), which Zed's side of ACP is built on. The agent runs against its
//! embedded backend (`--embedded`, with a scenario of the test's own), and everything the
//! client receives is kept in a [`Journal`], in arrival order, as ACP JSON.
//!
//! The addon must be built first (`npm run build:test`, which `npm test` runs before these).

use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::sync::{Arc, Mutex};
use std::time::Duration;

pub use agent_client_protocol as sdk;
use agent_client_protocol::v1::schema as v1;
use agent_client_protocol::v1::{ConnectionTo, Responder};
use agent_client_protocol::{Agent, ByteStreams, Client, Error};
use serde_json::Value;
use tokio_util::compat::{TokioAsyncReadCompatExt, TokioAsyncWriteCompatExt};

/// The repository's root (this crate is `crates/acp-client-tests`).
pub fn repo_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..").canonicalize().expect("the repository root")
}

/// One thing the client received, as ACP JSON (`params` of the message).
#[derive(Debug, Clone)]
pub enum Seen {
    /// `session/update`
    Update(Value),
    /// `session/request_permission`
    Permission(Value),
    /// `fs/read_text_file`
    ReadTextFile(Value),
    /// `fs/write_text_file`
    WriteTextFile(Value),
}

/// What the client received, in arrival order.
#[derive(Clone, Default)]
pub struct Journal(Arc<Mutex<Vec<Seen>>>);

impl Journal {
    fn push(&self, seen: Seen) {
        self.0.lock().unwrap().push(seen);
    }

    pub fn all(&self) -> Vec<Seen> {
        self.0.lock().unwrap().clone()
    }

    pub fn len(&self) -> usize {
        self.0.lock().unwrap().len()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The `update`s of one session, from entry `from` on.
    pub fn updates(&self, session_id: &str, from: usize) -> Vec<Value> {
        self.all()[from..]
            .iter()
            .filter_map(|s| match s {
                Seen::Update(n) if n["sessionId"] == session_id => Some(n["update"].clone()),
                _ => None,
            })
            .collect()
    }

    /// The permission requests from entry `from` on, with their index in the journal.
    pub fn permissions(&self, from: usize) -> Vec<(usize, Value)> {
        self.all()
            .into_iter()
            .enumerate()
            .skip(from)
            .filter_map(|(i, s)| match s {
                Seen::Permission(p) => Some((i, p)),
                _ => None,
            })
            .collect()
    }

    /// Where the `tool_call` announcing `id` is, among the entries from `from` on.
    pub fn card_index(&self, id: &str, from: usize) -> Option<usize> {
        self.all().iter().enumerate().skip(from).find_map(|(i, s)| match s {
            Seen::Update(n) if n["update"]["sessionUpdate"] == "tool_call" && n["update"]["toolCallId"] == id => {
                Some(i)
            }
            _ => None,
        })
    }

    /// Waits until `predicate` holds for the journal (polling), at most `ms`.
    pub async fn wait_for(&self, ms: u64, what: &str, predicate: impl Fn(&[Seen]) -> bool) {
        let deadline = tokio::time::Instant::now() + Duration::from_millis(ms);
        while !predicate(&self.all()) {
            assert!(tokio::time::Instant::now() < deadline, "{what} did not happen within {ms} ms");
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    }
}

/// How the editor answers a permission request.
#[derive(Clone)]
pub enum Answer {
    /// Picks the first option of this kind.
    Pick(v1::PermissionOptionKind),
    /// Answers `cancelled` at once.
    Cancel,
    /// Keeps the prompt open until the test answers it ([`Held`]); a withdrawal
    /// (`$/cancel_request`) is honoured with `cancelled` when `honour_withdrawal`, and ignored
    /// otherwise (as an editor whose dialog cannot be closed from outside).
    Hold { honour_withdrawal: bool },
}

/// A permission prompt the editor keeps open, and the way to answer it.
type HeldPrompt = (v1::RequestPermissionRequest, Responder<v1::RequestPermissionResponse>);

/// Permission prompts kept open, for the test to answer (or not).
#[derive(Clone, Default)]
pub struct Held(Arc<Mutex<Vec<HeldPrompt>>>);

impl Held {
    pub fn len(&self) -> usize {
        self.0.lock().unwrap().len()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Answers the oldest held prompt with its first option of `kind`.
    pub fn answer(&self, kind: v1::PermissionOptionKind) -> Result<(), Error> {
        let (request, responder) = self.0.lock().unwrap().remove(0);
        responder.respond(pick(&request, kind))
    }
}

fn pick(request: &v1::RequestPermissionRequest, kind: v1::PermissionOptionKind) -> v1::RequestPermissionResponse {
    let outcome = match request.options.iter().find(|o| o.kind == kind) {
        Some(option) => {
            v1::RequestPermissionOutcome::Selected(v1::SelectedPermissionOutcome::new(option.option_id.clone()))
        }
        None => v1::RequestPermissionOutcome::Cancelled,
    };
    v1::RequestPermissionResponse::new(outcome)
}

/// An agent process and what it works in.
pub struct Setup {
    /// Scenario for the embedded backend (`None`: the demo turn).
    pub scenario: Option<Value>,
    /// Where sessions are saved (shared between two agents to test `session/load`).
    pub cache_dir: PathBuf,
    /// The editor's answer to every permission request.
    pub answer: Answer,
}

impl Setup {
    pub fn new(scenario: Option<Value>, cache_dir: &Path) -> Self {
        Setup {
            scenario,
            cache_dir: cache_dir.to_path_buf(),
            answer: Answer::Pick(v1::PermissionOptionKind::AllowOnce),
        }
    }

    pub fn answer(mut self, answer: Answer) -> Self {
        self.answer = answer;
        self
    }
}

/// What a test gets: the connection to the agent, what it received, the prompts held open.
pub struct Editor {
    pub cx: ConnectionTo<Agent>,
    pub journal: Journal,
    pub held: Held,
}

/// Starts the agent, connects the Rust SDK's client to its stdio, and runs `body`; the agent
/// is killed when `body` returns (its stdin closed first, as an editor quitting would).
pub async fn with_agent<R>(setup: Setup, body: impl AsyncFnOnce(Editor) -> Result<R, Error>) -> Result<R, Error> {
    let dir = tempfile::tempdir().map_err(Error::into_internal_error)?;
    let mut command = tokio::process::Command::new(std::env::var("NODE").unwrap_or_else(|_| "node".into()));
    command
        .arg(repo_root().join("bin/cursor-acp-native.mjs"))
        .arg("--embedded")
        .arg("--cache-dir")
        .arg(&setup.cache_dir);
    if let Some(scenario) = &setup.scenario {
        let file = dir.path().join("scenario.json");
        std::fs::write(&file, scenario.to_string()).map_err(Error::into_internal_error)?;
        command.arg("--scenario").arg(file);
    }
    // Credentials of the machine running the tests stay out of the agent.
    command.env_remove("CURSOR_API_KEY").env_remove("CURSOR_ACCESS_TOKEN");
    command.stdin(Stdio::piped()).stdout(Stdio::piped()).stderr(Stdio::inherit()).kill_on_drop(true);
    let mut child = command.spawn().map_err(Error::into_internal_error)?;
    let stdin = child.stdin.take().expect("piped stdin");
    let stdout = child.stdout.take().expect("piped stdout");
    let transport = ByteStreams::new(stdin.compat_write(), stdout.compat());

    let journal = Journal::default();
    let held = Held::default();
    let (on_update, on_permission, on_read, on_write) =
        (journal.clone(), journal.clone(), journal.clone(), journal.clone());
    let (answer, keep) = (setup.answer.clone(), held.clone());
    let result = Client
        .v1()
        .name("cursor-acp-client-tests")
        .on_receive_notification(
            async move |n: v1::SessionNotification, _cx| {
                on_update.push(Seen::Update(serde_json::to_value(&n)?));
                Ok(())
            },
            agent_client_protocol::on_receive_notification!(),
        )
        .on_receive_request(
            async move |request: v1::RequestPermissionRequest,
                        responder: Responder<v1::RequestPermissionResponse>,
                        cx| {
                on_permission.push(Seen::Permission(serde_json::to_value(&request)?));
                match &answer {
                    Answer::Pick(kind) => responder.respond(pick(&request, *kind)),
                    Answer::Cancel => {
                        responder.respond(v1::RequestPermissionResponse::new(v1::RequestPermissionOutcome::Cancelled))
                    }
                    Answer::Hold { honour_withdrawal: false } => {
                        keep.0.lock().unwrap().push((request, responder));
                        Ok(())
                    }
                    Answer::Hold { honour_withdrawal: true } => {
                        let withdrawn = responder.cancellation();
                        cx.spawn(async move {
                            withdrawn.cancelled().await;
                            responder
                                .respond(v1::RequestPermissionResponse::new(v1::RequestPermissionOutcome::Cancelled))
                        })
                    }
                }
            },
            agent_client_protocol::on_receive_request!(),
        )
        .on_receive_request(
            async move |request: v1::ReadTextFileRequest, responder: Responder<v1::ReadTextFileResponse>, _cx| {
                on_read.push(Seen::ReadTextFile(serde_json::to_value(&request)?));
                let text = std::fs::read_to_string(&request.path).map_err(Error::into_internal_error)?;
                let lines: Vec<&str> = text.split_inclusive('\n').collect();
                let first = request.line.map_or(0, |l| l.saturating_sub(1) as usize).min(lines.len());
                let count = request.limit.map_or(lines.len(), |l| l as usize);
                let content: String = lines[first..].iter().take(count).copied().collect();
                responder.respond(v1::ReadTextFileResponse::new(content))
            },
            agent_client_protocol::on_receive_request!(),
        )
        .on_receive_request(
            async move |request: v1::WriteTextFileRequest, responder: Responder<v1::WriteTextFileResponse>, _cx| {
                on_write.push(Seen::WriteTextFile(serde_json::to_value(&request)?));
                std::fs::write(&request.path, &request.content).map_err(Error::into_internal_error)?;
                responder.respond(v1::WriteTextFileResponse::new())
            },
            agent_client_protocol::on_receive_request!(),
        )
        .connect_with(transport, async move |cx: ConnectionTo<Agent>| body(Editor { cx, journal, held }).await)
        .await;
    let _ = child.start_kill();
    let _ = tokio::time::timeout(Duration::from_secs(5), child.wait()).await;
    result
}

/// `initialize` as Zed sends it: fs, terminal, and the display-only terminal (`_meta.terminal_output`).
pub fn zed_like_initialize() -> v1::InitializeRequest {
    let mut meta = serde_json::Map::new();
    meta.insert("terminal_output".into(), Value::Bool(true));
    let capabilities = v1::ClientCapabilities::new()
        .fs(v1::FileSystemCapabilities::new().read_text_file(true).write_text_file(true))
        .terminal(true)
        .meta(meta);
    v1::InitializeRequest::new(agent_client_protocol::schema::ProtocolVersion::V1)
        .client_capabilities(capabilities)
        .client_info(v1::Implementation::new("zed-like", "1.0.0"))
}

/// `initialize` with no capabilities at all.
pub fn minimal_initialize() -> v1::InitializeRequest {
    v1::InitializeRequest::new(agent_client_protocol::schema::ProtocolVersion::V1)
}

/// A text prompt.
pub fn prompt(session_id: &v1::SessionId, text: &str) -> v1::PromptRequest {
    v1::PromptRequest::new(session_id.clone(), vec![v1::ContentBlock::Text(v1::TextContent::new(text))])
}
