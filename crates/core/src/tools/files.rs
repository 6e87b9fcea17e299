//! read, write and delete, answering with the typed result branches of the proto.

use std::fs;
use std::io::{self, BufRead, BufReader, Read};
use std::path::Path;

use crate::proto::agent::v1 as pb;

use super::{ToolOptions, Workspace};

/// Bytes looked at for a NUL to call a file binary (what git and ripgrep do).
const BINARY_SNIFF_BYTES: usize = 8 * 1024;

fn display(path: &Path) -> String {
    path.display().to_string()
}

pub fn read(ws: &Workspace, opts: &ToolOptions, args: &pb::ReadArgs) -> pb::ReadResult {
    use pb::read_result::Result as R;
    let path = match ws.resolve(&args.path) {
        Ok(p) => p,
        Err(e) => {
            return pb::ReadResult {
                result: Some(R::Rejected(pb::ReadRejected { path: args.path.clone(), reason: e.0 })),
            }
        }
    };
    let shown = display(&path);
    let result = match read_file(&path, opts, args.offset, args.limit) {
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

fn read_file(
    path: &Path,
    opts: &ToolOptions,
    offset: Option<i32>,
    limit: Option<u32>,
) -> Result<pb::ReadSuccess, ReadFailure> {
    let meta = fs::metadata(path)?;
    if meta.is_dir() {
        return Err(ReadFailure::Invalid("is a directory; use ls to list it".into()));
    }
    let file_size = meta.len() as i64;
    let mut file = fs::File::open(path)?;
    let mut head = vec![0u8; BINARY_SNIFF_BYTES];
    let n = read_fully(&mut file, &mut head)?;
    head.truncate(n);
    if head.contains(&0) {
        return read_binary(path, opts, file_size);
    }
    let range_applied = offset.is_some() || limit.is_some();
    // A negative offset counts from the end, so the line count is needed first.
    let total_for_offset = match offset {
        Some(o) if o < 0 => Some(count_lines(path)?),
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

    let mut reader = BufReader::new(io::Cursor::new(head).chain(file));
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
    let content = match String::from_utf8(content) {
        Ok(text) => text,
        // Not UTF-8 but no NUL either (Latin-1, UTF-16 without BOM sniffing): hand back bytes
        // rather than a lossy string the model would write back corrupted.
        Err(_) => return read_binary(path, opts, file_size),
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

fn read_binary(path: &Path, opts: &ToolOptions, file_size: i64) -> Result<pb::ReadSuccess, ReadFailure> {
    if file_size as u64 > opts.max_binary_bytes as u64 {
        return Err(ReadFailure::Invalid(format!(
            "binary file of {file_size} bytes is larger than the {} byte limit",
            opts.max_binary_bytes
        )));
    }
    let data = fs::read(path)?;
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

fn count_lines(path: &Path) -> io::Result<u64> {
    let mut reader = BufReader::new(fs::File::open(path)?);
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
    let path = match ws.resolve(&args.path) {
        Ok(p) => p,
        Err(e) => {
            return pb::WriteResult {
                result: Some(R::Rejected(pb::WriteRejected { path: args.path.clone(), reason: e.0 })),
            }
        }
    };
    let shown = display(&path);
    let bytes: &[u8] = if args.file_bytes.is_empty() { args.file_text.as_bytes() } else { &args.file_bytes };
    if path.is_dir() {
        return pb::WriteResult {
            result: Some(R::Error(pb::WriteError { path: shown, error: "is a directory".into() })),
        };
    }
    let outcome = path.parent().map_or(Ok(()), fs::create_dir_all).and_then(|()| fs::write(&path, bytes));
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
    let path = match ws.resolve(&args.path) {
        Ok(p) => p,
        Err(e) => {
            return pb::DeleteResult {
                result: Some(R::Rejected(pb::DeleteRejected { path: args.path.clone(), reason: e.0 })),
            }
        }
    };
    let shown = display(&path);
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
    let meta = match fs::metadata(&path) {
        Ok(m) => m,
        Err(e) => return pb::DeleteResult { result: Some(io_result(e)) },
    };
    if !meta.is_file() {
        let actual_type = if meta.is_dir() { "directory" } else { "special file" };
        return pb::DeleteResult {
            result: Some(R::NotFile(pb::DeleteNotFile { path: shown, actual_type: actual_type.into() })),
        };
    }
    // The previous content lets the caller show the deletion as a diff and undo it; binary or
    // oversized files are deleted without it.
    let prev_content = if meta.len() as usize <= opts.max_read_bytes {
        fs::read(&path).ok().and_then(|b| String::from_utf8(b).ok()).unwrap_or_default()
    } else {
        String::new()
    };
    let result = match fs::remove_file(&path) {
        Ok(()) => R::Success(pb::DeleteSuccess {
            path: shown.clone(),
            deleted_file: shown,
            file_size: meta.len() as i64,
            prev_content,
        }),
        Err(e) => io_result(e),
    };
    pb::DeleteResult { result: Some(result) }
}
