//! Files private to this user, for the JS that writes them (the agent's sessions, credentials
//! and recordings): the core's `private_files` owns what "private" means on each platform.

use std::path::Path;

use cursor_acp_core::private_files;
use cursor_acp_core::CoreError;
use napi::bindgen_prelude::*;
use napi::Env;

use crate::js_error::coded;

fn failed(env: &Env, path: &str, e: &std::io::Error) -> napi::Error {
    coded(env, &CoreError::InvalidInput(format!("{path}: {e}")))
}

/// Makes the file or folder at `path` readable by this user only: mode 0600 (0700 for a folder)
/// on Unix; on Windows a protected access list with one entry, full control for this user
/// (inherited by what is created in a folder). A symbolic link is refused on Unix. Throws
/// `E_INVALID` when `path` is missing or cannot be changed.
#[napi]
pub fn make_private(env: Env, path: String) -> Result<()> {
    private_files::restrict(Path::new(&path)).map_err(|e| failed(&env, &path, &e))
}

/// One entry of a Windows access list ([`access_list`]).
#[napi(object)]
pub struct AccessEntry {
    /// Allows (rather than denies).
    pub allows: bool,
    /// Names the user this process runs as.
    pub current_user: bool,
    /// The access mask.
    pub mask: u32,
    /// Came from the folder above.
    pub inherited: bool,
    /// A folder passes it on to the files and folders made in it.
    pub passed_on: bool,
}

/// Who may open a file or folder on Windows, read back from its access list.
#[napi(object)]
pub struct AccessList {
    /// The folders' entries above are kept out (inheritance turned off).
    pub protected: bool,
    pub entries: Vec<AccessEntry>,
}

/// The access list of `path` on Windows (what `makePrivate` sets, for diagnostics and tests);
/// `null` elsewhere. Throws `E_INVALID` when `path` is missing.
#[napi]
pub fn access_list(env: Env, path: String) -> Result<Option<AccessList>> {
    let list = private_files::access_list(Path::new(&path)).map_err(|e| failed(&env, &path, &e))?;
    Ok(list.map(|list| AccessList {
        protected: list.protected,
        entries: list
            .entries
            .into_iter()
            .map(|e| AccessEntry {
                allows: e.allows,
                current_user: e.current_user,
                mask: e.mask,
                inherited: e.inherited,
                passed_on: e.passed_on,
            })
            .collect(),
    }))
}
