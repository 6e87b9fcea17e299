//! shell and shellStream: local processes in their own process group (a job object on
//! Windows), so abort, timeout and teardown kill everything the command started.

use std::process::Stdio;
use std::time::{Duration, Instant};

use crate::host::ExecContext;
use crate::proto::agent::v1 as pb;

use super::background::spawn_background;
use super::process::{read_some, spawn_group, terminate, Signal};
use super::shell_command::{shell_command, working_directory, ShellContext};

/// How long pipes are still drained after the shell exits: a command that leaves a daemon
/// holding stdout (`server &`) must not hold the result forever.
const DRAIN_AFTER_EXIT: Duration = Duration::from_millis(200);
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
    let (mut child, mut kill) = match spawn_group(&mut cmd) {
        Ok(spawned) => spawned,
        Err(e) => {
            return result(R::SpawnError(pb::ShellSpawnError { command, working_directory: wd, error: e.to_string() }))
        }
    };
    // Only now has anything started: a streaming shell's `start` goes out.
    ctx.started();
    let pid = child.id();
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
                terminate(&mut child, &kill).await;
                ending = Some(Ending::TimedOut);
                drain_until = Some(tokio::time::Instant::now() + DRAIN_AFTER_EXIT);
            }
            _ = ctx.cancel.cancelled(), if ending.is_none() => {
                kill.signal(Signal::Kill);
                // And the shell itself, whatever became of its group: on Windows a shell outside
                // a job is ended with taskkill, which can fail or be missing (under wine it left
                // cmd.exe running), and waiting on a shell that still runs would hold the
                // cancelled exec, and the turn, forever.
                #[allow(
                    clippy::let_underscore_must_use,
                    reason = "a shell already gone is what was wanted; the wait below reaps it either way"
                )]
                let _ = child.start_kill();
                #[allow(
                    clippy::let_underscore_must_use,
                    reason = "only reaps the killed child; the run ends as aborted whatever its status"
                )]
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
