//! The command a shell tool runs: `<shell> -c <command>` (cmd.exe and PowerShell as each wants
//! it) in a checked working directory, in a process group of its own, with the environment the
//! policy makes; which shell that is; and [`ShellContext`], what the shell tools work with.

use std::path::{Path, PathBuf};

use tokio::process::Command;

use super::environment::ShellEnvironment;
use super::shells::Shells;
use super::workspace::Failure;
use super::{TerminalsFolder, ToolOptions, Workspace};

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
    add_command(cmd.as_std_mut(), &program, command);
    cmd.current_dir(cwd).env_clear().envs(environment.build(std::env::vars_os())).kill_on_drop(true);
    #[cfg(unix)]
    cmd.process_group(0);
    Ok(cmd)
}

/// `command` as `program` takes it: `-c <command>` for a POSIX shell, PowerShell's own
/// switches, cmd.exe's raw command line on Windows.
fn add_command(cmd: &mut std::process::Command, program: &Path, command: &str) {
    let is_cmd = program.file_stem().is_some_and(|s| s.eq_ignore_ascii_case("cmd"));
    #[cfg(windows)]
    if is_cmd {
        // cmd.exe reads its command line itself and knows no `\"` escape: the quoting Command
        // adds for a C runtime's argv reached the command as backslashes (`echo "a b"` printed
        // `\"a b\"`). So the line goes as cmd wants it, as Node's `shell: true` passes it:
        // `/d` (no AutoRun commands from the registry), `/s /c "<command>"` (exactly the outer
        // quotes are stripped, the command is kept as written).
        std::os::windows::process::CommandExt::raw_arg(cmd, format!("/d /s /c \"{command}\""));
    }
    let is_powershell =
        program.file_stem().is_some_and(|s| s.eq_ignore_ascii_case("powershell") || s.eq_ignore_ascii_case("pwsh"));
    if is_powershell {
        // The user's profile scripts stay out of the model's commands (they can be slow, print,
        // or change what a command does), and nothing may wait on a prompt nobody answers.
        cmd.args(["-NoLogo", "-NoProfile", "-NonInteractive", "-Command"]).arg(command);
    } else if !(cfg!(windows) && is_cmd) {
        cmd.arg("-c").arg(command);
    }
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

/// Resolves the working directory, or the `rejected` / `spawn_error` reason.
pub(super) fn working_directory(ws: &Workspace, requested: &str) -> Result<PathBuf, (bool, String)> {
    let located = ws.locate(requested).map_err(|e| (true, e.to_string()))?;
    match located.metadata() {
        Ok(m) if m.is_dir() => Ok(located.absolute),
        Err(Failure::Refused(e)) => Err((true, e.to_string())),
        _ => Err((false, format!("working directory {} does not exist", located.absolute.display()))),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn args(program: &str, command: &str) -> Vec<String> {
        let mut cmd = std::process::Command::new(program);
        add_command(&mut cmd, Path::new(program), command);
        cmd.get_args().map(|a| a.to_string_lossy().into_owned()).collect()
    }

    #[test]
    fn each_shell_gets_the_command_as_it_takes_it() {
        assert_eq!(args("/bin/bash", "echo 'a b'"), ["-c", "echo 'a b'"]);
        let powershell = ["-NoLogo", "-NoProfile", "-NonInteractive", "-Command", "Write-Output 'a b'"];
        for program in ["pwsh", "/usr/bin/pwsh", "powershell.exe", "PowerShell"] {
            assert_eq!(args(program, "Write-Output 'a b'"), powershell, "{program}");
        }
    }
}
