//! Titles that tools of several families share: a grep reads like the command, a file search
//! like `Find *.rs in src`, whichever tool ran it (Cursor's `grep` and `glob`, pi's `pi_grep`
//! and `pi_find`).

use serde_json::Value;

use super::paths::Paths;
use super::render::str_arg;

/// `grep "pattern" dir --include glob`, for the grep tools (`pattern`, `path`, `glob`).
pub(super) fn grep_title(a: &Value, paths: &Paths) -> Option<String> {
    let pattern = str_arg(a, "pattern")?;
    let mut title = format!("grep \"{pattern}\"");
    if let Some(p) = str_arg(a, "path") {
        title.push(' ');
        title.push_str(&paths.relative(p));
    }
    if let Some(g) = str_arg(a, "glob") {
        title.push_str(&format!(" --include {g}"));
    }
    Some(title)
}

/// `Find *.rs in src`, for the file-finding tools.
pub(super) fn find_title(pattern: Option<&str>, dir: Option<String>) -> Option<String> {
    let pattern = pattern?;
    Some(match dir {
        Some(d) => format!("Find {pattern} in {d}"),
        None => format!("Find {pattern}"),
    })
}
