//! A file that each save replaces whole (a session's saved record): the saves land in the order
//! they started, whichever finishes writing first, and none lands once the file is closed (its
//! session deleted).
//!
//! A save is written to a temporary of its own, off the thread that asked for it, then renamed
//! over the file. The check "is this still the latest save, and is the file still open?" and
//! the rename happen under one lock: once [`RecordFile::close`] returns, no save can land, and a
//! save that started earlier never replaces one that started later.

use std::io;
use std::path::{Path, PathBuf};
use std::sync::{Mutex, MutexGuard, PoisonError};

/// A save's place in the order saves of one [`RecordFile`] started (from [`RecordFile::begin`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub struct SaveNumber(u64);

impl SaveNumber {
    /// The number as a host names it (its temporary's name, say).
    pub fn get(self) -> u64 {
        self.0
    }
}

/// What became of a save given to [`RecordFile::replace`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Landing {
    /// Renamed over the file: it holds this save now.
    Landed,
    /// A save that started later is there already; this one's temporary was removed.
    Superseded,
    /// The file was closed (its session deleted); the temporary was removed.
    Closed,
}

#[derive(Debug, Default)]
struct Saves {
    started: u64,
    landed: u64,
    closed: bool,
}

/// The file one session's saves replace; see the module's documentation.
#[derive(Debug)]
pub struct RecordFile {
    path: PathBuf,
    saves: Mutex<Saves>,
}

impl RecordFile {
    pub fn new(path: impl Into<PathBuf>) -> Self {
        Self { path: path.into(), saves: Mutex::default() }
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    fn saves(&self) -> MutexGuard<'_, Saves> {
        // Nothing under the lock can leave the counts half changed: a poisoned lock is still
        // a consistent one.
        self.saves.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Numbers a new save; `None` once the file is closed (nothing is to be written then).
    pub fn begin(&self) -> Option<SaveNumber> {
        let mut saves = self.saves();
        if saves.closed {
            return None;
        }
        saves.started += 1;
        Some(SaveNumber(saves.started))
    }

    /// The save number `n` as a host gave it back, if this file issued it.
    pub fn issued(&self, n: u64) -> Option<SaveNumber> {
        (n >= 1 && n <= self.saves().started).then_some(SaveNumber(n))
    }

    /// Renames `temporary` (save `save`, written in full) over the file, unless the file was
    /// closed or a later save landed first: then the temporary is removed. On an error the
    /// temporary is removed too and the file keeps the save it had.
    pub fn replace(&self, save: SaveNumber, temporary: &Path) -> io::Result<Landing> {
        let mut saves = self.saves();
        let landing = if saves.closed {
            Ok(Landing::Closed)
        } else if save.0 < saves.landed {
            Ok(Landing::Superseded)
        } else {
            std::fs::rename(temporary, &self.path).map(|()| {
                saves.landed = save.0;
                Landing::Landed
            })
        };
        drop(saves);
        if !matches!(landing, Ok(Landing::Landed)) {
            remove_quietly(temporary);
        }
        landing
    }

    /// [`replace`](Self::replace) with the number as a host gave it back: one this file did not
    /// issue is an `InvalidInput` error, and its temporary is removed as on every failure.
    pub fn replace_numbered(&self, save: u64, temporary: &Path) -> io::Result<Landing> {
        match self.issued(save) {
            Some(save) => self.replace(save, temporary),
            None => {
                remove_quietly(temporary);
                Err(io::Error::new(io::ErrorKind::InvalidInput, format!("save {save} was not begun for this record")))
            }
        }
    }

    /// No save lands from now on: one being written is dropped when it comes to land.
    pub fn close(&self) {
        self.saves().closed = true;
    }

    pub fn is_closed(&self) -> bool {
        self.saves().closed
    }
}

fn remove_quietly(path: &Path) {
    #[allow(
        clippy::let_underscore_must_use,
        reason = "a temporary already gone is what was wanted; one that cannot be removed is left to the store's tidying"
    )]
    let _ = std::fs::remove_file(path);
}

#[cfg(test)]
mod tests {
    use super::*;

    fn temp_dir() -> PathBuf {
        let dir = std::env::temp_dir().join(format!("record-file-{}", crate::new_id()));
        std::fs::create_dir(&dir).unwrap();
        dir
    }

    fn written(dir: &Path, name: &str, text: &str) -> PathBuf {
        let path = dir.join(name);
        std::fs::write(&path, text).unwrap();
        path
    }

    fn names(dir: &Path) -> Vec<String> {
        let mut names: Vec<String> =
            std::fs::read_dir(dir).unwrap().map(|e| e.unwrap().file_name().to_string_lossy().into_owned()).collect();
        names.sort();
        names
    }

    #[test]
    fn the_save_started_last_is_the_one_kept_whatever_order_they_land_in() {
        let dir = temp_dir();
        let record = RecordFile::new(dir.join("s.json"));
        let first = record.begin().unwrap();
        let second = record.begin().unwrap();
        assert!(first < second);
        let second_tmp = written(&dir, "s.json.2.tmp", "two");
        assert_eq!(record.replace(second, &second_tmp).unwrap(), Landing::Landed);
        let first_tmp = written(&dir, "s.json.1.tmp", "one");
        assert_eq!(record.replace(first, &first_tmp).unwrap(), Landing::Superseded);
        assert_eq!(std::fs::read_to_string(record.path()).unwrap(), "two");
        assert_eq!(names(&dir), ["s.json"], "the superseded save's temporary is gone");

        // In order, each replaces the one before.
        let third = record.begin().unwrap();
        assert_eq!(record.replace(third, &written(&dir, "s.json.3.tmp", "three")).unwrap(), Landing::Landed);
        assert_eq!(std::fs::read_to_string(record.path()).unwrap(), "three");
        std::fs::remove_dir_all(dir).unwrap();
    }

    #[test]
    fn once_closed_nothing_lands_and_nothing_begins() {
        let dir = temp_dir();
        let record = RecordFile::new(dir.join("s.json"));
        let writing = record.begin().unwrap();
        record.close();
        assert!(record.is_closed());
        assert_eq!(record.replace(writing, &written(&dir, "s.json.1.tmp", "late")).unwrap(), Landing::Closed);
        assert_eq!(names(&dir), Vec::<String>::new(), "neither the record nor the temporary");
        assert_eq!(record.begin(), None);
        std::fs::remove_dir_all(dir).unwrap();
    }

    #[test]
    fn a_rename_that_fails_keeps_the_last_save_and_removes_the_temporary() {
        let dir = temp_dir();
        let record = RecordFile::new(dir.join("s.json"));
        let kept = record.begin().unwrap();
        record.replace(kept, &written(&dir, "s.json.1.tmp", "kept")).unwrap();
        // A folder cannot be renamed over a file.
        let failing = record.begin().unwrap();
        let folder = dir.join("s.json.2.tmp");
        std::fs::create_dir(&folder).unwrap();
        assert!(record.replace(failing, &folder).is_err());
        assert_eq!(std::fs::read_to_string(record.path()).unwrap(), "kept");
        std::fs::remove_dir(folder).unwrap();
        // A missing temporary is an error, not a landing.
        let missing = record.begin().unwrap();
        assert_eq!(record.replace(missing, &dir.join("nothing.tmp")).unwrap_err().kind(), io::ErrorKind::NotFound);
        assert_eq!(std::fs::read_to_string(record.path()).unwrap(), "kept");
        assert_eq!(names(&dir), ["s.json"]);

        // The record's folder removed meanwhile: the save fails and its temporary goes.
        let gone = RecordFile::new(dir.join("removed").join("s.json"));
        let save = gone.begin().unwrap();
        let tmp = written(&dir, "s.json.3.tmp", "nowhere to land");
        assert_eq!(gone.replace(save, &tmp).unwrap_err().kind(), io::ErrorKind::NotFound);
        assert_eq!(names(&dir), ["s.json"]);
        std::fs::remove_dir_all(dir).unwrap();
    }

    #[test]
    fn only_numbers_it_issued_come_back() {
        let record = RecordFile::new("unused.json");
        assert_eq!(record.issued(1), None);
        let first = record.begin().unwrap();
        assert_eq!(record.issued(first.get()), Some(first));
        assert_eq!(record.issued(0), None);
        assert_eq!(record.issued(2), None);

        // Given back unissued: refused, and its temporary goes; an issued one lands.
        let dir = temp_dir();
        let record = RecordFile::new(dir.join("s.json"));
        let save = record.begin().unwrap();
        let refused = record.replace_numbered(2, &written(&dir, "s.json.2.tmp", "two")).unwrap_err();
        assert_eq!(refused.kind(), io::ErrorKind::InvalidInput);
        assert!(refused.to_string().contains("save 2 was not begun"), "{refused}");
        assert_eq!(names(&dir), Vec::<String>::new());
        assert_eq!(
            record.replace_numbered(save.get(), &written(&dir, "s.json.1.tmp", "one")).unwrap(),
            Landing::Landed
        );
        assert_eq!(names(&dir), ["s.json"]);
        std::fs::remove_dir_all(dir).unwrap();
    }

    #[test]
    fn a_close_waits_for_a_landing_under_way_and_none_follows_it() {
        // Saves landing from other threads while the file is closed: each landed before the
        // close (its save on disk, then removed by nobody) or reports Closed (nothing written).
        let dir = temp_dir();
        let record = std::sync::Arc::new(RecordFile::new(dir.join("s.json")));
        let writers: Vec<_> = (0..4)
            .map(|w| {
                let record = record.clone();
                let dir = dir.clone();
                std::thread::spawn(move || {
                    let mut landings = Vec::new();
                    while let Some(save) = record.begin() {
                        let tmp = written(&dir, &format!("s.json.{w}.{}.tmp", save.get()), &save.get().to_string());
                        landings.push((save, record.replace(save, &tmp).unwrap()));
                    }
                    landings
                })
            })
            .collect();
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
        while !record.path().exists() {
            assert!(std::time::Instant::now() < deadline, "no save landed in 10 s");
            std::thread::yield_now();
        }
        record.close();
        let closed_at = std::fs::read_to_string(record.path()).ok();
        let landings: Vec<_> = writers.into_iter().flat_map(|w| w.join().unwrap()).collect();
        assert!(landings.iter().any(|(_, l)| *l == Landing::Landed), "the writers ran before the close");
        assert_eq!(std::fs::read_to_string(record.path()).ok(), closed_at, "nothing landed after close returned");
        let last = landings.iter().filter(|(_, l)| *l == Landing::Landed).map(|(s, _)| s.get()).max().unwrap();
        assert_eq!(closed_at.as_deref(), Some(last.to_string().as_str()), "the file holds the latest save that landed");
        assert_eq!(names(&dir), ["s.json"], "every temporary landed or was removed");
        std::fs::remove_dir_all(dir).unwrap();
    }
}
