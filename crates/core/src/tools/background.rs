//! backgroundShellSpawn and writeShellStdin: shells that outlive their exec, their output
//! written to the terminals folder (read back by the model through `read`), their stdin kept
//! open; all killed when the tools are closed or dropped.

use std::process::Stdio;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use tokio::io::{AsyncRead, AsyncWriteExt};

use crate::proto::agent::v1 as pb;

use super::process::{read_some, spawn_group};
use super::shell_command::{shell_command, working_directory, ShellContext};
use super::shells::{Background, Shells};

/// Starts a shell that outlives the exec: its output goes to `<terminals_dir>/<shell_id>.txt`
/// (the model reads it back with `read`), its stdin stays open for `writeShellStdin`.
pub fn spawn_background(t: &ShellContext<'_>, args: &pb::BackgroundShellSpawnArgs) -> pb::BackgroundShellSpawnResult {
    use pb::background_shell_spawn_result::Result as R;
    let (shells, terminals) = (t.shells, t.terminals);
    // A kill_all from now on (the tools closed) is this shell's end too, however far it got.
    let kills_at_start = shells.kills.load(Ordering::Acquire);
    let command = args.command.clone();
    let cwd = match working_directory(t.workspace, &args.working_directory) {
        Ok(d) => d,
        Err((true, reason)) => {
            return pb::BackgroundShellSpawnResult {
                result: Some(R::Rejected(pb::ShellRejected {
                    command,
                    working_directory: args.working_directory.clone(),
                    reason,
                    is_readonly: false,
                })),
            }
        }
        Err((false, error)) => {
            return pb::BackgroundShellSpawnResult {
                result: Some(R::Error(pb::BackgroundShellSpawnError {
                    command,
                    working_directory: args.working_directory.clone(),
                    error,
                })),
            }
        }
    };
    let wd = cwd.display().to_string();
    let spawn_error = |error: String| pb::BackgroundShellSpawnResult {
        result: Some(R::Error(pb::BackgroundShellSpawnError {
            command: command.clone(),
            working_directory: wd.clone(),
            error,
        })),
    };
    let shell_id = shells.next_id.fetch_add(1, Ordering::Relaxed) + 1;
    let opened = match terminals.ensure() {
        Ok(opened) => opened,
        Err(e) => return spawn_error(format!("cannot create {}: {e}", terminals.path().display())),
    };
    let mut cmd = match shell_command(t, &command, &cwd) {
        Ok(cmd) => cmd,
        Err(error) => return spawn_error(error),
    };
    // Made before the shell starts, so a shell is never left running without its output file.
    let log = match terminals.create_output(opened, shell_id) {
        Ok(f) => Arc::new(Mutex::new(f)),
        Err(e) => return spawn_error(format!("cannot create the output file of shell {shell_id}: {e}")),
    };
    cmd.stdin(if args.enable_write_shell_stdin_tool { Stdio::piped() } else { Stdio::null() })
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    let (mut child, kill) = match spawn_group(&mut cmd) {
        Ok(spawned) => spawned,
        Err(e) => return spawn_error(e.to_string()),
    };
    let pid = child.id();
    let output_len = Arc::new(AtomicU64::new(0));
    for pipe in [child.stdout.take().map(Pipe::Out), child.stderr.take().map(Pipe::Err)].into_iter().flatten() {
        let (log, len) = (log.clone(), output_len.clone());
        tokio::spawn(async move {
            let mut buf = vec![0u8; 16 * 1024];
            let mut pipe = pipe;
            while let Some(n) = read_some(&mut pipe, &mut buf).await {
                use std::io::Write;
                if log.lock().expect("log lock").write_all(&buf[..n]).is_err() {
                    break;
                }
                len.fetch_add(n as u64, Ordering::Relaxed);
            }
        });
    }
    let stdin = child.stdin.take().map(|s| Arc::new(tokio::sync::Mutex::new(s)));
    // Reap the shell when it exits; the group stays killable through the table entry.
    tokio::spawn(async move {
        #[allow(clippy::let_underscore_must_use, reason = "only reaps the shell; its exit status is not reported")]
        let _ = child.wait().await;
    });
    {
        let mut table = shells.background.lock().expect("shell table");
        if shells.kills.load(Ordering::Acquire) != kills_at_start {
            drop(table);
            // Dropped: the process group is killed, as kill_all killed the others.
            drop(kill);
            return spawn_error("the tools were closed while the shell started: it was stopped".into());
        }
        table.insert(shell_id, Background { pid, stdin, output_len, _kill: kill });
    }
    pb::BackgroundShellSpawnResult {
        result: Some(R::Success(pb::BackgroundShellSpawnSuccess { shell_id, command, working_directory: wd, pid })),
    }
}

enum Pipe {
    Out(tokio::process::ChildStdout),
    Err(tokio::process::ChildStderr),
}

impl AsyncRead for Pipe {
    fn poll_read(
        self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
        buf: &mut tokio::io::ReadBuf<'_>,
    ) -> std::task::Poll<std::io::Result<()>> {
        match self.get_mut() {
            Pipe::Out(p) => std::pin::Pin::new(p).poll_read(cx, buf),
            Pipe::Err(p) => std::pin::Pin::new(p).poll_read(cx, buf),
        }
    }
}

pub async fn write_stdin(shells: &Shells, args: &pb::WriteShellStdinArgs) -> pb::WriteShellStdinResult {
    use pb::write_shell_stdin_result::Result as R;
    let error =
        |error: String| pb::WriteShellStdinResult { result: Some(R::Error(pb::WriteShellStdinError { error })) };
    let (stdin, output_len) = {
        let table = shells.background.lock().expect("shell table");
        match table.get(&args.shell_id) {
            Some(b) => (b.stdin.clone(), b.output_len.clone()),
            None => return error(format!("no background shell {}", args.shell_id)),
        }
    };
    let Some(stdin) = stdin else { return error(format!("shell {} was started without stdin", args.shell_id)) };
    let before = output_len.load(Ordering::Relaxed);
    let mut stdin = stdin.lock().await;
    let written = async {
        stdin.write_all(args.chars.as_bytes()).await?;
        stdin.flush().await
    };
    if let Err(e) = written.await {
        return error(format!("shell {} stdin: {e}", args.shell_id));
    }
    pb::WriteShellStdinResult {
        result: Some(R::Success(pb::WriteShellStdinSuccess {
            shell_id: args.shell_id,
            terminal_file_length_before_input_written: before.min(u32::MAX as u64) as u32,
        })),
    }
}
