//! Workspace confinement: every path a tool touches must stay inside one of the roots it was
//! given, both lexically (`..`, absolute paths) and through symbolic links, even while
//! something swaps a link between the check and the use.
//!
//! So nothing is opened by its full name. Each root is opened once as a directory handle and
//! every file operation resolves the path relative to that handle with `cap-std`, which refuses
//! any step out of it: `openat2(RESOLVE_BENEATH)` on Linux 5.6+, component by component with
//! `O_NOFOLLOW` elsewhere. A link swapped mid-operation makes the operation fail; it can never
//! make it land outside.

use std::fmt;
use std::io;
use std::path::{Component, Path, PathBuf};
use std::sync::Arc;

use cap_std::ambient_authority;
use cap_std::fs::{Dir, Metadata, OpenOptions};

/// Longest path accepted, in bytes (Linux's PATH_MAX): a longer one cannot be opened by the
/// system anyway, and is refused before any work is spent on it.
pub const MAX_PATH_BYTES: usize = 4096;

/// Why a path was refused. Its text is what the model sees in the `rejected` result.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum PathRefused {
    /// Outside every root as written (`..`, an absolute path elsewhere).
    Outside { path: String, roots: String },
    /// A symbolic link on the way leads out of the workspace.
    ThroughLink { path: String },
    /// Longer than [`MAX_PATH_BYTES`] (the path itself is not repeated).
    TooLong { bytes: usize },
}

impl fmt::Display for PathRefused {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            PathRefused::Outside { path, roots } => write!(f, "{path} is outside the workspace ({roots})"),
            PathRefused::ThroughLink { path } => {
                write!(f, "{path} resolves through a symbolic link to outside the workspace")
            }
            PathRefused::TooLong { bytes } => {
                write!(f, "the path is too long: {bytes} bytes, at most {MAX_PATH_BYTES} are accepted")
            }
        }
    }
}

impl std::error::Error for PathRefused {}

/// What a file operation ran into.
#[derive(Debug)]
pub(crate) enum Failure {
    Refused(PathRefused),
    /// Exists, but is not a regular file (and opening it could block or never end).
    NotRegular(FileKind),
    Io(io::Error),
}

/// What a path that is not a regular file is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum FileKind {
    Directory,
    #[cfg_attr(not(unix), allow(dead_code, reason = "only Unix has these to find (`unix_special`)"))]
    Fifo,
    #[cfg_attr(not(unix), allow(dead_code, reason = "only Unix has these to find (`unix_special`)"))]
    Socket,
    #[cfg_attr(not(unix), allow(dead_code, reason = "only Unix has these to find (`unix_special`)"))]
    Device,
    Other,
}

/// The file type questions asked of std's and cap-std's file types alike.
trait FileTypeQuestions {
    fn file(&self) -> bool;
    fn dir(&self) -> bool;
    /// FIFO, socket or device (`None` off Unix).
    fn unix_special(&self) -> Option<FileKind>;
}

macro_rules! file_type_questions {
    ($ty:ty, $ext:path) => {
        impl FileTypeQuestions for $ty {
            fn file(&self) -> bool {
                self.is_file()
            }
            fn dir(&self) -> bool {
                self.is_dir()
            }
            fn unix_special(&self) -> Option<FileKind> {
                #[cfg(unix)]
                {
                    use $ext;
                    if self.is_fifo() {
                        return Some(FileKind::Fifo);
                    }
                    if self.is_socket() {
                        return Some(FileKind::Socket);
                    }
                    if self.is_block_device() || self.is_char_device() {
                        return Some(FileKind::Device);
                    }
                }
                None
            }
        }
    };
}

// The extension traits are only named on Unix: elsewhere the block using them is left out.
file_type_questions!(std::fs::FileType, std::os::unix::fs::FileTypeExt);
file_type_questions!(cap_std::fs::FileType, cap_std::fs::FileTypeExt);

impl FileKind {
    /// `None` for a regular file.
    fn of(file_type: &impl FileTypeQuestions) -> Option<FileKind> {
        if file_type.file() {
            None
        } else if file_type.dir() {
            Some(FileKind::Directory)
        } else {
            Some(file_type.unix_special().unwrap_or(FileKind::Other))
        }
    }

    pub(crate) fn describe(self) -> &'static str {
        match self {
            FileKind::Directory => "directory",
            FileKind::Fifo => "FIFO",
            FileKind::Socket => "socket",
            FileKind::Device => "device",
            FileKind::Other => "special file",
        }
    }
}

/// cap-std reports a step out of the handle as its own error: `PermissionDenied` that came
/// from no system call (a real EACCES carries its errno).
fn is_escape(e: &io::Error) -> bool {
    e.kind() == io::ErrorKind::PermissionDenied && e.raw_os_error().is_none()
}

/// One root: its canonical path and the handle everything under it is resolved through.
#[derive(Debug, Clone)]
struct Root {
    path: PathBuf,
    handle: RootHandle,
}

#[derive(Debug, Clone)]
enum RootHandle {
    /// Opened when the workspace was made; the folder stays pinned even if renamed.
    Open(Arc<Dir>),
    /// A folder made on first use (background shells' output): opened for each operation, never
    /// through a symbolic link in its place.
    MadeLater,
}

impl Root {
    fn dir(&self) -> io::Result<Arc<Dir>> {
        match &self.handle {
            RootHandle::Open(dir) => Ok(dir.clone()),
            RootHandle::MadeLater => open_dir_no_follow(&self.path).map(Arc::new),
        }
    }
}

#[cfg(unix)]
fn open_dir_no_follow(path: &Path) -> io::Result<Dir> {
    use std::os::unix::fs::OpenOptionsExt;
    let opened = std::fs::OpenOptions::new().read(true).custom_flags(libc::O_DIRECTORY | libc::O_NOFOLLOW).open(path);
    match opened {
        Ok(file) => Ok(Dir::from_std_file(file)),
        // ELOOP or ENOTDIR, by kernel: a link in the folder's place is never followed.
        Err(_) if std::fs::symlink_metadata(path).is_ok_and(|m| m.file_type().is_symlink()) => Err(escape_error()),
        Err(e) => Err(e),
    }
}

#[cfg(not(unix))]
fn open_dir_no_follow(path: &Path) -> io::Result<Dir> {
    if std::fs::symlink_metadata(path)?.file_type().is_symlink() {
        return Err(escape_error());
    }
    Dir::open_ambient_dir(path, ambient_authority())
}

/// The same error cap-std gives for a step out of a handle.
fn escape_error() -> io::Error {
    io::Error::new(io::ErrorKind::PermissionDenied, "a path led outside of the workspace")
}

/// The workspace roots, canonicalised and opened once. Cheap to clone.
#[derive(Debug, Clone)]
pub struct Workspace {
    roots: Arc<Vec<Root>>,
}

impl Workspace {
    /// Roots must exist; they are canonicalised so symlinked roots (macOS `/tmp`) compare right.
    pub fn new<I, P>(roots: I) -> io::Result<Self>
    where
        I: IntoIterator<Item = P>,
        P: AsRef<Path>,
    {
        let mut opened = Vec::new();
        for root in roots {
            let root = root.as_ref();
            let context = |e: io::Error| io::Error::new(e.kind(), format!("workspace root {}: {e}", root.display()));
            let path = canonical(root).map_err(context)?;
            if !path.is_dir() {
                return Err(io::Error::new(
                    io::ErrorKind::InvalidInput,
                    format!("workspace root {} is not a directory", root.display()),
                ));
            }
            let dir = Dir::open_ambient_dir(&path, ambient_authority()).map_err(context)?;
            opened.push(Root { path, handle: RootHandle::Open(Arc::new(dir)) });
        }
        if opened.is_empty() {
            return Err(io::Error::new(io::ErrorKind::InvalidInput, "at least one workspace root is required"));
        }
        Ok(Self { roots: Arc::new(opened) })
    }

    /// Adds a root that may not exist yet (a folder made on first use). Its parent is
    /// canonicalised like any root; its own name is kept as written, and whatever later appears
    /// there is opened without following a symbolic link.
    pub fn with_pending_root(self, root: &Path) -> Self {
        let absolute = normalize(&std::path::absolute(root).unwrap_or_else(|_| root.to_path_buf()));
        let path = match (absolute.parent(), absolute.file_name()) {
            (Some(parent), Some(name)) => canonical_prefix(parent).join(name),
            _ => absolute,
        };
        let mut roots = Vec::clone(&self.roots);
        roots.push(Root { path, handle: RootHandle::MadeLater });
        Self { roots: Arc::new(roots) }
    }

    pub fn roots(&self) -> Vec<PathBuf> {
        self.roots.iter().map(|r| r.path.clone()).collect()
    }

    pub fn primary(&self) -> &Path {
        &self.roots[0].path
    }

    /// The root `path` is under (for reporting paths relative to it).
    pub fn root_of(&self, path: &Path) -> Option<&Path> {
        self.root_index(path).map(|i| self.roots[i].path.as_path())
    }

    fn root_index(&self, path: &Path) -> Option<usize> {
        (0..self.roots.len())
            .filter(|&i| under(path, &self.roots[i].path).is_some())
            .max_by_key(|&i| self.roots[i].path.as_os_str().len())
    }

    /// Resolves `path` (absolute, or relative to a root) to an absolute path inside the
    /// workspace, refusing it if it is outside as written or if a symbolic link on its way
    /// leads out right now. For showing and for hosts that open the file themselves; the tools
    /// open through [`Located`], which holds however the links change.
    pub fn resolve(&self, path: &str) -> Result<PathBuf, PathRefused> {
        let located = self.locate(path)?;
        match located.metadata() {
            Err(Failure::Refused(refused)) => Err(refused),
            _ => Ok(located.absolute),
        }
    }

    /// Where `path` is: its root and its path under it. Only lexical, and linear in the length
    /// of the path. A relative path is tried against each root and the first root where it
    /// exists wins (so results reported relative to a second root can be read back); if it
    /// exists in none, the primary root is used (e.g. a file about to be written).
    pub(crate) fn locate(&self, path: &str) -> Result<Located, PathRefused> {
        if path.len() > MAX_PATH_BYTES {
            return Err(PathRefused::TooLong { bytes: path.len() });
        }
        let given = Path::new(path);
        let outside = || PathRefused::Outside { path: path.to_string(), roots: self.describe_roots() };
        if given.is_absolute() {
            let absolute = normalize(given);
            let index = self.root_index(&absolute).ok_or_else(outside)?;
            return Ok(self.located(index, absolute, path));
        }
        let mut candidates = Vec::with_capacity(self.roots.len());
        for (index, root) in self.roots.iter().enumerate() {
            let absolute = normalize(&root.path.join(given));
            if under(&absolute, &root.path).is_some() {
                candidates.push(self.located(index, absolute, path));
            }
        }
        let first_existing = candidates.iter().position(Located::exists);
        match first_existing {
            Some(i) => Ok(candidates.swap_remove(i)),
            None => candidates.into_iter().find(|c| c.root == 0).ok_or_else(outside),
        }
    }

    /// An entry a directory walk found by its full name. The walk reads folders by name, so a
    /// folder swapped for a link out would be listed from outside: an entry is only reported,
    /// or opened, through what this returns, beneath its root.
    pub(crate) fn found(&self, path: &Path) -> Option<Located> {
        let root = self.root_index(path)?;
        Some(self.located(root, path.to_path_buf(), ""))
    }

    /// `absolute` (known to be under root `root`) placed there. It is rewritten as the root's
    /// path and the rest under it, so a path written with other letter case on Windows
    /// (`c:\\users\\…` for a root `C:\\Users\\…`) is shown, and compared later, as the root spells
    /// it; elsewhere the two are the same path already.
    fn located(&self, root: usize, absolute: PathBuf, shown: &str) -> Located {
        let root_path = &self.roots[root].path;
        let relative = under(&absolute, root_path).unwrap_or_default();
        let absolute = if relative.as_os_str().is_empty() { root_path.clone() } else { root_path.join(&relative) };
        Located { absolute, relative, root, workspace: self.clone(), shown: shown.to_string() }
    }

    fn describe_roots(&self) -> String {
        self.roots.iter().map(|r| r.path.display().to_string()).collect::<Vec<_>>().join(", ")
    }
}

/// Whether an operation follows a symbolic link in the last component of its path.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum LastLink {
    Followed,
    Itself,
}

/// A path placed in the workspace: every operation on it resolves beneath its root's handle.
#[derive(Debug, Clone)]
pub(crate) struct Located {
    /// The absolute path as shown to the model (lexical: `..` applied, links not resolved).
    pub absolute: PathBuf,
    /// The same path under its root (`.` for the root itself).
    relative: PathBuf,
    root: usize,
    workspace: Workspace,
    /// The path as the request gave it, for refusals.
    shown: String,
}

impl Located {
    fn relative(&self) -> &Path {
        if self.relative.as_os_str().is_empty() {
            Path::new(".")
        } else {
            &self.relative
        }
    }

    fn dir(&self) -> io::Result<Arc<Dir>> {
        self.workspace.roots[self.root].dir()
    }

    /// Runs `op` beneath the root. A link that leaves the root's handle is refused, unless it
    /// is an absolute link (or one through `..`) to a place inside a root, as a workspace may
    /// hold: then the place it leads to now is resolved by name once and `op` runs again
    /// beneath that root, so a link swapped in the meantime is refused there in turn.
    fn beneath<T>(&self, last: LastLink, op: impl Fn(&Dir, &Path) -> io::Result<T>) -> Result<T, Failure> {
        let refused = || Failure::Refused(PathRefused::ThroughLink { path: self.shown.clone() });
        let first = self.dir().and_then(|dir| op(&dir, self.relative()));
        match first {
            Err(e) if is_escape(&e) => {}
            other => return other.map_err(Failure::Io),
        }
        let target = self.link_target(last).ok_or_else(refused)?;
        match target.dir().and_then(|dir| op(&dir, target.relative())) {
            Err(e) if is_escape(&e) => Err(refused()),
            other => other.map_err(Failure::Io),
        }
    }

    /// Where the links on the way lead now, if that is inside a root.
    fn link_target(&self, last: LastLink) -> Option<Located> {
        let real = match last {
            LastLink::Followed => canonical(&self.absolute).ok()?,
            LastLink::Itself => {
                let parent = canonical(self.absolute.parent()?).ok()?;
                parent.join(self.absolute.file_name()?)
            }
        };
        let root = self.workspace.root_index(&real)?;
        Some(self.workspace.located(root, real, &self.shown))
    }

    /// Whether something is there (a link leading out counts: it is then refused, not skipped).
    fn exists(&self) -> bool {
        match self.entry_metadata() {
            Ok(_) | Err(Failure::Refused(_)) => true,
            Err(_) => false,
        }
    }

    /// Metadata of what the path leads to (links inside followed).
    pub(crate) fn metadata(&self) -> Result<Metadata, Failure> {
        self.beneath(LastLink::Followed, |dir, rel| dir.metadata(rel))
    }

    /// Opens a regular file for reading. Never blocks: a FIFO, socket or device is answered as
    /// [`Failure::NotRegular`] (it is opened non-blocking, then looked at through the handle).
    pub(crate) fn open_regular(&self) -> Result<(std::fs::File, std::fs::Metadata), Failure> {
        let mut options = OpenOptions::new();
        options.read(true);
        self.open_checked(&options)
    }

    /// Opens a regular file for writing from the start, creating it and its parent folders.
    /// What is there already is only truncated once it is known to be a regular file.
    pub(crate) fn create_regular(&self) -> Result<std::fs::File, Failure> {
        if self.relative.parent().is_some_and(|p| !p.as_os_str().is_empty()) {
            let parent_of = |rel: &Path| rel.parent().map(Path::to_path_buf).unwrap_or_default();
            let made = self.beneath(LastLink::Itself, |dir, rel| dir.create_dir_all(parent_of(rel)));
            if let Err(Failure::Io(e)) = made {
                // A link out where a folder should be fails as "exists"; say what it is.
                return Err(match self.beneath(LastLink::Itself, |dir, rel| dir.metadata(parent_of(rel))) {
                    Err(refused @ Failure::Refused(_)) => refused,
                    _ => Failure::Io(e),
                });
            }
            made?;
        }
        let mut options = OpenOptions::new();
        options.write(true).create(true);
        let (file, _) = self.open_checked(&options)?;
        file.set_len(0).map_err(Failure::Io)?;
        Ok(file)
    }

    fn open_checked(&self, options: &OpenOptions) -> Result<(std::fs::File, std::fs::Metadata), Failure> {
        let options = never_blocking(options.clone());
        let file = match self.beneath(LastLink::Followed, |dir, rel| dir.open_with(rel, &options)) {
            Ok(file) => file.into_std(),
            Err(Failure::Io(e)) => return Err(self.not_regular_or(e)),
            Err(other) => return Err(other),
        };
        let meta = file.metadata().map_err(Failure::Io)?;
        match FileKind::of(&meta.file_type()) {
            Some(kind) => Err(Failure::NotRegular(kind)),
            None => Ok((file, meta)),
        }
    }

    /// A failed open of something that is not a regular file (a FIFO without a reader, a
    /// socket: ENXIO; a directory opened for writing: EISDIR) is reported as what it is.
    fn not_regular_or(&self, e: io::Error) -> Failure {
        if e.kind() == io::ErrorKind::NotFound {
            return Failure::Io(e);
        }
        match self.metadata() {
            Ok(meta) => match FileKind::of(&meta.file_type()) {
                Some(kind) => Failure::NotRegular(kind),
                None => Failure::Io(e),
            },
            Err(_) => Failure::Io(e),
        }
    }

    /// Removes the file (a link itself, not what it points at) from its folder.
    pub(crate) fn remove_file(&self) -> Result<(), Failure> {
        self.beneath(LastLink::Itself, |dir, rel| dir.remove_file(rel))
    }

    /// The entry itself (a link is not followed), as a directory walk reports it.
    pub(crate) fn entry_metadata(&self) -> Result<Metadata, Failure> {
        self.beneath(LastLink::Itself, |dir, rel| dir.symlink_metadata(rel))
    }
}

/// Options that never wait on an open: a FIFO without a writer, a terminal.
#[cfg(unix)]
fn never_blocking(mut options: OpenOptions) -> OpenOptions {
    use cap_std::fs::OpenOptionsExt;
    options.custom_flags(libc::O_NONBLOCK | libc::O_NOCTTY);
    options
}

/// Windows has no FIFOs to open by path; what is not a regular file is refused after the open.
#[cfg(not(unix))]
fn never_blocking(options: OpenOptions) -> OpenOptions {
    options
}

/// `std::fs::canonicalize` in the form people and programs write paths. On Windows it answers
/// with the `\\?\` (verbatim) form, `\\?\C:\Users\me\project`, which no path the model or the
/// editor writes (`C:\Users\me\project\a.txt`) starts with: every absolute path, a shell's
/// working directory included, was refused as outside the workspace. The plain form is used
/// whenever it names the same file (see [`plain_form`]).
pub(crate) fn canonical(path: &Path) -> io::Result<PathBuf> {
    let real = std::fs::canonicalize(path)?;
    if cfg!(windows) {
        if let Some(plain) = real.to_str().and_then(plain_form) {
            return Ok(PathBuf::from(plain));
        }
    }
    Ok(real)
}

/// The plain form of a verbatim Windows path (`\\?\C:\a` → `C:\a`, `\\?\UNC\server\share\a` →
/// `\\server\share\a`), or `None` when the plain form would name another file or none: longer
/// than MAX_PATH (260), or a name that Windows rewrites when it parses a plain path (a
/// trailing dot or space, a device name such as `NUL` or `com1.txt`). Verbatim paths are
/// taken as they are, so those stay verbatim. A pure function of the text, so it is tested on
/// every platform.
fn plain_form(verbatim: &str) -> Option<String> {
    let rest = verbatim.strip_prefix(r"\\?\")?;
    let (plain, names) = if let Some(unc) = rest.strip_prefix(r"UNC\") {
        // \\server\share\names…: the server and the share are not file names.
        (format!(r"\\{unc}"), unc.splitn(3, '\\').nth(2).unwrap_or(""))
    } else {
        let bytes = rest.as_bytes();
        if bytes.len() < 3 || !bytes[0].is_ascii_alphabetic() || bytes[1] != b':' || bytes[2] != b'\\' {
            return None;
        }
        (rest.to_string(), &rest[3..])
    };
    const MAX_PATH: usize = 260;
    if plain.encode_utf16().count() >= MAX_PATH {
        return None;
    }
    let rewritten = |name: &str| {
        let stem = name.split('.').next().unwrap_or("").trim_end().to_ascii_uppercase();
        let device = matches!(stem.as_str(), "CON" | "PRN" | "AUX" | "NUL" | "CONIN$" | "CONOUT$")
            || ((stem.starts_with("COM") || stem.starts_with("LPT"))
                && stem.len() == 4
                && stem.as_bytes()[3].is_ascii_digit());
        device || name.ends_with('.') || name.ends_with(' ') || name.contains('/')
    };
    if names.split('\\').filter(|name| !name.is_empty()).any(rewritten) {
        return None;
    }
    Some(plain)
}

/// What is left of `path` under `root`, or `None` when it is not under it. Component by
/// component, as `Path::strip_prefix`; on Windows in any letter case, as NTFS compares names
/// (a path the model writes as `c:\users\me\project\x` is in the root `C:\Users\me\project`),
/// and `C:` the same drive as `\\?\C:`.
fn under(path: &Path, root: &Path) -> Option<PathBuf> {
    if !cfg!(windows) {
        return path.strip_prefix(root).ok().map(Path::to_path_buf);
    }
    let mut rest = path.components();
    for wanted in root.components() {
        if !same_name_ignoring_case(rest.next()?, wanted) {
            return None;
        }
    }
    Some(rest.as_path().to_path_buf())
}

/// Two path components that name the same thing when letter case does not matter.
fn same_name_ignoring_case(a: Component, b: Component) -> bool {
    use std::path::Prefix;
    fn drive(c: &Component) -> Option<u8> {
        match c {
            Component::Prefix(p) => match p.kind() {
                Prefix::Disk(letter) | Prefix::VerbatimDisk(letter) => Some(letter.to_ascii_uppercase()),
                _ => None,
            },
            _ => None,
        }
    }
    if let (Some(x), Some(y)) = (drive(&a), drive(&b)) {
        return x == y;
    }
    match (a.as_os_str().to_str(), b.as_os_str().to_str()) {
        (Some(x), Some(y)) => x == y || x.to_lowercase() == y.to_lowercase(),
        // A name that is not Unicode (an unpaired surrogate) is compared exactly.
        _ => a == b,
    }
}

/// Lexical normalisation: drops `.`, applies `..` (never above the filesystem root). Linear.
fn normalize(path: &Path) -> PathBuf {
    let mut parts: Vec<Component> = Vec::new();
    for component in path.components() {
        match component {
            Component::CurDir => {}
            Component::ParentDir => {
                if matches!(parts.last(), Some(Component::Normal(_))) {
                    parts.pop();
                }
            }
            other => parts.push(other),
        }
    }
    parts.iter().collect()
}

/// Canonicalises the longest existing prefix of `path` and appends the rest (for a root that
/// does not exist yet, whose parent may be a symlinked temp dir).
fn canonical_prefix(path: &Path) -> PathBuf {
    let mut rest = Vec::new();
    for existing in path.ancestors() {
        if let Ok(real) = canonical(existing) {
            return rest.iter().rev().fold(real, |full, part: &&std::ffi::OsStr| full.join(part));
        }
        match existing.file_name() {
            Some(name) => rest.push(name),
            None => break,
        }
    }
    path.to_path_buf()
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
        assert!(ws.resolve("../outside.txt").unwrap_err().to_string().contains("outside the workspace"));
        assert!(ws.resolve("a/../../x").is_err());
        assert!(ws.resolve("/etc/passwd").is_err());
        assert_eq!(ws.resolve(root.join("c").to_str().unwrap()).unwrap(), root.join("c"));
        assert_eq!(ws.resolve("").unwrap(), root);
        let long = "a/".repeat(MAX_PATH_BYTES);
        assert_eq!(ws.resolve(&long).unwrap_err(), PathRefused::TooLong { bytes: long.len() });
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
        std::os::unix::fs::symlink("inside", dir.path().join("relative-link")).unwrap();
        let ws = Workspace::new([dir.path()]).unwrap();
        assert!(ws.resolve("link/secret").unwrap_err().to_string().contains("symbolic link"));
        assert!(ws.resolve("link/new-file").is_err(), "writes through an escaping link");
        assert!(ws.resolve("dangling").is_err(), "a dangling link to outside");
        assert!(ws.resolve("relative-link").is_ok());
        // A link by its absolute name into the root is resolved by the root's handle too.
        assert!(ws.resolve("ok-link").is_ok());
    }

    #[test]
    fn verbatim_windows_paths_are_shown_plain_only_when_that_names_the_same_file() {
        assert_eq!(plain_form(r"\\?\C:\Users\me\project").as_deref(), Some(r"C:\Users\me\project"));
        assert_eq!(plain_form(r"\\?\d:\").as_deref(), Some(r"d:\"));
        assert_eq!(plain_form(r"\\?\UNC\server\share\dir").as_deref(), Some(r"\\server\share\dir"));
        assert_eq!(plain_form(r"C:\already\plain"), None);
        assert_eq!(plain_form(r"\\?\Volume{0b1c}\dir"), None, "no drive to name it by");
        assert_eq!(plain_form(r"\\?\C:\dir\nul"), None, "a device name");
        assert_eq!(plain_form(r"\\?\C:\dir\COM1.txt"), None, "a device name with an extension");
        assert_eq!(plain_form(r"\\?\C:\dir\trailing."), None);
        assert_eq!(plain_form(r"\\?\C:\dir\trailing "), None);
        assert_eq!(plain_form(r"\\?\C:\dir\console.log").as_deref(), Some(r"C:\dir\console.log"));
        let long = format!(r"\\?\C:\{}", "a".repeat(300));
        assert_eq!(plain_form(&long), None, "longer than MAX_PATH");
    }

    #[test]
    fn components_compare_ignoring_case_and_the_verbatim_drive() {
        let name = |s: &'static str| Component::Normal(std::ffi::OsStr::new(s));
        assert!(same_name_ignoring_case(name("Users"), name("users")));
        assert!(same_name_ignoring_case(name("ÄRGER"), name("ärger")));
        assert!(!same_name_ignoring_case(name("a"), name("b")));
    }

    #[test]
    fn normalisation_is_lexical_and_stops_at_the_root() {
        assert_eq!(normalize(Path::new("/a/./b/../c")), PathBuf::from("/a/c"));
        assert_eq!(normalize(Path::new("/../../a")), PathBuf::from("/a"));
    }
}
