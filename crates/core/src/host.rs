//! What the turn loop asks of its host (the JavaScript callbacks, or a Rust implementation):
//! run exec requests, answer interaction queries, supply the request context, store blobs.
//!
//! Requests and results cross this boundary as proto3 JSON of the exact wire messages, so every
//! exec branch and every interaction kind of the schema is reachable and typed, without a
//! hand-written mapping per branch.

use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};

use bytes::Bytes;
use futures::future::BoxFuture;
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

use crate::error::CoreError;

/// One `ExecServerMessage`, decoded.
#[derive(Debug, Clone)]
pub struct ExecRequest {
    /// Bridge id (echoed in every reply).
    pub id: u32,
    pub exec_id: String,
    /// The branch, camelCase without `Args`: `read`, `write`, `delete`, `grep`, `ls`, `shell`,
    /// `shellStream`, `diagnostics`, `mcp`, `fetch`, `backgroundShellSpawn`, `writeShellStdin`,
    /// `piRead`, `gitDiffRequest`, `shellAllowlistPrecheck`, …
    pub kind: String,
    /// The branch's args message in proto3 JSON.
    pub args: serde_json::Value,
    /// `ExecServerMessage.accept_hook_additional_contexts`: the server takes hook contexts
    /// ([`ExecEvent::HookContext`]) with the result; without it they are not sent.
    pub accept_hook_additional_contexts: bool,
    /// Field number of the args branch (its result branch is found by name, see `bridge`).
    pub(crate) field: u32,
}

impl ExecRequest {
    /// The request's kind as the schema names it (`None` only for a request made by hand with
    /// a field number the schema does not have).
    pub fn exec_kind(&self) -> Option<crate::kinds::ExecKind> {
        crate::kinds::ExecKind::from_field(self.field)
    }
}

/// What a host reports while it works on an exec, in order.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ExecEvent {
    /// The process started. A streaming shell's `start` goes out now (or with its first
    /// output), never before: a command that is rejected or fails to spawn never started.
    Started,
    /// Standard output of a shell, streamed to the server as it comes.
    Stdout(String),
    /// Standard error of a shell.
    Stderr(String),
    /// Additional context from a hook, sent with the result when the server accepts it.
    HookContext { hook_event_name: String, content: String },
}

/// Per-exec context handed to the host.
#[derive(Debug, Clone)]
pub struct ExecContext {
    /// Cancelled on the server's `abort`, on turn cancel, or when the callback times out.
    pub cancel: CancellationToken,
    /// Where [`ExecEvent`]s go (a receiver that is gone drops them).
    pub events: mpsc::UnboundedSender<ExecEvent>,
}

impl ExecContext {
    /// A context and the receiving end of its events.
    pub fn new(cancel: CancellationToken) -> (Self, mpsc::UnboundedReceiver<ExecEvent>) {
        let (events, rx) = mpsc::unbounded_channel();
        (ExecContext { cancel, events }, rx)
    }

    /// A context whose events go nowhere (a tool run outside a turn).
    pub fn detached() -> Self {
        Self::new(CancellationToken::new()).0
    }

    pub fn stdout(&self, text: String) {
        #[allow(clippy::let_underscore_must_use, reason = "the exec ended and nobody listens for output any more")]
        let _ = self.events.send(ExecEvent::Stdout(text));
    }

    pub fn stderr(&self, text: String) {
        #[allow(clippy::let_underscore_must_use, reason = "the exec ended and nobody listens for output any more")]
        let _ = self.events.send(ExecEvent::Stderr(text));
    }

    /// The process has started (see [`ExecEvent::Started`]).
    pub fn started(&self) {
        #[allow(clippy::let_underscore_must_use, reason = "the exec ended and nobody waits for its start any more")]
        let _ = self.events.send(ExecEvent::Started);
    }
}

/// One `InteractionQuery`, decoded.
#[derive(Debug, Clone)]
pub struct InteractionRequest {
    pub id: u32,
    /// camelCase branch without the `RequestQuery`/`InteractionQuery`/`Args` suffix: `webSearch`,
    /// `askQuestion`, `switchMode`, `createPlan`, `webFetch`, `setupVmEnvironment`, …
    pub kind: String,
    /// The query message in proto3 JSON.
    pub query: serde_json::Value,
    pub(crate) field: u32,
}

/// A question to the host's permission policy about one tool call the core is about to run
/// (`Host::permission`). The client already shows the call's card (`tool_call`, with its ACP
/// id); the policy answers from its rules or asks the user about that card.
#[derive(Debug, Clone, PartialEq)]
pub struct PermissionRequest {
    /// The card as an ACP `ToolCall` (id, title, kind, content such as the diff, rawInput):
    /// what a `session/request_permission` shows.
    pub tool_call: serde_json::Value,
    /// The ACP tool kind the policy is keyed by: `execute`, `edit`, `delete`, `fetch`, `other`.
    pub kind: String,
    /// A shell's command line, as the model wrote it.
    pub command: Option<String>,
    /// The programs the command runs, when the server parsed it (prechecks); else empty.
    pub programs: Vec<String>,
    /// Absolute paths the call writes or deletes.
    pub paths: Vec<String>,
    /// The URL a fetch reads.
    pub url: Option<String>,
    /// The MCP server and tool a call runs.
    pub mcp: Option<(String, String)>,
    /// `false` for the server's allowlist prechecks: answer from the rules only, never ask.
    pub may_ask: bool,
}

/// What a host without a permission policy answers: every call runs; a precheck
/// (`may_ask: false`) is not allowlisted, so the server's own approval flow runs.
pub fn no_policy(request: &PermissionRequest) -> Permission {
    if request.may_ask {
        Permission::Allow
    } else {
        Permission::Reject(None)
    }
}

/// The policy's answer to a [`PermissionRequest`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Permission {
    Allow,
    /// Refused; the reason is what the model reads (a default one when `None`).
    Reject(Option<String>),
    /// The user dismissed the question or the turn was cancelled: the turn stops.
    Cancelled,
}

/// An MCP operation the core asks the host's MCP client to carry out (the host owns the
/// connections to the servers; the core decides when, after the permission policy).
#[derive(Debug, Clone, PartialEq)]
pub enum McpCall {
    /// Calls `tool` of `server` with `args`.
    Tool {
        server: String,
        tool: String,
        args: serde_json::Value,
    },
    /// The resources of one server, or of every server (`None`).
    ListResources {
        server: Option<String>,
    },
    ReadResource {
        server: String,
        uri: String,
    },
    /// The state of these servers (every server when empty).
    State {
        servers: Vec<String>,
    },
}

/// A choice between options of the core's own about a card the client shows (switch modes?
/// implement the plan?), asked of the host's user.
#[derive(Debug, Clone, PartialEq)]
pub struct ChoiceRequest {
    /// The card as an ACP `ToolCall`, with its ACP id.
    pub tool_call: serde_json::Value,
    pub options: Vec<ChoiceOption>,
}

/// One option of a [`ChoiceRequest`]: at most one of each ACP permission option kind.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ChoiceOption {
    pub id: String,
    pub name: String,
    /// ACP's option kind: `allow_once` or `reject_once`.
    pub kind: String,
}

/// The server's questions for the user (`askQuestion`).
#[derive(Debug, Clone, PartialEq)]
pub struct QuestionsRequest {
    /// The ACP id of the question's card, when the client has been told of it.
    pub tool_call_id: Option<String>,
    pub title: String,
    /// `[{ id, prompt, options: [{ id, label }], allowMultiple }]`, as the server sent them.
    pub questions: serde_json::Value,
}

/// What became of a [`QuestionsRequest`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Answers {
    /// The options chosen, by question id.
    Answered(Vec<(String, Vec<String>)>),
    Declined,
    /// The user dismissed them or the turn was cancelled.
    Cancelled,
    /// The host showed them in the conversation; the user answers in the next prompt.
    InConversation,
}

/// A conversation the host keeps, for the model's conversation search.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PastConversation {
    pub conversation_id: String,
    pub title: String,
    /// Milliseconds since the epoch of its last change, when known.
    pub updated_at_ms: Option<i64>,
}

/// Results are proto3 JSON of the matching result message (`ReadResult` for `read`, …);
/// `Ok(None)` means "not handled" (exec: throw + close; interaction: the default rejection).
pub trait Host: Send + Sync + 'static {
    fn exec(
        &self,
        request: ExecRequest,
        ctx: ExecContext,
    ) -> BoxFuture<'static, Result<Option<serde_json::Value>, CoreError>>;

    fn interaction(
        &self,
        _query: InteractionRequest,
        _cancel: CancellationToken,
    ) -> BoxFuture<'static, Result<Option<serde_json::Value>, CoreError>> {
        Box::pin(async { Ok(None) })
    }

    /// A `RequestContext` in proto3 JSON (rules, env, MCP tools), or `None` for the default.
    fn request_context(&self) -> BoxFuture<'static, Result<Option<serde_json::Value>, CoreError>> {
        Box::pin(async { Ok(None) })
    }

    /// The permission policy for the calls of the client's built-in tools that change things
    /// (writes, deletes, shells, fetches, MCP calls). `cancel` fires when the turn is cancelled
    /// or the server aborts the exec. Without a policy ([`no_policy`]) every call runs, and
    /// the server's prechecks hear "not allowlisted", so its own approval flow runs.
    fn permission(
        &self,
        request: PermissionRequest,
        _cancel: CancellationToken,
    ) -> BoxFuture<'static, Result<Permission, CoreError>> {
        let answer = no_policy(&request);
        Box::pin(async move { Ok(answer) })
    }

    /// Whether the host reads files through the editor (`editor_read`); the core then shows the
    /// read's card before it asks, as the editor names the card in its own log.
    fn reads_through_editor(&self) -> bool {
        false
    }

    /// The text of a file as the editor holds it (unsaved changes included), `line` (1-based)
    /// and `limit` lines when given; `None`: the editor does not offer it, read the disk.
    fn editor_read(
        &self,
        _path: String,
        _line: Option<u32>,
        _limit: Option<u32>,
    ) -> BoxFuture<'static, Result<Option<String>, CoreError>> {
        Box::pin(async { Ok(None) })
    }

    /// Writes a text file through the editor (so its review tracks the change): `Ok(true)`
    /// written, `Ok(false)` not offered (write the disk), `Err` the editor failed.
    fn editor_write(&self, _path: String, _content: String) -> BoxFuture<'static, Result<bool, CoreError>> {
        Box::pin(async { Ok(false) })
    }

    /// Runs an MCP operation through the host's MCP client: the result message in proto3 JSON
    /// (`McpResult`, `ListMcpResourcesExecResult`, …), or `None` when the host has no MCP client.
    fn mcp(
        &self,
        _call: McpCall,
        _cancel: CancellationToken,
    ) -> BoxFuture<'static, Result<Option<serde_json::Value>, CoreError>> {
        Box::pin(async { Ok(None) })
    }

    /// Whether [`Host::permission`] is a policy of the host's (the server's approval queries
    /// then go to it; without one they are refused, as before the host could answer them).
    fn has_permission_policy(&self) -> bool {
        false
    }

    /// Asks the user to choose, on a card the client shows: `Some(id)` chosen, `Some("")`
    /// dismissed (the host stops the turn), `None` when the host asks nothing of the kind.
    fn choose(
        &self,
        _request: ChoiceRequest,
        _cancel: CancellationToken,
    ) -> BoxFuture<'static, Result<Option<String>, CoreError>> {
        Box::pin(async { Ok(None) })
    }

    /// The user accepted a switch to `mode` (or a plan to implement): the host's picker follows
    /// (an error refuses the mode, and the session's stays as it was); then the core sets the
    /// session's mode.
    fn mode_switched(&self, _mode: String) -> BoxFuture<'static, Result<(), CoreError>> {
        Box::pin(async { Ok(()) })
    }

    /// The server's questions for the user; `None` when the host asks nothing of the kind.
    fn ask_questions(
        &self,
        _request: QuestionsRequest,
        _cancel: CancellationToken,
    ) -> BoxFuture<'static, Result<Option<Answers>, CoreError>> {
        Box::pin(async { Ok(None) })
    }

    /// The conversations the host keeps (for conversation search), or `None` when it keeps none.
    fn past_conversations(&self) -> BoxFuture<'static, Result<Option<Vec<PastConversation>>, CoreError>> {
        Box::pin(async { Ok(None) })
    }
}

/// A host that handles nothing: every exec is thrown, every query rejected.
#[derive(Debug, Default, Clone, Copy)]
pub struct NoHost;

impl Host for NoHost {
    fn exec(&self, _: ExecRequest, _: ExecContext) -> BoxFuture<'static, Result<Option<serde_json::Value>, CoreError>> {
        Box::pin(async { Ok(None) })
    }
}

/// The KV channel's storage: content-addressed blobs keyed by the server's opaque ids.
pub trait BlobStore: Send + Sync + 'static {
    fn get(&self, id: Bytes) -> BoxFuture<'static, Result<Option<Bytes>, CoreError>>;
    fn set(&self, id: Bytes, data: Bytes) -> BoxFuture<'static, Result<(), CoreError>>;
    /// Every blob held, for `Session::save` (stores that cannot enumerate return `None`).
    fn snapshot(&self) -> Option<Vec<(Bytes, Bytes)>> {
        None
    }
}

/// In-memory store (the default).
#[derive(Debug, Default, Clone)]
pub struct MemoryBlobStore {
    blobs: Arc<Mutex<HashMap<Bytes, Bytes>>>,
}

impl MemoryBlobStore {
    pub fn new() -> Self {
        Self::default()
    }

    pub fn len(&self) -> usize {
        self.blobs.lock().expect("blob lock").len()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    pub fn insert(&self, id: Bytes, data: Bytes) {
        self.blobs.lock().expect("blob lock").insert(id, data);
    }
}

impl BlobStore for MemoryBlobStore {
    fn get(&self, id: Bytes) -> BoxFuture<'static, Result<Option<Bytes>, CoreError>> {
        let found = self.blobs.lock().expect("blob lock").get(&id).cloned();
        Box::pin(async move { Ok(found) })
    }

    fn set(&self, id: Bytes, data: Bytes) -> BoxFuture<'static, Result<(), CoreError>> {
        self.insert(id, data);
        Box::pin(async { Ok(()) })
    }

    fn snapshot(&self) -> Option<Vec<(Bytes, Bytes)>> {
        Some(self.blobs.lock().expect("blob lock").iter().map(|(k, v)| (k.clone(), v.clone())).collect())
    }
}

/// Longest blob id accepted, in bytes. The server's ids are opaque, but they are hashes
/// (SHA-256: 32 bytes); a longer one would not even fit a file name as hex.
pub const MAX_BLOB_ID_BYTES: usize = 64;

/// Blobs as files named by the hex of their id, so they survive restarts.
///
/// Blobs hold the conversation, so they are private to the user whatever the umask: the folder
/// is 0700 and every file 0600 (a folder or blob made by an older version is narrowed when the
/// store opens, unless another user owns it). A blob is written to a temporary file in the same folder, named after the
/// blob and the writing process (`.<hex>.<pid>-<n>.tmp`), then renamed, so a crash never leaves
/// a truncated blob under a valid id; temporaries of processes that are gone (killed mid-write)
/// are removed when the store opens.
///
/// The folder is made when the store opens and never by a write: its owner (the stdio agent's
/// session store) may remove it, a session deleted, and a blob the server sends after that is
/// refused with an error naming the missing folder rather than bringing it back.
#[derive(Debug, Clone)]
pub struct DirBlobStore {
    dir: PathBuf,
}

impl DirBlobStore {
    pub fn new(dir: impl Into<PathBuf>) -> Result<Self, CoreError> {
        let dir = dir.into();
        let failed = |e: std::io::Error| CoreError::InvalidInput(format!("blob directory {}: {e}", dir.display()));
        let mut builder = std::fs::DirBuilder::new();
        builder.recursive(true);
        #[cfg(unix)]
        std::os::unix::fs::DirBuilderExt::mode(&mut builder, 0o700);
        builder.create(&dir).map_err(failed)?;
        // A folder of another owner cannot be narrowed; the blobs in it are 0600 all the same.
        #[allow(
            clippy::let_underscore_must_use,
            reason = "a folder of another owner cannot be narrowed; the blobs in it are 0600 all the same"
        )]
        let _ = crate::private_files::restrict_dir(&dir);
        let store = DirBlobStore { dir };
        store.sweep();
        Ok(store)
    }

    /// Removes temporaries left by processes that are gone and narrows blobs' modes.
    fn sweep(&self) {
        let Ok(entries) = std::fs::read_dir(&self.dir) else { return };
        for entry in entries.flatten() {
            let name = entry.file_name();
            let Some(name) = name.to_str() else { continue };
            if let Some(writer) = name.strip_suffix(".tmp") {
                // `<hex>.tmp` from before temporaries were named after their writer: stale too.
                let pid =
                    writer.rsplit_once('.').and_then(|(_, w)| w.split_once('-')).and_then(|(p, _)| p.parse().ok());
                if pid.is_none_or(|pid| !process_alive(pid)) {
                    #[allow(
                        clippy::let_underscore_must_use,
                        reason = "tidying a stale temporary; one that cannot be removed is tried again at the next open"
                    )]
                    let _ = std::fs::remove_file(entry.path());
                }
            } else if blob_id_of(name).is_some() {
                #[allow(
                    clippy::let_underscore_must_use,
                    reason = "best effort on blobs of older versions; each new blob is written 0600"
                )]
                let _ = crate::private_files::restrict_file(&entry.path());
            }
        }
    }

    fn path(&self, id: &[u8]) -> Result<PathBuf, CoreError> {
        check_blob_id(id)?;
        Ok(self.dir.join(hex::encode(id)))
    }
}

/// Ids name files: an empty one would name the folder itself, a huge one no file at all.
fn check_blob_id(id: &[u8]) -> Result<(), CoreError> {
    if id.is_empty() {
        return Err(CoreError::InvalidInput("blob id is empty".into()));
    }
    if id.len() > MAX_BLOB_ID_BYTES {
        return Err(CoreError::InvalidInput(format!(
            "blob id is {} bytes long, more than the {MAX_BLOB_ID_BYTES} accepted",
            id.len()
        )));
    }
    Ok(())
}

/// The id a file name stands for, if it is a blob's name (lowercase hex of a valid id).
fn blob_id_of(name: &str) -> Option<Vec<u8>> {
    if name.bytes().any(|b| b.is_ascii_uppercase()) {
        return None;
    }
    hex::decode(name).ok().filter(|id| check_blob_id(id).is_ok())
}

#[cfg(unix)]
fn process_alive(pid: u32) -> bool {
    if pid == std::process::id() {
        return true;
    }
    let Ok(pid) = libc::pid_t::try_from(pid) else { return false };
    // SAFETY: signal 0 only checks whether the process exists; nothing is sent.
    let found = unsafe { libc::kill(pid, 0) } == 0;
    found || std::io::Error::last_os_error().raw_os_error() == Some(libc::EPERM)
}

/// No cheap check elsewhere: only this process's own temporaries count as in flight.
#[cfg(not(unix))]
fn process_alive(pid: u32) -> bool {
    pid == std::process::id()
}

impl BlobStore for DirBlobStore {
    fn get(&self, id: Bytes) -> BoxFuture<'static, Result<Option<Bytes>, CoreError>> {
        let path = self.path(&id);
        Box::pin(async move {
            match tokio::fs::read(&path?).await {
                Ok(data) => Ok(Some(Bytes::from(data))),
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
                Err(e) => Err(CoreError::Callback(format!("blob store read failed: {e}"))),
            }
        })
    }

    fn set(&self, id: Bytes, data: Bytes) -> BoxFuture<'static, Result<(), CoreError>> {
        static NEXT: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(1);
        let path = self.path(&id);
        let dir = self.dir.clone();
        Box::pin(async move {
            let path = path?;
            let n = NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
            let tmp = dir.join(format!(".{}.{}-{n}.tmp", hex::encode(&id), std::process::id()));
            // Written and renamed in one job of the file thread: a blob is whole once it has
            // its name.
            let renamed = {
                let tmp = tmp.clone();
                crate::file_queue::run(move || {
                    crate::private_files::write_new_file(&tmp, &data)?;
                    std::fs::rename(&tmp, &path)
                })
                .await
                .unwrap_or_else(|e| Err(std::io::Error::other(e)))
            };
            let Err(e) = renamed else { return Ok(()) };
            #[allow(
                clippy::let_underscore_must_use,
                reason = "the write's own error is the one reported; a leftover temporary is tidied at the next open"
            )]
            let _ = tokio::fs::remove_file(&tmp).await;
            // A missing folder is its owner's doing (a deleted session): said as such, and left
            // missing.
            if e.kind() == std::io::ErrorKind::NotFound && tokio::fs::metadata(&dir).await.is_err() {
                return Err(CoreError::Callback(format!(
                    "blob store write failed: the blob folder {} is gone (removed by its owner), and a write does not make it again",
                    dir.display()
                )));
            }
            Err(CoreError::Callback(format!("blob store write failed: {e}")))
        })
    }

    fn snapshot(&self) -> Option<Vec<(Bytes, Bytes)>> {
        let entries = std::fs::read_dir(&self.dir).ok()?;
        let mut out = Vec::new();
        for entry in entries.flatten() {
            let name = entry.file_name();
            let Some(id) = name.to_str().and_then(blob_id_of) else { continue };
            if let Ok(data) = std::fs::read(entry.path()) {
                out.push((Bytes::from(id), Bytes::from(data)));
            }
        }
        Some(out)
    }
}
