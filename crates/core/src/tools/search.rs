//! grep and glob on ripgrep's crates: `ignore` walks (honouring .gitignore, hidden files, globs
//! and file types), `grep-regex` + `grep-searcher` match (binary files skipped, context lines).

use std::collections::HashMap;
use std::io;
use std::path::{Path, PathBuf};
use std::time::SystemTime;

use globset::GlobBuilder;
use grep_regex::RegexMatcherBuilder;
use grep_searcher::{BinaryDetection, Searcher, SearcherBuilder, Sink, SinkContext, SinkMatch};
use ignore::overrides::OverrideBuilder;
use ignore::types::TypesBuilder;
use ignore::WalkBuilder;

use crate::proto::agent::v1 as pb;

use super::workspace::Failure;
use super::{ToolOptions, Workspace};

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Mode {
    Files,
    Count,
    Content,
}

impl Mode {
    fn parse(s: Option<&str>) -> Result<Self, String> {
        match s.unwrap_or("") {
            "" | "files_with_matches" | "files" => Ok(Mode::Files),
            "count" => Ok(Mode::Count),
            "content" => Ok(Mode::Content),
            other => Err(format!("unknown output_mode {other:?} (files_with_matches, count or content)")),
        }
    }

    fn name(self) -> &'static str {
        match self {
            Mode::Files => "files_with_matches",
            Mode::Count => "count",
            Mode::Content => "content",
        }
    }
}

fn grep_error(error: String) -> pb::GrepResult {
    pb::GrepResult { result: Some(pb::grep_result::Result::Error(pb::GrepError { error })) }
}

/// One file's hits, as the searcher reported them.
struct FileHits {
    path: PathBuf,
    matched_lines: usize,
    lines: Vec<pb::GrepContentMatch>,
}

pub fn grep(ws: &Workspace, opts: &ToolOptions, args: &pb::GrepArgs) -> pb::GrepResult {
    if args.pattern.is_empty() {
        return grep_error("the pattern is empty".into());
    }
    let mode = match Mode::parse(args.output_mode.as_deref()) {
        Ok(m) => m,
        Err(e) => return grep_error(e),
    };
    // Workspaces searched, each with the path to search in it.
    let scopes: Vec<(PathBuf, PathBuf)> = match args.path.as_deref().filter(|p| !p.is_empty()) {
        Some(p) => {
            let located = match ws.locate(p) {
                Ok(l) => l,
                Err(e) => return grep_error(e.to_string()),
            };
            match located.metadata() {
                Ok(_) | Err(Failure::NotRegular(_)) => {}
                Err(Failure::Refused(e)) => return grep_error(e.to_string()),
                Err(Failure::Io(_)) => return grep_error(format!("{p}: no such file or directory")),
            }
            let resolved = located.absolute;
            let root = ws.root_of(&resolved).unwrap_or(ws.primary()).to_path_buf();
            vec![(root, resolved)]
        }
        None => ws.roots().into_iter().map(|r| (r.clone(), r)).collect(),
    };
    let multiline = args.multiline.unwrap_or(false);
    let mut matcher = RegexMatcherBuilder::new();
    matcher.case_insensitive(args.case_insensitive.unwrap_or(false)).multi_line(true);
    // Files on Windows mostly end their lines with CRLF: `$` must match before the `\r` there,
    // or `two$` finds nothing in "two\r\n" (ripgrep's `--crlf`). Unix keeps `$` at `\n` alone.
    matcher.crlf(cfg!(windows));
    if multiline {
        matcher.dot_matches_new_line(true);
    } else {
        matcher.line_terminator(Some(b'\n'));
    }
    let matcher = match matcher.build(&args.pattern) {
        Ok(m) => m,
        Err(e) => return grep_error(format!("invalid pattern: {e}")),
    };
    let context = args.context.unwrap_or(0).max(0) as usize;
    let before = args.context_before.map_or(context, |n| n.max(0) as usize);
    let after = args.context_after.map_or(context, |n| n.max(0) as usize);
    let want_context = mode == Mode::Content;
    let mut searcher = SearcherBuilder::new()
        .line_number(true)
        .multi_line(multiline)
        .before_context(if want_context { before } else { 0 })
        .after_context(if want_context { after } else { 0 })
        .binary_detection(BinaryDetection::quit(0))
        .build();

    let mut results = HashMap::new();
    for (root, scope) in scopes {
        let mut walk = WalkBuilder::new(&scope);
        walk.require_git(false).sort_by_file_name(|a, b| a.cmp(b)).filter_entry(folders_beneath(ws));
        if let Some(glob) = args.glob.as_deref().filter(|g| !g.is_empty()) {
            let mut overrides = OverrideBuilder::new(&scope);
            for part in split_globs(glob) {
                if let Err(e) = overrides.add(&part) {
                    return grep_error(format!("invalid glob {part:?}: {e}"));
                }
            }
            match overrides.build() {
                Ok(o) => {
                    walk.overrides(o);
                }
                Err(e) => return grep_error(format!("invalid glob {glob:?}: {e}")),
            }
        }
        if let Some(kind) = args.r#type.as_deref().filter(|t| !t.is_empty()) {
            let mut types = TypesBuilder::new();
            types.add_defaults().select(kind);
            match types.build() {
                Ok(t) => {
                    walk.types(t);
                }
                Err(e) => return grep_error(format!("unknown file type {kind:?}: {e}")),
            }
        }

        let mut hits: Vec<FileHits> = Vec::new();
        let mut budget = opts.grep_max_lines;
        let mut stopped_early = false;
        for entry in walk.build().flatten() {
            if !entry.file_type().is_some_and(|t| t.is_file()) {
                continue;
            }
            if budget == 0 {
                stopped_early = true;
                break;
            }
            let mut sink = Collect {
                mode,
                max_chars: opts.grep_max_line_chars,
                budget: &mut budget,
                matched: 0,
                lines: Vec::new(),
            };
            // Opened beneath the root, never blocking; unreadable files (and whatever is no longer
            // a regular file inside) are skipped, as ripgrep skips what it cannot read.
            let Some(file) = ws.found(entry.path()).and_then(|e| e.open_regular().ok()) else { continue };
            if searcher.search_file(&matcher, &file.0, &mut sink).is_err() {
                continue;
            }
            if sink.matched > 0 {
                let (matched_lines, lines) = (sink.matched, sink.lines);
                hits.push(FileHits { path: entry.path().to_path_buf(), matched_lines, lines });
            }
        }
        sort_hits(ws, &mut hits, args.sort.as_deref(), args.sort_ascending);
        let union = summarize(&root, hits, mode, args.offset, args.head_limit, stopped_early);
        results.insert(root.display().to_string(), union);
    }
    pb::GrepResult {
        result: Some(pb::grep_result::Result::Success(pb::GrepSuccess {
            pattern: args.pattern.clone(),
            path: args.path.clone().unwrap_or_default(),
            output_mode: mode.name().into(),
            workspace_results: results,
            active_editor_result: None,
        })),
    }
}

/// `{a,b}` braces are handled by the glob itself; several globs may be given space- or
/// comma-separated outside braces (`*.ts *.tsx`).
fn split_globs(glob: &str) -> Vec<String> {
    let mut parts = Vec::new();
    let mut current = String::new();
    let mut depth = 0;
    for c in glob.chars() {
        match c {
            '{' => depth += 1,
            '}' => depth -= 1,
            ' ' | ',' if depth == 0 => {
                if !current.is_empty() {
                    parts.push(std::mem::take(&mut current));
                }
                continue;
            }
            _ => {}
        }
        current.push(c);
    }
    if !current.is_empty() {
        parts.push(current);
    }
    parts
}

/// Prunes folders a walk would enter that are not (or no longer) beneath a root: a folder
/// swapped for a link out is not searched. Files are checked when they are opened.
fn folders_beneath(ws: &Workspace) -> impl Fn(&ignore::DirEntry) -> bool + Send + Sync + 'static {
    let ws = ws.clone();
    move |entry| {
        entry.depth() == 0
            || !entry.file_type().is_some_and(|t| t.is_dir())
            || ws.found(entry.path()).is_some_and(|e| e.entry_metadata().is_ok())
    }
}

/// Modification time, looked up beneath the root (`None` when the entry is not there).
fn modified(ws: &Workspace, path: &Path) -> Option<SystemTime> {
    let meta = ws.found(path)?.entry_metadata().ok()?;
    Some(meta.modified().map(|t| t.into_std()).unwrap_or(SystemTime::UNIX_EPOCH))
}

fn sort_hits(ws: &Workspace, hits: &mut [FileHits], sort: Option<&str>, ascending: Option<bool>) {
    match sort.unwrap_or("path") {
        "modified" | "mtime" | "time" => {
            // Newest first unless ascending is asked for.
            hits.sort_by_cached_key(|h| std::cmp::Reverse(modified(ws, &h.path)));
            if ascending == Some(true) {
                hits.reverse();
            }
        }
        _ => {
            if ascending == Some(false) {
                hits.reverse();
            }
        }
    }
}

fn relative(root: &Path, path: &Path) -> String {
    path.strip_prefix(root).unwrap_or(path).display().to_string()
}

fn window<T>(items: Vec<T>, offset: Option<i32>, head_limit: Option<i32>) -> (Vec<T>, bool) {
    let offset = offset.unwrap_or(0).max(0) as usize;
    let total = items.len();
    let mut items: Vec<T> = items.into_iter().skip(offset).collect();
    let mut cut = offset > 0 && total > 0;
    if let Some(limit) = head_limit.filter(|&l| l > 0) {
        if items.len() > limit as usize {
            items.truncate(limit as usize);
            cut = true;
        }
    }
    (items, cut)
}

fn summarize(
    root: &Path,
    hits: Vec<FileHits>,
    mode: Mode,
    offset: Option<i32>,
    head_limit: Option<i32>,
    stopped_early: bool,
) -> pb::GrepUnionResult {
    use pb::grep_union_result::Result as U;
    let total_files = hits.len() as i32;
    let offset_applied = offset.filter(|&o| o > 0);
    let head_limit_applied = head_limit.filter(|&l| l > 0);
    let result = match mode {
        Mode::Files => {
            let files: Vec<String> = hits.iter().map(|h| relative(root, &h.path)).collect();
            let (files, cut) = window(files, offset, head_limit);
            U::Files(pb::GrepFilesResult {
                files,
                total_files,
                client_truncated: cut,
                ripgrep_truncated: stopped_early,
                head_limit_applied,
                offset_applied,
            })
        }
        Mode::Count => {
            let total_matches = hits.iter().map(|h| h.matched_lines as i32).sum();
            let counts: Vec<_> = hits
                .iter()
                .map(|h| pb::GrepFileCount { file: relative(root, &h.path), count: h.matched_lines as i32 })
                .collect();
            let (counts, cut) = window(counts, offset, head_limit);
            U::Count(pb::GrepCountResult {
                counts,
                total_files,
                total_matches,
                client_truncated: cut,
                ripgrep_truncated: stopped_early,
                head_limit_applied,
                offset_applied,
            })
        }
        Mode::Content => {
            let total_lines = hits.iter().map(|h| h.lines.len() as i32).sum();
            let total_matched_lines = hits.iter().map(|h| h.matched_lines as i32).sum();
            // offset / head_limit count output lines, as `rg … | tail -n +N | head -n M` would.
            let flat: Vec<(usize, pb::GrepContentMatch)> =
                hits.iter().enumerate().flat_map(|(i, h)| h.lines.iter().cloned().map(move |l| (i, l))).collect();
            let (flat, cut) = window(flat, offset, head_limit);
            let mut matches: Vec<pb::GrepFileMatch> = Vec::new();
            let mut last: Option<usize> = None;
            for (file_index, line) in flat {
                if last != Some(file_index) {
                    matches
                        .push(pb::GrepFileMatch { file: relative(root, &hits[file_index].path), matches: Vec::new() });
                    last = Some(file_index);
                }
                matches.last_mut().expect("pushed above").matches.push(line);
            }
            U::Content(pb::GrepContentResult {
                matches,
                total_lines,
                total_matched_lines,
                client_truncated: cut,
                ripgrep_truncated: stopped_early,
                head_limit_applied,
                offset_applied,
            })
        }
    };
    pb::GrepUnionResult { result: Some(result) }
}

/// Collects one file's matched lines (and context lines in content mode).
struct Collect<'a> {
    mode: Mode,
    max_chars: usize,
    /// Lines the whole search may still collect; 0 stops it.
    budget: &'a mut usize,
    matched: usize,
    lines: Vec<pb::GrepContentMatch>,
}

impl Collect<'_> {
    fn push(&mut self, number: Option<u64>, bytes: &[u8], is_context_line: bool) {
        let text = String::from_utf8_lossy(bytes);
        let text = text.trim_end_matches(['\n', '\r']);
        let (content, content_truncated) = match text.char_indices().nth(self.max_chars) {
            Some((cut, _)) => (text[..cut].to_string(), true),
            None => (text.to_string(), false),
        };
        self.lines.push(pb::GrepContentMatch {
            line_number: number.unwrap_or(0).min(i32::MAX as u64) as i32,
            content,
            content_truncated,
            is_context_line,
        });
        *self.budget = self.budget.saturating_sub(1);
    }
}

impl Sink for Collect<'_> {
    type Error = io::Error;

    fn matched(&mut self, _: &Searcher, m: &SinkMatch<'_>) -> Result<bool, io::Error> {
        if *self.budget == 0 {
            return Ok(false);
        }
        match self.mode {
            Mode::Files => {
                self.matched += 1;
                // One match is enough to list the file.
                return Ok(false);
            }
            Mode::Count => {
                self.matched += m.lines().count().max(1);
                *self.budget = self.budget.saturating_sub(1);
            }
            Mode::Content => {
                let first = m.line_number();
                for (i, line) in m.lines().enumerate() {
                    self.matched += 1;
                    self.push(first.map(|n| n + i as u64), line, false);
                }
            }
        }
        Ok(*self.budget > 0)
    }

    fn context(&mut self, _: &Searcher, c: &SinkContext<'_>) -> Result<bool, io::Error> {
        if self.mode == Mode::Content && *self.budget > 0 {
            self.push(c.line_number(), c.bytes(), true);
        }
        Ok(*self.budget > 0)
    }
}

pub fn glob(ws: &Workspace, opts: &ToolOptions, args: &pb::GlobToolArgs) -> pb::GlobToolResult {
    use pb::glob_tool_result::Result as R;
    let error = |error: String| pb::GlobToolResult { result: Some(R::Error(pb::GlobToolError { error })) };
    let located = match ws.locate(args.target_directory.as_deref().unwrap_or("")) {
        Ok(l) => l,
        Err(e) => return error(e.to_string()),
    };
    let dir = located.absolute.clone();
    match located.metadata() {
        Ok(m) if m.is_dir() => {}
        Err(Failure::Refused(e)) => return error(e.to_string()),
        _ => return error(format!("{}: not a directory", dir.display())),
    }
    // Patterns without a directory part match at any depth, as in ripgrep's --glob.
    let pattern = if args.glob_pattern.contains('/') || args.glob_pattern.starts_with("**") {
        args.glob_pattern.clone()
    } else {
        format!("**/{}", args.glob_pattern)
    };
    let matcher = match GlobBuilder::new(&pattern).literal_separator(true).build() {
        Ok(g) => g.compile_matcher(),
        Err(e) => return error(format!("invalid glob {:?}: {e}", args.glob_pattern)),
    };
    let mut found: Vec<(SystemTime, String)> = Vec::new();
    let mut stopped_early = false;
    for entry in WalkBuilder::new(&dir).require_git(false).filter_entry(folders_beneath(ws)).build().flatten() {
        if !entry.file_type().is_some_and(|t| t.is_file()) {
            continue;
        }
        let rel = entry.path().strip_prefix(&dir).unwrap_or(entry.path());
        if matcher.is_match(rel) {
            if found.len() >= opts.grep_max_lines {
                stopped_early = true;
                break;
            }
            // Only names found again beneath the root are reported.
            let Some(time) = modified(ws, entry.path()) else { continue };
            found.push((time, rel.display().to_string()));
        }
    }
    // Most recently modified first: what the model most likely means.
    found.sort_by(|a, b| b.0.cmp(&a.0).then_with(|| a.1.cmp(&b.1)));
    let total_files = found.len() as i32;
    let client_truncated = found.len() > opts.glob_max_files;
    found.truncate(opts.glob_max_files);
    pb::GlobToolResult {
        result: Some(R::Success(pb::GlobToolSuccess {
            pattern: args.glob_pattern.clone(),
            path: dir.display().to_string(),
            files: found.into_iter().map(|(_, f)| f).collect(),
            total_files,
            client_truncated,
            ripgrep_truncated: stopped_early,
        })),
    }
}
