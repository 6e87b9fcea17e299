//! The `pi_*` exec family: the tools of the pi coding agent (read, bash, edit, write, grep,
//! find, ls), whose answers are text for the model with pi's own limits and notices (2000
//! lines or 50 KiB, whichever comes first; a notice saying how to see more), confined to the
//! workspace like every other tool.

mod bash;
mod edit;
mod files;
mod search;

pub(super) use bash::bash;
pub(super) use edit::edit;
pub(super) use files::{read, write};
pub(super) use search::{find, grep, ls};

use crate::proto::agent::v1 as pb;

/// Lines one answer shows at most.
pub(crate) const MAX_LINES: usize = 2000;
/// Bytes one answer shows at most.
pub(crate) const MAX_BYTES: usize = 50 * 1024;
/// Characters of one grep line before it is cut.
pub(crate) const GREP_MAX_LINE_CHARS: usize = 500;

/// `512B`, `50.0KB`, `1.5MB`, as pi's notices write sizes.
pub(crate) fn format_size(bytes: usize) -> String {
    match bytes {
        b if b < 1024 => format!("{b}B"),
        b if b < 1024 * 1024 => format!("{:.1}KB", b as f64 / 1024.0),
        b => format!("{:.1}MB", b as f64 / (1024.0 * 1024.0)),
    }
}

/// Text cut to the limits, and how.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Cut {
    pub text: String,
    /// `None` when nothing was cut.
    pub truncation: Option<pb::PiTruncation>,
}

fn truncation(by: &str, total_lines: usize, kept: &str, kept_lines: usize) -> pb::PiTruncation {
    pb::PiTruncation {
        truncated: true,
        truncated_by: by.to_string(),
        total_lines: total_lines as u32,
        output_lines: kept_lines as u32,
        output_bytes: kept.len() as u32,
        max_lines: Some(MAX_LINES as u32),
        max_bytes: Some(MAX_BYTES as u32),
        ..Default::default()
    }
}

/// The first whole lines of `text` that fit `max_lines` and `max_bytes` (lines are what
/// `split('\n')` gives, so a trailing newline ends with an empty line). A first line longer
/// than `max_bytes` gives nothing, with `first_line_exceeds_limit`.
pub(crate) fn head(text: &str, max_lines: usize, max_bytes: usize) -> Cut {
    let lines: Vec<&str> = text.split('\n').collect();
    if lines.len() <= max_lines && text.len() <= max_bytes {
        return Cut { text: text.to_string(), truncation: None };
    }
    if lines[0].len() > max_bytes {
        let mut t = truncation("bytes", lines.len(), "", 0);
        t.first_line_exceeds_limit = true;
        return Cut { text: String::new(), truncation: Some(t) };
    }
    let (mut kept, mut bytes, mut by) = (0usize, 0usize, "lines");
    for (i, line) in lines.iter().enumerate().take(max_lines) {
        let cost = line.len() + usize::from(i > 0);
        if bytes + cost > max_bytes {
            by = "bytes";
            break;
        }
        bytes += cost;
        kept += 1;
    }
    let out = lines[..kept].join("\n");
    let t = truncation(by, lines.len(), &out, kept);
    Cut { text: out, truncation: Some(t) }
}

/// The last whole lines of `text` that fit; when even the last line is too long, its end
/// (`last_line_partial`), cut at a character boundary.
pub(crate) fn tail(text: &str, max_lines: usize, max_bytes: usize) -> Cut {
    let lines: Vec<&str> = text.split('\n').collect();
    if lines.len() <= max_lines && text.len() <= max_bytes {
        return Cut { text: text.to_string(), truncation: None };
    }
    let (mut first, mut bytes, mut by, mut partial) = (lines.len(), 0usize, "lines", None);
    for (i, line) in lines.iter().enumerate().rev() {
        if lines.len() - first >= max_lines {
            break;
        }
        let cost = line.len() + usize::from(first < lines.len());
        if bytes + cost > max_bytes {
            by = "bytes";
            if first == lines.len() {
                let mut start = line.len() - max_bytes;
                while !line.is_char_boundary(start) {
                    start += 1;
                }
                partial = Some(&line[start..]);
            }
            break;
        }
        bytes += cost;
        first = i;
    }
    let (out, kept) = match partial {
        Some(end) => (end.to_string(), 1),
        None => (lines[first..].join("\n"), lines.len() - first),
    };
    let mut t = truncation(by, lines.len(), &out, kept);
    t.last_line_partial = partial.is_some();
    Cut { text: out, truncation: Some(t) }
}

/// A notice line appended to an answer: `\n\n[a. b]`.
pub(crate) fn with_notices(mut text: String, notices: &[String]) -> String {
    if !notices.is_empty() {
        text.push_str(&format!("\n\n[{}]", notices.join(". ")));
    }
    text
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes_are_written_as_pi_writes_them() {
        assert_eq!(format_size(512), "512B");
        assert_eq!(format_size(MAX_BYTES), "50.0KB");
        assert_eq!(format_size(3 * 1024 * 1024 / 2), "1.5MB");
    }

    #[test]
    fn head_keeps_whole_lines_within_both_limits() {
        assert_eq!(head("a\nb", 5, 100), Cut { text: "a\nb".into(), truncation: None });
        let by_lines = head("1\n2\n3\n4", 2, 100);
        assert_eq!(by_lines.text, "1\n2");
        let t = by_lines.truncation.unwrap();
        assert_eq!((t.truncated_by.as_str(), t.total_lines, t.output_lines, t.output_bytes), ("lines", 4, 2, 3));
        let by_bytes = head("aaaa\nbbbb\ncccc", 10, 9);
        assert_eq!(by_bytes.text, "aaaa\nbbbb");
        assert_eq!(by_bytes.truncation.unwrap().truncated_by, "bytes");
        let huge = head(&"x".repeat(20), 10, 8);
        assert_eq!(huge.text, "");
        assert!(huge.truncation.unwrap().first_line_exceeds_limit);
    }

    #[test]
    fn tail_keeps_the_end_and_a_partial_last_line_at_a_char_boundary() {
        let cut = tail("1\n2\n3\n4", 2, 100);
        assert_eq!(cut.text, "3\n4");
        assert_eq!(cut.truncation.unwrap().output_lines, 2);
        let partial = tail("short\nééééé", 10, 5);
        assert_eq!(partial.text, "éé");
        let t = partial.truncation.unwrap();
        assert!(t.last_line_partial);
        assert_eq!(t.truncated_by, "bytes");
    }
}
