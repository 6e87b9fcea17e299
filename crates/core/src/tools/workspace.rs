//! Workspace confinement: every path a tool touches must stay inside one of the roots it was
//! given, both lexically (`..`) and after resolving symlinks.

use std::io;
use std::path::{Component, Path, PathBuf};

/// Why a path was refused. The message is what the model sees in the `rejected` result.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Escape(pub String);

/// The workspace roots, canonicalised once.
#[derive(Debug, Clone)]
pub struct Workspace {
    roots: Vec<PathBuf>,
}

impl Workspace {
    /// Roots must exist; they are canonicalised so symlinked roots (macOS `/tmp`) compare right.
    pub fn new<I, P>(roots: I) -> io::Result<Self>
    where
        I: IntoIterator<Item = P>,
        P: AsRef<Path>,
    {
        let mut canonical = Vec::new();
        for root in roots {
            let root = root.as_ref();
            let c = std::fs::canonicalize(root)
                .map_err(|e| io::Error::new(e.kind(), format!("workspace root {}: {e}", root.display())))?;
            if !c.is_dir() {
                return Err(io::Error::new(
                    io::ErrorKind::InvalidInput,
                    format!("workspace root {} is not a directory", root.display()),
                ));
            }
            canonical.push(c);
        }
        if canonical.is_empty() {
            return Err(io::Error::new(io::ErrorKind::InvalidInput, "at least one workspace root is required"));
        }
        Ok(Self { roots: canonical })
    }

    /// Adds a root that may not exist yet (a folder made on first use). Its parent is
    /// canonicalised like any root; its own name is kept as written, so whatever later appears
    /// there (a symlink elsewhere, say) is checked through it rather than trusted now.
    pub fn with_pending_root(mut self, root: &Path) -> Self {
        let absolute = normalize(&std::path::absolute(root).unwrap_or_else(|_| root.to_path_buf()));
        let root = match (absolute.parent(), absolute.file_name()) {
            (Some(parent), Some(name)) => resolve_existing_prefix(parent).join(name),
            _ => absolute,
        };
        self.roots.push(root);
        self
    }

    pub fn roots(&self) -> &[PathBuf] {
        &self.roots
    }

    pub fn primary(&self) -> &Path {
        &self.roots[0]
    }

    /// Resolves `path` (absolute, or relative to a root) to an absolute path inside the
    /// workspace. A relative path is tried against each root and the first root where it exists
    /// wins (so results reported relative to a second root can be read back); if it exists in
    /// none, the primary root is used (e.g. a file about to be written).
    pub fn resolve(&self, path: &str) -> Result<PathBuf, Escape> {
        if path.is_empty() {
            return Ok(self.primary().to_path_buf());
        }
        let given = Path::new(path);
        let candidates: Vec<PathBuf> = if given.is_absolute() {
            vec![normalize(given)]
        } else {
            self.roots.iter().map(|r| normalize(&r.join(given))).collect()
        };
        let chosen = candidates
            .iter()
            .find(|c| c.symlink_metadata().is_ok())
            .or_else(|| candidates.first())
            .cloned()
            .expect("at least one root");
        self.confine(path, chosen)
    }

    /// Checks that `lexical` (already normalised) is inside a root both as written and once every
    /// existing component is resolved through symlinks.
    fn confine(&self, shown: &str, lexical: PathBuf) -> Result<PathBuf, Escape> {
        if !self.contains(&lexical) {
            return Err(Escape(format!("{shown} is outside the workspace ({})", self.describe_roots())));
        }
        let real = resolve_existing_prefix(&lexical);
        if !self.contains(&real) {
            return Err(Escape(format!(
                "{shown} resolves through a symbolic link to {}, outside the workspace",
                real.display()
            )));
        }
        Ok(lexical)
    }

    fn contains(&self, path: &Path) -> bool {
        self.roots.iter().any(|r| path.starts_with(r))
    }

    /// The root `path` is under (for reporting paths relative to it).
    pub fn root_of(&self, path: &Path) -> Option<&Path> {
        self.roots.iter().filter(|r| path.starts_with(r)).max_by_key(|r| r.as_os_str().len()).map(|r| r.as_path())
    }

    fn describe_roots(&self) -> String {
        self.roots.iter().map(|r| r.display().to_string()).collect::<Vec<_>>().join(", ")
    }
}

/// Lexical normalisation: drops `.`, applies `..` (never above the filesystem root).
fn normalize(path: &Path) -> PathBuf {
    let mut out = PathBuf::new();
    for component in path.components() {
        match component {
            Component::CurDir => {}
            Component::ParentDir => {
                out.pop();
            }
            other => out.push(other.as_os_str()),
        }
    }
    out
}

/// Canonicalises the longest existing prefix of `path` and appends the rest, so a path that does
/// not exist yet (a file about to be written) is still checked through its existing parents.
fn resolve_existing_prefix(path: &Path) -> PathBuf {
    let mut existing = path.to_path_buf();
    let mut rest = Vec::new();
    loop {
        if let Ok(real) = std::fs::canonicalize(&existing) {
            let mut full = real;
            for part in rest.iter().rev() {
                full.push(part);
            }
            return full;
        }
        // A dangling symlink cannot be canonicalised: follow it by hand once so its target is
        // what gets checked, not the link's own location.
        if let Ok(target) = std::fs::read_link(&existing) {
            let base = existing.parent().map(Path::to_path_buf).unwrap_or_default();
            let mut full = resolve_existing_prefix(&normalize(&base.join(target)));
            for part in rest.iter().rev() {
                full.push(part);
            }
            return full;
        }
        match (existing.file_name().map(|n| n.to_os_string()), existing.parent()) {
            (Some(name), Some(parent)) => {
                rest.push(name);
                existing = parent.to_path_buf();
            }
            _ => return path.to_path_buf(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn relative_paths_resolve_inside_and_dotdot_escapes_are_refused() {
        let dir = tempfile::tempdir().unwrap();
        let ws = Workspace::new([dir.path()]).unwrap();
        let root = ws.primary().to_path_buf();
        assert_eq!(ws.resolve("a/b.txt").unwrap(), root.join("a/b.txt"));
        assert_eq!(ws.resolve("a/../b.txt").unwrap(), root.join("b.txt"));
        assert!(ws.resolve("../outside.txt").unwrap_err().0.contains("outside the workspace"));
        assert!(ws.resolve("a/../../x").is_err());
        assert!(ws.resolve("/etc/passwd").is_err());
        assert_eq!(ws.resolve(root.join("c").to_str().unwrap()).unwrap(), root.join("c"));
    }

    #[cfg(unix)]
    #[test]
    fn symlinks_that_leave_the_workspace_are_refused() {
        let dir = tempfile::tempdir().unwrap();
        let outside = tempfile::tempdir().unwrap();
        std::fs::write(outside.path().join("secret"), "s").unwrap();
        std::os::unix::fs::symlink(outside.path(), dir.path().join("link")).unwrap();
        std::os::unix::fs::symlink(outside.path().join("nope"), dir.path().join("dangling")).unwrap();
        std::fs::write(dir.path().join("inside"), "i").unwrap();
        std::os::unix::fs::symlink(dir.path().join("inside"), dir.path().join("ok-link")).unwrap();
        let ws = Workspace::new([dir.path()]).unwrap();
        assert!(ws.resolve("link/secret").unwrap_err().0.contains("symbolic link"));
        assert!(ws.resolve("link/new-file").is_err(), "writes through an escaping link");
        assert!(ws.resolve("dangling").is_err(), "a dangling link to outside");
        assert!(ws.resolve("ok-link").is_ok());
    }
}
