//! Path confinement: whatever path the model names, a resolved path lies under a workspace
//! root, and a refusal is an error, never a panic.
#![no_main]

use std::path::PathBuf;
use std::sync::OnceLock;

use cursor_acp_core::tools::Workspace;
use libfuzzer_sys::fuzz_target;

/// A workspace of two roots with a file, a folder and a link out, made once per process.
fn workspace() -> &'static (Workspace, PathBuf) {
    static WORKSPACE: OnceLock<(Workspace, PathBuf)> = OnceLock::new();
    WORKSPACE.get_or_init(|| {
        let base = std::env::temp_dir().join(format!("cursor-acp-fuzz-{}", std::process::id()));
        let (one, two) = (base.join("one"), base.join("two"));
        std::fs::create_dir_all(one.join("dir")).expect("a scratch folder");
        std::fs::create_dir_all(&two).expect("a scratch folder");
        std::fs::write(one.join("dir/file.txt"), "x").expect("a scratch file");
        #[cfg(unix)]
        let _ = std::os::unix::fs::symlink("/etc", one.join("out"));
        let workspace = Workspace::new([&one, &two]).expect("the roots exist");
        (workspace, base)
    })
}

fuzz_target!(|data: &[u8]| {
    let Ok(path) = std::str::from_utf8(data) else { return };
    let (workspace, _) = workspace();
    if let Ok(resolved) = workspace.resolve(path) {
        assert!(
            workspace.roots().iter().any(|root| resolved.starts_with(root)),
            "{path:?} resolved outside the roots: {}",
            resolved.display()
        );
        assert!(!resolved.starts_with("/etc"), "{path:?} followed the link out");
    }
});
