//! What the tools' test binaries share: a workspace in a temp dir with the tools on it, an exec
//! context, and checks on processes and files.
#![allow(dead_code, reason = "each test binary includes this module and uses a part of it")]

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use cursor_acp_core::host::{ExecContext, ExecEvent};
use cursor_acp_core::kinds::ExecKind;
use cursor_acp_core::tools::{LocalTools, ToolOptions, Workspace};
use cursor_acp_core::CancellationToken;
use serde_json::Value;
use tokio::sync::mpsc;

pub struct Fixture {
    pub dir: tempfile::TempDir,
    _terminals: tempfile::TempDir,
    pub tools: LocalTools,
}

impl Fixture {
    pub fn new() -> Self {
        Self::with(|_| {})
    }

    pub fn with(tune: impl FnOnce(&mut ToolOptions)) -> Self {
        let dir = tempfile::tempdir().unwrap();
        let terminals = tempfile::tempdir().unwrap();
        let mut options = ToolOptions { terminals_dir: terminals.path().to_path_buf(), ..Default::default() };
        tune(&mut options);
        let tools = LocalTools::new(Workspace::new([dir.path()]).unwrap(), options);
        Fixture { dir, _terminals: terminals, tools }
    }

    pub fn root(&self) -> PathBuf {
        std::fs::canonicalize(self.dir.path()).unwrap()
    }

    pub fn file(&self, rel: &str, content: impl AsRef<[u8]>) -> PathBuf {
        let path = self.dir.path().join(rel);
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(&path, content).unwrap();
        path
    }

    pub async fn run(&self, kind: &str, args: Value) -> Value {
        let (ctx, _rx) = context();
        let kind = ExecKind::from_name(kind).expect("a kind of the schema");
        self.tools.run_kind(kind, &args, &ctx).await.unwrap().expect("handled kind")
    }
}

pub fn context() -> (ExecContext, mpsc::UnboundedReceiver<ExecEvent>) {
    ExecContext::new(CancellationToken::new())
}

pub fn is_root() -> bool {
    // SAFETY: geteuid has no preconditions.
    unsafe { libc::geteuid() == 0 }
}

pub fn alive(pid: i64) -> bool {
    // A zombie still answers kill(0), so look at its state too.
    let state = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
    let zombie = state.rsplit(')').next().is_some_and(|rest| rest.trim_start().starts_with('Z'));
    // SAFETY: signal 0 only checks for existence.
    unsafe { libc::kill(pid as libc::pid_t, 0) == 0 && !zombie }
}

pub async fn wait_for_file(path: &Path) -> String {
    let start = Instant::now();
    loop {
        if let Ok(s) = std::fs::read_to_string(path) {
            if !s.trim().is_empty() {
                return s;
            }
        }
        assert!(start.elapsed() < Duration::from_secs(10), "{} never appeared", path.display());
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}
