//! read, write and delete, answering with the typed result branches of the proto.

use std::io::{self, BufRead, BufReader, Read, Seek, Write};
use std::path::Path;

use crate::proto::agent::v1 as pb;

use super::workspace::{Failure, FileKind};
use super::{ToolOptions, Workspace};

/// Bytes looked at for a NUL to call a file binary (what git and ripgrep do).
const BINARY_SNIFF_BYTES: usize = 8 * 1024;

fn display(path: &Path) -> String {
    path.display().to_string()
}

pub fn read(ws: &Workspace, opts: &ToolOptions, args: &pb::ReadArgs) -> pb::ReadResult {
    use pb::read_result::Result as R;
    let rejected = |reason: String| pb::ReadResult {
        result: Some(R::Rejected(pb::ReadRejected { path: args.path.clone(), reason })),
    };
    let located = match ws.locate(&args.path) {
        Ok(l) => l,
        Err(e) => return rejected(e.to_string()),
    };
    let shown = display(&located.absolute);
    let read = match located.open_regular() {
        Ok((file, meta)) => read_file(file, meta.len() as i64, opts, args.offset, args.limit),
        Err(Failure::Refused(e)) => return rejected(e.to_string()),
        Err(Failure::NotRegular(FileKind::Directory)) => {
            Err(ReadFailure::Invalid("is a directory; use ls to list it".into()))
        }
        Err(Failure::NotRegular(kind)) => {
            Err(ReadFailure::Invalid(format!("is a {}, not a regular file", kind.describe())))
        }
        Err(Failure::Io(e)) => Err(ReadFailure::Io(e)),
    };
    let result = match read {
        Ok(mut success) => {
            success.path = shown;
            R::Success(success)
        }
        Err(ReadFailure::Io(e)) => match e.kind() {
            io::ErrorKind::NotFound => R::FileNotFound(pb::ReadFileNotFound { path: shown }),
            io::ErrorKind::PermissionDenied => R::PermissionDenied(pb::ReadPermissionDenied { path: shown }),
            _ => R::Error(pb::ReadError { path: shown, error: e.to_string() }),
        },
        Err(ReadFailure::Invalid(reason)) => R::InvalidFile(pb::ReadInvalidFile { path: shown, reason }),
    };
    pb::ReadResult { result: Some(result) }
}

enum ReadFailure {
    Io(io::Error),
    Invalid(String),
}

impl From<io::Error> for ReadFailure {
    fn from(e: io::Error) -> Self {
        ReadFailure::Io(e)
    }
}

/// Reads an open regular file: everything goes through this one handle (a second open by
/// name could be redirected).
fn read_file(
    mut file: std::fs::File,
    file_size: i64,
    opts: &ToolOptions,
    offset: Option<i32>,
    limit: Option<u32>,
) -> Result<pb::ReadSuccess, ReadFailure> {
    let mut head = vec![0u8; BINARY_SNIFF_BYTES];
    let n = read_fully(&mut file, &mut head)?;
    head.truncate(n);
    if head.contains(&0) {
        return read_binary(file, opts, file_size);
    }
    let range_applied = offset.is_some() || limit.is_some();
    // A negative offset counts from the end, so the line count is needed first.
    let total_for_offset = match offset {
        Some(o) if o < 0 => {
            let total = count_lines(&mut file)?;
            file.seek(io::SeekFrom::Start(n as u64))?;
            Some(total)
        }
        _ => None,
    };
    let first_line: u64 = match (offset, total_for_offset) {
        (Some(o), Some(total)) => (total as i64 + o as i64 + 1).max(1) as u64,
        (Some(o), None) => (o as u64).max(1),
        (None, _) => 1,
    };
    let last_line: u64 = match limit {
        Some(l) => first_line.saturating_add(l as u64).saturating_sub(1),
        None => u64::MAX,
    };

    let mut reader = BufReader::new(io::Cursor::new(head).chain(&mut file));
    let mut content = Vec::new();
    let mut line = Vec::new();
    let mut number: u64 = 0;
    let mut truncated = false;
    loop {
        line.clear();
        if reader.read_until(b'\n', &mut line)? == 0 {
            break;
        }
        number += 1;
        if number < first_line || number > last_line || truncated {
            continue;
        }
        if content.len() + line.len() > opts.max_read_bytes {
            truncated = true;
            continue;
        }
        content.extend_from_slice(&line);
    }
    drop(reader);
    let content = match String::from_utf8(content) {
        Ok(text) => text,
        // Not UTF-8 but no NUL either (Latin-1, UTF-16 without BOM sniffing): hand back bytes
        // rather than a lossy string the model would write back corrupted.
        Err(_) => return read_binary(file, opts, file_size),
    };
    Ok(pb::ReadSuccess {
        total_lines: number.min(i32::MAX as u64) as i32,
        file_size,
        truncated,
        range_applied,
        output: Some(pb::read_success::Output::Content(content)),
        ..Default::default()
    })
}

fn read_binary(mut file: std::fs::File, opts: &ToolOptions, file_size: i64) -> Result<pb::ReadSuccess, ReadFailure> {
    if file_size as u64 > opts.max_binary_bytes as u64 {
        return Err(ReadFailure::Invalid(format!(
            "binary file of {file_size} bytes is larger than the {} byte limit",
            opts.max_binary_bytes
        )));
    }
    file.seek(io::SeekFrom::Start(0))?;
    let mut data = Vec::with_capacity(file_size.max(0) as usize);
    // No more than the limit, even if the file grew since it was looked at.
    file.take(opts.max_binary_bytes as u64).read_to_end(&mut data)?;
    Ok(pb::ReadSuccess { file_size, output: Some(pb::read_success::Output::Data(data.into())), ..Default::default() })
}

fn read_fully(r: &mut impl Read, buf: &mut [u8]) -> io::Result<usize> {
    let mut filled = 0;
    while filled < buf.len() {
        match r.read(&mut buf[filled..]) {
            Ok(0) => break,
            Ok(n) => filled += n,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    Ok(filled)
}

/// Lines from the start of `file` (an unterminated last line counts).
fn count_lines(file: &mut std::fs::File) -> io::Result<u64> {
    file.seek(io::SeekFrom::Start(0))?;
    let mut reader = BufReader::new(file);
    let mut count = 0u64;
    let mut ends_with_newline = true;
    loop {
        let buf = reader.fill_buf()?;
        if buf.is_empty() {
            break;
        }
        count += buf.iter().filter(|&&b| b == b'\n').count() as u64;
        ends_with_newline = buf.last() == Some(&b'\n');
        let n = buf.len();
        reader.consume(n);
    }
    Ok(if ends_with_newline { count } else { count + 1 })
}

/// Lines in `text` as an editor counts them (a trailing newline does not start a new line).
pub fn line_count(text: &str) -> usize {
    if text.is_empty() {
        0
    } else {
        text.lines().count()
    }
}

pub fn write(ws: &Workspace, args: &pb::WriteArgs) -> pb::WriteResult {
    use pb::write_result::Result as R;
    let rejected = |reason: String| pb::WriteResult {
        result: Some(R::Rejected(pb::WriteRejected { path: args.path.clone(), reason })),
    };
    let located = match ws.locate(&args.path) {
        Ok(l) => l,
        Err(e) => return rejected(e.to_string()),
    };
    let path = &located.absolute;
    let shown = display(path);
    let bytes: &[u8] = if args.file_bytes.is_empty() { args.file_text.as_bytes() } else { &args.file_bytes };
    let outcome = match located.create_regular() {
        Ok(mut file) => file.write_all(bytes),
        Err(Failure::Refused(e)) => return rejected(e.to_string()),
        Err(Failure::NotRegular(FileKind::Directory)) => {
            return pb::WriteResult {
                result: Some(R::Error(pb::WriteError { path: shown, error: "is a directory".into() })),
            }
        }
        Err(Failure::NotRegular(kind)) => {
            return pb::WriteResult {
                result: Some(R::Error(pb::WriteError {
                    path: shown,
                    error: format!("is a {}, not a regular file", kind.describe()),
                })),
            }
        }
        Err(Failure::Io(e)) => Err(e),
    };
    let result = match outcome {
        Ok(()) => {
            let text = std::str::from_utf8(bytes).ok();
            R::Success(pb::WriteSuccess {
                path: shown,
                lines_created: text.map_or(0, line_count).min(i32::MAX as usize) as i32,
                file_size: bytes.len().min(i32::MAX as usize) as i32,
                file_content_after_write: args
                    .return_file_content_after_write
                    .then(|| text.unwrap_or_default().to_string()),
            })
        }
        Err(e) if e.kind() == io::ErrorKind::PermissionDenied || e.kind() == io::ErrorKind::ReadOnlyFilesystem => {
            R::PermissionDenied(pb::WritePermissionDenied {
                path: shown,
                directory: path.parent().map(display).unwrap_or_default(),
                operation: "write".into(),
                error: e.to_string(),
                is_readonly: e.kind() == io::ErrorKind::ReadOnlyFilesystem,
            })
        }
        Err(e) if e.kind() == io::ErrorKind::StorageFull => R::NoSpace(pb::WriteNoSpace { path: shown }),
        Err(e) => R::Error(pb::WriteError { path: shown, error: e.to_string() }),
    };
    pb::WriteResult { result: Some(result) }
}

pub fn delete(ws: &Workspace, opts: &ToolOptions, args: &pb::DeleteArgs) -> pb::DeleteResult {
    use pb::delete_result::Result as R;
    let rejected = |reason: String| pb::DeleteResult {
        result: Some(R::Rejected(pb::DeleteRejected { path: args.path.clone(), reason })),
    };
    let located = match ws.locate(&args.path) {
        Ok(l) => l,
        Err(e) => return rejected(e.to_string()),
    };
    let shown = display(&located.absolute);
    let io_result = |e: io::Error| match e.kind() {
        io::ErrorKind::NotFound => R::FileNotFound(pb::DeleteFileNotFound { path: shown.clone() }),
        io::ErrorKind::PermissionDenied | io::ErrorKind::ReadOnlyFilesystem => {
            R::PermissionDenied(pb::DeletePermissionDenied {
                path: shown.clone(),
                client_visible_error: e.to_string(),
                is_readonly: e.kind() == io::ErrorKind::ReadOnlyFilesystem,
            })
        }
        io::ErrorKind::ResourceBusy => R::FileBusy(pb::DeleteFileBusy { path: shown.clone() }),
        _ => R::Error(pb::DeleteError { path: shown.clone(), error: e.to_string() }),
    };
    let not_file =
        |kind: FileKind| R::NotFile(pb::DeleteNotFile { path: shown.clone(), actual_type: kind.describe().into() });
    // The previous content lets the caller show the deletion as a diff and undo it; binary or
    // oversized files are deleted without it. It is read through the same kind of handle the
    // other tools use, so it is never the content of a file outside.
    let (prev_content, file_size) = match located.open_regular() {
        Ok((file, meta)) if meta.len() as usize <= opts.max_read_bytes => {
            let mut bytes = Vec::new();
            let read = file.take(opts.max_read_bytes as u64).read_to_end(&mut bytes);
            (read.ok().and_then(|_| String::from_utf8(bytes).ok()).unwrap_or_default(), meta.len())
        }
        Ok((_, meta)) => (String::new(), meta.len()),
        Err(Failure::Refused(e)) => return rejected(e.to_string()),
        Err(Failure::NotRegular(kind)) => return pb::DeleteResult { result: Some(not_file(kind)) },
        // A file one may not read may still be deleted (that is up to its folder's mode).
        Err(Failure::Io(e)) if e.kind() == io::ErrorKind::PermissionDenied => match located.metadata() {
            Ok(meta) if meta.is_file() => (String::new(), meta.len()),
            _ => return pb::DeleteResult { result: Some(io_result(e)) },
        },
        Err(Failure::Io(e)) => return pb::DeleteResult { result: Some(io_result(e)) },
    };
    let result = match located.remove_file() {
        Ok(()) => R::Success(pb::DeleteSuccess {
            path: shown.clone(),
            deleted_file: shown.clone(),
            file_size: file_size as i64,
            prev_content,
        }),
        Err(Failure::Refused(e)) => return rejected(e.to_string()),
        Err(Failure::NotRegular(kind)) => not_file(kind),
        Err(Failure::Io(e)) => io_result(e),
    };
    pb::DeleteResult { result: Some(result) }
}
