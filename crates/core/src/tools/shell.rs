//! shell and shellStream: local processes in their own process group, so abort, timeout and
//! teardown kill everything the command started.

use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::{Duration, Instant};

use tokio::io::{AsyncRead, AsyncReadExt};
use tokio::process::{Child, Command};

use crate::host::ExecContext;
use crate::proto::agent::v1 as pb;

use super::background::{spawn_background, Shells};
use super::environment::ShellEnvironment;
use super::reaper;
use super::workspace::Failure;
use super::{TerminalsFolder, ToolOptions, Workspace};

/// How long pipes are still drained after the shell exits: a command that leaves a daemon
/// holding stdout (`server &`) must not hold the result forever.
const DRAIN_AFTER_EXIT: Duration = Duration::from_millis(200);
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
    fn disarm(&mut self) {
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
enum Signal {
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
    // No process groups: end the tree with taskkill, best effort.
    let _ = std::process::Command::new("taskkill").args(["/PID", &pid.to_string(), "/T", "/F"]).output();
}

/// What the shell tools work with.
pub(super) struct ShellContext<'a> {
    pub workspace: &'a Workspace,
    pub options: &'a ToolOptions,
    /// The processes' environment, or why the host's policy is invalid.
    pub environment: Result<&'a ShellEnvironment, &'a String>,
    pub shells: &'a Shells,
    pub terminals: &'a TerminalsFolder,
}

/// `<shell> -c <command>` in `cwd`, in a process group of its own, with exactly the environment
/// the policy makes (nothing else of the host's is inherited).
pub(super) fn shell_command(t: &ShellContext, command: &str, cwd: &Path) -> Result<Command, String> {
    let environment = t.environment.map_err(|e| e.clone())?;
    let program = t.options.shell.clone().unwrap_or_else(default_shell);
    let mut cmd = Command::new(&program);
    let is_cmd = program.file_stem().is_some_and(|s| s.eq_ignore_ascii_case("cmd"));
    #[cfg(windows)]
    if is_cmd {
        // cmd.exe reads its command line itself and knows no `\"` escape: the quoting Command
        // adds for a C runtime's argv reached the command as backslashes (`echo "a b"` printed
        // `\"a b\"`). So the line goes as cmd wants it, as Node's `shell: true` passes it:
        // `/d` (no AutoRun commands from the registry), `/s /c "<command>"` (exactly the outer
        // quotes are stripped, the command is kept as written).
        cmd.raw_arg(format!("/d /s /c \"{command}\""));
    }
    if !(cfg!(windows) && is_cmd) {
        cmd.arg("-c").arg(command);
    }
    cmd.current_dir(cwd).env_clear().envs(environment.build(std::env::vars_os())).kill_on_drop(true);
    #[cfg(unix)]
    cmd.process_group(0);
    Ok(cmd)
}

/// The shell the tools run commands with when none is configured: bash, else sh (cmd on
/// Windows). The request context names the same value, so the model is told of the shell that
/// runs its commands.
pub fn default_shell() -> PathBuf {
    if cfg!(windows) {
        return PathBuf::from("cmd");
    }
    ["/bin/bash", "/usr/bin/bash", "/bin/sh"]
        .iter()
        .map(PathBuf::from)
        .find(|p| p.exists())
        .unwrap_or_else(|| "sh".into())
}

/// What the `shell` option takes, for its one error message.
pub const SHELL_TAKES: &str = "an executable file: an absolute path, or a name found on PATH";

/// The shell a configured `shell` names, as an absolute path: the file itself when `configured`
/// has a directory part, else the first executable of that name on `PATH` (what `Command`
/// would run, resolved once so the request context names the very file). `Err` says why the
/// value cannot run (the caller adds the option's name). A bare-name lookup is a few lines over
/// `split_paths`, so it takes no crate of its own.
pub fn resolve_shell(configured: &str) -> Result<PathBuf, String> {
    if configured.trim().is_empty() || configured.contains('\0') {
        return Err("not a file name".into());
    }
    let path = Path::new(configured);
    if path.components().count() > 1 || path.is_absolute() {
        let absolute = std::path::absolute(path).map_err(|e| e.to_string())?;
        return executable(&absolute).map(|()| absolute);
    }
    let search = std::env::var_os("PATH").unwrap_or_default();
    std::env::split_paths(&search)
        .filter(|dir| dir.is_absolute())
        .map(|dir| dir.join(path))
        .find(|candidate| executable(candidate).is_ok())
        .ok_or_else(|| "not found on PATH".into())
}

/// Whether `path` is a file this process could run.
fn executable(path: &Path) -> Result<(), String> {
    let meta = std::fs::metadata(path).map_err(|e| match e.kind() {
        std::io::ErrorKind::NotFound => "no such file".to_string(),
        _ => e.to_string(),
    })?;
    if !meta.is_file() {
        return Err("not a file".into());
    }
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        if meta.permissions().mode() & 0o111 == 0 {
            return Err("not executable".into());
        }
    }
    Ok(())
}

/// Incremental UTF-8 decoding of a pipe: a character split across reads is held until complete.
#[derive(Default)]
struct Utf8Stream {
    pending: Vec<u8>,
}

impl Utf8Stream {
    fn push(&mut self, bytes: &[u8]) -> String {
        self.pending.extend_from_slice(bytes);
        let mut out = String::new();
        loop {
            match std::str::from_utf8(&self.pending) {
                Ok(s) => {
                    out.push_str(s);
                    self.pending.clear();
                    return out;
                }
                Err(e) => {
                    let valid = e.valid_up_to();
                    out.push_str(std::str::from_utf8(&self.pending[..valid]).expect("valid prefix"));
                    match e.error_len() {
                        None => {
                            self.pending.drain(..valid);
                            return out;
                        }
                        Some(bad) => {
                            out.push('\u{FFFD}');
                            self.pending.drain(..valid + bad);
                        }
                    }
                }
            }
        }
    }

    fn finish(&mut self) -> String {
        let rest = String::from_utf8_lossy(&self.pending).into_owned();
        self.pending.clear();
        rest
    }
}

/// Output kept for the final result: the tail, when it grows past the cap.
struct Captured {
    text: String,
    cap: usize,
    dropped: bool,
}

impl Captured {
    fn new(cap: usize) -> Self {
        Self { text: String::new(), cap, dropped: false }
    }

    fn push(&mut self, s: &str) {
        self.text.push_str(s);
        if self.text.len() > self.cap {
            let mut cut = self.text.len() - self.cap;
            while !self.text.is_char_boundary(cut) {
                cut += 1;
            }
            self.text.drain(..cut);
            self.dropped = true;
        }
    }

    fn finish(self) -> String {
        if self.dropped {
            format!("[… earlier output truncated …]\n{}", self.text)
        } else {
            self.text
        }
    }
}

enum Ending {
    Exited(std::process::ExitStatus),
    TimedOut,
    Aborted,
    WaitFailed(std::io::Error),
}

/// Resolves the working directory, or the `rejected` / `spawn_error` reason.
pub(super) fn working_directory(ws: &Workspace, requested: &str) -> Result<PathBuf, (bool, String)> {
    let located = ws.locate(requested).map_err(|e| (true, e.to_string()))?;
    match located.metadata() {
        Ok(m) if m.is_dir() => Ok(located.absolute),
        Err(Failure::Refused(e)) => Err((true, e.to_string())),
        _ => Err((false, format!("working directory {} does not exist", located.absolute.display()))),
    }
}

/// Runs `args.command`. `ctx` hears the output as it comes, and `started` once the process
/// has been spawned (never for a command refused or failing to spawn).
pub async fn run(t: &ShellContext<'_>, args: &pb::ShellArgs, ctx: &ExecContext) -> pb::ShellResult {
    use pb::shell_result::Result as R;
    let opts = t.options;
    let command = args.command.clone();
    let cwd = match working_directory(t.workspace, &args.working_directory) {
        Ok(d) => d,
        Err((true, reason)) => {
            return result(R::Rejected(pb::ShellRejected {
                command,
                working_directory: args.working_directory.clone(),
                reason,
                is_readonly: false,
            }))
        }
        Err((false, error)) => {
            return result(R::SpawnError(pb::ShellSpawnError {
                command,
                working_directory: args.working_directory.clone(),
                error,
            }))
        }
    };
    let wd = cwd.display().to_string();
    if args.is_background {
        let spawn = pb::BackgroundShellSpawnArgs {
            command: command.clone(),
            working_directory: wd.clone(),
            enable_write_shell_stdin_tool: true,
            ..Default::default()
        };
        return match spawn_background(t, &spawn).result {
            Some(pb::background_shell_spawn_result::Result::Success(s)) => {
                ctx.started();
                pb::ShellResult {
                    is_background: Some(true),
                    pid: s.pid,
                    terminals_folder: Some(t.terminals.path().display().to_string()),
                    result: Some(R::Success(pb::ShellSuccess {
                        command,
                        working_directory: wd,
                        shell_id: Some(s.shell_id),
                        pid: s.pid,
                        stdout: format!("started in the background as shell {}", s.shell_id),
                        background_reason: Some(pb::ShellBackgroundReason::UserRequest as i32),
                        ..Default::default()
                    })),
                    ..Default::default()
                }
            }
            Some(pb::background_shell_spawn_result::Result::Error(e)) => {
                result(R::SpawnError(pb::ShellSpawnError { command, working_directory: wd, error: e.error }))
            }
            _ => result(R::SpawnError(pb::ShellSpawnError {
                command,
                working_directory: wd,
                error: "spawn failed".into(),
            })),
        };
    }

    let timeout_ms: u64 = if args.timeout > 0 { args.timeout as u64 } else { opts.shell_timeout.as_millis() as u64 };
    let mut cmd = match shell_command(t, &command, &cwd) {
        Ok(cmd) => cmd,
        Err(error) => return result(R::SpawnError(pb::ShellSpawnError { command, working_directory: wd, error })),
    };
    // Foreground shells never read from us: a command waiting on stdin sees EOF instead of hanging.
    cmd.stdin(Stdio::null());
    cmd.stdout(Stdio::piped()).stderr(Stdio::piped());
    let started = Instant::now();
    let mut child = match cmd.spawn() {
        Ok(c) => c,
        Err(e) => {
            return result(R::SpawnError(pb::ShellSpawnError { command, working_directory: wd, error: e.to_string() }))
        }
    };
    // Only now has anything started: a streaming shell's `start` goes out.
    ctx.started();
    let pid = child.id();
    let mut kill = GroupKill::new(pid);
    let mut pipes_held = false;
    let mut stdout = child.stdout.take().expect("piped stdout");
    let mut stderr = child.stderr.take().expect("piped stderr");

    let (mut out_text, mut err_text, mut both) = (
        Captured::new(opts.max_output_bytes),
        Captured::new(opts.max_output_bytes),
        Captured::new(opts.max_output_bytes),
    );
    let (mut out_dec, mut err_dec) = (Utf8Stream::default(), Utf8Stream::default());
    let mut emit = |is_err: bool, text: String| {
        if text.is_empty() {
            return;
        }
        both.push(&text);
        if is_err {
            err_text.push(&text);
            ctx.stderr(text);
        } else {
            out_text.push(&text);
            ctx.stdout(text);
        }
    };
    let (mut out_buf, mut err_buf) = (vec![0u8; 16 * 1024], vec![0u8; 16 * 1024]);
    let (mut out_open, mut err_open) = (true, true);
    let deadline = tokio::time::sleep(Duration::from_millis(timeout_ms));
    tokio::pin!(deadline);
    let mut ending: Option<Ending> = None;
    let mut drain_until: Option<tokio::time::Instant> = None;

    loop {
        if ending.is_some() && !out_open && !err_open {
            break;
        }
        let drain_deadline = async {
            match drain_until {
                Some(t) => tokio::time::sleep_until(t).await,
                None => std::future::pending().await,
            }
        };
        tokio::select! {
            n = read_some(&mut stdout, &mut out_buf), if out_open => match n {
                Some(n) => emit(false, out_dec.push(&out_buf[..n])),
                None => out_open = false,
            },
            n = read_some(&mut stderr, &mut err_buf), if err_open => match n {
                Some(n) => emit(true, err_dec.push(&err_buf[..n])),
                None => err_open = false,
            },
            status = child.wait(), if ending.is_none() => {
                ending = Some(match status {
                    Ok(s) => Ending::Exited(s),
                    Err(e) => Ending::WaitFailed(e),
                });
                drain_until = Some(tokio::time::Instant::now() + DRAIN_AFTER_EXIT);
            }
            _ = &mut deadline, if ending.is_none() => {
                terminate(&mut child, pid).await;
                ending = Some(Ending::TimedOut);
                drain_until = Some(tokio::time::Instant::now() + DRAIN_AFTER_EXIT);
            }
            _ = ctx.cancel.cancelled(), if ending.is_none() => {
                if let Some(pid) = pid {
                    signal_group(pid, Signal::Kill);
                }
                // And the shell itself, whatever became of its group: on Windows taskkill can
                // fail or be missing (under wine it left cmd.exe running), and waiting on a
                // shell that still runs would hold the cancelled exec, and the turn, forever.
                let _ = child.start_kill();
                let _ = child.wait().await;
                ending = Some(Ending::Aborted);
                drain_until = Some(tokio::time::Instant::now() + DRAIN_AFTER_EXIT);
            }
            _ = drain_deadline => {
                pipes_held = true;
                break;
            }
        }
    }
    emit(false, out_dec.finish());
    emit(true, err_dec.finish());
    // A process the shell left behind still holding its output (`server &`) goes with it, as
    // when a terminal closes; start it with is_background to keep it. Otherwise the group is
    // empty and the pid may be reused, so it is not signalled.
    if !pipes_held {
        kill.disarm();
    }
    drop(kill);
    let elapsed = started.elapsed().as_millis().min(i32::MAX as u128) as i32;
    let (stdout, stderr, interleaved) = (out_text.finish(), err_text.finish(), both.finish());
    let outcome = match ending.expect("loop ends after an ending") {
        Ending::Exited(status) => {
            let signal = exit_signal(&status);
            match status.code() {
                Some(0) => R::Success(pb::ShellSuccess {
                    command,
                    working_directory: wd,
                    exit_code: 0,
                    stdout,
                    stderr,
                    execution_time: elapsed,
                    interleaved_output: Some(interleaved),
                    pid,
                    local_execution_time_ms: Some(elapsed),
                    ..Default::default()
                }),
                code => R::Failure(pb::ShellFailure {
                    command,
                    working_directory: wd,
                    exit_code: code.unwrap_or_else(|| 128 + signal.map_or(0, |(n, _)| n)),
                    signal: signal.map(|(_, name)| name.to_string()).unwrap_or_default(),
                    stdout,
                    stderr,
                    execution_time: elapsed,
                    interleaved_output: Some(interleaved),
                    local_execution_time_ms: Some(elapsed),
                    ..Default::default()
                }),
            }
        }
        Ending::TimedOut => R::Timeout(pb::ShellTimeout {
            command,
            working_directory: wd,
            timeout_ms: timeout_ms.min(i32::MAX as u64) as i32,
        }),
        Ending::Aborted => R::Failure(pb::ShellFailure {
            command,
            working_directory: wd,
            exit_code: 130,
            signal: "SIGKILL".into(),
            stdout,
            stderr,
            execution_time: elapsed,
            interleaved_output: Some(interleaved),
            abort_reason: Some(pb::ShellAbortReason::UserAbort as i32),
            aborted: true,
            local_execution_time_ms: Some(elapsed),
            output_location: None,
            ..Default::default()
        }),
        Ending::WaitFailed(e) => {
            R::SpawnError(pb::ShellSpawnError { command, working_directory: wd, error: e.to_string() })
        }
    };
    pb::ShellResult { pid, result: Some(outcome), ..Default::default() }
}

fn result(r: pb::shell_result::Result) -> pb::ShellResult {
    pb::ShellResult { result: Some(r), ..Default::default() }
}

pub(super) async fn read_some(pipe: &mut (impl AsyncRead + Unpin), buf: &mut [u8]) -> Option<usize> {
    match pipe.read(buf).await {
        Ok(0) | Err(_) => None,
        Ok(n) => Some(n),
    }
}

/// SIGTERM to the group, SIGKILL if it is still there after the grace.
async fn terminate(child: &mut Child, pid: Option<u32>) {
    let Some(pid) = pid else {
        let _ = child.kill().await;
        return;
    };
    signal_group(pid, Signal::Term);
    if tokio::time::timeout(KILL_GRACE, child.wait()).await.is_err() {
        signal_group(pid, Signal::Kill);
        // The shell itself too, should the group's kill not reach it (see the cancel above).
        let _ = child.start_kill();
        let _ = child.wait().await;
    }
}

#[cfg(unix)]
fn exit_signal(status: &std::process::ExitStatus) -> Option<(i32, &'static str)> {
    use std::os::unix::process::ExitStatusExt;
    let n = status.signal()?;
    let name = match n {
        libc::SIGHUP => "SIGHUP",
        libc::SIGINT => "SIGINT",
        libc::SIGQUIT => "SIGQUIT",
        libc::SIGILL => "SIGILL",
        libc::SIGABRT => "SIGABRT",
        libc::SIGFPE => "SIGFPE",
        libc::SIGKILL => "SIGKILL",
        libc::SIGSEGV => "SIGSEGV",
        libc::SIGPIPE => "SIGPIPE",
        libc::SIGALRM => "SIGALRM",
        libc::SIGTERM => "SIGTERM",
        libc::SIGUSR1 => "SIGUSR1",
        libc::SIGUSR2 => "SIGUSR2",
        _ => "SIGNAL",
    };
    Some((n, name))
}

#[cfg(not(unix))]
fn exit_signal(_: &std::process::ExitStatus) -> Option<(i32, &'static str)> {
    None
}
