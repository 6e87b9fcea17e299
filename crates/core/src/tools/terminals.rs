//! The folder background shells write their output to (`<shell id>.txt`, read back by the
//! model through `read`).
//!
//! Unless the host names one, each tool set gets a folder of its own in the temp dir. It is
//! made only when the first background shell starts, private to the user, and removed with the
//! tools: a process that never starts a background shell leaves nothing behind, and two tool
//! sets in one process never write to each other's `1.txt`.
//!
//! Shell output can hold anything a command printed, secrets included: every output file is
//! private to the user (0600, whatever the umask), folders made for it too (0700), and the
//! files go when the tools are closed or dropped (their shells are killed then), also from a
//! folder the host named.
//!
//! A folder the host named is the host's: the tools make it while they are open, but once
//! closed they never make it again. The host closes the tools before it removes the folder (the
//! stdio agent deleting a session), so a shell or output file that comes late finds no folder
//! and fails, rather than bringing the deleted folder back. A writer that opened the folder
//! before a close makes no file in it after (see [`Opened`]): the host's removal never races a
//! new file (which would leave the folder there, not empty).

use std::io;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Mutex;

pub(super) struct TerminalsFolder {
    path: PathBuf,
    /// Made by these tools (and so theirs to remove), rather than named by the host.
    own: bool,
    /// Output files written in a host's folder, removed with the tools.
    written: Mutex<Vec<PathBuf>>,
    /// How many times [`TerminalsFolder::close`] ran; once closed, a host's folder is not made
    /// again. A lock, not an atomic: `ensure` and `create_file` hold it from their check to the
    /// folder or file made, so nothing is made once `close` returned (and the host removed it).
    closes: Mutex<u64>,
}

/// The folder as `ensure` found or made it, for the writer that asked: files are made in it
/// only while the tools have not been closed since.
#[derive(Debug, Clone, Copy)]
#[must_use]
pub(super) struct Opened {
    closes: u64,
}

impl TerminalsFolder {
    /// The host's folder (made absolute now, so a later change of the process's working
    /// directory cannot move it), or when `configured` is empty one of these tools' own.
    pub(super) fn new(configured: &Path) -> Self {
        if !configured.as_os_str().is_empty() {
            let path = std::path::absolute(configured).unwrap_or_else(|_| configured.to_path_buf());
            return TerminalsFolder { path, own: false, written: Mutex::default(), closes: Mutex::new(0) };
        }
        static NEXT: AtomicU64 = AtomicU64::new(1);
        let name = format!("cursor-acp-terminals-{}-{}", std::process::id(), NEXT.fetch_add(1, Ordering::Relaxed));
        TerminalsFolder {
            path: std::env::temp_dir().join(name),
            own: true,
            written: Mutex::default(),
            closes: Mutex::new(0),
        }
    }

    pub(super) fn path(&self) -> &Path {
        &self.path
    }

    pub(super) fn is_own(&self) -> bool {
        self.own
    }

    /// Makes the folder if it is missing. An own folder is made private (0700); a path that
    /// is already there is only taken if it is a real folder of this user, not a symlink or
    /// something another user put in the shared temp dir. A host's folder is made only until
    /// the tools are closed: after that, a missing one is the host's decision (it removed it).
    pub(super) fn ensure(&self) -> io::Result<Opened> {
        let mut builder = std::fs::DirBuilder::new();
        #[cfg(unix)]
        std::os::unix::fs::DirBuilderExt::mode(&mut builder, 0o700);
        let closes = self.closes.lock().expect("terminals lock");
        let opened = Opened { closes: *closes };
        if !self.own {
            if *closes > 0 {
                return match std::fs::metadata(&self.path) {
                    Ok(found) if found.is_dir() => Ok(opened),
                    _ => Err(io::Error::new(
                        io::ErrorKind::NotFound,
                        "the folder is gone and the tools were closed: it is not made again",
                    )),
                };
            }
            // Folders made here are private; one the host already has is left as it is.
            return builder.recursive(true).create(&self.path).map(|()| opened);
        }
        match builder.create(&self.path) {
            Err(e) if e.kind() == io::ErrorKind::AlreadyExists => {
                let found = std::fs::symlink_metadata(&self.path)?;
                if found.is_dir() && owned_by_this_user(&found) {
                    Ok(opened)
                } else {
                    Err(io::Error::new(io::ErrorKind::AlreadyExists, "something else is already there"))
                }
            }
            // Windows has no mode to create it with: its access list is set once it exists.
            #[cfg(windows)]
            Ok(()) => crate::private_files::restrict_dir(&self.path).map(|()| opened),
            made => made.map(|()| opened),
        }
    }

    /// Creates (or empties) the output file of a background shell, readable by this user
    /// only. A link put in its place is not followed.
    pub(super) fn create_output(&self, opened: Opened, shell_id: u32) -> io::Result<std::fs::File> {
        self.create_file(opened, &format!("{shell_id}.txt"))
    }

    /// Creates (or empties) the file `name` in the folder `ensure` opened, as
    /// [`TerminalsFolder::create_output`] does: private, no link followed, removed with the
    /// tools; refused when the tools were closed since.
    pub(super) fn create_file(&self, opened: Opened, name: &str) -> io::Result<std::fs::File> {
        let closes = self.closes.lock().expect("terminals lock");
        if *closes != opened.closes {
            return Err(io::Error::other("the tools were closed meanwhile"));
        }
        let path = self.path.join(name);
        let mut options = std::fs::OpenOptions::new();
        options.write(true).create(true).truncate(true);
        #[cfg(unix)]
        {
            use std::os::unix::fs::OpenOptionsExt;
            options.mode(0o600).custom_flags(libc::O_NOFOLLOW);
        }
        let file = options.open(&path)?;
        // The mode given at creation is narrowed by the umask and ignored for a file that was
        // there already: set it outright.
        #[cfg(unix)]
        file.set_permissions(std::os::unix::fs::PermissionsExt::from_mode(0o600))?;
        #[cfg(windows)]
        crate::private_files::restrict_file(&path)?;
        if !self.own {
            self.written.lock().expect("terminals lock").push(path);
        }
        drop(closes);
        Ok(file)
    }

    /// [`TerminalsFolder::remove`], and from now on a host's folder is never made again, nor
    /// a file in any folder by a writer that opened it before.
    pub(super) fn close(&self) {
        let mut closes = self.closes.lock().expect("terminals lock");
        *closes += 1;
        // Under the lock: no writer makes a file while the output is removed.
        self.remove();
    }

    /// Removes the shells' output: an own folder with everything in it, or from a host's folder
    /// the files these tools wrote (the folder stays).
    pub(super) fn remove(&self) {
        if self.own {
            // Nothing to do when it was never made. A symlink put in its place is removed
            // itself, never followed.
            #[allow(
                clippy::let_underscore_must_use,
                reason = "best effort at teardown: nothing is left to report to, and a folder never made is no error"
            )]
            let _ = std::fs::remove_dir_all(&self.path);
        } else {
            for file in self.written.lock().expect("terminals lock").drain(..) {
                #[allow(
                    clippy::let_underscore_must_use,
                    reason = "best effort at teardown: nothing is left to report to, and a file already gone is no error"
                )]
                let _ = std::fs::remove_file(file);
            }
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
