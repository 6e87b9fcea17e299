//! The shell the server is told of is the shell the tools run: the request context's
//! `env.shell` and a command's own `$0` agree, whatever the user's `$SHELL` says. Its own test
//! binary, because it sets `SHELL` for the process.

mod common;

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use cursor_acp_core::acp::{ContentBlock, TextContent};
use cursor_acp_core::session::{AgentClient, ClientOptions, SessionOptions};
use cursor_acp_embedded::{EmbeddedBackend, Scenario};
use serde_json::{json, Value};

use common::Fixture;

/// A turn on the embedded backend that asks for `$0` and `$SHELL` of a shell; returns the
/// request context's shell as the server received it, and the command's output lines.
async fn told_and_ran(shell_option: Option<String>, tools: &Fixture) -> (String, Vec<String>) {
    let scenario = json!({ "steps": [
        { "type": "exec", "id": 1, "args": { "shellArgs": { "command": "echo \"$0\"; echo \"$SHELL\"" } } },
        { "type": "exec", "id": 2, "args": { "requestContextArgs": {} } },
        { "type": "turnEnded" }
    ]});
    let backend = EmbeddedBackend::start(Scenario::from_json(&scenario).unwrap()).await.unwrap();
    let options = ClientOptions { base_url: Some(backend.url()), shell: shell_option, ..Default::default() };
    let client = AgentClient::new(options.into_config().unwrap(), Arc::new(tools.tools.clone()), None).unwrap();
    let root = tools.root().display().to_string();
    let session = client.new_session(SessionOptions { cwd: Some(root), ..Default::default() }).unwrap();
    let turn = session.prompt(vec![ContentBlock::Text(TextContent::new("which shell?"))]).unwrap();
    while tokio::time::timeout(Duration::from_secs(20), turn.next()).await.unwrap().is_some() {}
    turn.result().await.unwrap();

    let messages: Vec<Value> = backend.records()[0].messages.iter().map(|m| m.message.clone()).collect();
    let told = &messages[0]["runRequest"]["action"]["userMessageAction"]["requestContext"]["env"]["shell"];
    let exec =
        |id: u64| messages.iter().find(|m| m["execClientMessage"]["id"] == id).unwrap()["execClientMessage"].clone();
    let from_exec = &exec(2)["requestContextResult"]["success"]["requestContext"]["env"]["shell"];
    assert_eq!(told, from_exec, "the run request and the requestContext exec name one shell");
    let stdout = exec(1)["shellResult"]["success"]["stdout"].as_str().unwrap_or_default().to_string();
    (told.as_str().unwrap_or_default().to_string(), stdout.lines().map(str::to_string).collect())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_request_context_names_the_shell_the_tools_run_not_the_users_shell_variable() {
    // A login shell the tools do not run (and that need not exist here).
    // SAFETY: this binary's only test, set before anything reads the environment.
    unsafe { std::env::set_var("SHELL", "/usr/bin/fish") };

    // Defaults on both sides: the tools' default shell, named as such.
    let tools = Fixture::new();
    let (told, ran) = told_and_ran(None, &tools).await;
    assert_ne!(told, "/usr/bin/fish", "the user's $SHELL is not what runs");
    assert_eq!(told, tools.tools.shell().display().to_string());
    assert_eq!(ran, [told.clone(), told.clone()], "$0 and $SHELL of the command are the shell named");

    // A shell configured for the client and its tools.
    let sh = PathBuf::from("/bin/sh");
    let tools = Fixture::with(|o| o.shell = Some(sh.clone()));
    let (told, ran) = told_and_ran(Some("/bin/sh".into()), &tools).await;
    assert_eq!(told, "/bin/sh");
    assert_eq!(ran, ["/bin/sh", "/bin/sh"]);
}
