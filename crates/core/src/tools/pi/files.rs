//! pi's read and write: a text file's lines from a 1-based offset, cut to the limits with a
//! notice saying where to continue; a whole file written, its folders made.

use std::io::{Read, Write};

use crate::proto::agent::v1 as pb;
use crate::tools::workspace::{Failure, FileKind};
use crate::tools::{ToolOptions, Workspace};

use super::{format_size, head, MAX_BYTES, MAX_LINES};

/// Why a file could not be read as text, as pi words it.
pub(super) fn read_failure(path: &str, failure: Failure) -> String {
    match failure {
        Failure::Refused(e) => e.to_string(),
        Failure::NotRegular(FileKind::Directory) => format!("{path} is a directory; use ls to list it"),
        Failure::NotRegular(kind) => format!("{path} is a {}, not a regular file", kind.describe()),
        Failure::Io(e) if e.kind() == std::io::ErrorKind::NotFound => format!("File not found: {path}"),
        Failure::Io(e) => format!("{path}: {e}"),
    }
}

/// The text of a workspace file (at most `opts.max_binary_bytes`), or why there is none.
pub(super) fn text_of(ws: &Workspace, opts: &ToolOptions, path: &str) -> Result<String, String> {
    let located = ws.locate(path).map_err(|e| e.to_string())?;
    let (file, meta) = located.open_regular().map_err(|f| read_failure(path, f))?;
    if meta.len() > opts.max_binary_bytes as u64 {
        return Err(format!(
            "{path} is {} long, more than the {} this tool reads",
            format_size(meta.len() as usize),
            format_size(opts.max_binary_bytes)
        ));
    }
    let mut bytes = Vec::with_capacity(meta.len() as usize);
    file.take(opts.max_binary_bytes as u64).read_to_end(&mut bytes).map_err(|e| format!("{path}: {e}"))?;
    if bytes.contains(&0) {
        return Err(format!("{path} is a binary file; inspect it with bash (e.g. xxd or file)"));
    }
    Ok(String::from_utf8_lossy(&bytes).into_owned())
}

pub(crate) fn read(ws: &Workspace, opts: &ToolOptions, args: &pb::PiReadExecArgs) -> pb::PiReadExecResult {
    use pb::pi_read_exec_result::Result as R;
    let result = match read_text(ws, opts, args) {
        Ok((output, truncation)) => R::Success(pb::PiReadExecSuccess { output, truncation }),
        Err(error) => R::Error(pb::PiReadExecError { error }),
    };
    pb::PiReadExecResult { result: Some(result) }
}

fn read_text(
    ws: &Workspace,
    opts: &ToolOptions,
    args: &pb::PiReadExecArgs,
) -> Result<(String, Option<pb::PiTruncation>), String> {
    let text = text_of(ws, opts, &args.path)?;
    let lines: Vec<&str> = text.split('\n').collect();
    let start = args.offset.map_or(0, |o| (o.max(1) - 1) as usize);
    if start >= lines.len() {
        return Err(format!("Offset {} is beyond end of file ({} lines total)", args.offset.unwrap_or(1), lines.len()));
    }
    let end = match args.limit {
        Some(limit) => (start + limit.max(0) as usize).min(lines.len()),
        None => lines.len(),
    };
    let cut = head(&lines[start..end].join("\n"), MAX_LINES, MAX_BYTES);
    let first = start + 1;
    let Some(t) = cut.truncation else {
        if end < lines.len() {
            let notice = format!("\n\n[{} more lines in file. Use offset={} to continue]", lines.len() - end, end + 1);
            return Ok((cut.text + &notice, None));
        }
        return Ok((cut.text, None));
    };
    if t.first_line_exceeds_limit {
        let size = format_size(lines[start].len());
        let notice = format!(
            "[Line {first} is {size}, exceeds {} limit. Use bash: sed -n '{first}p' {} | head -c {MAX_BYTES}]",
            format_size(MAX_BYTES),
            args.path
        );
        return Ok((notice, Some(t)));
    }
    let last = first + t.output_lines as usize - 1;
    let limit = if t.truncated_by == "lines" { String::new() } else { format!(" ({} limit)", format_size(MAX_BYTES)) };
    let notice =
        format!("\n\n[Showing lines {first}-{last} of {}{limit}. Use offset={} to continue]", lines.len(), last + 1);
    Ok((cut.text + &notice, Some(t)))
}

pub(crate) fn write(ws: &Workspace, args: &pb::PiWriteExecArgs) -> pb::PiWriteExecResult {
    use pb::pi_write_exec_result::Result as R;
    let result = match write_text(ws, &args.path, &args.content) {
        Ok(()) => R::Success(pb::PiWriteExecSuccess {
            output: format!("Successfully wrote {} bytes to {}", args.content.len(), args.path),
        }),
        Err(Failure::Refused(e)) => R::Rejected(pb::PiWriteExecRejected { reason: e.to_string() }),
        Err(failure) => R::Error(pb::PiWriteExecError { error: write_failure(&args.path, failure) }),
    };
    pb::PiWriteExecResult { result: Some(result) }
}

/// Writes `content` as the whole of the workspace file at `path`, making its folders.
pub(super) fn write_text(ws: &Workspace, path: &str, content: &str) -> Result<(), Failure> {
    let located = ws.locate(path).map_err(Failure::Refused)?;
    let mut file = located.create_regular()?;
    file.write_all(content.as_bytes()).map_err(Failure::Io)
}

pub(super) fn write_failure(path: &str, failure: Failure) -> String {
    match failure {
        Failure::Refused(e) => e.to_string(),
        Failure::NotRegular(kind) => format!("{path} is a {}, not a regular file", kind.describe()),
        Failure::Io(e) => format!("{path}: {e}"),
    }
}
