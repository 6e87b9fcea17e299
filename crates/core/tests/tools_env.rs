//! The environment of the processes the tools start: under a host environment holding this
//! product's credentials and other secrets, a model-run `env` sees only what the policy allows.
#![cfg(unix)]

mod common;

use std::collections::BTreeMap;
use std::sync::Once;

use common::Fixture;
use cursor_acp_core::tools::{EnvPolicy, Inherit, ToolOptions};
use serde_json::json;

/// The host's environment for every test here (one process, so set once before any shell).
fn host_environment() {
    static SET: Once = Once::new();
    SET.call_once(|| {
        for (name, value) in [
            ("CURSOR_API_KEY", "key_host_secret"),
            ("CURSOR_ACCESS_TOKEN", "token_host_secret"),
            ("GITHUB_TOKEN", "ghp_host_secret"),
            ("MY_SECRET", "hunter2"),
            ("EDITOR_THEME", "dark"),
        ] {
            std::env::set_var(name, value);
        }
    });
}

/// What `env` printed in a shell of tools made with `tune`, foreground and background alike.
async fn shell_env(tune: impl FnOnce(&mut ToolOptions)) -> BTreeMap<String, String> {
    host_environment();
    let f = Fixture::with(tune);
    let r = f.run("shell", json!({ "command": "env" })).await;
    let printed = r["success"]["stdout"].as_str().unwrap_or_else(|| panic!("{r}")).to_string();
    let spawned = f.run("backgroundShellSpawn", json!({ "command": "env" })).await;
    let log = f.tools.options().terminals_dir.join(format!("{}.txt", spawned["success"]["shellId"]));
    let background = common::wait_for_file(&log).await;
    let parse = |text: &str| -> BTreeMap<String, String> {
        text.lines().filter_map(|l| l.split_once('=')).map(|(k, v)| (k.to_string(), v.to_string())).collect()
    };
    let (foreground, background) = (parse(&printed), parse(&background));
    // The shells' own bookkeeping aside, background shells get the same environment.
    let own = |env: &BTreeMap<String, String>| {
        env.iter()
            .filter(|(k, _)| !["_", "SHLVL", "PWD", "OLDPWD"].contains(&k.as_str()))
            .map(|(k, v)| (k.clone(), v.clone()))
            .collect::<Vec<_>>()
    };
    assert_eq!(own(&foreground), own(&background), "background shells get another environment");
    foreground
}

fn leaked(env: &BTreeMap<String, String>) -> Vec<&String> {
    env.iter().filter(|(_, v)| v.contains("secret") || v.as_str() == "hunter2").map(|(k, _)| k).collect()
}

#[tokio::test]
async fn by_default_no_credential_or_secret_reaches_a_shell() {
    let env = shell_env(|_| {}).await;
    assert!(leaked(&env).is_empty(), "leaked: {:?}", leaked(&env));
    for gone in ["CURSOR_API_KEY", "CURSOR_ACCESS_TOKEN", "GITHUB_TOKEN", "MY_SECRET"] {
        assert!(!env.contains_key(gone), "{gone} reached the shell");
    }
    assert_eq!(env.get("PATH"), std::env::var("PATH").ok().as_ref());
    assert_eq!(env.get("HOME"), std::env::var("HOME").ok().as_ref());
    assert_eq!(env.get("EDITOR_THEME").map(String::as_str), Some("dark"));
}

#[tokio::test]
async fn the_host_includes_sets_and_narrows_what_shells_get() {
    let policy = |inherit, include: &[&str], exclude: &[&str]| EnvPolicy {
        inherit,
        include: include.iter().map(|s| s.to_string()).collect(),
        exclude: exclude.iter().map(|s| s.to_string()).collect(),
    };
    // Included on purpose: a secret-looking name comes through, this product's credentials never.
    let env = shell_env(|o| o.env_policy = policy(Inherit::All, &["GITHUB_TOKEN", "CURSOR_*"], &["EDITOR_*"])).await;
    assert_eq!(env.get("GITHUB_TOKEN").map(String::as_str), Some("ghp_host_secret"));
    assert!(!env.contains_key("CURSOR_API_KEY") && !env.contains_key("CURSOR_ACCESS_TOKEN"));
    assert!(!env.contains_key("EDITOR_THEME") && !env.contains_key("MY_SECRET"));

    let env = shell_env(|o| o.env_policy = policy(Inherit::Core, &[], &[])).await;
    assert!(env.contains_key("PATH") && env.contains_key("HOME"));
    assert!(!env.contains_key("EDITOR_THEME"), "core inherits more than the core set");

    // Set explicitly, a variable always arrives, even one the policy would drop.
    let env = shell_env(|o| {
        o.env_policy = policy(Inherit::None, &[], &[]);
        o.env = vec![("PATH".into(), "/usr/bin:/bin".into()), ("CURSOR_API_KEY".into(), "given".into())];
    })
    .await;
    assert!(!env.contains_key("HOME") && !env.contains_key("EDITOR_THEME"));
    assert_eq!(env.get("CURSOR_API_KEY").map(String::as_str), Some("given"));
}

#[tokio::test]
async fn an_invalid_pattern_fails_the_shell_with_the_reason() {
    host_environment();
    let f = Fixture::with(|o| o.env_policy.exclude = vec!["[unclosed".into()]);
    let r = f.run("shell", json!({ "command": "true" })).await;
    assert!(r["spawnError"]["error"].as_str().unwrap_or_default().contains("[unclosed"), "{r}");
}
