//! A shell's process: its group killed when the handle is dropped, SIGTERM then SIGKILL on a
//! timeout, its pipes read until they close.

use std::time::Duration;

use tokio::io::{AsyncRead, AsyncReadExt};
use tokio::process::Child;

use super::reaper;

/// SIGTERM first on timeout, then SIGKILL after this grace.
const KILL_GRACE: Duration = Duration::from_millis(1500);

/// Kills a process group when dropped: an exec future dropped mid-run (turn cancelled, server
/// abort) leaves no process behind. While armed, the group is also listed with the reaper,
/// which kills it should this process end without dropping anything.
pub(super) struct GroupKill(Option<u32>);

impl GroupKill {
    /// For the group led by `pid` (the shell's), when it started.
    pub(super) fn new(pid: Option<u32>) -> Self {
        if let Some(pid) = pid {
            reaper::watch_group(pid);
        }
        GroupKill(pid)
    }

    /// The group is known to be empty: nothing to kill, now or after a crash.
    pub(super) fn disarm(&mut self) {
        if let Some(pid) = self.0.take() {
            reaper::forget_group(pid);
        }
    }
}

impl Drop for GroupKill {
    fn drop(&mut self) {
        if let Some(pid) = self.0.take() {
            signal_group(pid, Signal::Kill);
            reaper::forget_group(pid);
        }
    }
}

#[derive(Clone, Copy)]
pub(super) enum Signal {
    Term,
    Kill,
}

#[cfg(unix)]
pub(super) fn signal_group(pid: u32, signal: Signal) {
    let sig = match signal {
        Signal::Term => libc::SIGTERM,
        Signal::Kill => libc::SIGKILL,
    };
    // SAFETY: kill(2) with a negative pid signals the process group; no memory is touched.
    unsafe {
        libc::kill(-(pid as libc::pid_t), sig);
    }
}

#[cfg(not(unix))]
pub(super) fn signal_group(pid: u32, _signal: Signal) {
    // No process groups: end the tree with taskkill, best effort.
    #[allow(clippy::let_underscore_must_use, reason = "best effort: a tree already gone is what was wanted")]
    let _ = std::process::Command::new("taskkill").args(["/PID", &pid.to_string(), "/T", "/F"]).output();
}

pub(super) async fn read_some(pipe: &mut (impl AsyncRead + Unpin), buf: &mut [u8]) -> Option<usize> {
    match pipe.read(buf).await {
        Ok(0) | Err(_) => None,
        Ok(n) => Some(n),
    }
}

/// SIGTERM to the group, SIGKILL if it is still there after the grace.
pub(super) async fn terminate(child: &mut Child, pid: Option<u32>) {
    let Some(pid) = pid else {
        #[allow(
            clippy::let_underscore_must_use,
            reason = "the child may have exited already; nothing more can be done about one that cannot be killed"
        )]
        let _ = child.kill().await;
        return;
    };
    signal_group(pid, Signal::Term);
    if tokio::time::timeout(KILL_GRACE, child.wait()).await.is_err() {
        signal_group(pid, Signal::Kill);
        // The shell itself too, should the group's kill not reach it (see the cancel above).
        #[allow(
            clippy::let_underscore_must_use,
            reason = "a shell already gone is what was wanted; the wait below reaps it"
        )]
        let _ = child.start_kill();
        #[allow(clippy::let_underscore_must_use, reason = "only reaps the killed child; its status is the timeout's")]
        let _ = child.wait().await;
    }
}
