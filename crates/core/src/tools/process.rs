//! A shell's process and the ones it starts: its group (a process group on Unix, a job object
//! on Windows) killed when the handle is dropped, SIGTERM then SIGKILL on a timeout, its pipes
//! read until they close.

use std::io;
use std::time::Duration;

use tokio::io::{AsyncRead, AsyncReadExt};
use tokio::process::{Child, Command};

#[cfg(windows)]
use super::job::{self, Job};
use super::reaper;

/// SIGTERM first on timeout, then SIGKILL after this grace.
const KILL_GRACE: Duration = Duration::from_millis(1500);

/// Starts `cmd` (made by `shell_command`, which on Unix makes it lead a process group of its
/// own) with the [`GroupKill`] for everything it will start. On Windows the shell starts in a
/// job object of its own, suspended until it is in the job.
pub(super) fn spawn_group(cmd: &mut Command) -> io::Result<(Child, GroupKill)> {
    #[cfg(windows)]
    {
        let job = match Job::new() {
            Ok(job) => {
                cmd.creation_flags(job::START_SUSPENDED);
                Some(job)
            }
            Err(e) => {
                tracing::warn!("no job object for a shell ({e}): ending it falls back to taskkill");
                None
            }
        };
        let mut child = cmd.spawn()?;
        let pid = child.id();
        let job = match (job, child.raw_handle(), pid) {
            (Some(job), Some(process), Some(pid)) => match job.adopt(process, pid) {
                Ok(true) => Some(job),
                Ok(false) => None,
                Err(e) => {
                    #[allow(
                        clippy::let_underscore_must_use,
                        reason = "the shell never ran; a kill that fails leaves it suspended, and kill_on_drop tries again"
                    )]
                    let _ = child.start_kill();
                    return Err(e);
                }
            },
            (Some(_), _, _) => {
                // A process std just created suspended has a handle and an id; should either be
                // missing, it could be neither joined nor resumed, and it would wait forever.
                #[allow(
                    clippy::let_underscore_must_use,
                    reason = "the shell never ran; a kill that fails leaves it suspended, and kill_on_drop tries again"
                )]
                let _ = child.start_kill();
                return Err(io::Error::other("the suspended shell has no process handle or id to resume it by"));
            }
            (None, _, _) => None,
        };
        Ok((child, GroupKill { pid, job }))
    }
    #[cfg(not(windows))]
    {
        let child = cmd.spawn()?;
        let kill = GroupKill::new(child.id());
        Ok((child, kill))
    }
}

/// Kills a shell's process group when dropped: an exec future dropped mid-run (turn cancelled,
/// server abort) leaves no process behind. While armed, the group is also listed with the
/// reaper (Unix), or held by a job object that Windows ends with this process, so it is killed
/// should this process end without dropping anything.
pub(super) struct GroupKill {
    /// The shell's pid, which leads its process group, while the group may hold processes.
    pid: Option<u32>,
    /// The shell's job, when it could be put in one (see [`spawn_group`]).
    #[cfg(windows)]
    job: Option<Job>,
}

impl GroupKill {
    /// For the group led by `pid` (the shell's), when it started.
    #[cfg(not(windows))]
    fn new(pid: Option<u32>) -> Self {
        if let Some(pid) = pid {
            reaper::watch_group(pid);
        }
        GroupKill { pid }
    }

    /// Whether anything is left to kill (the shell started and the group was not disarmed).
    pub(super) fn is_armed(&self) -> bool {
        self.pid.is_some()
    }

    /// Sends `signal` to the whole group (on Windows, any signal ends the job's processes).
    pub(super) fn signal(&self, signal: Signal) {
        let Some(pid) = self.pid else { return };
        #[cfg(windows)]
        if let Some(job) = &self.job {
            job.terminate();
            return;
        }
        signal_group(pid, signal);
    }

    /// The shell's run is over and nothing holds its output: nothing is killed, now or after a
    /// crash (on Unix the group is empty and its id may be reused; on Windows what is left in
    /// the job was started to outlive the shell).
    pub(super) fn disarm(&mut self) {
        if let Some(pid) = self.pid.take() {
            reaper::forget_group(pid);
        }
        #[cfg(windows)]
        if let Some(job) = self.job.take() {
            job.release();
        }
    }
}

impl Drop for GroupKill {
    fn drop(&mut self) {
        self.signal(Signal::Kill);
        if let Some(pid) = self.pid.take() {
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
fn signal_group(pid: u32, signal: Signal) {
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
fn signal_group(pid: u32, _signal: Signal) {
    // A shell outside a job (none could be made): end the tree with taskkill, best effort.
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
pub(super) async fn terminate(child: &mut Child, group: &GroupKill) {
    if !group.is_armed() {
        #[allow(
            clippy::let_underscore_must_use,
            reason = "the child may have exited already; nothing more can be done about one that cannot be killed"
        )]
        let _ = child.kill().await;
        return;
    }
    group.signal(Signal::Term);
    if tokio::time::timeout(KILL_GRACE, child.wait()).await.is_err() {
        group.signal(Signal::Kill);
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
