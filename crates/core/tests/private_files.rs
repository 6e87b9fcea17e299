//! What the core stores on disk is private to the user whatever the umask: the blob store's
//! folder and files, background shells' output. Blob ids that would name something else are
//! refused; temporaries a killed process left are removed when the store opens.
//!
//! The umask is the process's: every test here sets it under one lock.
#![cfg(unix)]

mod common;

use std::os::unix::fs::PermissionsExt;
use std::path::Path;

use bytes::Bytes;
use cursor_acp_core::host::{BlobStore, DirBlobStore};
use serde_json::json;

static UMASK: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());

/// Runs `f` with the umask set to `mask`, alone among these tests.
async fn under_umask<T>(mask: libc::mode_t, f: impl std::future::Future<Output = T>) -> T {
    let _alone = UMASK.lock().await;
    // SAFETY: umask only sets the process's file creation mask.
    let before = unsafe { libc::umask(mask) };
    let out = f.await;
    // SAFETY: as above.
    unsafe { libc::umask(before) };
    out
}

fn mode(path: &Path) -> u32 {
    std::fs::metadata(path).unwrap().permissions().mode() & 0o777
}

#[tokio::test]
async fn blob_folders_are_0700_and_blobs_0600_whatever_the_umask() {
    for mask in [0o022, 0o000] {
        under_umask(mask, async {
            let parent = tempfile::tempdir().unwrap();
            let dir = parent.path().join("blobs").join("session");
            let store = DirBlobStore::new(&dir).unwrap();
            store.set(Bytes::from_static(&[0xab, 0xcd]), Bytes::from_static(b"conversation")).await.unwrap();
            assert_eq!(mode(&dir), 0o700, "umask {mask:o}");
            assert_eq!(mode(&parent.path().join("blobs")), 0o700, "umask {mask:o}");
            assert_eq!(mode(&dir.join("abcd")), 0o600, "umask {mask:o}");
            let names: Vec<_> = std::fs::read_dir(&dir).unwrap().map(|e| e.unwrap().file_name()).collect();
            assert_eq!(names, ["abcd"], "a temporary was left");
        })
        .await;
    }
}

#[tokio::test]
async fn a_store_made_by_an_older_version_is_narrowed_when_it_opens() {
    under_umask(0o022, async {
        let dir = tempfile::tempdir().unwrap();
        std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o755)).unwrap();
        std::fs::write(dir.path().join("beef"), "old blob").unwrap();
        std::fs::set_permissions(dir.path().join("beef"), std::fs::Permissions::from_mode(0o644)).unwrap();
        let store = DirBlobStore::new(dir.path()).unwrap();
        assert_eq!((mode(dir.path()), mode(&dir.path().join("beef"))), (0o700, 0o600));
        assert_eq!(store.get(Bytes::from_static(&[0xbe, 0xef])).await.unwrap().unwrap(), "old blob");
    })
    .await;
}

#[tokio::test]
async fn empty_and_oversized_blob_ids_are_refused_and_nothing_is_written_outside() {
    let parent = tempfile::tempdir().unwrap();
    let dir = parent.path().join("session");
    let store = DirBlobStore::new(&dir).unwrap();
    let empty = store.set(Bytes::new(), Bytes::from_static(b"x")).await.unwrap_err();
    assert!(empty.to_string().contains("blob id is empty"), "{empty}");
    assert_eq!(empty.code(), "E_INVALID");
    assert!(store.get(Bytes::new()).await.unwrap_err().to_string().contains("blob id is empty"));
    let huge = store.set(Bytes::from(vec![1u8; 65]), Bytes::from_static(b"x")).await.unwrap_err();
    assert!(huge.to_string().contains("65 bytes"), "{huge}");
    let beside: Vec<_> = std::fs::read_dir(parent.path()).unwrap().map(|e| e.unwrap().file_name()).collect();
    assert_eq!(beside, ["session"], "something was written beside the blob folder");
    assert_eq!(std::fs::read_dir(&dir).unwrap().count(), 0);
    assert_eq!(store.snapshot().unwrap().len(), 0);
}

#[tokio::test]
async fn a_blob_folder_its_owner_removed_is_not_made_again_by_a_write() {
    // The stdio agent deleting a session removes its blob folder; the server may still send a
    // blob of that session's turn afterwards.
    let parent = tempfile::tempdir().unwrap();
    let dir = parent.path().join("blobs").join("session");
    let store = DirBlobStore::new(&dir).unwrap();
    store.set(Bytes::from_static(&[0x01]), Bytes::from_static(b"before")).await.unwrap();
    std::fs::remove_dir_all(&dir).unwrap();
    let late = store.set(Bytes::from_static(&[0x02]), Bytes::from_static(b"after")).await.unwrap_err();
    let message = late.to_string();
    assert!(message.contains("is gone") && message.contains(&dir.display().to_string()), "{message}");
    assert!(!dir.exists(), "a write made the removed folder again");
    assert_eq!(store.get(Bytes::from_static(&[0x01])).await.unwrap(), None);
    let beside: Vec<_> = std::fs::read_dir(parent.path().join("blobs")).unwrap().collect();
    assert!(beside.is_empty(), "something was written where the folder was: {beside:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn concurrent_writes_of_one_blob_each_use_a_temporary_of_their_own() {
    let dir = tempfile::tempdir().unwrap();
    let store = DirBlobStore::new(dir.path()).unwrap();
    let id = Bytes::from_static(&[0x12, 0x34]);
    let writes: Vec<_> = (0..32)
        .map(|i| {
            let (store, id) = (store.clone(), id.clone());
            tokio::spawn(async move { store.set(id, Bytes::from(format!("version {i:02}"))).await })
        })
        .collect();
    for w in writes {
        w.await.unwrap().expect("a concurrent write failed");
    }
    let data = store.get(id).await.unwrap().unwrap();
    assert!(data.starts_with(b"version "), "{data:?}");
    let names: Vec<_> = std::fs::read_dir(dir.path()).unwrap().map(|e| e.unwrap().file_name()).collect();
    assert_eq!(names, ["1234"]);
}

#[tokio::test]
async fn temporaries_of_a_killed_writer_are_removed_when_the_store_opens() {
    let dir = tempfile::tempdir().unwrap();
    // A process that is gone (as after kill -9 mid-write), and a live one (this test's).
    let mut child = std::process::Command::new("true").spawn().unwrap();
    let gone = child.id();
    child.wait().unwrap();
    let write = |name: String| std::fs::write(dir.path().join(name), "partial").unwrap();
    write(format!(".abcd.{gone}-1.tmp"));
    write("abcd.tmp".into());
    let in_flight = format!(".abcd.{}-999.tmp", std::process::id());
    write(in_flight.clone());
    write("abcd".into());
    let store = DirBlobStore::new(dir.path()).unwrap();
    let mut names: Vec<_> = std::fs::read_dir(dir.path()).unwrap().map(|e| e.unwrap().file_name()).collect();
    names.sort();
    assert_eq!(names, [in_flight.as_str(), "abcd"]);
    assert_eq!(store.snapshot().unwrap().len(), 1, "a temporary was taken for a blob");
}

#[tokio::test]
async fn background_output_is_0600_in_folders_made_0700_and_goes_with_the_tools() {
    under_umask(0o022, async {
        let parent = tempfile::tempdir().unwrap();
        let named = parent.path().join("terminals").join("session-1");
        let f = common::Fixture::with(|o| o.terminals_dir = named.clone());
        let spawned = f.run("backgroundShellSpawn", json!({ "command": "echo printed" })).await;
        let log = named.join(format!("{}.txt", spawned["success"]["shellId"]));
        assert_eq!(common::wait_for_file(&log).await, "printed\n");
        assert_eq!(mode(&log), 0o600);
        assert_eq!((mode(&named), mode(&parent.path().join("terminals"))), (0o700, 0o700));

        let own = common::Fixture::with(|o| o.terminals_dir = Default::default());
        let spawned = own.run("backgroundShellSpawn", json!({ "command": "echo printed" })).await;
        let folder = own.tools.options().terminals_dir.clone();
        let log = folder.join(format!("{}.txt", spawned["success"]["shellId"]));
        common::wait_for_file(&log).await;
        assert_eq!((mode(&folder), mode(&log)), (0o700, 0o600));
        drop((f, own));
        assert!(!named.join("1.txt").exists() && !folder.exists(), "the output outlived the tools");
    })
    .await;
}
