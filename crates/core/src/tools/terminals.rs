//! The folder background shells write their output to (`<shell id>.txt`, read back by the
//! model through `read`).
//!
//! Unless the host names one, each tool set gets a folder of its own in the temp dir. It is
//! made only when the first background shell starts, private to the user, and removed with the
//! tools: a process that never starts a background shell leaves nothing behind, and two tool
//! sets in one process never write to each other's `1.txt`.

use std::io;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};

pub(super) struct TerminalsFolder {
    path: PathBuf,
    /// Made by these tools (and so theirs to remove), rather than named by the host.
    own: bool,
}

impl TerminalsFolder {
    /// The host's folder (made absolute now, so a later change of the process's working
    /// directory cannot move it), or when `configured` is empty one of these tools' own.
    pub(super) fn new(configured: &Path) -> Self {
        if !configured.as_os_str().is_empty() {
            let path = std::path::absolute(configured).unwrap_or_else(|_| configured.to_path_buf());
            return TerminalsFolder { path, own: false };
        }
        static NEXT: AtomicU64 = AtomicU64::new(1);
        let name = format!("cursor-acp-terminals-{}-{}", std::process::id(), NEXT.fetch_add(1, Ordering::Relaxed));
        TerminalsFolder { path: std::env::temp_dir().join(name), own: true }
    }

    pub(super) fn path(&self) -> &Path {
        &self.path
    }

    pub(super) fn is_own(&self) -> bool {
        self.own
    }

    /// Makes the folder if it is missing. An own folder is made private (0700); a path that
    /// is already there is only taken if it is a real folder of this user, not a symlink or
    /// something another user put in the shared temp dir.
    pub(super) fn ensure(&self) -> io::Result<()> {
        if !self.own {
            return std::fs::create_dir_all(&self.path);
        }
        let mut builder = std::fs::DirBuilder::new();
        #[cfg(unix)]
        std::os::unix::fs::DirBuilderExt::mode(&mut builder, 0o700);
        match builder.create(&self.path) {
            Err(e) if e.kind() == io::ErrorKind::AlreadyExists => {
                let found = std::fs::symlink_metadata(&self.path)?;
                if found.is_dir() && owned_by_this_user(&found) {
                    Ok(())
                } else {
                    Err(io::Error::new(io::ErrorKind::AlreadyExists, "something else is already there"))
                }
            }
            made => made,
        }
    }

    /// Removes an own folder and the output in it; a host's folder is left as it is.
    pub(super) fn remove(&self) {
        if self.own {
            // Nothing to do when it was never made. A symlink put in its place is removed
            // itself, never followed.
            let _ = std::fs::remove_dir_all(&self.path);
        }
    }
}

impl Drop for TerminalsFolder {
    fn drop(&mut self) {
        self.remove();
    }
}

#[cfg(unix)]
fn owned_by_this_user(found: &std::fs::Metadata) -> bool {
    use std::os::unix::fs::MetadataExt;
    // SAFETY: geteuid has no preconditions and cannot fail.
    found.uid() == unsafe { libc::geteuid() }
}

#[cfg(not(unix))]
fn owned_by_this_user(_: &std::fs::Metadata) -> bool {
    true
}
