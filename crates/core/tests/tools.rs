//! The built-in local tools on real files and processes: every result branch, workspace
//! confinement (`..`, absolute paths, symlinks), limits and truncation flags, shell streaming,
//! timeout and abort (the process is gone afterwards), background shells with stdin.

mod common;

use std::path::PathBuf;
use std::time::{Duration, Instant};

use base64::Engine as _;
use common::{alive, context, is_root, wait_for_file, Fixture};
use cursor_acp_core::host::ExecEvent;
use cursor_acp_core::kinds::ExecKind;
use serde_json::{json, Value};

// ---------- read ----------

#[tokio::test]
async fn read_returns_content_lines_and_size() {
    let f = Fixture::new();
    f.file("src/a.txt", "one\ntwo\nthree\n");
    let r = f.run("read", json!({ "path": "src/a.txt" })).await;
    let s = &r["success"];
    assert_eq!(s["content"], "one\ntwo\nthree\n");
    assert_eq!(s["totalLines"], 3);
    assert_eq!(s["fileSize"], "14", "int64 is a string in proto3 JSON");
    assert_eq!(s["path"], f.root().join("src/a.txt").display().to_string());
    assert!(s.get("truncated").is_none() && s.get("rangeApplied").is_none());
}

#[tokio::test]
async fn read_applies_line_ranges_including_from_the_end() {
    let f = Fixture::new();
    f.file("a.txt", "l1\nl2\nl3\nl4\nl5");
    let r = f.run("read", json!({ "path": "a.txt", "offset": 2, "limit": 2 })).await;
    assert_eq!(r["success"]["content"], "l2\nl3\n");
    assert_eq!(r["success"]["totalLines"], 5);
    assert_eq!(r["success"]["rangeApplied"], true);
    let tail = f.run("read", json!({ "path": "a.txt", "offset": -2 })).await;
    assert_eq!(tail["success"]["content"], "l4\nl5");
}

#[tokio::test]
async fn huge_files_are_truncated_at_a_line_boundary() {
    let f = Fixture::with(|o| o.max_read_bytes = 1000);
    let body: String = (0..500).map(|i| format!("line {i}\n")).collect();
    f.file("big.log", &body);
    let r = f.run("read", json!({ "path": "big.log" })).await;
    let s = &r["success"];
    assert_eq!(s["truncated"], true);
    assert_eq!(s["totalLines"], 500, "the whole file is still counted");
    let content = s["content"].as_str().unwrap();
    assert!(content.len() <= 1000 && content.ends_with('\n') && body.starts_with(content));
}

#[tokio::test]
async fn binary_files_come_back_as_bytes() {
    let f = Fixture::new();
    let png = [0x89u8, b'P', b'N', b'G', 0, 0, 0, 13, 1, 2, 3];
    f.file("img.png", png);
    let r = f.run("read", json!({ "path": "img.png" })).await;
    let data = base64::engine::general_purpose::STANDARD.decode(r["success"]["data"].as_str().unwrap()).unwrap();
    assert_eq!(data, png);
    assert!(r["success"].get("content").is_none());
    let f = Fixture::with(|o| o.max_binary_bytes = 4);
    f.file("img.png", png);
    let r = f.run("read", json!({ "path": "img.png" })).await;
    assert!(r["invalidFile"]["reason"].as_str().unwrap().contains("binary"), "{r}");
}

/// The default binary limit leaves room for the longest path and the message around the bytes:
/// a file the tools read by default can always be sent (one message is at most 16 MiB).
#[tokio::test]
async fn a_binary_file_within_the_default_limit_fits_in_one_message() {
    use cursor_acp_core::proto::agent::v1 as pb;
    use cursor_acp_core::tools::{ToolOptions, DEFAULT_MAX_BINARY_BYTES, MAX_PATH_BYTES};
    use cursor_acp_core::transport::MAX_OUTBOUND_MESSAGE;
    use prost::Message as _;
    assert_eq!(ToolOptions::default().max_binary_bytes, DEFAULT_MAX_BINARY_BYTES);
    let success = pb::ReadSuccess {
        path: "p".repeat(MAX_PATH_BYTES),
        total_lines: i32::MAX,
        file_size: i64::MAX,
        truncated: true,
        range_applied: true,
        output: Some(pb::read_success::Output::Data(vec![0xff; DEFAULT_MAX_BINARY_BYTES].into())),
        ..Default::default()
    };
    let result = pb::ReadResult { result: Some(pb::read_result::Result::Success(success)) };
    let exec = pb::ExecClientMessage {
        id: u32::MAX,
        exec_id: "e".repeat(1024),
        message: Some(pb::exec_client_message::Message::ReadResult(result)),
        ..Default::default()
    };
    let message =
        pb::AgentClientMessage { message: Some(pb::agent_client_message::Message::ExecClientMessage(exec.into())) };
    assert!(message.encoded_len() <= MAX_OUTBOUND_MESSAGE, "{} bytes", message.encoded_len());
    // One byte over the limit is refused by the tool itself, before anything is read.
    let f = Fixture::new();
    f.file("big.bin", vec![0u8; DEFAULT_MAX_BINARY_BYTES + 1]);
    let r = f.run("read", json!({ "path": "big.bin" })).await;
    assert!(r["invalidFile"]["reason"].as_str().unwrap().contains("byte limit"), "{r}");
}

#[tokio::test]
async fn read_failures_use_their_branches() {
    let f = Fixture::new();
    std::fs::create_dir(f.dir.path().join("d")).unwrap();
    assert!(f.run("read", json!({ "path": "missing.txt" })).await["fileNotFound"]["path"].is_string());
    assert!(f.run("read", json!({ "path": "d" })).await["invalidFile"]["reason"]
        .as_str()
        .unwrap()
        .contains("directory"));
    let r = f.run("read", json!({ "path": "../etc/passwd" })).await;
    assert!(r["rejected"]["reason"].as_str().unwrap().contains("outside the workspace"), "{r}");
    assert!(f.run("read", json!({ "path": "/etc/hostname" })).await["rejected"].is_object());
    if !is_root() {
        let p = f.file("secret.txt", "s");
        std::fs::set_permissions(&p, std::os::unix::fs::PermissionsExt::from_mode(0o000)).unwrap();
        assert!(f.run("read", json!({ "path": "secret.txt" })).await["permissionDenied"].is_object());
    }
}

#[tokio::test]
async fn symlink_escapes_are_rejected_for_every_file_tool() {
    let f = Fixture::new();
    let outside = tempfile::tempdir().unwrap();
    std::fs::write(outside.path().join("secret"), "top secret").unwrap();
    std::os::unix::fs::symlink(outside.path(), f.dir.path().join("escape")).unwrap();
    std::os::unix::fs::symlink(outside.path().join("secret"), f.dir.path().join("secret-link")).unwrap();
    for path in ["escape/secret", "secret-link"] {
        let r = f.run("read", json!({ "path": path })).await;
        assert!(r["rejected"]["reason"].as_str().unwrap().contains("symbolic link"), "{r}");
        assert!(f.run("write", json!({ "path": path, "fileText": "x" })).await["rejected"].is_object());
        assert!(f.run("delete", json!({ "path": path })).await["rejected"].is_object());
    }
    assert!(f.run("write", json!({ "path": "escape/new.txt", "fileText": "x" })).await["rejected"].is_object());
    assert!(f.run("ls", json!({ "path": "escape" })).await["rejected"].is_object());
    assert!(!outside.path().join("new.txt").exists());
    assert_eq!(std::fs::read_to_string(outside.path().join("secret")).unwrap(), "top secret");
}

// ---------- write / delete ----------

#[tokio::test]
async fn write_creates_parents_and_reports_size_and_lines() {
    let f = Fixture::new();
    let r = f.run("write", json!({ "path": "new/deep/file.rs", "fileText": "fn a() {}\nfn b() {}\n", "returnFileContentAfterWrite": true })).await;
    let s = &r["success"];
    assert_eq!(s["linesCreated"], 2);
    assert_eq!(s["fileSize"], 20);
    assert_eq!(s["fileContentAfterWrite"], "fn a() {}\nfn b() {}\n");
    assert_eq!(std::fs::read_to_string(f.dir.path().join("new/deep/file.rs")).unwrap(), "fn a() {}\nfn b() {}\n");
    // Bytes win over text when given.
    let r = f.run("write", json!({ "path": "bin.dat", "fileBytes": "AAEC" })).await;
    assert_eq!(r["success"]["fileSize"], 3);
    assert_eq!(std::fs::read(f.dir.path().join("bin.dat")).unwrap(), [0, 1, 2]);
}

#[tokio::test]
async fn write_failures_use_their_branches() {
    let f = Fixture::new();
    std::fs::create_dir(f.dir.path().join("adir")).unwrap();
    assert!(f.run("write", json!({ "path": "adir", "fileText": "x" })).await["error"]["error"].is_string());
    assert!(f.run("write", json!({ "path": "../x.txt", "fileText": "x" })).await["rejected"].is_object());
    assert!(!f.dir.path().parent().unwrap().join("x.txt").exists());
    if !is_root() {
        let ro = f.dir.path().join("ro");
        std::fs::create_dir(&ro).unwrap();
        std::fs::set_permissions(&ro, std::os::unix::fs::PermissionsExt::from_mode(0o500)).unwrap();
        let r = f.run("write", json!({ "path": "ro/x.txt", "fileText": "x" })).await;
        assert_eq!(r["permissionDenied"]["operation"], "write", "{r}");
    }
}

#[tokio::test]
async fn delete_returns_the_previous_content() {
    let f = Fixture::new();
    let p = f.file("old.txt", "bye\n");
    let r = f.run("delete", json!({ "path": "old.txt" })).await;
    assert_eq!(r["success"]["prevContent"], "bye\n");
    assert_eq!(r["success"]["fileSize"], "4");
    assert!(!p.exists());
    assert!(f.run("delete", json!({ "path": "old.txt" })).await["fileNotFound"].is_object());
    std::fs::create_dir(f.dir.path().join("d")).unwrap();
    assert_eq!(f.run("delete", json!({ "path": "d" })).await["notFile"]["actualType"], "directory");
    assert!(f.dir.path().join("d").exists());
    assert!(f.run("delete", json!({ "path": "../../tmp" })).await["rejected"].is_object());
}

// ---------- ls ----------

#[tokio::test]
async fn ls_lists_the_tree_honouring_gitignore() {
    let f = Fixture::new();
    f.file(".gitignore", "target/\n*.log\n");
    f.file("src/main.rs", "");
    f.file("src/lib.rs", "");
    f.file("src/util/mod.rs", "");
    f.file("README.md", "");
    f.file("debug.log", "");
    f.file("target/out.bin", "");
    f.file(".git/HEAD", "");
    f.file("node_modules/x/index.js", "");
    let r = f.run("ls", json!({ "path": "", "ignore": ["node_modules"] })).await;
    let root = &r["success"]["directoryTreeRoot"];
    assert_eq!(root["absPath"], f.root().display().to_string());
    let files: Vec<&str> =
        root["childrenFiles"].as_array().unwrap().iter().map(|f| f["name"].as_str().unwrap()).collect();
    assert_eq!(files, [".gitignore", "README.md"]);
    let dirs: Vec<&str> =
        root["childrenDirs"].as_array().unwrap().iter().map(|d| d["absPath"].as_str().unwrap()).collect();
    assert_eq!(dirs, [f.root().join("src").display().to_string()]);
    assert_eq!(root["numFiles"], 5);
    assert_eq!(root["fullSubtreeExtensionCounts"][".rs"], 3);
    assert_eq!(root["childrenWereProcessed"], true);
    assert_eq!(root["childrenDirs"][0]["childrenDirs"][0]["childrenFiles"][0]["name"], "mod.rs");
}

#[tokio::test]
async fn ls_stops_at_its_entry_cap_and_marks_what_was_not_listed() {
    let f = Fixture::with(|o| o.ls_max_entries = 3);
    for i in 0..5 {
        f.file(&format!("a/f{i}.txt"), "");
    }
    f.file("z.txt", "");
    let r = f.run("ls", json!({ "path": "." })).await;
    let root = &r["success"]["directoryTreeRoot"];
    assert!(root.get("childrenWereProcessed").is_none(), "root was cut: {root}");
    let a = &root["childrenDirs"][0];
    assert_eq!(a["childrenFiles"].as_array().unwrap().len(), 2);
    assert!(a.get("childrenWereProcessed").is_none());
    assert!(f.run("ls", json!({ "path": "z.txt" })).await["error"]["error"]
        .as_str()
        .unwrap()
        .contains("not a directory"));
    assert!(f.run("ls", json!({ "path": "/" })).await["rejected"].is_object());
}

/// A tree deeper than protobuf decoders accept (100 nested messages) is listed to
/// `LS_MAX_DEPTH` folders, the deepest marked as not processed: the answer always decodes,
/// here (proto3 JSON goes through the descriptors), on the server and in its echo.
#[tokio::test]
async fn ls_of_a_deep_tree_stops_at_its_depth_cap_and_marks_what_was_not_listed() {
    use cursor_acp_core::tools::LS_MAX_DEPTH;
    let f = Fixture::new();
    let deep: Vec<&str> = vec!["d"; 100];
    f.file(&format!("{}/leaf.txt", deep.join("/")), "x");
    f.file(&format!("{}/shallow.txt", deep[..3].join("/")), "x");
    let r = f.run("ls", json!({ "path": "." })).await;
    let mut node = &r["success"]["directoryTreeRoot"];
    let mut depth = 0;
    while let Some(child) = node["childrenDirs"].get(0) {
        assert_eq!(node["childrenWereProcessed"], true, "level {depth} is listed");
        node = child;
        depth += 1;
    }
    assert_eq!(depth, LS_MAX_DEPTH, "{}", r.to_string().len());
    assert_eq!(node["childrenWereProcessed"], json!(null), "the deepest listed folder is marked unprocessed: {node}");
    assert!(node["childrenFiles"].is_null(), "nothing of it listed");
}

#[tokio::test]
async fn ls_past_its_deadline_answers_timeout_with_the_partial_tree() {
    let f = Fixture::new();
    for d in 0..50 {
        for i in 0..100 {
            f.file(&format!("d{d:02}/f{i:03}.txt"), "");
        }
    }
    let r = f.run("ls", json!({ "path": "", "timeoutMs": 1 })).await;
    let root = &r["timeout"]["directoryTreeRoot"];
    assert!(root.is_object(), "{}", &r.to_string()[..200.min(r.to_string().len())]);
    assert!(root.get("childrenWereProcessed").is_none());
    assert!(root["numFiles"].as_i64().unwrap_or(0) < 5000);
}

// ---------- grep / glob ----------

fn grep_fixture() -> Fixture {
    let f = Fixture::new();
    f.file(".gitignore", "ignored.rs\n");
    f.file("src/a.rs", "fn alpha() {}\n// TODO one\nfn beta() {}\n");
    f.file("src/b.rs", "const X: u8 = 1;\n// todo two\n");
    f.file("web/c.ts", "// TODO three\n");
    f.file("ignored.rs", "// TODO ignored\n");
    f.file("bin.dat", b"TODO\0binary");
    f
}

fn workspace_result<'a>(f: &Fixture, r: &'a Value) -> &'a Value {
    &r["success"]["workspaceResults"][f.root().display().to_string()]
}

#[tokio::test]
async fn grep_files_mode_skips_ignored_and_binary_files() {
    let f = grep_fixture();
    let r = f.run("grep", json!({ "pattern": "TODO" })).await;
    assert_eq!(r["success"]["outputMode"], "files_with_matches");
    let files = &workspace_result(&f, &r)["files"];
    assert_eq!(files["files"], json!(["src/a.rs", "web/c.ts"]));
    assert_eq!(files["totalFiles"], 2);
    let ci = f.run("grep", json!({ "pattern": "todo", "caseInsensitive": true })).await;
    assert_eq!(workspace_result(&f, &ci)["files"]["files"], json!(["src/a.rs", "src/b.rs", "web/c.ts"]));
}

#[tokio::test]
async fn grep_count_and_content_modes_with_context() {
    let f = grep_fixture();
    let r = f.run("grep", json!({ "pattern": "fn \\w+", "outputMode": "count" })).await;
    let count = &workspace_result(&f, &r)["count"];
    assert_eq!(count["counts"], json!([{ "file": "src/a.rs", "count": 2 }]));
    assert_eq!(count["totalMatches"], 2);

    let r = f.run("grep", json!({ "pattern": "TODO", "path": "src", "outputMode": "content", "context": 1 })).await;
    let content = &workspace_result(&f, &r)["content"];
    assert_eq!(
        content["matches"],
        json!([{ "file": "src/a.rs", "matches": [
            { "lineNumber": 1, "content": "fn alpha() {}", "isContextLine": true },
            { "lineNumber": 2, "content": "// TODO one" },
            { "lineNumber": 3, "content": "fn beta() {}", "isContextLine": true },
        ]}])
    );
    assert_eq!(content["totalMatchedLines"], 1);
    assert_eq!(content["totalLines"], 3);
}

#[tokio::test]
async fn grep_filters_by_glob_and_type() {
    let f = grep_fixture();
    let r = f.run("grep", json!({ "pattern": "TODO", "glob": "*.ts" })).await;
    assert_eq!(workspace_result(&f, &r)["files"]["files"], json!(["web/c.ts"]));
    let r = f.run("grep", json!({ "pattern": "(?i)todo", "type": "rust" })).await;
    assert_eq!(workspace_result(&f, &r)["files"]["files"], json!(["src/a.rs", "src/b.rs"]));
    assert!(f.run("grep", json!({ "pattern": "x", "type": "no-such-type" })).await["error"]["error"].is_string());
}

#[tokio::test]
async fn grep_caps_set_their_truncation_flags() {
    let f = Fixture::with(|o| {
        o.grep_max_lines = 5;
        o.grep_max_line_chars = 10;
    });
    for i in 0..4 {
        f.file(&format!("f{i}.txt"), "hit\nhit\n");
    }
    f.file("long.txt", format!("hit {}\n", "x".repeat(50)));
    let r = f.run("grep", json!({ "pattern": "hit", "outputMode": "content" })).await;
    let content = &workspace_result(&f, &r)["content"];
    assert_eq!(content["ripgrepTruncated"], true, "{content}");
    assert_eq!(content["totalLines"], 5);

    let f2 = Fixture::with(|o| o.grep_max_line_chars = 10);
    f2.file("long.txt", format!("hit {}\n", "x".repeat(50)));
    let r = f2.run("grep", json!({ "pattern": "hit", "outputMode": "content" })).await;
    let line = &workspace_result(&f2, &r)["content"]["matches"][0]["matches"][0];
    assert_eq!(line["content"], "hit xxxxxx");
    assert_eq!(line["contentTruncated"], true);

    let r = f.run("grep", json!({ "pattern": "hit", "headLimit": 2, "offset": 1 })).await;
    let files = &workspace_result(&f, &r)["files"];
    assert_eq!(files["files"], json!(["f1.txt", "f2.txt"]));
    assert_eq!(files["totalFiles"], 5);
    assert_eq!(files["clientTruncated"], true);
    assert_eq!(files["headLimitApplied"], 2);
    assert_eq!(files["offsetApplied"], 1);
}

#[tokio::test]
async fn grep_errors_are_reported_not_thrown() {
    let f = grep_fixture();
    assert!(f.run("grep", json!({ "pattern": "(" })).await["error"]["error"]
        .as_str()
        .unwrap()
        .contains("invalid pattern"));
    assert!(f.run("grep", json!({ "pattern": "" })).await["error"].is_object());
    assert!(f.run("grep", json!({ "pattern": "x", "path": "../" })).await["error"]["error"]
        .as_str()
        .unwrap()
        .contains("outside"));
    assert!(f.run("grep", json!({ "pattern": "x", "outputMode": "lines" })).await["error"].is_object());
}

#[tokio::test]
async fn glob_finds_files_newest_first_and_caps() {
    let f = Fixture::with(|o| o.glob_max_files = 2);
    f.file(".gitignore", "dist/\n");
    f.file("a/one.rs", "");
    std::thread::sleep(Duration::from_millis(20));
    f.file("b/two.rs", "");
    std::thread::sleep(Duration::from_millis(20));
    f.file("three.rs", "");
    f.file("dist/four.rs", "");
    f.file("x.txt", "");
    let r = f.tools.glob(&json!({ "globPattern": "*.rs" })).await.unwrap();
    let s = &r["success"];
    assert_eq!(s["files"], json!(["three.rs", "b/two.rs"]));
    assert_eq!(s["totalFiles"], 3);
    assert_eq!(s["clientTruncated"], true);
    let r = f.tools.glob(&json!({ "globPattern": "*.rs", "targetDirectory": "a" })).await.unwrap();
    assert_eq!(r["success"]["files"], json!(["one.rs"]));
    assert!(f.tools.glob(&json!({ "globPattern": "*", "targetDirectory": ".." })).await.unwrap()["error"].is_object());
}

// ---------- shell ----------

#[tokio::test]
async fn shell_success_streams_and_returns_output() {
    let f = Fixture::with(|o| o.env = vec![("GREETING".into(), "hello".into())]);
    std::fs::create_dir(f.dir.path().join("sub")).unwrap();
    let (ctx, mut rx) = context();
    let started = Instant::now();
    let tools = f.tools.clone();
    let run = tokio::spawn(async move {
        let args =
            json!({ "command": "echo $GREETING; pwd; echo oops >&2; sleep 0.5; echo done", "workingDirectory": "sub" });
        tools.run_kind(ExecKind::ShellStream, &args, &ctx).await.unwrap().unwrap()
    });
    // The process is reported started before any output.
    assert_eq!(tokio::time::timeout(Duration::from_secs(5), rx.recv()).await.unwrap(), Some(ExecEvent::Started));
    // stdout and stderr are separate pipes: stderr's "oops" may be read first.
    let first = loop {
        match tokio::time::timeout(Duration::from_secs(5), rx.recv()).await.unwrap().unwrap() {
            ExecEvent::Stdout(s) => break s,
            ExecEvent::Stderr(e) => assert_eq!(e, "oops\n"),
            other => panic!("{other:?}"),
        }
    };
    assert!(first.starts_with("hello\n"), "{first:?}");
    assert!(started.elapsed() < Duration::from_millis(450), "output streamed before the command ended");
    let r = run.await.unwrap();
    let s = &r["success"];
    assert_eq!(s["stdout"], format!("hello\n{}\ndone\n", f.root().join("sub").display()));
    assert_eq!(s["stderr"], "oops\n");
    assert!(s.get("exitCode").is_none(), "0 is the default");
    assert_eq!(s["workingDirectory"], f.root().join("sub").display().to_string());
    let mut rest = String::new();
    while let Ok(chunk) = rx.try_recv() {
        if let ExecEvent::Stdout(s) = chunk {
            rest.push_str(&s);
        }
    }
    assert!(rest.ends_with("done\n"), "{rest}");
}

#[tokio::test]
async fn shell_failures_exit_codes_and_signals() {
    let f = Fixture::new();
    let r = f.run("shell", json!({ "command": "echo partial; exit 3" })).await;
    assert_eq!(r["failure"]["exitCode"], 3);
    assert_eq!(r["failure"]["stdout"], "partial\n");
    let r = f.run("shell", json!({ "command": "kill -TERM $$" })).await;
    assert_eq!(r["failure"]["signal"], "SIGTERM", "{r}");
    let r = f.run("shell", json!({ "command": "true", "workingDirectory": "/" })).await;
    assert!(r["rejected"]["reason"].as_str().unwrap().contains("outside"), "{r}");
    let r = f.run("shell", json!({ "command": "true", "workingDirectory": "nope" })).await;
    assert!(r["spawnError"]["error"].as_str().unwrap().contains("does not exist"));
    let f = Fixture::with(|o| o.shell = Some("/no/such/shell".into()));
    assert!(f.run("shell", json!({ "command": "true" })).await["spawnError"].is_object());
}

#[tokio::test]
async fn shell_timeout_kills_the_whole_process_group() {
    let f = Fixture::new();
    let pidfile = f.dir.path().join("child.pid");
    let started = Instant::now();
    let r = f
        .run("shell", json!({ "command": format!("sleep 30 & echo $! > {}; wait", pidfile.display()), "timeout": 300 }))
        .await;
    assert_eq!(r["timeout"]["timeoutMs"], 300, "{r}");
    assert!(started.elapsed() < Duration::from_secs(5));
    let pid: i64 = wait_for_file(&pidfile).await.trim().parse().unwrap();
    tokio::time::sleep(Duration::from_millis(100)).await;
    assert!(!alive(pid), "the grandchild sleep {pid} survived the timeout");
}

#[tokio::test]
async fn aborting_a_shell_kills_it_and_reports_aborted() {
    let f = Fixture::new();
    let pidfile = f.dir.path().join("child.pid");
    let (ctx, _rx) = context();
    let cancel = ctx.cancel.clone();
    let tools = f.tools.clone();
    let command = format!("sleep 30 & echo $! > {}; wait", pidfile.display());
    let run = tokio::spawn(async move {
        tools.run_kind(ExecKind::Shell, &json!({ "command": command }), &ctx).await.unwrap().unwrap()
    });
    let pid: i64 = wait_for_file(&pidfile).await.trim().parse().unwrap();
    assert!(alive(pid));
    let aborted_at = Instant::now();
    cancel.cancel();
    let r = tokio::time::timeout(Duration::from_secs(3), run).await.expect("abort is prompt").unwrap();
    assert!(aborted_at.elapsed() < Duration::from_secs(1));
    assert_eq!(r["failure"]["aborted"], true, "{r}");
    assert_eq!(r["failure"]["abortReason"], "SHELL_ABORT_REASON_USER_ABORT");
    tokio::time::sleep(Duration::from_millis(100)).await;
    assert!(!alive(pid), "the process survived the abort");
}

#[tokio::test]
async fn dropping_a_running_shell_kills_it() {
    let f = Fixture::new();
    let pidfile = f.dir.path().join("child.pid");
    let (ctx, _rx) = context();
    let tools = f.tools.clone();
    let command = format!("sleep 30 & echo $! > {}; wait", pidfile.display());
    let run = tokio::spawn(async move { tools.run_kind(ExecKind::Shell, &json!({ "command": command }), &ctx).await });
    let pid: i64 = wait_for_file(&pidfile).await.trim().parse().unwrap();
    run.abort();
    #[allow(
        clippy::let_underscore_must_use,
        reason = "the aborted task's JoinError is expected; the test checks the process is gone"
    )]
    let _ = run.await;
    tokio::time::sleep(Duration::from_millis(100)).await;
    assert!(!alive(pid), "a dropped exec left its process running");
}

#[tokio::test]
async fn stdin_is_closed_so_a_reading_command_does_not_hang() {
    let f = Fixture::new();
    let r = tokio::time::timeout(Duration::from_secs(5), f.run("shell", json!({ "command": "cat; echo after" })))
        .await
        .unwrap();
    assert_eq!(r["success"]["stdout"], "after\n");
}

#[tokio::test]
async fn output_beyond_the_cap_keeps_the_tail() {
    let f = Fixture::with(|o| o.max_output_bytes = 100);
    let r = f.run("shell", json!({ "command": "seq 1 1000" })).await;
    let out = r["success"]["stdout"].as_str().unwrap();
    assert!(out.starts_with("[… earlier output truncated …]") && out.ends_with("999\n1000\n"), "{out}");
    assert!(out.len() < 200);
}

#[tokio::test]
async fn background_shells_take_stdin_and_write_their_terminal_file() {
    let f = Fixture::new();
    let r = f
        .run(
            "backgroundShellSpawn",
            json!({ "command": "while read l; do echo got:$l; done", "enableWriteShellStdinTool": true }),
        )
        .await;
    let id = r["success"]["shellId"].as_u64().unwrap();
    let pid = r["success"]["pid"].as_i64().unwrap();
    assert!(alive(pid));
    let w = f.run("writeShellStdin", json!({ "shellId": id, "chars": "ping\n" })).await;
    assert_eq!(w["success"]["shellId"], id);
    let log = f.tools.options().terminals_dir.join(format!("{id}.txt"));
    assert_eq!(wait_for_file(&log).await, "got:ping\n");
    // The model reads the terminal file back through the read tool.
    let read = f.run("read", json!({ "path": log.display().to_string() })).await;
    assert_eq!(read["success"]["content"], "got:ping\n");
    let w = f.run("writeShellStdin", json!({ "shellId": id, "chars": "pong\n" })).await;
    assert_eq!(w["success"]["terminalFileLengthBeforeInputWritten"], 9);
    assert!(f.run("writeShellStdin", json!({ "shellId": 999, "chars": "x" })).await["error"]["error"].is_string());
    f.tools.close();
    tokio::time::sleep(Duration::from_millis(100)).await;
    assert!(!alive(pid), "close() left the background shell running");
}

#[tokio::test]
async fn shell_is_background_returns_at_once_with_a_shell_id() {
    let f = Fixture::new();
    let started = Instant::now();
    let r = f.run("shell", json!({ "command": "sleep 30", "isBackground": true })).await;
    assert!(started.elapsed() < Duration::from_secs(2));
    assert_eq!(r["isBackground"], true);
    let pid = r["pid"].as_i64().unwrap();
    assert!(r["success"]["shellId"].as_u64().unwrap() >= 1);
    assert_eq!(f.tools.shells().background_count(), 1);
    drop(f);
    tokio::time::sleep(Duration::from_millis(100)).await;
    assert!(!alive(pid), "dropping the tools left the background shell running");
}

// ---------- dispatch ----------

/// Starts `command` as a background shell; the spawn result as proto3 JSON.
async fn spawn_background(f: &Fixture, command: &str) -> Value {
    f.run("backgroundShellSpawn", json!({ "command": command })).await
}

#[tokio::test]
async fn the_own_terminals_folder_is_made_on_first_use_private_and_removed_with_the_tools() {
    let own = || Fixture::with(|o| o.terminals_dir = PathBuf::new());
    let (a, b) = (own(), own());
    let folder = a.tools.options().terminals_dir.clone();
    assert_ne!(folder, b.tools.options().terminals_dir, "two tool sets share a terminals folder");
    assert!(folder.starts_with(std::env::temp_dir()), "{}", folder.display());
    // Nothing on disk until a background shell needs it, yet it is already a root.
    assert!(!folder.exists());
    let early = a.run("read", json!({ "path": folder.join("1.txt").display().to_string() })).await;
    assert!(early.get("rejected").is_none(), "{early}");
    let other = b.run("read", json!({ "path": folder.join("1.txt").display().to_string() })).await;
    assert!(other["rejected"]["reason"].as_str().unwrap_or_default().contains("outside the workspace"), "{other}");

    let (ra, rb) = (spawn_background(&a, "echo from-a").await, spawn_background(&b, "echo from-b").await);
    assert_eq!((ra["success"]["shellId"].as_u64(), rb["success"]["shellId"].as_u64()), (Some(1), Some(1)));
    let log_a = folder.join("1.txt");
    assert_eq!(wait_for_file(&log_a).await, "from-a\n");
    assert_eq!(wait_for_file(&b.tools.options().terminals_dir.join("1.txt")).await, "from-b\n");
    {
        use std::os::unix::fs::PermissionsExt;
        assert_eq!(std::fs::metadata(&folder).unwrap().permissions().mode() & 0o777, 0o700);
    }
    let read = a.run("read", json!({ "path": log_a.display().to_string() })).await;
    assert_eq!(read["success"]["content"], "from-a\n");

    // close() takes the output with it; a later background shell makes the folder again.
    let sleeper = spawn_background(&a, "sleep 30").await;
    let pid = sleeper["success"]["pid"].as_i64().unwrap();
    a.tools.close();
    assert!(!folder.exists(), "close() left {}", folder.display());
    tokio::time::sleep(Duration::from_millis(100)).await;
    assert!(!alive(pid));
    spawn_background(&a, "echo again").await;
    assert_eq!(wait_for_file(&folder.join("3.txt")).await, "again\n");
    drop(a);
    assert!(!folder.exists(), "dropping the tools left {}", folder.display());

    let folder_b = b.tools.options().terminals_dir.clone();
    drop(b);
    assert!(!folder_b.exists(), "dropping the tools left {}", folder_b.display());
}

#[tokio::test]
async fn the_own_terminals_folder_refuses_a_symlink_put_in_its_place() {
    let f = Fixture::with(|o| o.terminals_dir = PathBuf::new());
    let folder = f.tools.options().terminals_dir.clone();
    let elsewhere = tempfile::tempdir().unwrap();
    std::fs::write(elsewhere.path().join("secret.txt"), "secret").unwrap();
    std::os::unix::fs::symlink(elsewhere.path(), &folder).unwrap();

    let spawned = spawn_background(&f, "echo hi").await;
    let error = spawned["error"]["error"].as_str().unwrap_or_default();
    assert!(error.contains("cannot create") && error.contains("already there"), "{spawned}");
    assert!(!elsewhere.path().join("1.txt").exists());
    let read = f.run("read", json!({ "path": folder.join("secret.txt").display().to_string() })).await;
    assert!(read["rejected"]["reason"].as_str().unwrap_or_default().contains("symbolic link"), "{read}");

    // Removing the folder removes the link, not what it points at.
    f.tools.close();
    assert!(folder.symlink_metadata().is_err());
    assert!(elsewhere.path().join("secret.txt").exists());
}

#[tokio::test]
async fn a_terminals_folder_the_host_names_is_made_when_needed_and_kept_without_the_output() {
    let parent = tempfile::tempdir().unwrap();
    let named = parent.path().join("terminals").join("session-1");
    let f = Fixture::with(|o| o.terminals_dir = named.clone());
    assert!(!named.exists());
    std::fs::create_dir_all(&named).unwrap();
    std::fs::write(named.join("notes.txt"), "the host's").unwrap();
    spawn_background(&f, "echo shown").await;
    assert_eq!(wait_for_file(&named.join("1.txt")).await, "shown\n");
    // The output goes with the tools (it may hold whatever a command printed); the folder and
    // what the host put there stay.
    f.tools.close();
    assert!(!named.join("1.txt").exists(), "close() left the output");
    spawn_background(&f, "echo again").await;
    assert_eq!(wait_for_file(&named.join("2.txt")).await, "again\n");
    drop(f);
    assert!(!named.join("2.txt").exists(), "dropping the tools left the output");
    assert_eq!(std::fs::read_to_string(named.join("notes.txt")).unwrap(), "the host's");

    // A relative folder is fixed against the working directory of the moment.
    let relative = Fixture::with(|o| o.terminals_dir = PathBuf::from("terminals-not-made"));
    let cwd = std::env::current_dir().unwrap();
    assert_eq!(relative.tools.options().terminals_dir, cwd.join("terminals-not-made"));
    let roots = relative.tools.workspace().roots();
    assert_eq!(roots.last().unwrap(), &std::fs::canonicalize(&cwd).unwrap().join("terminals-not-made"));
    assert!(!cwd.join("terminals-not-made").exists());
}

#[tokio::test]
async fn a_terminals_folder_the_host_named_is_never_made_again_once_the_tools_are_closed() {
    // The stdio agent deleting a session: it closes the session's tools, then removes the
    // session's terminals folder. A shell the server asks for after that must not bring it back.
    let parent = tempfile::tempdir().unwrap();
    let named = parent.path().join("terminals").join("session-1");
    let f = Fixture::with(|o| o.terminals_dir = named.clone());
    spawn_background(&f, "echo before").await;
    assert_eq!(wait_for_file(&named.join("1.txt")).await, "before\n");
    f.tools.close();
    std::fs::remove_dir_all(&named).unwrap();
    let late = spawn_background(&f, "echo late").await;
    let error = late["error"]["error"].as_str().unwrap_or_default();
    assert!(error.contains("not made again") && error.contains("session-1"), "{late}");
    assert!(!named.exists(), "a shell after close made the removed folder again");
    assert_eq!(f.tools.shells().background_count(), 0, "a shell started without its output file");

    // Tools closed before they ever made the folder: none is made either.
    let never = parent.path().join("terminals").join("session-2");
    let g = Fixture::with(|o| o.terminals_dir = never.clone());
    g.tools.close();
    assert!(spawn_background(&g, "echo late").await["error"]["error"].is_string());
    assert!(!never.exists(), "a shell after close made the folder");
}

#[tokio::test]
async fn unknown_kinds_are_not_handled_and_bad_args_are_errors() {
    let f = Fixture::new();
    let (ctx, _rx) = context();
    assert!(f.tools.run_kind(ExecKind::Mcp, &json!({}), &ctx).await.unwrap().is_none());
    let err = f.tools.run_kind(ExecKind::Read, &json!({ "path": 5 }), &ctx).await.unwrap_err();
    assert_eq!(err.code(), "E_INVALID");
    let err = f.tools.run_kind(ExecKind::Read, &json!({ "pth": "x" }), &ctx).await.unwrap_err();
    assert!(err.to_string().contains("pth"), "{err}");
}

// ---------- through the turn loop ----------

/// The tools as the session's host, over real sockets: the embedded backend sends exec
/// requests, the tools answer them, and the recording shows the wire replies.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_tools_answer_a_real_turn_on_the_wire() {
    use cursor_acp_core::session::{AgentClient, ClientConfig, SessionOptions};
    use cursor_acp_core::transport::TransportConfig;
    use cursor_acp_embedded::{EmbeddedBackend, Scenario};

    let f = Fixture::new();
    let root = f.root().display().to_string();
    let pidfile = f.dir.path().join("sleep.pid").display().to_string();
    let scenario = json!({ "steps": [
        { "type": "exec", "id": 1, "args": { "writeArgs": { "path": "notes/a.txt", "fileText": "hello\nworld\n" } } },
        { "type": "exec", "id": 2, "args": { "readArgs": { "path": "notes/a.txt", "offset": 2 } } },
        { "type": "exec", "id": 3, "args": { "shellStreamArgs": { "command": "cat notes/a.txt; echo err >&2", "workingDirectory": root } } },
        { "type": "exec", "id": 4, "wait": false, "args": { "shellStreamArgs": { "command": format!("echo $$ > {pidfile}; sleep 30") } } },
        { "type": "sleep", "ms": 400 },
        { "type": "abortExec", "id": 4 },
        { "type": "awaitExec", "id": 4 },
        { "type": "exec", "id": 5, "args": { "readArgs": { "path": "../../etc/passwd" } } },
        { "type": "turnEnded" }
    ]});
    let backend = EmbeddedBackend::start(Scenario::from_json(&scenario).unwrap()).await.unwrap();
    let config = ClientConfig {
        transport: TransportConfig { base_url: backend.url(), ..Default::default() },
        ..Default::default()
    };
    let client = AgentClient::new(config, std::sync::Arc::new(f.tools.clone()), None).unwrap();
    let session = client.new_session(SessionOptions { cwd: Some(root.clone()), ..Default::default() }).unwrap();
    let turn = session
        .prompt(vec![cursor_acp_core::acp::ContentBlock::Text(cursor_acp_core::acp::TextContent::new("go"))])
        .unwrap();
    while tokio::time::timeout(Duration::from_secs(20), turn.next()).await.unwrap().is_some() {}
    turn.result().await.unwrap();

    assert_eq!(std::fs::read_to_string(f.dir.path().join("notes/a.txt")).unwrap(), "hello\nworld\n");
    let messages: Vec<Value> = backend.records()[0].messages.iter().map(|m| m.message.clone()).collect();
    let results_for = |id: u64| -> Vec<&Value> {
        messages.iter().filter(|m| m["execClientMessage"]["id"] == id).map(|m| &m["execClientMessage"]).collect()
    };
    assert_eq!(results_for(1)[0]["writeResult"]["success"]["linesCreated"], 2);
    assert_eq!(results_for(2)[0]["readResult"]["success"]["content"], "world\n");
    let shell = results_for(3);
    let events: Vec<String> = shell
        .iter()
        .map(|m| match m["shellStream"].as_object() {
            Some(s) => s.keys().next().unwrap().clone(),
            None => "shellResult".to_string(),
        })
        .collect();
    assert_eq!(events.first().map(String::as_str), Some("start"));
    assert!(events.contains(&"stdout".to_string()) && events.contains(&"stderr".to_string()), "{events:?}");
    assert_eq!(&events[events.len() - 2..], ["exit", "shellResult"]);
    assert_eq!(shell.last().unwrap()["shellResult"]["success"]["stdout"], "hello\nworld\n");
    // The aborted shell is answered and gone.
    let aborted = results_for(4);
    assert!(aborted.iter().any(|m| m["shellStream"]["exit"]["aborted"] == true), "{aborted:#?}");
    let pid: i64 = std::fs::read_to_string(&pidfile).unwrap().trim().parse().unwrap();
    tokio::time::sleep(Duration::from_millis(100)).await;
    assert!(!alive(pid), "the aborted shell is still running");
    assert!(results_for(5)[0]["readResult"]["rejected"].is_object());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_shell_starting_while_the_tools_close_neither_outlives_them_nor_makes_the_folder_again() {
    // A background shell the model asked for just before the session was deleted starts on
    // another thread while the host closes the tools and removes the folder. Swept over the
    // first 2 ms of the start.
    let mut started = Vec::new();
    for i in 0..100u64 {
        let parent = tempfile::tempdir().unwrap();
        let named = parent.path().join("terminals").join("session");
        let f = Fixture::with(|o| o.terminals_dir = named.clone());
        let tools = f.tools.clone();
        let spawn = tokio::spawn(async move {
            let args = json!({ "command": "sleep 30" });
            tools.run_kind(ExecKind::BackgroundShellSpawn, &args, &cursor_acp_core::host::ExecContext::detached()).await
        });
        let spin = Instant::now();
        while spin.elapsed() < Duration::from_micros(i * 20) {
            std::hint::spin_loop();
        }
        f.tools.close();
        #[allow(clippy::let_underscore_must_use, reason = "best-effort clean-up of a temporary folder")]
        let _ = std::fs::remove_dir_all(&named);
        let result = spawn.await.unwrap().unwrap().unwrap();
        if let Some(pid) = result["success"]["pid"].as_i64() {
            started.push(pid);
        }
        assert_eq!(f.tools.shells().background_count(), 0, "round {i}: a shell outlived close(): {result}");
        // Made again, or never removed: a file made while it was removed keeps it there.
        assert!(!named.exists(), "round {i}: the folder is there after its removal: {result}");
    }
    // A deadline, not a wait: up to 100 process groups end on a machine that may be busy.
    let deadline = Instant::now() + Duration::from_secs(20);
    while started.iter().any(|&pid| alive(pid)) {
        assert!(Instant::now() < deadline, "shells still running after close(): {started:?}");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}
