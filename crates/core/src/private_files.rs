//! Files and folders only their owner may read: saved sessions, blobs, terminal output and
//! recordings hold conversations and what was sent to the server.
//!
//! On Unix that is a mode (0600 for a file, 0700 for a folder), set outright: a mode given at
//! creation is narrowed by the umask, and one an older version made may be wider. On Windows a
//! mode means nothing; the object gets a protected access list (nothing inherited from the
//! folder above) with one entry, full control for the user this process runs as. A folder's
//! entry is inherited by what is created in it, so a file written there is private from its
//! first byte.

use std::io;
use std::path::Path;

/// Makes the folder `path` private to this user.
pub fn restrict_dir(path: &Path) -> io::Result<()> {
    #[cfg(unix)]
    return unix::set_mode(path, 0o700);
    #[cfg(windows)]
    return windows::owner_only(path, true);
    #[cfg(not(any(unix, windows)))]
    return Ok(());
}

/// Makes the file `path` private to this user.
pub fn restrict_file(path: &Path) -> io::Result<()> {
    #[cfg(unix)]
    return unix::set_mode(path, 0o600);
    #[cfg(windows)]
    return windows::owner_only(path, false);
    #[cfg(not(any(unix, windows)))]
    return Ok(());
}

/// [`restrict_dir`] or [`restrict_file`], whichever `path` is (a link is not followed on Unix;
/// its target's mode would change).
pub fn restrict(path: &Path) -> io::Result<()> {
    if std::fs::symlink_metadata(path)?.is_dir() {
        restrict_dir(path)
    } else {
        restrict_file(path)
    }
}

/// Writes `data` to `path` as a new file private to this user from its first byte: mode 0600
/// given at creation (and set outright, the umask may narrow it), or on Windows this user's
/// access list before anything is written. A file already at `path` is removed and made again,
/// so that no wider mode or access list it has is kept; the caller names a file of its own there
/// (a temporary it renames into place). On failure nothing is left at `path`.
pub fn write_new_file(path: &Path, data: &[u8]) -> io::Result<()> {
    use std::io::Write as _;
    let mut options = std::fs::OpenOptions::new();
    options.write(true).create_new(true);
    #[cfg(unix)]
    std::os::unix::fs::OpenOptionsExt::mode(&mut options, 0o600);
    // Made first and removed only when something is there: the usual case (a fresh temporary)
    // costs no removal that finds nothing.
    let opened = match options.open(path) {
        Err(e) if e.kind() == io::ErrorKind::AlreadyExists => {
            std::fs::remove_file(path)?;
            options.open(path)
        }
        opened => opened,
    };
    let written = opened.and_then(|mut file| {
        #[cfg(unix)]
        file.set_permissions(std::os::unix::fs::PermissionsExt::from_mode(0o600))?;
        #[cfg(windows)]
        restrict_file(path)?;
        file.write_all(data)
    });
    if written.is_err() {
        #[allow(
            clippy::let_underscore_must_use,
            reason = "the write's error is the one to report; a file that cannot be removed either is left to the caller's tidying"
        )]
        let _ = std::fs::remove_file(path);
    }
    written
}

/// Who may open `path`, as its access list says (Windows; elsewhere `None`): for tests and
/// diagnostics, read back through the same API that wrote it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AccessList {
    /// Whether entries of the folders above are kept out (inheritance turned off).
    pub protected: bool,
    pub entries: Vec<AccessEntry>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AccessEntry {
    /// Whether the entry allows (rather than denies).
    pub allows: bool,
    /// Whether it names the user this process runs as.
    pub current_user: bool,
    /// The access mask.
    pub mask: u32,
    /// Whether it came from the folder above.
    pub inherited: bool,
    /// Whether a folder passes it on to the files and folders made in it.
    pub passed_on: bool,
}

/// The access list of `path` on Windows; `Ok(None)` elsewhere.
pub fn access_list(path: &Path) -> io::Result<Option<AccessList>> {
    #[cfg(windows)]
    return windows::access_list(path).map(Some);
    #[cfg(not(windows))]
    {
        std::fs::symlink_metadata(path)?;
        Ok(None)
    }
}

#[cfg(unix)]
mod unix {
    use std::io;
    use std::os::unix::fs::PermissionsExt;
    use std::path::Path;

    pub(super) fn set_mode(path: &Path, mode: u32) -> io::Result<()> {
        let metadata = std::fs::symlink_metadata(path)?;
        if metadata.file_type().is_symlink() {
            return Err(io::Error::other(format!("{} is a symbolic link", path.display())));
        }
        if metadata.permissions().mode() & 0o777 != mode {
            std::fs::set_permissions(path, std::fs::Permissions::from_mode(mode))?;
        }
        Ok(())
    }
}

#[cfg(windows)]
mod windows {
    use std::ffi::c_void;
    use std::io;
    use std::os::windows::ffi::OsStrExt;
    use std::os::windows::io::{AsRawHandle, FromRawHandle, OwnedHandle};
    use std::path::Path;

    use windows_sys::Win32::Foundation::{LocalFree, ERROR_SUCCESS};
    use windows_sys::Win32::Security::Authorization::{GetNamedSecurityInfoW, SetNamedSecurityInfoW, SE_FILE_OBJECT};
    use windows_sys::Win32::Security::{
        AddAccessAllowedAceEx, EqualSid, GetAce, GetLengthSid, GetSecurityDescriptorControl, GetTokenInformation,
        InitializeAcl, TokenUser, ACCESS_ALLOWED_ACE, ACE_HEADER, ACL, ACL_REVISION, CONTAINER_INHERIT_ACE,
        DACL_SECURITY_INFORMATION, INHERITED_ACE, OBJECT_INHERIT_ACE, PROTECTED_DACL_SECURITY_INFORMATION,
        PSECURITY_DESCRIPTOR, SE_DACL_PROTECTED, TOKEN_QUERY, TOKEN_USER,
    };
    use windows_sys::Win32::Storage::FileSystem::FILE_ALL_ACCESS;
    use windows_sys::Win32::System::SystemServices::ACCESS_ALLOWED_ACE_TYPE;
    use windows_sys::Win32::System::Threading::{GetCurrentProcess, OpenProcessToken};

    use super::{AccessEntry, AccessList};

    /// The `TOKEN_USER` of this process, in a buffer aligned for it; its SID points into it.
    struct CurrentUser(Vec<u64>);

    impl CurrentUser {
        fn get() -> io::Result<CurrentUser> {
            let mut raw = std::ptr::null_mut();
            // SAFETY: the pseudo-handle of this process, and a pointer to receive the token.
            if unsafe { OpenProcessToken(GetCurrentProcess(), TOKEN_QUERY, &mut raw) } == 0 {
                return Err(io::Error::last_os_error());
            }
            // SAFETY: a token handle just opened, owned by nothing else.
            let token = unsafe { OwnedHandle::from_raw_handle(raw) };
            let mut len = 0u32;
            // SAFETY: asks for the size only (no buffer); fails with ERROR_INSUFFICIENT_BUFFER.
            unsafe { GetTokenInformation(token.as_raw_handle(), TokenUser, std::ptr::null_mut(), 0, &mut len) };
            if len == 0 {
                return Err(io::Error::last_os_error());
            }
            let mut buffer = vec![0u64; (len as usize).div_ceil(8)];
            // SAFETY: the buffer holds `len` bytes, aligned for TOKEN_USER.
            let got = unsafe {
                GetTokenInformation(token.as_raw_handle(), TokenUser, buffer.as_mut_ptr().cast(), len, &mut len)
            };
            if got == 0 {
                return Err(io::Error::last_os_error());
            }
            Ok(CurrentUser(buffer))
        }

        fn sid(&self) -> *mut c_void {
            // SAFETY: the buffer holds a TOKEN_USER that GetTokenInformation wrote.
            unsafe { (*self.0.as_ptr().cast::<TOKEN_USER>()).User.Sid }
        }
    }

    fn wide(path: &Path) -> io::Result<Vec<u16>> {
        let wide: Vec<u16> = path.as_os_str().encode_wide().chain(Some(0)).collect();
        if wide[..wide.len() - 1].contains(&0) {
            return Err(io::Error::new(io::ErrorKind::InvalidInput, "a path with a NUL character"));
        }
        Ok(wide)
    }

    /// One entry, full control for this user (inherited by a folder's files and subfolders when
    /// `folder`), nothing inherited from above.
    pub(super) fn owner_only(path: &Path, folder: bool) -> io::Result<()> {
        // Setting a folder's list walks everything in it (Windows passes the entry on to each
        // file), so a list that is already right is left alone.
        let list = access_list(path)?;
        if let [only] = list.entries.as_slice() {
            let right = AccessEntry {
                allows: true,
                current_user: true,
                mask: FILE_ALL_ACCESS,
                inherited: false,
                passed_on: folder,
            };
            if list.protected && *only == right {
                return Ok(());
            }
        }
        let name = wide(path)?;
        let user = CurrentUser::get()?;
        // SAFETY: the SID GetTokenInformation wrote, valid while `user` lives.
        let sid_len = unsafe { GetLengthSid(user.sid()) } as usize;
        let acl_len = size_of::<ACL>() + size_of::<ACCESS_ALLOWED_ACE>() - size_of::<u32>() + sid_len;
        let mut acl = vec![0u64; acl_len.div_ceil(8)];
        let acl_ptr = acl.as_mut_ptr().cast::<ACL>();
        let flags = if folder { OBJECT_INHERIT_ACE | CONTAINER_INHERIT_ACE } else { 0 };
        // SAFETY: `acl` holds `acl_len` bytes, aligned for ACL (DWORD alignment is required).
        if unsafe { InitializeAcl(acl_ptr, acl_len as u32, ACL_REVISION) } == 0 {
            return Err(io::Error::last_os_error());
        }
        // SAFETY: an initialised ACL with room for this one entry; the SID is valid.
        if unsafe { AddAccessAllowedAceEx(acl_ptr, ACL_REVISION, flags, FILE_ALL_ACCESS, user.sid()) } == 0 {
            return Err(io::Error::last_os_error());
        }
        // SAFETY: a NUL-terminated name; owner, group and SACL left as they are (null).
        let status = unsafe {
            SetNamedSecurityInfoW(
                name.as_ptr(),
                SE_FILE_OBJECT,
                DACL_SECURITY_INFORMATION | PROTECTED_DACL_SECURITY_INFORMATION,
                std::ptr::null_mut(),
                std::ptr::null_mut(),
                acl_ptr,
                std::ptr::null(),
            )
        };
        if status != ERROR_SUCCESS {
            return Err(io::Error::from_raw_os_error(status as i32));
        }
        Ok(())
    }

    /// Frees what GetNamedSecurityInfoW allocated.
    struct Descriptor(PSECURITY_DESCRIPTOR);

    impl Drop for Descriptor {
        fn drop(&mut self) {
            // SAFETY: a descriptor GetNamedSecurityInfoW allocated with LocalAlloc.
            unsafe { LocalFree(self.0) };
        }
    }

    pub(super) fn access_list(path: &Path) -> io::Result<AccessList> {
        let name = wide(path)?;
        let user = CurrentUser::get()?;
        let mut dacl: *mut ACL = std::ptr::null_mut();
        let mut descriptor: PSECURITY_DESCRIPTOR = std::ptr::null_mut();
        // SAFETY: a NUL-terminated name and out-pointers for the DACL and its descriptor.
        let status = unsafe {
            GetNamedSecurityInfoW(
                name.as_ptr(),
                SE_FILE_OBJECT,
                DACL_SECURITY_INFORMATION,
                std::ptr::null_mut(),
                std::ptr::null_mut(),
                &mut dacl,
                std::ptr::null_mut(),
                &mut descriptor,
            )
        };
        if status != ERROR_SUCCESS {
            return Err(io::Error::from_raw_os_error(status as i32));
        }
        let descriptor = Descriptor(descriptor);
        let (mut control, mut revision) = (0u16, 0u32);
        // SAFETY: the descriptor just returned.
        if unsafe { GetSecurityDescriptorControl(descriptor.0, &mut control, &mut revision) } == 0 {
            return Err(io::Error::last_os_error());
        }
        let mut entries = Vec::new();
        // A null DACL (everyone may do anything) has no entries to list.
        let count = if dacl.is_null() {
            0
        } else {
            // SAFETY: a DACL GetNamedSecurityInfoW returned, valid while `descriptor` lives.
            unsafe { (*dacl).AceCount }
        };
        for index in 0..u32::from(count) {
            let mut ace: *mut c_void = std::ptr::null_mut();
            // SAFETY: the DACL is valid while `descriptor` lives; `index` is below its count.
            if unsafe { GetAce(dacl, index, &mut ace) } == 0 {
                return Err(io::Error::last_os_error());
            }
            // SAFETY: every ACE starts with an ACE_HEADER.
            let header = unsafe { *ace.cast::<ACE_HEADER>() };
            let allows = u32::from(header.AceType) == ACCESS_ALLOWED_ACE_TYPE;
            let (mask, current_user) = if allows {
                let allowed = ace.cast::<ACCESS_ALLOWED_ACE>();
                // SAFETY: an access-allowed ACE, whose SID starts at SidStart.
                unsafe {
                    ((*allowed).Mask, EqualSid(std::ptr::addr_of_mut!((*allowed).SidStart).cast(), user.sid()) != 0)
                }
            } else {
                // SAFETY: every other ACE of a file DACL has its mask right after the header.
                (unsafe { *ace.cast::<u8>().add(size_of::<ACE_HEADER>()).cast::<u32>() }, false)
            };
            let flags = u32::from(header.AceFlags);
            entries.push(AccessEntry {
                allows,
                current_user,
                mask,
                inherited: flags & INHERITED_ACE != 0,
                passed_on: flags & (OBJECT_INHERIT_ACE | CONTAINER_INHERIT_ACE)
                    == OBJECT_INHERIT_ACE | CONTAINER_INHERIT_ACE,
            });
        }
        Ok(AccessList { protected: control & SE_DACL_PROTECTED != 0, entries })
    }
}

#[cfg(all(test, unix))]
mod tests {
    use std::os::unix::fs::PermissionsExt;

    use super::*;

    #[test]
    fn modes_are_set_outright_and_links_refused() {
        let dir = tempfile::tempdir().unwrap();
        let folder = dir.path().join("f");
        std::fs::create_dir(&folder).unwrap();
        std::fs::set_permissions(&folder, std::fs::Permissions::from_mode(0o755)).unwrap();
        let file = folder.join("a");
        std::fs::write(&file, "x").unwrap();
        std::fs::set_permissions(&file, std::fs::Permissions::from_mode(0o644)).unwrap();
        restrict(&folder).unwrap();
        restrict(&file).unwrap();
        let mode = |p: &Path| std::fs::metadata(p).unwrap().permissions().mode() & 0o777;
        assert_eq!((mode(&folder), mode(&file)), (0o700, 0o600));
        let link = dir.path().join("link");
        std::os::unix::fs::symlink(&file, &link).unwrap();
        assert!(restrict_file(&link).is_err());
        assert!(restrict(&dir.path().join("missing")).is_err());
        assert_eq!(access_list(&file).unwrap(), None);
    }

    #[test]
    fn a_new_file_is_private_and_replaces_a_wider_one() {
        let dir = tempfile::tempdir().unwrap();
        let mode = |p: &Path| std::fs::metadata(p).unwrap().permissions().mode() & 0o777;
        let file = dir.path().join("save.tmp");
        std::fs::write(&file, "an older, longer and readable text").unwrap();
        std::fs::set_permissions(&file, std::fs::Permissions::from_mode(0o644)).unwrap();
        write_new_file(&file, b"new").unwrap();
        assert_eq!((std::fs::read_to_string(&file).unwrap().as_str(), mode(&file)), ("new", 0o600));

        // A link there is replaced, its target left as it was.
        let target = dir.path().join("target");
        std::fs::write(&target, "kept").unwrap();
        let link = dir.path().join("link.tmp");
        std::os::unix::fs::symlink(&target, &link).unwrap();
        write_new_file(&link, b"own").unwrap();
        assert!(!std::fs::symlink_metadata(&link).unwrap().file_type().is_symlink());
        assert_eq!(std::fs::read_to_string(&target).unwrap(), "kept");

        // A folder in the way, or a missing folder above: an error, and nothing written.
        let folder = dir.path().join("folder");
        std::fs::create_dir(&folder).unwrap();
        assert!(write_new_file(&folder, b"x").is_err());
        assert!(std::fs::metadata(&folder).unwrap().is_dir());
        let missing = dir.path().join("missing").join("a");
        assert_eq!(write_new_file(&missing, b"x").unwrap_err().kind(), io::ErrorKind::NotFound);
    }
}
