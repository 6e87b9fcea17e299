//! ls: the directory tree under a path, honouring .gitignore (ripgrep's `ignore` walker), with an
//! entry cap and a deadline so a huge tree answers quickly with what was seen.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use globset::{Glob, GlobSetBuilder};
use ignore::WalkBuilder;

use crate::proto::agent::v1 as pb;

use super::workspace::Failure;
use super::{ToolOptions, Workspace};

/// Folders listed below the path asked for; deeper ones are answered as not processed
/// (`childrenWereProcessed: false`), as for the entry cap. Each level is one more nested message,
/// and protobuf decoders (prost's among them, and so the core's own proto3 JSON) refuse messages
/// nested more than 100 deep: the answer and the server's echo of it in a tool call (about ten
/// messages around the tree) must stay under that.
pub const LS_MAX_DEPTH: usize = 64;

pub fn ls(ws: &Workspace, opts: &ToolOptions, args: &pb::LsArgs) -> pb::LsResult {
    use pb::ls_result::Result as R;
    let located = match ws.locate(&args.path) {
        Ok(l) => l,
        Err(e) => return rejected(&args.path, e.to_string()),
    };
    let root = located.absolute.clone();
    let shown = root.display().to_string();
    match located.metadata() {
        Ok(m) if m.is_dir() => {}
        Ok(_) => return error(shown, "not a directory"),
        Err(Failure::Refused(e)) => return rejected(&args.path, e.to_string()),
        Err(Failure::NotRegular(kind)) => return error(shown, &format!("a {}, not a directory", kind.describe())),
        Err(Failure::Io(e)) => return error(shown, &e.to_string()),
    }
    let mut ignore = GlobSetBuilder::new();
    for pattern in &args.ignore {
        match Glob::new(pattern) {
            Ok(g) => {
                ignore.add(g);
            }
            Err(e) => return error(shown, &format!("invalid ignore pattern {pattern:?}: {e}")),
        }
    }
    let ignore = match ignore.build() {
        Ok(set) => set,
        Err(e) => return error(shown, &e.to_string()),
    };
    let deadline = args.timeout_ms.filter(|&ms| ms > 0).map(|ms| Instant::now() + Duration::from_millis(ms as u64));

    let walk_root = root.clone();
    let ws = ws.clone();
    let walker = WalkBuilder::new(&root)
        .max_depth(Some(LS_MAX_DEPTH))
        .hidden(false)
        .require_git(false)
        .sort_by_file_name(|a, b| a.cmp(b))
        .filter_entry(move |entry| {
            if entry.file_name() == ".git" {
                return false;
            }
            let rel = entry.path().strip_prefix(&walk_root).unwrap_or(entry.path());
            if ignore.is_match(rel) || ignore.is_match(entry.file_name()) {
                return false;
            }
            entry.depth() == 0 || ws.found(entry.path()).is_some_and(|e| e.entry_metadata().is_ok())
        })
        .build();

    let mut tree = Tree::new(root.clone());
    let mut timed_out = false;
    let mut seen = 0usize;
    for entry in walker.flatten() {
        if entry.depth() == 0 {
            continue;
        }
        if seen >= opts.ls_max_entries || deadline.is_some_and(|d| Instant::now() >= d) {
            // Depth-first order: the only directories left partly listed are this entry's ancestors.
            tree.mark_unprocessed(entry.path());
            timed_out = seen < opts.ls_max_entries;
            break;
        }
        seen += 1;
        let is_dir = entry.file_type().is_some_and(|t| t.is_dir());
        tree.add(entry.path(), is_dir, entry.depth() < LS_MAX_DEPTH);
    }
    let node = tree.build();
    let result = if timed_out {
        R::Timeout(pb::LsTimeout { directory_tree_root: Some(node) })
    } else {
        R::Success(pb::LsSuccess { directory_tree_root: Some(node) })
    };
    pb::LsResult { result: Some(result) }
}

fn rejected(path: &str, reason: String) -> pb::LsResult {
    pb::LsResult { result: Some(pb::ls_result::Result::Rejected(pb::LsRejected { path: path.to_string(), reason })) }
}

fn error(path: String, message: &str) -> pb::LsResult {
    pb::LsResult { result: Some(pb::ls_result::Result::Error(pb::LsError { path, error: message.to_string() })) }
}

/// Directories keyed by path while walking; turned into nested nodes at the end.
struct Tree {
    root: PathBuf,
    dirs: HashMap<PathBuf, Dir>,
}

#[derive(Default)]
struct Dir {
    dirs: Vec<PathBuf>,
    files: Vec<String>,
    processed: bool,
}

impl Tree {
    fn new(root: PathBuf) -> Self {
        let mut dirs = HashMap::new();
        dirs.insert(root.clone(), Dir { processed: true, ..Default::default() });
        Self { root, dirs }
    }

    /// Adds an entry; a folder's own entries follow when `listed` (it is not at the depth cap).
    fn add(&mut self, path: &Path, is_dir: bool, listed: bool) {
        let Some(parent) = path.parent() else { return };
        let Some(dir) = self.dirs.get_mut(parent) else { return };
        if is_dir {
            dir.dirs.push(path.to_path_buf());
            self.dirs.insert(path.to_path_buf(), Dir { processed: listed, ..Default::default() });
        } else {
            dir.files.push(path.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default());
        }
    }

    fn mark_unprocessed(&mut self, next: &Path) {
        for ancestor in next.ancestors().skip(1) {
            if let Some(dir) = self.dirs.get_mut(ancestor) {
                dir.processed = false;
            }
            if ancestor == self.root {
                break;
            }
        }
    }

    fn build(mut self) -> pb::LsDirectoryTreeNode {
        let root = self.root.clone();
        self.node(&root)
    }

    fn node(&mut self, path: &Path) -> pb::LsDirectoryTreeNode {
        let dir = self.dirs.remove(path).unwrap_or_default();
        let mut counts: HashMap<String, i32> = HashMap::new();
        let mut num_files = dir.files.len() as i32;
        for name in &dir.files {
            *counts.entry(extension_key(name)).or_default() += 1;
        }
        let children_dirs: Vec<_> = dir.dirs.iter().map(|d| self.node(d)).collect();
        for child in &children_dirs {
            num_files += child.num_files;
            for (ext, n) in &child.full_subtree_extension_counts {
                *counts.entry(ext.clone()).or_default() += n;
            }
        }
        pb::LsDirectoryTreeNode {
            abs_path: path.display().to_string(),
            children_dirs,
            children_files: dir
                .files
                .into_iter()
                .map(|name| pb::ls_directory_tree_node::File { name, terminal_metadata: None })
                .collect(),
            children_were_processed: dir.processed,
            full_subtree_extension_counts: counts,
            num_files,
        }
    }
}

/// `.rs` for `main.rs`; files without an extension count under `""`.
fn extension_key(name: &str) -> String {
    match Path::new(name).extension() {
        Some(ext) => format!(".{}", ext.to_string_lossy()),
        None => String::new(),
    }
}
