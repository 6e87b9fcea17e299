//! Confinement under attack: a symlink swapped between an inside and an outside target while the
//! tools read, write, delete, list and search through it; absurdly long paths; special files
//! (FIFOs, sockets) that would block an open.
#![cfg(unix)]

mod common;

use std::path::Path;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use common::Fixture;
use serde_json::{json, Value};

/// Flips `link` between `inside` and `outside` as fast as it can (a new link renamed over the
/// old one, so the name always exists) until dropped.
struct Flipper {
    stop: Arc<AtomicBool>,
    flips: Arc<AtomicU64>,
    thread: Option<std::thread::JoinHandle<()>>,
}

/// Flips a race needs before it counts as exercised.
const ENOUGH_FLIPS: u64 = 100;

/// However loaded the machine, a race loop stops by then (and the flip count then says why).
const RACE_DEADLINE: Duration = Duration::from_secs(60);

impl Flipper {
    fn start(link: &Path, inside: &Path, outside: &Path) -> Self {
        let stop = Arc::new(AtomicBool::new(false));
        let flips = Arc::new(AtomicU64::new(0));
        let (link, inside, outside, flag, count) =
            (link.to_path_buf(), inside.to_path_buf(), outside.to_path_buf(), stop.clone(), flips.clone());
        // The link exists before the tools start: otherwise the first write could make a real
        // folder by that name before the thread's first flip.
        std::os::unix::fs::symlink(&inside, &link).unwrap();
        let thread = std::thread::spawn(move || {
            let staged = link.with_extension("staged");
            let mut out = true;
            while !flag.load(Ordering::Relaxed) {
                let target = if out { &outside } else { &inside };
                out = !out;
                #[allow(clippy::let_underscore_must_use, reason = "best-effort clean-up of the staged file")]
                let _ = std::fs::remove_file(&staged);
                std::os::unix::fs::symlink(target, &staged).unwrap();
                std::fs::rename(&staged, &link).unwrap();
                count.fetch_add(1, Ordering::Relaxed);
            }
        });
        Flipper { stop, flips, thread: Some(thread) }
    }

    fn flips(&self) -> u64 {
        self.flips.load(Ordering::Relaxed)
    }
}

impl Drop for Flipper {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(t) = self.thread.take() {
            #[allow(clippy::let_underscore_must_use, reason = "a panicked flipper is reported by its flips below")]
            let _ = t.join();
            let flips = self.flips();
            if !std::thread::panicking() {
                assert!(flips > ENOUGH_FLIPS, "the link hardly flipped ({flips}): the race was not exercised");
            }
        }
    }
}

struct Race {
    // First: fields drop in order, so the flipping stops before the folders go.
    flippers: [Flipper; 2],
    f: Fixture,
    outside: tempfile::TempDir,
    started: Instant,
}

/// A workspace with `real/` (inside) and `dlink` flipping between `real` and an outside folder,
/// and `flink` flipping between `real/f.txt` and the outside `f.txt`.
fn race() -> Race {
    let f = Fixture::new();
    let outside = tempfile::tempdir().unwrap();
    std::fs::create_dir(f.dir.path().join("real")).unwrap();
    std::fs::write(f.dir.path().join("real/f.txt"), "INSIDE\n").unwrap();
    std::fs::write(outside.path().join("f.txt"), "OUTSIDE\n").unwrap();
    std::fs::write(outside.path().join("victim.txt"), "OUTSIDE\n").unwrap();
    std::fs::write(outside.path().join("only-outside.txt"), "OUTSIDE\n").unwrap();
    let root = f.root();
    let dirs = Flipper::start(&root.join("dlink"), Path::new("real"), outside.path());
    let files = Flipper::start(&root.join("flink"), Path::new("real/f.txt"), &outside.path().join("f.txt"));
    Race { flippers: [dirs, files], f, outside, started: Instant::now() }
}

impl Race {
    /// Whether a loop that has done `done` of its `wanted` rounds (and met its own condition)
    /// may stop: on a loaded machine the flippers may get little time, so the loop goes on until
    /// both have flipped often enough, within a deadline.
    fn may_stop(&self, done: usize, wanted: usize, also: bool) -> bool {
        let flipped = self.flippers.iter().all(|f| f.flips() > ENOUGH_FLIPS);
        done >= wanted && flipped && also || self.started.elapsed() > RACE_DEADLINE
    }
}

fn text(v: &Value) -> String {
    v.to_string()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_racing_symlink_never_redirects_a_read() {
    let race = race();
    let mut inside = 0;
    for i in 0.. {
        if race.may_stop(i, 6000, inside > 0) {
            break;
        }
        let path = if i % 2 == 0 { "dlink/f.txt" } else { "flink" };
        let r = race.f.run("read", json!({ "path": path })).await;
        assert!(!text(&r).contains("OUTSIDE"), "read {i} of {path} returned the outside file: {r}");
        if r["success"]["content"] == "INSIDE\n" {
            inside += 1;
        } else {
            assert!(r.get("rejected").is_some() || r.get("fileNotFound").is_some(), "{r}");
        }
    }
    assert!(inside > 0, "no read went through the inside target");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_racing_symlink_never_redirects_a_write_or_a_delete() {
    let race = race();
    for i in 0.. {
        if race.may_stop(i, 800, race.f.dir.path().join("real/new").is_dir()) {
            break;
        }
        let r = race.f.run("write", json!({ "path": format!("dlink/new/w{}.txt", i % 7), "fileText": "X" })).await;
        assert!(r.get("success").is_some() || r.get("rejected").is_some() || r.get("error").is_some(), "{r}");
        race.f.run("write", json!({ "path": "flink", "fileText": "WRITTEN\n" })).await;
        race.f.run("delete", json!({ "path": "dlink/victim.txt" })).await;
    }
    let outside: Vec<_> = std::fs::read_dir(race.outside.path()).unwrap().map(|e| e.unwrap().file_name()).collect();
    assert!(!race.outside.path().join("new").exists(), "a write created a folder outside: {outside:?}");
    assert_eq!(
        std::fs::read_to_string(race.outside.path().join("f.txt")).unwrap(),
        "OUTSIDE\n",
        "a write landed outside"
    );
    assert!(race.outside.path().join("victim.txt").exists(), "a delete removed an outside file");
    assert!(race.f.dir.path().join("real/new").is_dir(), "no write went through the inside target");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_racing_symlink_never_shows_outside_names_or_content_in_ls_grep_and_glob() {
    let race = race();
    for i in 0.. {
        if race.may_stop(i, 300, true) {
            break;
        }
        let ls = race.f.run("ls", json!({ "path": "dlink" })).await;
        assert!(!text(&ls).contains("only-outside"), "ls listed an outside file: {ls}");
        let grep = race.f.run("grep", json!({ "pattern": "SIDE", "path": "dlink", "outputMode": "content" })).await;
        assert!(!text(&grep).contains(r#""OUTSIDE""#) && !text(&grep).contains("only-outside"), "grep: {grep}");
        let glob = race.f.tools.glob(&json!({ "globPattern": "*.txt", "targetDirectory": "dlink" })).await.unwrap();
        assert!(!text(&glob).contains("only-outside"), "glob listed an outside file: {glob}");
    }
}

// ---------- long paths ----------

#[tokio::test]
async fn a_path_of_half_a_million_components_is_refused_at_once() {
    let f = Fixture::new();
    f.file("a.txt", "a\n");
    let huge = "d/".repeat(512 * 1024) + "a.txt";
    let started = Instant::now();
    let r = tokio::time::timeout(Duration::from_secs(30), f.run("read", json!({ "path": huge })))
        .await
        .expect("a long path hung the read");
    // A hang guard, not a speed assertion: the old resolution took 85 s here.
    assert!(started.elapsed() < Duration::from_secs(2), "took {:?}", started.elapsed());
    let reason = r["rejected"]["reason"].as_str().unwrap_or_default();
    assert!(reason.contains("long"), "{r}");
    assert!(reason.len() < 300, "the reason echoes the path: {}", reason.len());
    for (kind, args) in [
        ("write", json!({ "path": huge, "fileText": "x" })),
        ("delete", json!({ "path": huge })),
        ("ls", json!({ "path": huge })),
    ] {
        let r = f.run(kind, args).await;
        assert!(r["rejected"]["reason"].as_str().unwrap_or_default().contains("long"), "{kind}: {}", &text(&r)[..200]);
    }
    let shell = f.run("shell", json!({ "command": "true", "workingDirectory": huge })).await;
    assert!(shell["rejected"].is_object());
    assert!(f.tools.workspace().resolve(&huge).is_err());
}

#[tokio::test]
async fn long_paths_within_the_limit_resolve_to_the_right_file() {
    let f = Fixture::new();
    f.file("sub/a.txt", "right\n");
    // Thousands of components that normalise to a short path.
    for path in ["./".repeat(1500) + "sub/a.txt", "x/../".repeat(800) + "sub/a.txt"] {
        let r = f.run("read", json!({ "path": path })).await;
        assert_eq!(r["success"]["content"], "right\n", "{r}");
    }
    let escape = "sub/..".to_string() + &"/..".repeat(1000) + "/etc/passwd";
    assert!(f.run("read", json!({ "path": escape })).await["rejected"].is_object());
}

// ---------- special files ----------

fn mkfifo(path: &Path) {
    let c = std::ffi::CString::new(path.as_os_str().as_encoded_bytes()).unwrap();
    // SAFETY: a valid NUL-terminated path; mkfifo touches no memory of ours.
    assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o644) }, 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn fifos_and_sockets_are_invalid_files_answered_at_once() {
    let f = Fixture::new();
    mkfifo(&f.dir.path().join("pipe"));
    let _socket = std::os::unix::net::UnixListener::bind(f.dir.path().join("sock")).unwrap();
    f.file("a.txt", "needle\n");
    let bounded = |kind: &'static str, args: Value| {
        let f = &f;
        async move {
            tokio::time::timeout(Duration::from_secs(5), f.run(kind, args))
                .await
                .unwrap_or_else(|_| panic!("{kind} blocked on a special file"))
        }
    };
    for path in ["pipe", "sock"] {
        let r = bounded("read", json!({ "path": path })).await;
        let reason = r["invalidFile"]["reason"].as_str().unwrap_or_default();
        assert!(reason.contains("not a regular file"), "read {path}: {r}");
        let w = bounded("write", json!({ "path": path, "fileText": "x" })).await;
        assert!(w["error"]["error"].as_str().unwrap_or_default().contains("not a regular file"), "write {path}: {w}");
        let d = bounded("delete", json!({ "path": path })).await;
        assert!(d["notFile"].is_object(), "delete {path}: {d}");
    }
    let grep = bounded("grep", json!({ "pattern": "needle" })).await;
    assert!(text(&grep).contains("a.txt"), "{grep}");
    let grep = bounded("grep", json!({ "pattern": "needle", "path": "pipe" })).await;
    assert!(grep.get("success").is_some(), "{grep}");
    let ls = bounded("ls", json!({ "path": "" })).await;
    assert!(text(&ls).contains("pipe"), "{ls}");
}
