//! The bench's `many` scenario on the core alone (no Node, no N-API): N sessions of one client,
//! all prompting at once against a running backend; prints the wall time and the p50/p99 time
//! from each prompt to its first update. With `--first-only` each turn is left as soon as its
//! first update arrives, so only the setup (stream, run request, first frame) is measured.
//!
//! `cargo run --release -p cursor-acp-bench --example many_turns -- URL [N] [--first-only]`

use std::sync::Arc;
use std::time::Instant;

use cursor_acp_core::acp::ContentBlock;
use cursor_acp_core::host::{ExecContext, ExecRequest, Host};
use cursor_acp_core::session::{AgentClient, ClientConfig, SessionOptions};
use cursor_acp_core::CoreError;
use futures::future::BoxFuture;
use serde_json::{json, Value};

/// Answers `read` execs as the bench's addon client does.
struct ReadHost;

impl Host for ReadHost {
    fn exec(&self, request: ExecRequest, _: ExecContext) -> BoxFuture<'static, Result<Option<Value>, CoreError>> {
        let answer = (request.kind == "read")
            .then(|| json!({ "success": { "path": request.args["path"], "content": "bench file\n" } }));
        Box::pin(async move { Ok(answer) })
    }
}

#[allow(clippy::print_stdout, reason = "an example reports its measurements on stdout")]
fn main() -> Result<(), Box<dyn std::error::Error>> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let first_only = args.iter().any(|a| a == "--first-only");
    let mut positional = args.iter().filter(|a| !a.starts_with("--"));
    let url = positional.next().expect("usage: many_turns URL [N] [--first-only]").clone();
    let n: usize = positional.next().map_or(1000, |v| v.parse().expect("N is a number"));

    let runtime = tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build()?;
    runtime.block_on(async move {
        let mut config = ClientConfig::default();
        config.transport.base_url = url;
        let client = AgentClient::new(config, Arc::new(ReadHost), None)?;
        let options = SessionOptions { cwd: Some("/bench".into()), ..Default::default() };
        let sessions = (0..n).map(|_| client.new_session(options.clone())).collect::<Result<Vec<_>, _>>()?;
        let t0 = Instant::now();
        let turns: Vec<_> = sessions
            .into_iter()
            .map(|session| {
                tokio::spawn(async move {
                    let start = Instant::now();
                    let turn = session.prompt_with(vec![ContentBlock::from("many")], Default::default())?;
                    let mut first = None;
                    loop {
                        let batch = turn.next_batch(1024).await;
                        first.get_or_insert_with(|| start.elapsed());
                        if batch.is_empty() || first_only {
                            break;
                        }
                    }
                    if !first_only {
                        turn.result().await?;
                    }
                    Ok::<_, CoreError>(first.unwrap_or_default())
                })
            })
            .collect();
        let mut firsts = Vec::with_capacity(n);
        for turn in turns {
            firsts.push(turn.await??.as_secs_f64() * 1000.0);
        }
        let wall = t0.elapsed().as_secs_f64() * 1000.0;
        firsts.sort_by(f64::total_cmp);
        let at = |p: usize| firsts[(p * n / 100).min(n - 1)];
        println!("core: {n} turns, wall {wall:.0} ms, first update p50 {:.0} ms, p99 {:.0} ms", at(50), at(99));
        Ok(())
    })
}
