//! `RecordFile`: the file a session's saves replace, as the core's `record_file` keeps it (saves
//! land in the order they started, none once closed). The stdio agent's store holds one per
//! open session; `Session.saveToFile` lands a save through it on the addon's file thread.

use std::path::Path;
use std::sync::Arc;

use cursor_acp_core::record_file::{self, Landing};
use cursor_acp_core::CoreError;
use napi::bindgen_prelude::*;
use napi::Env;

use crate::js_error::coded;

/// The file each save of one session's record replaces whole. A save is numbered as it starts
/// (`begin()`), written to a temporary of its own, and renamed over the file by `replace` (or
/// by `Session.saveToFile` on the addon's file thread): the save that started last is the one
/// kept, whatever order the writes end in, and once `close()` returned no save lands.
#[napi]
pub struct RecordFile {
    pub(crate) inner: Arc<record_file::RecordFile>,
}

#[napi]
impl RecordFile {
    /// The record at `path`; nothing is touched on disk.
    #[napi(constructor)]
    pub fn new(path: String) -> Self {
        Self { inner: Arc::new(record_file::RecordFile::new(path)) }
    }

    #[napi(getter)]
    pub fn path(&self) -> String {
        self.inner.path().to_string_lossy().into_owned()
    }

    /// Numbers a new save (1, 2, …); `null` once closed: nothing is to be written.
    #[napi]
    pub fn begin(&self) -> Option<u32> {
        // A session saves a few times per turn: four billion saves are not reached.
        self.inner.begin().map(|save| u32::try_from(save.get()).unwrap_or(u32::MAX))
    }

    /// Renames `temporary`, save number `save` written in full, over the file: true when it
    /// landed; false when the file was closed or a save that started later landed first (the
    /// temporary is removed then). Throws `E_INVALID` for a number `begin()` did not give, or
    /// when the rename fails (the temporary removed either way; the file keeps its last save).
    #[napi]
    pub fn replace(&self, env: Env, temporary: String, save: u32) -> Result<bool> {
        replace_now(&self.inner, &temporary, save).map_err(|e| coded(&env, &e))
    }

    /// No save lands from now on, not even one being written now.
    #[napi]
    pub fn close(&self) {
        self.inner.close();
    }

    #[napi(getter)]
    pub fn closed(&self) -> bool {
        self.inner.is_closed()
    }
}

/// `RecordFile.replace`, on whichever thread runs it.
pub(crate) fn replace_now(
    record: &record_file::RecordFile,
    temporary: &str,
    save: u32,
) -> std::result::Result<bool, CoreError> {
    match record.replace_numbered(u64::from(save), Path::new(temporary)) {
        Ok(Landing::Landed) => Ok(true),
        Ok(Landing::Superseded | Landing::Closed) => Ok(false),
        Err(e) => Err(CoreError::InvalidInput(format!("{}: {e}", record.path().display()))),
    }
}

/// The error for save number `save` that `record` never gave, said before anything is written.
pub(crate) fn not_begun(record: &record_file::RecordFile, save: u32) -> CoreError {
    CoreError::InvalidInput(format!("{}: save {save} was not begun for this record", record.path().display()))
}
