//! pi's grep, find and ls: text for the model, on ripgrep's crates like the built-in grep
//! (.gitignore honoured, hidden files included, `.git` skipped), every entry found again
//! beneath its root before it is reported.

use std::path::{Path, PathBuf};

use globset::GlobBuilder;
use grep_regex::RegexMatcherBuilder;
use grep_searcher::{BinaryDetection, SearcherBuilder, Sink, SinkMatch};
use ignore::overrides::OverrideBuilder;
use ignore::WalkBuilder;

use crate::proto::agent::v1 as pb;
use crate::tools::workspace::Failure;
use crate::tools::Workspace;

use super::{format_size, head, with_notices, GREP_MAX_LINE_CHARS, MAX_BYTES};

const GREP_LIMIT: usize = 100;
const FIND_LIMIT: usize = 1000;
const LS_LIMIT: usize = 500;

/// The directory or file a search starts from: (its absolute path, whether it is a directory).
fn search_root(ws: &Workspace, path: Option<&str>) -> Result<(PathBuf, bool), String> {
    let path = path.filter(|p| !p.is_empty()).unwrap_or(".");
    let located = ws.locate(path).map_err(|e| e.to_string())?;
    match located.metadata() {
        Ok(meta) => Ok((located.absolute, meta.is_dir())),
        Err(Failure::Refused(e)) => Err(e.to_string()),
        Err(_) => Err(format!("Path not found: {}", located.absolute.display())),
    }
}

/// A walk from `root` as pi's tools walk: hidden files in, .gitignore honoured, `.git` out,
/// and no folder that is not (or no longer) beneath a workspace root.
fn walk(ws: &Workspace, root: &Path) -> WalkBuilder {
    let ws = ws.clone();
    let mut walk = WalkBuilder::new(root);
    walk.hidden(false).require_git(false).sort_by_file_name(|a, b| a.cmp(b)).filter_entry(move |entry| {
        entry.file_name() != ".git"
            && (entry.depth() == 0 || ws.found(entry.path()).is_some_and(|e| e.entry_metadata().is_ok()))
    });
    walk
}

/// `path` relative to `root`, with `/` separators.
fn relative(root: &Path, path: &Path) -> String {
    let rel = path.strip_prefix(root).unwrap_or(path);
    rel.components().map(|c| c.as_os_str().to_string_lossy()).collect::<Vec<_>>().join("/")
}

/// Escapes what a regex would read as syntax, for `literal`.
fn escape_regex(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        if "\\.+*?()|[]{}^$#&-~".contains(c) {
            out.push('\\');
        }
        out.push(c);
    }
    out
}

pub(crate) fn grep(ws: &Workspace, args: &pb::PiGrepExecArgs) -> pb::PiGrepExecResult {
    use pb::pi_grep_exec_result::Result as R;
    let result = match grep_text(ws, args) {
        Ok(success) => R::Success(success),
        Err(error) => R::Error(pb::PiGrepExecError { error }),
    };
    pb::PiGrepExecResult { result: Some(result) }
}

/// Collects matching line numbers of one file, up to a budget.
struct Matches<'a> {
    lines: Vec<u64>,
    budget: &'a mut usize,
}

impl Sink for Matches<'_> {
    type Error = std::io::Error;

    fn matched(&mut self, _: &grep_searcher::Searcher, m: &SinkMatch<'_>) -> Result<bool, Self::Error> {
        if *self.budget == 0 {
            return Ok(false);
        }
        *self.budget -= 1;
        self.lines.push(m.line_number().unwrap_or(0));
        Ok(*self.budget > 0)
    }
}

fn grep_text(ws: &Workspace, args: &pb::PiGrepExecArgs) -> Result<pb::PiGrepExecSuccess, String> {
    if args.pattern.is_empty() {
        return Err("the pattern is empty".into());
    }
    let (root, is_dir) = search_root(ws, args.path.as_deref())?;
    let pattern = if args.literal.unwrap_or(false) { escape_regex(&args.pattern) } else { args.pattern.clone() };
    let matcher = RegexMatcherBuilder::new()
        .case_insensitive(args.ignore_case.unwrap_or(false))
        .line_terminator(Some(b'\n'))
        // `$` before CRLF on Windows, as in the grep tool (tools/search.rs says why).
        .crlf(cfg!(windows))
        .build(&pattern)
        .map_err(|e| format!("invalid pattern: {e}"))?;
    let limit = args.limit.map_or(GREP_LIMIT, |l| l.max(1) as usize);
    let context = args.context.unwrap_or(0).max(0) as usize;
    let mut walker = walk(ws, &root);
    if let Some(glob) = args.glob.as_deref().filter(|g| !g.is_empty()) {
        let mut overrides = OverrideBuilder::new(&root);
        overrides.add(glob).map_err(|e| format!("invalid glob {glob:?}: {e}"))?;
        walker.overrides(overrides.build().map_err(|e| format!("invalid glob {glob:?}: {e}"))?);
    }
    let mut searcher = SearcherBuilder::new().line_number(true).binary_detection(BinaryDetection::quit(0)).build();
    let mut budget = limit;
    let (mut out, mut lines_truncated) = (Vec::new(), false);
    for entry in walker.build().flatten() {
        if budget == 0 {
            break;
        }
        if !entry.file_type().is_some_and(|t| t.is_file()) {
            continue;
        }
        let Some((file, _)) = ws.found(entry.path()).and_then(|e| e.open_regular().ok()) else { continue };
        let mut sink = Matches { lines: Vec::new(), budget: &mut budget };
        if searcher.search_file(&matcher, &file, &mut sink).is_err() || sink.lines.is_empty() {
            continue;
        }
        let shown =
            if is_dir { relative(&root, entry.path()) } else { entry.file_name().to_string_lossy().into_owned() };
        let found = sink.lines;
        let text = ws.found(entry.path()).and_then(|e| e.open_regular().ok()).and_then(|(mut f, _)| {
            let mut s = String::new();
            std::io::Read::read_to_string(&mut f, &mut s).ok().map(|_| s)
        });
        let Some(text) = text else {
            out.extend(found.iter().map(|n| format!("{shown}:{n}: (unable to read file)")));
            continue;
        };
        let file_lines: Vec<&str> = text.split('\n').collect();
        for &n in &found {
            let n = n as usize;
            let (from, to) = (n.saturating_sub(context).max(1), (n + context).min(file_lines.len()));
            for at in from..=to {
                let line = file_lines.get(at - 1).copied().unwrap_or_default().replace('\r', "");
                let line = match line.char_indices().nth(GREP_MAX_LINE_CHARS) {
                    Some((cut, _)) => {
                        lines_truncated = true;
                        format!("{}... [truncated]", &line[..cut])
                    }
                    None => line,
                };
                out.push(if at == n { format!("{shown}:{at}: {line}") } else { format!("{shown}-{at}- {line}") });
            }
        }
    }
    let matched = limit - budget;
    if matched == 0 {
        return Ok(pb::PiGrepExecSuccess { output: "No matches found".into(), ..Default::default() });
    }
    let cut = head(&out.join("\n"), usize::MAX, MAX_BYTES);
    let mut notices = Vec::new();
    let limit_reached = (matched >= limit).then_some(limit as u32);
    if limit_reached.is_some() {
        notices.push(format!("{limit} matches limit reached. Use limit={} for more, or refine pattern", limit * 2));
    }
    if cut.truncation.is_some() {
        notices.push(format!("{} limit reached", format_size(MAX_BYTES)));
    }
    if lines_truncated {
        notices.push(format!("Some lines truncated to {GREP_MAX_LINE_CHARS} chars. Use read tool to see full lines"));
    }
    Ok(pb::PiGrepExecSuccess {
        output: with_notices(cut.text, &notices),
        truncation: cut.truncation,
        match_limit_reached: limit_reached,
        lines_truncated,
    })
}

pub(crate) fn find(ws: &Workspace, args: &pb::PiFindExecArgs) -> pb::PiFindExecResult {
    use pb::pi_find_exec_result::Result as R;
    let result = match find_text(ws, args) {
        Ok(success) => R::Success(success),
        Err(error) => R::Error(pb::PiFindExecError { error }),
    };
    pb::PiFindExecResult { result: Some(result) }
}

fn find_text(ws: &Workspace, args: &pb::PiFindExecArgs) -> Result<pb::PiFindExecSuccess, String> {
    if args.pattern.is_empty() {
        return Err("the pattern is empty".into());
    }
    let (root, is_dir) = search_root(ws, args.path.as_deref())?;
    if !is_dir {
        return Err(format!("Not a directory: {}", root.display()));
    }
    // A pattern with a `/` is matched against the whole path under the folder, any other
    // against the name alone (`*.ts` finds them at every depth).
    let on_path = args.pattern.contains('/');
    let glob = GlobBuilder::new(&args.pattern)
        .literal_separator(on_path)
        .build()
        .map_err(|e| format!("invalid pattern {:?}: {e}", args.pattern))?
        .compile_matcher();
    let limit = args.limit.map_or(FIND_LIMIT, |l| l.max(1) as usize);
    let mut found = Vec::new();
    for entry in walk(ws, &root).build().flatten() {
        if entry.depth() == 0 {
            continue;
        }
        if found.len() >= limit {
            break;
        }
        let rel = relative(&root, entry.path());
        let matched = if on_path { glob.is_match(&rel) } else { glob.is_match(entry.file_name()) };
        if matched {
            let dir = entry.file_type().is_some_and(|t| t.is_dir());
            found.push(if dir { format!("{rel}/") } else { rel });
        }
    }
    if found.is_empty() {
        return Ok(pb::PiFindExecSuccess { output: "No files found matching pattern".into(), ..Default::default() });
    }
    let limit_reached = (found.len() >= limit).then_some(limit as u32);
    let cut = head(&found.join("\n"), usize::MAX, MAX_BYTES);
    let mut notices = Vec::new();
    if limit_reached.is_some() {
        notices.push(format!("{limit} results limit reached. Use limit={} for more, or refine pattern", limit * 2));
    }
    if cut.truncation.is_some() {
        notices.push(format!("{} limit reached", format_size(MAX_BYTES)));
    }
    Ok(pb::PiFindExecSuccess {
        output: with_notices(cut.text, &notices),
        truncation: cut.truncation,
        result_limit_reached: limit_reached,
    })
}

pub(crate) fn ls(ws: &Workspace, args: &pb::PiLsExecArgs) -> pb::PiLsExecResult {
    use pb::pi_ls_exec_result::Result as R;
    let result = match ls_text(ws, args) {
        Ok(success) => R::Success(success),
        Err(error) => R::Error(pb::PiLsExecError { error }),
    };
    pb::PiLsExecResult { result: Some(result) }
}

fn ls_text(ws: &Workspace, args: &pb::PiLsExecArgs) -> Result<pb::PiLsExecSuccess, String> {
    let (dir, is_dir) = search_root(ws, args.path.as_deref())?;
    if !is_dir {
        return Err(format!("Not a directory: {}", dir.display()));
    }
    let limit = args.limit.map_or(LS_LIMIT, |l| l.max(1) as usize);
    let mut names: Vec<String> = std::fs::read_dir(&dir)
        .map_err(|e| format!("Cannot read directory: {e}"))?
        .flatten()
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .collect();
    names.sort_by_key(|n| n.to_lowercase());
    let mut entries = Vec::new();
    let mut limit_reached = None;
    for name in names {
        if entries.len() >= limit {
            limit_reached = Some(limit as u32);
            break;
        }
        // Looked up again beneath its root: an entry that is gone, or a link out, is left out.
        let Some(meta) = ws.found(&dir.join(&name)).and_then(|e| e.metadata().ok()) else { continue };
        entries.push(if meta.is_dir() { format!("{name}/") } else { name });
    }
    if entries.is_empty() {
        return Ok(pb::PiLsExecSuccess { output: "(empty directory)".into(), ..Default::default() });
    }
    let cut = head(&entries.join("\n"), usize::MAX, MAX_BYTES);
    let mut notices = Vec::new();
    if limit_reached.is_some() {
        notices.push(format!("{limit} entries limit reached. Use limit={} for more", limit * 2));
    }
    if cut.truncation.is_some() {
        notices.push(format!("{} limit reached", format_size(MAX_BYTES)));
    }
    Ok(pb::PiLsExecSuccess {
        output: with_notices(cut.text, &notices),
        truncation: cut.truncation,
        entry_limit_reached: limit_reached,
    })
}
