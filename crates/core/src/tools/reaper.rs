//! The process groups this process starts (shells, and stdio MCP servers a host starts and
//! names with [`watch_child_group`]) end with this process, however it ends.
//!
//! A shell runs in a process group of its own, and [`super::process::GroupKill`] kills the group
//! when the tools are done with it. That needs this process to run its destructors: an agent
//! killed outright (an editor's `SIGKILL`, a crash, the OOM killer) would leave every shell it
//! started running, a dev server holding its port included. So the first group watched also
//! starts a watcher: a small `sh` in a process group of its own, told of each group as it
//! starts and as it is killed or known empty, on a pipe only this process holds open. When this
//! process ends, the kernel closes that pipe; the watcher then sends the groups still listed
//! `SIGTERM`, then `SIGKILL` a second later, and exits. On Windows each shell is in a job
//! object that Windows ends with this process (`super::job`), and a process a host names joins
//! a job of its own, held here: no watcher is needed.

use crate::error::CoreError;

#[cfg(unix)]
mod unix {
    use std::io::Write;
    use std::process::{ChildStdin, Command, Stdio};
    use std::sync::Mutex;

    /// The watcher's program. It reads `+<pgid>` (watch) and `-<pgid>` (forget) lines until its
    /// input ends, then signals what is left. Only shell built-ins and `sleep`; it ignores the
    /// terminal's hangup and interrupt, which reach the agent's process group, not its own.
    const WATCHER: &str = r#"# cursor-acp-native: ends the process groups of process $1 when it ends
trap '' HUP INT
groups=' '
while IFS= read -r line; do
  id=${line#?}
  case $id in ''|*[!0-9]*) continue ;; esac
  kept=' '
  for g in $groups; do [ "$g" = "$id" ] || kept="$kept$g "; done
  case $line in +*) kept="$kept$id " ;; esac
  groups=$kept
done
[ "$groups" = ' ' ] && exit 0
for g in $groups; do kill -s TERM -- "-$g" 2>/dev/null; done
sleep 1
for g in $groups; do kill -s KILL -- "-$g" 2>/dev/null; done
exit 0
"#;

    enum State {
        NotStarted,
        Watching(ChildStdin),
        /// It could not be started, or its pipe broke (someone ended it): shells still run and
        /// are still killed by their `GroupKill`s, only not after a crash.
        Gone,
    }

    static WATCHER_INPUT: Mutex<State> = Mutex::new(State::NotStarted);

    fn start() -> std::io::Result<ChildStdin> {
        let mut command = Command::new("/bin/sh");
        command
            .arg("-c")
            .arg(WATCHER)
            .arg("cursor-acp-native-reaper")
            .arg(std::process::id().to_string())
            .current_dir("/")
            .env_clear()
            .env("PATH", "/usr/bin:/bin")
            .stdin(Stdio::piped())
            .stdout(Stdio::null())
            .stderr(Stdio::null());
        std::os::unix::process::CommandExt::process_group(&mut command, 0);
        // The pipe's write end is close-on-exec here, so no shell started later holds it open.
        // The child is not waited for: it exits only once this process has.
        let mut child = command.spawn()?;
        child.stdin.take().ok_or_else(|| std::io::Error::other("the watcher has no stdin pipe"))
    }

    /// Writes `line` to the watcher, starting it first if `start_if_needed` and it is not yet.
    fn tell(line: String, start_if_needed: bool) {
        let mut state = WATCHER_INPUT.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
        if matches!(*state, State::NotStarted) {
            if !start_if_needed {
                return;
            }
            *state = match start() {
                Ok(input) => State::Watching(input),
                Err(e) => {
                    tracing::warn!("shells will not be ended should this process crash: cannot start /bin/sh ({e})");
                    State::Gone
                }
            };
        }
        if let State::Watching(input) = &mut *state {
            // A line is far below the pipe's buffer, and the watcher reads at once.
            if input.write_all(line.as_bytes()).is_err() {
                tracing::warn!("the shells' watcher is gone: shells will not be ended should this process crash");
                *state = State::Gone;
            }
        }
    }

    pub fn watch_group(pgid: u32) {
        tell(format!("+{pgid}\n"), true);
    }

    pub fn forget_group(pgid: u32) {
        // Nothing to forget before the first watch.
        tell(format!("-{pgid}\n"), false);
    }
}

/// Ends process group `pgid` (`SIGTERM`, then `SIGKILL` a second later) when this process
/// ends, unless [`forget_group`] was called for it first. The group must be one this process
/// started (its leader a child of this process): the watcher signals whatever group has that id.
#[cfg(unix)]
pub(super) use unix::watch_group;

/// [`watch_group`] for a group a host started (a stdio MCP server, say), refusing ids that
/// cannot be such a group: 0 and 1 (`kill -0` is the watcher's own group, 1 is init's) and
/// this process's own group, which holds the editor that started it. On Windows `pgid` is the
/// process's id: it joins a job object of its own, which ends it and what it starts when this
/// process ends or [`forget_group`] is called.
pub fn watch_child_group(pgid: u32) -> Result<(), CoreError> {
    if pgid < 2 {
        return Err(CoreError::InvalidInput(format!("{pgid} is not the id of a process group this process started")));
    }
    #[cfg(unix)]
    {
        // SAFETY: getpgrp takes nothing and cannot fail.
        let own = unsafe { libc::getpgrp() };
        if i64::from(pgid) == i64::from(own) {
            return Err(CoreError::InvalidInput(format!("{pgid} is this process's own process group")));
        }
    }
    #[cfg(windows)]
    return windows::hold(pgid);
    #[cfg(unix)]
    {
        watch_group(pgid);
        Ok(())
    }
}

/// Stops watching process group `pgid`: it was killed or is known empty, and its id may be
/// reused by another group.
#[cfg(unix)]
pub use unix::forget_group;

/// On Windows: closes the job of process `pid` if a host put it in one ([`watch_child_group`]),
/// which ends what is left in it (as the agent does to a Unix group before forgetting it).
#[cfg(windows)]
pub use windows::forget as forget_group;

#[cfg(windows)]
mod windows {
    use std::collections::HashMap;
    use std::sync::{Mutex, PoisonError};

    use crate::error::CoreError;
    use crate::tools::job::Job;

    /// The jobs of the processes hosts named, by process id. Each handle is this process's
    /// only one: Windows closes it, and ends the job's processes, when this process ends.
    static HELD: Mutex<Option<HashMap<u32, Job>>> = Mutex::new(None);

    pub(super) fn hold(pid: u32) -> Result<(), CoreError> {
        let unheld =
            |e: std::io::Error| CoreError::InvalidInput(format!("process {pid} cannot be put in a job object: {e}"));
        let job = Job::new().map_err(unheld)?;
        job.hold(pid).map_err(unheld)?;
        let mut held = HELD.lock().unwrap_or_else(PoisonError::into_inner);
        // A job held before for the same id was a process that has ended (ids are reused only
        // then): dropping it ends nothing that still belongs to anyone.
        held.get_or_insert_with(HashMap::new).insert(pid, job);
        Ok(())
    }

    pub fn forget(pid: u32) {
        let job = HELD.lock().unwrap_or_else(PoisonError::into_inner).as_mut().and_then(|held| held.remove(&pid));
        if let Some(job) = job {
            job.terminate();
        }
    }
}

#[cfg(all(test, unix))]
mod tests {
    use super::watch_child_group;

    #[test]
    fn ids_that_cannot_be_a_started_group_are_refused() {
        // SAFETY: getpgrp takes nothing and cannot fail.
        let own = unsafe { libc::getpgrp() } as u32;
        for pgid in [0, 1, own] {
            let refused = watch_child_group(pgid);
            assert!(matches!(refused, Err(crate::CoreError::InvalidInput(_))), "{pgid}: {refused:?}");
        }
    }
}
