//! The `pi_*` exec family and `mini_swe_agent_bash` on the built-in tools, on real files and
//! processes: pi's text answers, limits and notices, edits with their diff and patch, and the
//! workspace confinement every tool has.

mod common;

use common::Fixture;
use serde_json::{json, Value};

fn output(r: &Value) -> &str {
    r["success"]["output"].as_str().unwrap_or_else(|| panic!("not a success: {r}"))
}

#[tokio::test]
async fn read_shows_lines_from_an_offset_and_says_where_to_continue() {
    let f = Fixture::new();
    f.file("a.txt", "one\ntwo\nthree\nfour");
    assert_eq!(output(&f.run("piRead", json!({ "path": "a.txt" })).await), "one\ntwo\nthree\nfour");
    let r = f.run("piRead", json!({ "path": "a.txt", "offset": 2, "limit": 2 })).await;
    assert_eq!(output(&r), "two\nthree\n\n[1 more lines in file. Use offset=4 to continue]");
    let r = f.run("piRead", json!({ "path": "a.txt", "offset": 9 })).await;
    assert_eq!(r["error"]["error"], "Offset 9 is beyond end of file (4 lines total)");
    let long: String = (1..=2500).map(|i| format!("line {i}\n")).collect();
    f.file("long.txt", &long);
    let r = f.run("piRead", json!({ "path": "long.txt" })).await;
    assert!(output(&r).ends_with("line 2000\n\n[Showing lines 1-2000 of 2501. Use offset=2001 to continue]"));
    let t = &r["success"]["truncation"];
    assert_eq!(
        (t["truncatedBy"].as_str(), t["outputLines"].as_u64(), t["totalLines"].as_u64()),
        (Some("lines"), Some(2000), Some(2501))
    );
    let wide: String = (0..100).map(|i| format!("{i:0>1000}\n")).collect();
    f.file("wide.txt", &wide);
    let r = f.run("piRead", json!({ "path": "wide.txt" })).await;
    assert!(output(&r).ends_with("[Showing lines 1-51 of 101 (50.0KB limit). Use offset=52 to continue]"), "{r}");
    f.file("one-line.min.js", "x".repeat(60 * 1024));
    let r = f.run("piRead", json!({ "path": "one-line.min.js" })).await;
    assert_eq!(
        output(&r),
        "[Line 1 is 60.0KB, exceeds 50.0KB limit. Use bash: sed -n '1p' one-line.min.js | head -c 51200]"
    );
    assert_eq!(r["success"]["truncation"]["firstLineExceedsLimit"], true);
}

#[tokio::test]
async fn read_refuses_what_is_not_a_text_file_in_the_workspace() {
    let f = Fixture::new();
    f.file("bin.dat", [1u8, 0, 2]);
    assert!(f.run("piRead", json!({ "path": "bin.dat" })).await["error"]["error"].as_str().unwrap().contains("binary"));
    assert_eq!(f.run("piRead", json!({ "path": "gone.txt" })).await["error"]["error"], "File not found: gone.txt");
    let r = f.run("piRead", json!({ "path": "../../etc/passwd" })).await;
    assert!(r["error"]["error"].as_str().unwrap().contains("outside the workspace"), "{r}");
}

#[tokio::test]
async fn write_makes_folders_and_refuses_paths_outside() {
    let f = Fixture::new();
    let r = f.run("piWrite", json!({ "path": "deep/er/new.txt", "content": "héllo" })).await;
    assert_eq!(output(&r), "Successfully wrote 6 bytes to deep/er/new.txt");
    assert_eq!(std::fs::read_to_string(f.root().join("deep/er/new.txt")).unwrap(), "héllo");
    let r = f.run("piWrite", json!({ "path": "/etc/evil", "content": "x" })).await;
    assert!(r["rejected"]["reason"].as_str().unwrap().contains("outside the workspace"), "{r}");
}

#[tokio::test]
async fn edit_replaces_unique_text_keeps_crlf_and_bom_and_answers_with_diff_and_patch() {
    let f = Fixture::new();
    let path = f.file("src/lib.rs", "\u{feff}fn a() {\r\n    1\r\n}\r\nfn b() {\r\n    2\r\n}\r\n");
    let r = f
        .run(
            "piEdit",
            json!({ "path": "src/lib.rs", "edits": [
                { "oldText": "    1\n", "newText": "    10\n" },
                { "oldText": "fn b() {\n    2", "newText": "fn b() {\n    20" }
            ] }),
        )
        .await;
    let s = &r["success"];
    assert_eq!(s["output"], "Successfully replaced 2 blocks in src/lib.rs.");
    assert_eq!(
        std::fs::read_to_string(&path).unwrap(),
        "\u{feff}fn a() {\r\n    10\r\n}\r\nfn b() {\r\n    20\r\n}\r\n"
    );
    assert_eq!(s["firstChangedLine"], 2);
    let diff = s["diff"].as_str().unwrap();
    assert!(diff.contains("-2     1") && diff.contains("+2     10") && diff.contains("+5     20"), "{diff}");
    let patch = s["patch"].as_str().unwrap();
    assert!(patch.starts_with("--- a/src/lib.rs\n+++ b/src/lib.rs\n@@ -1,6 +1,6 @@\n"), "{patch}");
    assert!(patch.contains("\n-    1\n+    10\n"), "{patch}");
}

#[tokio::test]
async fn edit_finds_text_a_model_typed_with_plain_quotes_and_refuses_ambiguity() {
    let f = Fixture::new();
    let path = f.file("note.md", "She said \u{201c}hi\u{201d} \u{2014} twice.   \nagain\nagain\n");
    let r = f
        .run(
            "piEdit",
            json!({ "path": "note.md", "edits": [{ "oldText": "said \"hi\" - twice.", "newText": "said bye." }] }),
        )
        .await;
    assert_eq!(output(&r), "Successfully replaced text in note.md.");
    assert_eq!(std::fs::read_to_string(&path).unwrap(), "She said bye.\nagain\nagain\n");
    let r = f.run("piEdit", json!({ "path": "note.md", "edits": [{ "oldText": "again", "newText": "once" }] })).await;
    assert!(r["error"]["error"].as_str().unwrap().starts_with("found 2 occurrences"), "{r}");
    let r = f.run("piEdit", json!({ "path": "note.md", "edits": [{ "oldText": "absent", "newText": "x" }] })).await;
    assert!(r["error"]["error"].as_str().unwrap().contains("could not find the exact text"), "{r}");
    let r = f.run("piEdit", json!({ "path": "note.md", "edits": [{ "oldText": "bye", "newText": "bye" }] })).await;
    assert!(r["error"]["error"].as_str().unwrap().starts_with("No changes made"), "{r}");
    let r = f.run("piEdit", json!({ "path": "../x.md", "edits": [{ "oldText": "a", "newText": "b" }] })).await;
    assert!(r["rejected"]["reason"].is_string(), "{r}");
    assert_eq!(
        std::fs::read_to_string(&path).unwrap(),
        "She said bye.\nagain\nagain\n",
        "refused edits change nothing"
    );
}

#[tokio::test]
async fn grep_lists_matches_with_context_and_limits() {
    let f = Fixture::new();
    f.file("src/a.rs", "fn main() {\n    todo!()\n}\n");
    f.file("src/b.rs", "// TODO later\n");
    f.file(".hidden/c.rs", "todo here too\n");
    f.file(".gitignore", "ignored/\n");
    f.file("ignored/d.rs", "todo ignored\n");
    let r = f.run("piGrep", json!({ "pattern": "todo", "ignoreCase": true })).await;
    assert_eq!(output(&r), ".hidden/c.rs:1: todo here too\nsrc/a.rs:2:     todo!()\nsrc/b.rs:1: // TODO later");
    let r = f.run("piGrep", json!({ "pattern": "todo!()", "literal": true, "context": 1, "path": "src" })).await;
    assert_eq!(output(&r), "a.rs-1- fn main() {\na.rs:2:     todo!()\na.rs-3- }");
    let r = f.run("piGrep", json!({ "pattern": "o", "limit": 1, "glob": "*.rs" })).await;
    assert!(output(&r).ends_with("[1 matches limit reached. Use limit=2 for more, or refine pattern]"), "{r}");
    assert_eq!(r["success"]["matchLimitReached"], 1);
    assert_eq!(output(&f.run("piGrep", json!({ "pattern": "nothing-like-it" })).await), "No matches found");
    f.file("wide.txt", format!("{}needle\n", "x".repeat(600)));
    let r = f.run("piGrep", json!({ "pattern": "needle", "path": "wide.txt" })).await;
    assert!(output(&r).contains("... [truncated]") && r["success"]["linesTruncated"] == true, "{r}");
    assert!(f.run("piGrep", json!({ "pattern": "(" })).await["error"]["error"]
        .as_str()
        .unwrap()
        .contains("invalid pattern"));
}

#[tokio::test]
async fn find_matches_names_or_paths_and_ls_lists_one_folder() {
    let f = Fixture::new();
    f.file("src/a.ts", "");
    f.file("src/deep/b.ts", "");
    f.file("src/deep/b.spec.ts", "");
    f.file("README.md", "");
    f.file(".env", "");
    let r = f.run("piFind", json!({ "pattern": "*.ts" })).await;
    assert_eq!(output(&r), "src/a.ts\nsrc/deep/b.spec.ts\nsrc/deep/b.ts");
    let r = f.run("piFind", json!({ "pattern": "src/**/*.spec.ts" })).await;
    assert_eq!(output(&r), "src/deep/b.spec.ts");
    let r = f.run("piFind", json!({ "pattern": "*.ts", "limit": 1 })).await;
    assert!(output(&r).ends_with("[1 results limit reached. Use limit=2 for more, or refine pattern]"));
    assert_eq!(output(&f.run("piFind", json!({ "pattern": "*.py" })).await), "No files found matching pattern");
    assert_eq!(output(&f.run("piLs", json!({})).await), ".env\nREADME.md\nsrc/");
    let r = f.run("piLs", json!({ "path": "src", "limit": 1 })).await;
    assert_eq!(output(&r), "a.ts\n\n[1 entries limit reached. Use limit=2 for more]");
    std::fs::create_dir(f.root().join("empty")).unwrap();
    assert_eq!(output(&f.run("piLs", json!({ "path": "empty" })).await), "(empty directory)");
    assert!(f.run("piLs", json!({ "path": "README.md" })).await["error"]["error"]
        .as_str()
        .unwrap()
        .starts_with("Not a directory"));
    assert!(f.run("piLs", json!({ "path": "/" })).await["error"]["error"]
        .as_str()
        .unwrap()
        .contains("outside the workspace"));
}

#[cfg(unix)]
#[tokio::test]
async fn bash_answers_with_the_output_tail_and_says_how_it_ended() {
    let f = Fixture::new();
    let r = f.run("piBash", json!({ "command": "echo out; echo err >&2" })).await;
    let text = output(&r);
    assert!(text.contains("out\n") && text.contains("err\n"), "{r}");
    let r = f.run("piBash", json!({ "command": "echo nope; exit 3" })).await;
    assert_eq!(r["error"]["error"], "nope\n\n\nCommand exited with code 3");
    let r = f.run("piBash", json!({ "command": "sleep 5", "timeout": 0.2 })).await;
    assert_eq!(r["error"]["error"], "Command timed out after 0.2 seconds");
    assert_eq!(output(&f.run("piBash", json!({ "command": "true" })).await), "(no output)");
    let r = f.run("piBash", json!({ "command": "seq 1 3000" })).await;
    let text = output(&r);
    assert!(
        text.starts_with("1002\n") && text.contains("[Showing lines 1002-3001 of 3001. Full output: "),
        "{}",
        &text[..40]
    );
    let kept = r["success"]["fullOutputPath"].as_str().unwrap();
    let full = std::fs::read_to_string(kept).unwrap();
    assert!(full.starts_with("1\n2\n") && full.ends_with("3000\n"));
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        assert_eq!(std::fs::metadata(kept).unwrap().permissions().mode() & 0o777, 0o600, "the output is private");
    }
    f.tools.close();
    assert!(!std::path::Path::new(kept).exists(), "removed with the tools");
}

#[cfg(unix)]
#[tokio::test]
async fn mini_swe_agent_bash_is_a_shell_with_a_shell_result() {
    let f = Fixture::new();
    let r = f.run("miniSweAgentBash", json!({ "command": "echo hi; exit 2" })).await;
    assert_eq!(r["failure"]["exitCode"], 2);
    assert_eq!(r["failure"]["stdout"], "hi\n");
}
