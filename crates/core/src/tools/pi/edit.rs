//! pi's edit: replacements of exact text in one file. Each old text must occur exactly once in
//! the file as it was (tried as written first, then with trailing spaces, typographic quotes,
//! dashes and special spaces made plain, as pi does); the replacements may not overlap. A
//! byte-order mark and CRLF line ends survive. The answer carries a line-numbered diff for
//! people and a unified patch.

use similar::{ChangeTag, TextDiff};

use crate::proto::agent::v1 as pb;
use crate::tools::workspace::Failure;
use crate::tools::{ToolOptions, Workspace};

use super::files::{text_of, write_failure, write_text};

/// Lines of context around each change in the line-numbered diff (the patch uses 3).
const DIFF_CONTEXT: usize = 4;

pub(crate) fn edit(ws: &Workspace, opts: &ToolOptions, args: &pb::PiEditExecArgs) -> pb::PiEditExecResult {
    use pb::pi_edit_exec_result::Result as R;
    let result = match apply(ws, opts, args) {
        Ok(success) => R::Success(success),
        Err(Refusal::Rejected(reason)) => R::Rejected(pb::PiEditExecRejected { reason }),
        Err(Refusal::Error(error)) => R::Error(pb::PiEditExecError { error }),
    };
    pb::PiEditExecResult { result: Some(result) }
}

enum Refusal {
    /// The path is outside the workspace.
    Rejected(String),
    Error(String),
}

fn apply(ws: &Workspace, opts: &ToolOptions, args: &pb::PiEditExecArgs) -> Result<pb::PiEditExecSuccess, Refusal> {
    let path = &args.path;
    if let Err(e) = ws.resolve(path) {
        return Err(Refusal::Rejected(e.to_string()));
    }
    if args.edits.is_empty() {
        return Err(Refusal::Error("no edits given".into()));
    }
    let raw = text_of(ws, opts, path).map_err(Refusal::Error)?;
    let (bom, text) = match raw.strip_prefix('\u{feff}') {
        Some(rest) => ("\u{feff}", rest),
        None => ("", raw.as_str()),
    };
    let crlf = text.find('\n').is_some_and(|i| i > 0 && text.as_bytes()[i - 1] == b'\r');
    let original = to_lf(text);
    let edits: Vec<(String, String)> = args.edits.iter().map(|e| (to_lf(&e.old_text), to_lf(&e.new_text))).collect();
    // As written if every old text is found so; otherwise in the plain-text form, where the
    // whole file is then rewritten plain (as pi does).
    let exact = edits.iter().all(|(old, _)| !old.is_empty() && original.contains(old.as_str()));
    let base = if exact { original.clone() } else { plain(&original) };
    let mut spans = Vec::with_capacity(edits.len());
    for (n, (old, new)) in edits.iter().enumerate() {
        let wanted = if exact { old.clone() } else { plain(old) };
        let which = if edits.len() > 1 { format!("edit {} of {}: ", n + 1, edits.len()) } else { String::new() };
        if wanted.is_empty() {
            return Err(Refusal::Error(format!("{which}the old text is empty")));
        }
        let found: Vec<usize> = base.match_indices(wanted.as_str()).map(|(at, _)| at).collect();
        match found.len() {
            0 => {
                return Err(Refusal::Error(format!(
                    "{which}could not find the exact text in {path}. The old text must match exactly including all whitespace and newlines."
                )))
            }
            1 => spans.push((found[0], found[0] + wanted.len(), new.as_str())),
            count => {
                return Err(Refusal::Error(format!(
                    "{which}found {count} occurrences of the text in {path}. The text must be unique. Please provide more context to make it unique."
                )))
            }
        }
    }
    spans.sort_by_key(|&(start, _, _)| start);
    if spans.windows(2).any(|w| w[1].0 < w[0].1) {
        return Err(Refusal::Error(format!("two edits of {path} overlap; merge them into one")));
    }
    let mut edited = base.clone();
    for &(start, end, new) in spans.iter().rev() {
        edited.replace_range(start..end, new);
    }
    if edited == base {
        return Err(Refusal::Error(format!("No changes made to {path}. The replacement produced identical content.")));
    }
    let on_disk = if crlf { edited.replace('\n', "\r\n") } else { edited.clone() };
    write_text(ws, path, &format!("{bom}{on_disk}")).map_err(|f| match f {
        Failure::Refused(e) => Refusal::Rejected(e.to_string()),
        other => Refusal::Error(write_failure(path, other)),
    })?;
    let (diff, first_changed_line) = numbered_diff(&base, &edited);
    let patch = TextDiff::from_lines(&base, &edited)
        .unified_diff()
        .context_radius(3)
        .header(&format!("a/{path}"), &format!("b/{path}"))
        .to_string();
    let blocks = if spans.len() == 1 { "text".to_string() } else { format!("{} blocks", spans.len()) };
    Ok(pb::PiEditExecSuccess {
        output: format!("Successfully replaced {blocks} in {path}."),
        diff,
        patch,
        first_changed_line,
    })
}

fn to_lf(text: &str) -> String {
    text.replace("\r\n", "\n").replace('\r', "\n")
}

/// Text with what models get wrong made plain: trailing spaces of each line, typographic
/// quotes, dashes and special spaces.
fn plain(text: &str) -> String {
    let trimmed: Vec<&str> = text.split('\n').map(str::trim_end).collect();
    trimmed
        .join("\n")
        .chars()
        .map(|c| match c {
            '\u{2018}' | '\u{2019}' | '\u{201A}' | '\u{201B}' => '\'',
            '\u{201C}' | '\u{201D}' | '\u{201E}' | '\u{201F}' => '"',
            '\u{2010}'..='\u{2015}' | '\u{2212}' => '-',
            '\u{00A0}' | '\u{2002}'..='\u{200A}' | '\u{202F}' | '\u{205F}' | '\u{3000}' => ' ',
            c => c,
        })
        .collect()
}

/// The changes as `+12 line` / `-12 line` / ` 12 line`, with a few lines of context and ` ...`
/// where lines are left out; and the first changed line of the new text.
fn numbered_diff(old: &str, new: &str) -> (String, Option<u32>) {
    let diff = TextDiff::from_lines(old, new);
    let width = old.lines().count().max(new.lines().count()).max(1).to_string().len();
    let first_changed =
        diff.ops().iter().find(|op| op.tag() != similar::DiffTag::Equal).map(|op| op.new_range().start as u32 + 1);
    let mut out: Vec<String> = Vec::new();
    for (n, group) in diff.grouped_ops(DIFF_CONTEXT).iter().enumerate() {
        if n > 0 || group.first().is_some_and(|op| op.old_range().start > 0) {
            out.push(format!(" {:width$} ...", ""));
        }
        for op in group {
            for change in diff.iter_changes(op) {
                let line = change.value().strip_suffix('\n').unwrap_or(change.value());
                let (sign, number) = match change.tag() {
                    ChangeTag::Insert => ('+', change.new_index().unwrap_or(0) + 1),
                    ChangeTag::Delete => ('-', change.old_index().unwrap_or(0) + 1),
                    ChangeTag::Equal => (' ', change.old_index().unwrap_or(0) + 1),
                };
                out.push(format!("{sign}{number:>width$} {line}"));
            }
        }
    }
    (out.join("\n"), first_changed)
}
