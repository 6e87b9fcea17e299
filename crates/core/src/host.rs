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
    /// `shellStream`, `diagnostics`, `mcp`, `fetch`, `backgroundShellSpawn`, `writeShellStdin`, …
    pub kind: String,
    /// The branch's args message in proto3 JSON.
    pub args: serde_json::Value,
    /// Field number of the branch; the result uses the same number.
    pub(crate) field: u32,
}

/// Output a streaming shell exec reports while it runs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ShellOutput {
    Stdout(String),
    Stderr(String),
}

/// Per-exec context handed to the host.
#[derive(Debug, Clone)]
pub struct ExecContext {
    /// Cancelled on the server's `abort`, on turn cancel, or when the callback times out.
    pub cancel: CancellationToken,
    /// For `shellStream` (and `shell`): stream output chunks as they are produced.
    pub output: mpsc::UnboundedSender<ShellOutput>,
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

/// Blobs as files named by the hex of their id, so they survive restarts.
#[derive(Debug, Clone)]
pub struct DirBlobStore {
    dir: PathBuf,
}

impl DirBlobStore {
    pub fn new(dir: impl Into<PathBuf>) -> Result<Self, CoreError> {
        let dir = dir.into();
        std::fs::create_dir_all(&dir)
            .map_err(|e| CoreError::InvalidInput(format!("blob directory {}: {e}", dir.display())))?;
        Ok(DirBlobStore { dir })
    }

    fn path(&self, id: &[u8]) -> PathBuf {
        self.dir.join(hex::encode(id))
    }
}

impl BlobStore for DirBlobStore {
    fn get(&self, id: Bytes) -> BoxFuture<'static, Result<Option<Bytes>, CoreError>> {
        let path = self.path(&id);
        Box::pin(async move {
            match tokio::fs::read(&path).await {
                Ok(data) => Ok(Some(Bytes::from(data))),
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
                Err(e) => Err(CoreError::Callback(format!("blob store read failed: {e}"))),
            }
        })
    }

    fn set(&self, id: Bytes, data: Bytes) -> BoxFuture<'static, Result<(), CoreError>> {
        let path = self.path(&id);
        Box::pin(async move {
            // Write then rename, so a crash never leaves a truncated blob under a valid id.
            let tmp = path.with_extension("tmp");
            tokio::fs::write(&tmp, &data)
                .await
                .map_err(|e| CoreError::Callback(format!("blob store write failed: {e}")))?;
            tokio::fs::rename(&tmp, &path)
                .await
                .map_err(|e| CoreError::Callback(format!("blob store write failed: {e}")))
        })
    }

    fn snapshot(&self) -> Option<Vec<(Bytes, Bytes)>> {
        let entries = std::fs::read_dir(&self.dir).ok()?;
        let mut out = Vec::new();
        for entry in entries.flatten() {
            let name = entry.file_name();
            let Some(id) = name.to_str().and_then(|n| hex::decode(n).ok()) else { continue };
            if let Ok(data) = std::fs::read(entry.path()) {
                out.push((Bytes::from(id), Bytes::from(data)));
            }
        }
        Some(out)
    }
}
