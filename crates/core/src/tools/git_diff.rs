//! `git_diff_request`: the changes of a repository in the workspace, through `git` itself
//! (with the tools' environment policy), as `GetDiffResponse`: one `FileDiff` per file with its
//! hunks (`chunks`: the `@@` line, the lines with their `+`/`-`/` ` prefix, the ranges), line
//! counts, and on request the file before and after.
//!
//! What is compared: `base_ref` (default `HEAD`; with `merge_base`, its merge base with `ref`)
//! against `ref` when one is given, else against `HEAD` with `committed_only`, else against the
//! working tree (staged and unstaged changes) plus untracked files, at most
//! `max_untracked_files` of them (0: 100; negative: none). Only what lies under `cwd` (or the
//! `target_paths`, each inside the workspace) is compared. Space-only changes are left out
//! unless `include_space_changes`. Submodules are not descended into.

use std::path::{Path, PathBuf};
use std::process::Stdio;

use tokio::io::AsyncWriteExt;
use tokio::process::Command;

use crate::proto::agent::v1 as pb;

use super::environment::ShellEnvironment;
use super::workspace::Failure;
use super::Workspace;

/// git's id of the empty tree: the base of a repository without commits.
const EMPTY_TREE: &str = "4b825dc642cb6eb9a060e54bf8d69288fbee4904";
const DEFAULT_MAX_UNTRACKED: usize = 100;
/// Largest untracked file shown as lines.
const MAX_UNTRACKED_BYTES: u64 = 1024 * 1024;

type Format = pb::get_diff_request::OutputFormat;

/// Runs git in one folder with the tools' environment.
struct Git<'a> {
    cwd: PathBuf,
    environment: &'a ShellEnvironment,
}

impl Git<'_> {
    async fn run(&self, args: &[&str], input: Option<&[u8]>) -> Result<String, String> {
        let mut cmd = Command::new("git");
        // No fsmonitor hook: a repository's config must not make a diff run a program.
        cmd.args(["-c", "core.quotePath=false", "-c", "core.fsmonitor=false"])
            .args(args)
            .current_dir(&self.cwd)
            .env_clear()
            .envs(self.environment.build(std::env::vars_os()))
            .stdin(if input.is_some() { Stdio::piped() } else { Stdio::null() })
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .kill_on_drop(true);
        let mut child = cmd.spawn().map_err(|e| format!("git could not be started: {e}"))?;
        if let (Some(input), Some(mut stdin)) = (input, child.stdin.take()) {
            stdin.write_all(input).await.map_err(|e| format!("git {}: {e}", args[0]))?;
        }
        let out = child.wait_with_output().await.map_err(|e| format!("git {}: {e}", args[0]))?;
        if !out.status.success() {
            let why = String::from_utf8_lossy(&out.stderr).trim().to_string();
            return Err(format!("git {} failed: {why}", args[0]));
        }
        Ok(String::from_utf8_lossy(&out.stdout).into_owned())
    }

    async fn ok(&self, args: &[&str]) -> bool {
        self.run(args, None).await.is_ok()
    }
}

pub(super) async fn git_diff(
    ws: &Workspace,
    environment: Result<&ShellEnvironment, &String>,
    args: &pb::GetDiffRequest,
) -> Result<pb::GetDiffResponse, String> {
    let environment = environment.map_err(|e| e.clone())?;
    let cwd = folder(ws, &args.cwd)?;
    let git = Git { cwd: cwd.clone(), environment };
    git.run(&["rev-parse", "--show-toplevel"], None)
        .await
        .map_err(|_| format!("{} is not in a git repository", cwd.display()))?;
    let mut pathspec = Vec::new();
    for target in &args.target_paths {
        pathspec.push(ws.resolve(target).map_err(|e| e.to_string())?.display().to_string());
    }
    if pathspec.is_empty() {
        pathspec.push(".".to_string());
    }
    let has_head = git.ok(&["rev-parse", "--verify", "--quiet", "HEAD"]).await;
    let head = if has_head { "HEAD" } else { EMPTY_TREE };
    let mut base = if args.base_ref.is_empty() { head.to_string() } else { args.base_ref.clone() };
    let target = (!args.r#ref.is_empty()).then(|| args.r#ref.clone());
    if args.merge_base {
        let other = target.as_deref().unwrap_or(head);
        base = git.run(&["merge-base", &base, other], None).await?.trim().to_string();
    }
    let mut command: Vec<String> =
        ["diff", "--no-color", "--no-ext-diff", "--no-textconv", "-M"].map(String::from).to_vec();
    if let Some(lines) = args.unified_context_lines {
        command.push(format!("-U{}", lines.max(0)));
    }
    if !args.include_space_changes {
        command.push("--ignore-space-change".into());
    }
    command.push(base.clone());
    let compared_with_working_tree = match (&target, args.committed_only) {
        (Some(target), _) => {
            command.push(target.clone());
            false
        }
        (None, true) => {
            command.push(head.into());
            false
        }
        (None, false) => true,
    };
    command.push("--".into());
    command.extend(pathspec.iter().cloned());
    let patch = git.run(&command.iter().map(String::as_str).collect::<Vec<_>>(), None).await?;
    let format = args.output_format.and_then(|f| Format::try_from(f).ok()).unwrap_or(Format::FileDiffs);
    let mut diffs = parse_patch(&patch);
    if compared_with_working_tree && args.max_untracked_files >= 0 {
        let cap = match args.max_untracked_files {
            0 => DEFAULT_MAX_UNTRACKED,
            n => n as usize,
        };
        let mut list = vec!["ls-files", "--others", "--exclude-standard", "--full-name", "-z", "--"];
        list.extend(pathspec.iter().map(String::as_str));
        let root = PathBuf::from(git.run(&["rev-parse", "--show-toplevel"], None).await?.trim());
        for name in git.run(&list, None).await?.split('\0').filter(|n| !n.is_empty()).take(cap) {
            diffs.push(untracked(ws, &root, name));
        }
    }
    if format == Format::DiffsWithBeforeAndAfter {
        for diff in &mut diffs {
            add_contents(&git, ws, &base, target.as_deref(), compared_with_working_tree, diff).await;
        }
    }
    shape(&mut diffs, format, args.max_response_bytes);
    let status = git.run(&["status", "--porcelain", "--"], None).await.unwrap_or_default();
    let patch_id = if args.compute_patch_id && !patch.is_empty() {
        let out = git.run(&["patch-id", "--stable"], Some(patch.as_bytes())).await?;
        out.split_whitespace().next().map(str::to_string)
    } else {
        None
    };
    let head_sha = if args.return_head_sha == Some(true) && has_head {
        Some(git.run(&["rev-parse", "HEAD"], None).await?.trim().to_string())
    } else {
        None
    };
    let diff_type = if target.is_some() || args.merge_base {
        pb::git_diff::DiffType::DiffFromBranchToMain
    } else {
        pb::git_diff::DiffType::DiffToHead
    };
    Ok(pb::GetDiffResponse {
        diff: Some(pb::GitDiff { diffs, diff_type: diff_type as i32 }),
        submodule_diffs: Vec::new(),
        patch_id,
        head_sha,
        has_uncommitted_changes: Some(!status.trim().is_empty()),
    })
}

/// The folder git runs in: `cwd` (default the first root), inside the workspace.
fn folder(ws: &Workspace, cwd: &str) -> Result<PathBuf, String> {
    let located = ws.locate(if cwd.is_empty() { "." } else { cwd }).map_err(|e| e.to_string())?;
    match located.metadata() {
        Ok(meta) if meta.is_dir() => Ok(located.absolute),
        Ok(_) => Err(format!("{} is not a directory", located.absolute.display())),
        Err(Failure::Refused(e)) => Err(e.to_string()),
        Err(_) => Err(format!("{} does not exist", located.absolute.display())),
    }
}

/// An untracked file as an added one: all its lines `+`, none for a binary or large file.
fn untracked(ws: &Workspace, root: &Path, name: &str) -> pb::FileDiff {
    let mut diff = pb::FileDiff { from: "/dev/null".into(), to: name.to_string(), ..Default::default() };
    let text = ws.found(&root.join(name)).and_then(|f| f.open_regular().ok()).and_then(|(file, meta)| {
        let mut bytes = Vec::new();
        (meta.len() <= MAX_UNTRACKED_BYTES).then_some(())?;
        std::io::Read::read_to_end(&mut std::io::Read::take(file, MAX_UNTRACKED_BYTES), &mut bytes).ok()?;
        (!bytes.contains(&0)).then(|| String::from_utf8_lossy(&bytes).into_owned())
    });
    if let Some(text) = text.filter(|t| !t.is_empty()) {
        let lines: Vec<String> = text.lines().map(|l| format!("+{l}")).collect();
        diff.added = lines.len() as i32;
        diff.chunks.push(pb::file_diff::Chunk {
            content: format!("@@ -0,0 +1,{} @@", lines.len()),
            old_start: 0,
            old_lines: 0,
            new_start: 1,
            new_lines: lines.len() as i32,
            lines,
        });
        diff.after_file_contents = Some(text);
    }
    diff
}

/// The file before (at `base`) and after (at `target`, or in the working tree).
async fn add_contents(
    git: &Git<'_>,
    ws: &Workspace,
    base: &str,
    target: Option<&str>,
    working_tree: bool,
    diff: &mut pb::FileDiff,
) {
    if diff.from != "/dev/null" && diff.before_file_contents.is_none() {
        diff.before_file_contents = git.run(&["show", &format!("{base}:{}", diff.from)], None).await.ok();
    }
    if diff.to == "/dev/null" || diff.after_file_contents.is_some() {
        return;
    }
    diff.after_file_contents = match (target, working_tree) {
        (Some(target), _) => git.run(&["show", &format!("{target}:{}", diff.to)], None).await.ok(),
        (None, false) => git.run(&["show", &format!("HEAD:{}", diff.to)], None).await.ok(),
        (None, true) => {
            let root = git.run(&["rev-parse", "--show-toplevel"], None).await.ok();
            root.and_then(|r| ws.found(&Path::new(r.trim()).join(&diff.to))).and_then(|f| {
                let (mut file, _) = f.open_regular().ok()?;
                let mut text = String::new();
                std::io::Read::read_to_string(&mut file, &mut text).ok().map(|_| text)
            })
        }
    };
}

/// Keeps what `format` asks for, and stops adding hunks once `max_bytes` of them are in (the
/// files after that keep their names and counts).
fn shape(diffs: &mut [pb::FileDiff], format: Format, max_bytes: Option<i32>) {
    let mut budget = max_bytes.filter(|&b| b > 0).map(|b| b as usize);
    for diff in diffs {
        if format != Format::DiffsWithBeforeAndAfter {
            diff.before_file_contents = None;
            diff.after_file_contents = None;
        }
        match format {
            Format::NameStatus => {
                (diff.added, diff.removed) = (0, 0);
                diff.chunks.clear();
            }
            Format::NameStatusAndNumstat => diff.chunks.clear(),
            _ => {}
        }
        if let Some(left) = budget.as_mut() {
            let size: usize = diff
                .chunks
                .iter()
                .map(|c| c.content.len() + c.lines.iter().map(|l| l.len() + 1).sum::<usize>())
                .sum::<usize>()
                + diff.before_file_contents.as_ref().map_or(0, String::len)
                + diff.after_file_contents.as_ref().map_or(0, String::len);
            if size > *left {
                diff.chunks.clear();
                diff.before_file_contents = None;
                diff.after_file_contents = None;
                *left = 0;
            } else {
                *left -= size;
            }
        }
    }
}

/// Files of a `git diff` patch. A hunk's lines are counted off against its header's ranges,
/// so a removed line that reads `-- x` is not taken for a file header.
pub(super) fn parse_patch(patch: &str) -> Vec<pb::FileDiff> {
    let mut files: Vec<pb::FileDiff> = Vec::new();
    // Old and new lines the current hunk still has to come.
    let mut left = (0i32, 0i32);
    for line in patch.lines() {
        let in_hunk = left.0 > 0 || left.1 > 0;
        if let (true, Some(file)) = (in_hunk || line.starts_with('\\'), files.last_mut()) {
            if let Some(chunk) = file.chunks.last_mut() {
                match line.as_bytes().first() {
                    Some(b'+') => {
                        file.added += 1;
                        left.1 -= 1;
                    }
                    Some(b'-') => {
                        file.removed += 1;
                        left.0 -= 1;
                    }
                    Some(b'\\') => {}
                    _ => {
                        left.0 -= 1;
                        left.1 -= 1;
                    }
                }
                chunk.lines.push(line.to_string());
                continue;
            }
        }
        if let Some(names) = line.strip_prefix("diff --git ") {
            let (from, to) = split_names(names);
            files.push(pb::FileDiff { from, to, ..Default::default() });
            continue;
        }
        let Some(file) = files.last_mut() else { continue };
        if let Some(header) = line.strip_prefix("@@ ") {
            let chunk = hunk(line, header);
            left = (chunk.old_lines, chunk.new_lines);
            file.chunks.push(chunk);
        } else if let Some(path) = line.strip_prefix("--- ") {
            file.from = path_of(path, "a/");
        } else if let Some(path) = line.strip_prefix("+++ ") {
            file.to = path_of(path, "b/");
        } else if line.starts_with("new file mode") {
            file.from = "/dev/null".into();
        } else if line.starts_with("deleted file mode") {
            file.to = "/dev/null".into();
        } else if let Some(path) = line.strip_prefix("rename from ") {
            file.from = unquote(path);
        } else if let Some(path) = line.strip_prefix("rename to ") {
            file.to = unquote(path);
        }
    }
    files
}

/// `@@ -3,4 +3,5 @@ fn main` → the chunk with its ranges (a missing count is 1).
fn hunk(line: &str, header: &str) -> pb::file_diff::Chunk {
    let range = |s: &str| -> (i32, i32) {
        let mut parts = s.splitn(2, ',');
        let start = parts.next().and_then(|n| n.parse().ok()).unwrap_or(0);
        (start, parts.next().map_or(1, |n| n.parse().unwrap_or(0)))
    };
    let mut words = header.split_whitespace();
    let (old_start, old_lines) = words.next().and_then(|w| w.strip_prefix('-')).map_or((0, 0), range);
    let (new_start, new_lines) = words.next().and_then(|w| w.strip_prefix('+')).map_or((0, 0), range);
    pb::file_diff::Chunk { content: line.to_string(), lines: Vec::new(), old_start, old_lines, new_start, new_lines }
}

/// The two names of `a/x b/y` (quoted names included).
fn split_names(names: &str) -> (String, String) {
    if let Some(rest) = names.strip_prefix('"') {
        if let Some(end) = closing_quote(rest) {
            let from = path_of(&names[..end + 2], "a/");
            return (from, path_of(names[end + 2..].trim_start(), "b/"));
        }
    }
    match names.rfind(" b/") {
        Some(at) => (path_of(&names[..at], "a/"), path_of(&names[at + 1..], "b/")),
        None => (names.to_string(), names.to_string()),
    }
}

fn closing_quote(s: &str) -> Option<usize> {
    let mut escaped = false;
    for (i, c) in s.char_indices() {
        match c {
            '\\' if !escaped => escaped = true,
            '"' if !escaped => return Some(i),
            _ => escaped = false,
        }
    }
    None
}

/// A path of a patch header without its `a/` or `b/`, unquoted; `/dev/null` as it is.
fn path_of(raw: &str, prefix: &str) -> String {
    let raw = raw.trim_end_matches('\t');
    let path = unquote(raw);
    if path == "/dev/null" {
        return path;
    }
    path.strip_prefix(prefix).map(str::to_string).unwrap_or(path)
}

/// git's C-style quoting undone (`"a\tb"`); anything else as it is.
fn unquote(raw: &str) -> String {
    let Some(inner) = raw.strip_prefix('"').and_then(|r| r.strip_suffix('"')) else { return raw.to_string() };
    let mut out = String::new();
    let mut chars = inner.chars();
    while let Some(c) = chars.next() {
        if c != '\\' {
            out.push(c);
            continue;
        }
        match chars.next() {
            Some('t') => out.push('\t'),
            Some('n') => out.push('\n'),
            Some(other) => out.push(other),
            None => {}
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_patch_becomes_files_with_hunks_and_counts() {
        let patch = "diff --git a/src/a.rs b/src/a.rs\nindex 1..2 100644\n--- a/src/a.rs\n+++ b/src/a.rs\n@@ -1,3 +1,3 @@ fn main\n one\n--- two\n+TWO\n three\n@@ -10 +10,2 @@\n-x\n+y\n+z\n\\ No newline at end of file\ndiff --git a/new.txt b/new.txt\nnew file mode 100644\n--- /dev/null\n+++ b/new.txt\n@@ -0,0 +1 @@\n+hi\ndiff --git a/old name b/new name\nsimilarity index 100%\nrename from old name\nrename to new name\ndiff --git a/img.png b/img.png\nBinary files a/img.png and b/img.png differ\n";
        let files = parse_patch(patch);
        assert_eq!(files.len(), 4);
        let a = &files[0];
        assert_eq!((a.from.as_str(), a.to.as_str(), a.added, a.removed), ("src/a.rs", "src/a.rs", 3, 2));
        assert_eq!(a.chunks.len(), 2);
        let c = &a.chunks[0];
        assert_eq!(c.content, "@@ -1,3 +1,3 @@ fn main");
        assert_eq!(c.lines, [" one", "--- two", "+TWO", " three"], "a removed `-- two` is a line, not a header");
        assert_eq!((c.old_start, c.old_lines, c.new_start, c.new_lines), (1, 3, 1, 3));
        let c = &a.chunks[1];
        assert_eq!((c.old_start, c.old_lines, c.new_start, c.new_lines), (10, 1, 10, 2));
        assert_eq!(c.lines.last().unwrap(), "\\ No newline at end of file");
        assert_eq!((files[1].from.as_str(), files[1].to.as_str(), files[1].added), ("/dev/null", "new.txt", 1));
        assert_eq!((files[2].from.as_str(), files[2].to.as_str()), ("old name", "new name"));
        assert!(files[3].chunks.is_empty());
        assert_eq!(files[3].to, "img.png");
    }

    #[test]
    fn quoted_names_are_unquoted() {
        let (from, to) = split_names("\"a/tab\\there\" \"b/tab\\there\"");
        assert_eq!((from.as_str(), to.as_str()), ("tab\there", "tab\there"));
        assert_eq!(path_of("\"b/q\\\"uote\"", "b/"), "q\"uote");
    }

    #[test]
    fn formats_keep_what_they_name_and_the_byte_cap_drops_hunks_not_files() {
        let patch = "diff --git a/a b/a\n--- a/a\n+++ b/a\n@@ -1 +1 @@\n-x\n+y\ndiff --git a/b b/b\n--- a/b\n+++ b/b\n@@ -1 +1 @@\n-x\n+y\n";
        let mut names = parse_patch(patch);
        shape(&mut names, Format::NameStatus, None);
        assert!(names.iter().all(|d| d.chunks.is_empty() && d.added == 0));
        let mut counts = parse_patch(patch);
        shape(&mut counts, Format::NameStatusAndNumstat, None);
        assert!(counts.iter().all(|d| d.chunks.is_empty() && d.added == 1 && d.removed == 1));
        let mut capped = parse_patch(patch);
        shape(&mut capped, Format::FileDiffs, Some(20));
        assert_eq!(capped[0].chunks.len(), 1);
        assert!(capped[1].chunks.is_empty() && capped[1].added == 1, "named and counted, without hunks");
    }
}
