//! pi's bash: a command in the workspace folder, on the built-in shell (process group, abort,
//! environment policy), answered with the tail of its interleaved output; when that is cut,
//! what the shell kept is written to a private file in the terminals folder and named.

use std::io::Write;
use std::sync::atomic::{AtomicU64, Ordering};

use crate::host::ExecContext;
use crate::proto::agent::v1 as pb;
use crate::tools::shell;
use crate::tools::shell_command::ShellContext;

use super::{format_size, tail, Cut, MAX_BYTES, MAX_LINES};

pub(crate) async fn bash(t: &ShellContext<'_>, args: &pb::PiBashExecArgs, ctx: &ExecContext) -> pb::PiBashExecResult {
    use pb::pi_bash_exec_result::Result as R;
    use pb::shell_result::Result as S;
    let timeout_s = args.timeout.filter(|s| s.is_finite() && *s > 0.0);
    let shell_args = pb::ShellArgs {
        command: args.command.clone(),
        timeout: timeout_s.map_or(0, |s| (s * 1000.0).min(i32::MAX as f64) as i32),
        ..Default::default()
    };
    let ran = shell::run(t, &shell_args, ctx).await;
    let (output, ending) = match ran.result {
        Some(S::Success(s)) => (s.interleaved_output.unwrap_or(s.stdout), None),
        Some(S::Failure(f)) if f.aborted => (f.interleaved_output.unwrap_or(f.stdout), Some("Command aborted".into())),
        Some(S::Failure(f)) => {
            let code = format!("Command exited with code {}", f.exit_code);
            (f.interleaved_output.unwrap_or(f.stdout), Some(code))
        }
        Some(S::Timeout(_)) => {
            let secs = timeout_s.map_or_else(|| format!("{}", t.options.shell_timeout.as_secs()), |s| format!("{s}"));
            (String::new(), Some(format!("Command timed out after {secs} seconds")))
        }
        Some(S::Rejected(r)) => return error(r.reason, None, None),
        Some(S::PermissionDenied(p)) => return error(p.error, None, None),
        Some(S::SpawnError(e)) => return error(e.error, None, None),
        None => return error("the command did not run".into(), None, None),
    };
    let Cut { text, truncation } = tail(&output, MAX_LINES, MAX_BYTES);
    let full_output_path = truncation.as_ref().and_then(|_| keep_full_output(t, &output));
    let mut shown = if text.is_empty() && ending.is_none() { "(no output)".to_string() } else { text };
    if let Some(trunc) = &truncation {
        let end = trunc.total_lines;
        let start = end + 1 - trunc.output_lines.max(1);
        let full = full_output_path.as_deref().map(|p| format!(" Full output: {p}")).unwrap_or_default();
        let what = if trunc.last_line_partial {
            format!("Showing last {} of line {end}", format_size(trunc.output_bytes as usize))
        } else if trunc.truncated_by == "lines" {
            format!("Showing lines {start}-{end} of {end}")
        } else {
            format!("Showing lines {start}-{end} of {end} ({} limit)", format_size(MAX_BYTES))
        };
        shown.push_str(&format!("\n\n[{what}.{full}]"));
    }
    match ending {
        None => pb::PiBashExecResult {
            result: Some(R::Success(pb::PiBashExecSuccess { output: shown, truncation, full_output_path })),
        },
        Some(why) => {
            if !shown.is_empty() {
                shown.push_str("\n\n");
            }
            shown.push_str(&why);
            error(shown, truncation, full_output_path)
        }
    }
}

fn error(
    error: String,
    truncation: Option<pb::PiTruncation>,
    full_output_path: Option<String>,
) -> pb::PiBashExecResult {
    pb::PiBashExecResult {
        result: Some(pb::pi_bash_exec_result::Result::Error(pb::PiBashExecError {
            error,
            truncation,
            full_output_path,
        })),
    }
}

/// Writes `output` to `pi-bash-<n>.log` in the terminals folder (0600, removed with the
/// tools); its path, or `None` if it could not be written.
fn keep_full_output(t: &ShellContext<'_>, output: &str) -> Option<String> {
    static NEXT: AtomicU64 = AtomicU64::new(1);
    let name = format!("pi-bash-{}-{}.log", std::process::id(), NEXT.fetch_add(1, Ordering::Relaxed));
    let opened = t.terminals.ensure().ok()?;
    let mut file = t.terminals.create_file(opened, &name).ok()?;
    file.write_all(output.as_bytes()).ok()?;
    Some(t.terminals.path().join(name).display().to_string())
}
