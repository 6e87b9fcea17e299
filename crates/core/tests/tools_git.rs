//! `gitDiffRequest` on the built-in tools against real repositories made with git: the working
//! tree against HEAD (untracked files included), refs and merge bases, output formats, before
//! and after contents, the patch id and head sha, and what is refused.

mod common;

use std::path::Path;
use std::process::Command;

use common::{context, Fixture};
use cursor_acp_core::kinds::ExecKind;
use serde_json::{json, Value};

fn git(dir: &Path, args: &[&str]) -> String {
    let out = Command::new("git")
        .args(args)
        .current_dir(dir)
        .env("GIT_AUTHOR_NAME", "t")
        .env("GIT_AUTHOR_EMAIL", "t@example.com")
        .env("GIT_COMMITTER_NAME", "t")
        .env("GIT_COMMITTER_EMAIL", "t@example.com")
        .output()
        .expect("git runs");
    assert!(out.status.success(), "git {args:?}: {}", String::from_utf8_lossy(&out.stderr));
    String::from_utf8(out.stdout).unwrap()
}

/// A repository with one commit of `a.txt` and `sub/b.txt`.
fn repository() -> Fixture {
    let f = Fixture::new();
    let root = f.root();
    git(&root, &["init", "-q", "-b", "main"]);
    f.file("a.txt", "one\ntwo\nthree\n");
    f.file("sub/b.txt", "bee\n");
    git(&root, &["add", "."]);
    git(&root, &["commit", "-q", "-m", "first"]);
    f
}

async fn diff(f: &Fixture, args: Value) -> Value {
    f.run("gitDiffRequest", args).await
}

fn files(r: &Value) -> Vec<(String, String)> {
    r["diff"]["diffs"]
        .as_array()
        .map(|d| d.iter().map(|f| (f["from"].as_str().unwrap().into(), f["to"].as_str().unwrap().into())).collect())
        .unwrap_or_default()
}

#[tokio::test]
async fn the_working_tree_against_head_with_untracked_files() {
    let f = repository();
    f.file("a.txt", "one\nTWO\nthree\n");
    f.file("new.txt", "fresh\nlines\n");
    std::fs::remove_file(f.root().join("sub/b.txt")).unwrap();
    let r = diff(&f, json!({})).await;
    assert_eq!(
        files(&r),
        [
            ("a.txt".into(), "a.txt".into()),
            ("sub/b.txt".into(), "/dev/null".into()),
            ("/dev/null".into(), "new.txt".into())
        ]
    );
    let a = &r["diff"]["diffs"][0];
    assert_eq!((a["added"].as_i64(), a["removed"].as_i64()), (Some(1), Some(1)));
    let chunk = &a["chunks"][0];
    assert_eq!(chunk["content"], "@@ -1,3 +1,3 @@");
    assert_eq!(chunk["lines"], json!([" one", "-two", "+TWO", " three"]));
    assert_eq!((chunk["oldStart"].as_i64(), chunk["newLines"].as_i64()), (Some(1), Some(3)));
    let new = &r["diff"]["diffs"][2];
    assert_eq!(new["chunks"][0]["lines"], json!(["+fresh", "+lines"]));
    assert_eq!(r["diff"]["diffType"], "DIFF_TYPE_DIFF_TO_HEAD");
    assert_eq!(r["hasUncommittedChanges"], true);
    assert!(r.get("headSha").is_none(), "only when asked for");
    let none = diff(&f, json!({ "maxUntrackedFiles": -1 })).await;
    assert_eq!(files(&none).len(), 2, "no untracked files");
}

#[tokio::test]
async fn formats_contents_paths_and_ids() {
    let f = repository();
    f.file("a.txt", "one\ntwo\nthree\nfour\n");
    f.file("sub/b.txt", "BEE\n");
    let names = diff(&f, json!({ "outputFormat": "OUTPUT_FORMAT_NAME_STATUS" })).await;
    assert!(names["diff"]["diffs"]
        .as_array()
        .unwrap()
        .iter()
        .all(|d| d.get("chunks").is_none() && d.get("added").is_none()));
    let counts = diff(&f, json!({ "outputFormat": "OUTPUT_FORMAT_NAME_STATUS_AND_NUMSTAT" })).await;
    assert_eq!(counts["diff"]["diffs"][0]["added"], 1);
    assert!(counts["diff"]["diffs"][0].get("chunks").is_none());
    let full = diff(&f, json!({ "outputFormat": "OUTPUT_FORMAT_DIFFS_WITH_BEFORE_AND_AFTER" })).await;
    let a = &full["diff"]["diffs"][0];
    assert_eq!(
        (a["beforeFileContents"].as_str(), a["afterFileContents"].as_str()),
        (Some("one\ntwo\nthree\n"), Some("one\ntwo\nthree\nfour\n"))
    );
    let only_sub = diff(&f, json!({ "targetPaths": ["sub"] })).await;
    assert_eq!(files(&only_sub), [("sub/b.txt".into(), "sub/b.txt".into())]);
    let from_sub = diff(&f, json!({ "cwd": "sub" })).await;
    assert_eq!(files(&from_sub), [("sub/b.txt".into(), "sub/b.txt".into())], "only what lies under cwd");
    let ids = diff(&f, json!({ "computePatchId": true, "returnHeadSha": true })).await;
    let head = git(&f.root(), &["rev-parse", "HEAD"]);
    assert_eq!(ids["headSha"], head.trim());
    assert_eq!(ids["patchId"].as_str().map(str::len), Some(40));
    let context = diff(&f, json!({ "unifiedContextLines": 0 })).await;
    assert_eq!(context["diff"]["diffs"][0]["chunks"][0]["lines"], json!(["+four"]));
}

#[tokio::test]
async fn refs_merge_bases_and_committed_changes() {
    let f = repository();
    let root = f.root();
    git(&root, &["checkout", "-q", "-b", "topic"]);
    f.file("a.txt", "one\ntwo\nthree\ntopic\n");
    git(&root, &["commit", "-q", "-am", "topic"]);
    git(&root, &["checkout", "-q", "main"]);
    f.file("sub/b.txt", "main moved on\n");
    git(&root, &["commit", "-q", "-am", "main"]);
    let branch = diff(&f, json!({ "baseRef": "main", "ref": "topic", "mergeBase": true })).await;
    assert_eq!(files(&branch), [("a.txt".into(), "a.txt".into())], "main's own change is not the branch's");
    assert_eq!(branch["diff"]["diffType"], "DIFF_TYPE_DIFF_FROM_BRANCH_TO_MAIN");
    let both = diff(&f, json!({ "baseRef": "topic", "ref": "main" })).await;
    assert_eq!(files(&both).len(), 2);
    f.file("a.txt", "uncommitted\n");
    let committed = diff(&f, json!({ "baseRef": "HEAD~1", "committedOnly": true })).await;
    assert_eq!(files(&committed), [("sub/b.txt".into(), "sub/b.txt".into())], "the working tree is left out");
    f.file("a.txt", "one\n  two\nthree\n");
    git(&root, &["checkout", "-q", "--", "a.txt"]);
    f.file("a.txt", "one\ntwo  \nthree\n");
    assert!(files(&diff(&f, json!({})).await).is_empty(), "space-only changes are left out by default");
    assert_eq!(files(&diff(&f, json!({ "includeSpaceChanges": true })).await).len(), 1);
}

#[tokio::test]
async fn a_repository_without_commits_and_what_git_cannot_answer() {
    let f = Fixture::new();
    git(&f.root(), &["init", "-q"]);
    f.file("first.txt", "hello\n");
    let r = diff(&f, json!({})).await;
    assert_eq!(files(&r), [("/dev/null".into(), "first.txt".into())]);
    let plain = Fixture::new();
    let (ctx, _rx) = context();
    let err = plain.tools.run_kind(ExecKind::GitDiffRequest, &json!({}), &ctx).await.unwrap_err();
    assert!(err.to_string().contains("not in a git repository"), "{err}");
    let err = f.tools.run_kind(ExecKind::GitDiffRequest, &json!({ "cwd": "/" }), &ctx).await.unwrap_err();
    assert!(err.to_string().contains("outside the workspace"), "{err}");
    let err =
        f.tools.run_kind(ExecKind::GitDiffRequest, &json!({ "targetPaths": ["../../etc"] }), &ctx).await.unwrap_err();
    assert!(err.to_string().contains("outside the workspace"), "{err}");
}
