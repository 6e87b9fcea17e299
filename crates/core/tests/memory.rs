//! Memory the core keeps, measured by counting allocations. The tests take turns (`MEASURING`),
//! so no other test allocates while one measures.

use std::sync::atomic::Ordering;

#[path = "common/counting.rs"]
mod counting;
use counting::{this_thread, LIVE};

static MEASURING: std::sync::Mutex<()> = std::sync::Mutex::new(());

#[test]
fn the_whole_schemas_pool_stays_small() {
    // The embedded backend and recordings use every message. For the older schema (580
    // messages) the pool was 5.4 MiB with source info (comment locations) and under 3 without;
    // the 2026 schema keeps 4.7 without, and would keep about 9 with.
    let _turn = MEASURING.lock().unwrap_or_else(|e| e.into_inner());
    let before = this_thread();
    // A pool of its own: `whole_schema()`'s may have been built by a test that ran first.
    let pool = cursor_acp_core::descriptors::build_whole_schema();
    let kept = this_thread() - before;
    assert!(pool.get_message_by_name("agent.v1.AgentClientMessage").is_some());
    assert!(kept < 6 << 20, "the descriptor pool keeps {} KiB", kept / 1024);
    assert!(kept > 1 << 20, "a pool of 900 messages cannot keep only {kept} bytes");
}

/// A host that answers nothing (no turn runs here).
struct NoHost;

impl cursor_acp_core::host::Host for NoHost {
    fn exec(
        &self,
        _: cursor_acp_core::host::ExecRequest,
        _: cursor_acp_core::host::ExecContext,
    ) -> futures::future::BoxFuture<'static, Result<Option<serde_json::Value>, cursor_acp_core::CoreError>> {
        Box::pin(async { Ok(None) })
    }
}

#[test]
fn an_idle_session_keeps_little() {
    // An app may hold thousands of sessions (one per editor tab or chat); the bench's `many`
    // holds 1,000. Each used to keep its own copy of the client's URLs and header maps (4 KiB).
    let _turn = MEASURING.lock().unwrap_or_else(|e| e.into_inner());
    let mut config = cursor_acp_core::session::ClientConfig::default();
    config.transport.base_url = "http://127.0.0.1:9".into();
    config.transport.headers = vec![("x-extra".into(), "1".into())];
    let client = cursor_acp_core::session::AgentClient::new(config, std::sync::Arc::new(NoHost), None).unwrap();
    let options = cursor_acp_core::session::SessionOptions { cwd: Some("/work".into()), ..Default::default() };
    let before = this_thread();
    let sessions: Vec<_> = (0..100).map(|_| client.new_session(options.clone()).unwrap()).collect();
    let each = (this_thread() - before) / sessions.len() as isize;
    assert!(each < 1536, "an idle session keeps {each} bytes");
}

#[test]
fn the_messages_of_every_frame_stay_small() {
    // Each server frame is decoded into an `AgentServerMessage` (a box per frame) and each
    // append into an `AgentClientMessage`; a oneof is as large as its largest branch. With the
    // large branches inline these were 1,088 and 3,664 bytes, and a turn of 100 text deltas
    // allocated 175 KiB; build.rs boxes those branches.
    use cursor_acp_core::proto::agent::v1 as pb;
    use std::mem::size_of;
    assert!(size_of::<pb::AgentServerMessage>() <= 256, "{}", size_of::<pb::AgentServerMessage>());
    assert!(size_of::<pb::InteractionUpdate>() <= 256, "{}", size_of::<pb::InteractionUpdate>());
    assert!(size_of::<pb::AgentClientMessage>() <= 256, "{}", size_of::<pb::AgentClientMessage>());
}

/// Answers every exec with a small read result, as an editor's tools would.
struct Reading;

impl cursor_acp_core::host::Host for Reading {
    fn exec(
        &self,
        request: cursor_acp_core::host::ExecRequest,
        _: cursor_acp_core::host::ExecContext,
    ) -> futures::future::BoxFuture<'static, Result<Option<serde_json::Value>, cursor_acp_core::CoreError>> {
        let answer = serde_json::json!({ "success": { "path": request.args["path"], "content": "file body\n" } });
        Box::pin(async move { Ok(Some(answer)) })
    }
}

#[test]
fn memory_stays_flat_over_ten_thousand_sequential_turns() {
    // One client, one session, turn after turn against an embedded backend in the same process
    // (as the addon's users and tests run it), each turn with text, an exec and a checkpoint.
    // The backend kept every stream's state (and an empty record) for good: 1.2 KiB per turn
    // over Run, 1.7 over RunSSE, without end. After warm-up nothing may grow. The checkpoint
    // names its (empty) conversation itself: one the backend kept would grow by each turn's
    // blobs and ids, about 530 bytes a turn, as a real conversation does.
    use cursor_acp_core::acp;
    use cursor_acp_core::session::{AgentClient, ClientConfig, SessionOptions};
    use cursor_acp_embedded::{EmbeddedBackend, Scenario};
    let _turn = MEASURING.lock().unwrap_or_else(|e| e.into_inner());
    let runtime = tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build().unwrap();
    let (warm, end) = runtime.block_on(async {
        let scenario = serde_json::json!({ "record": false, "steps": [
            { "type": "text", "text": "hello" },
            { "type": "exec", "id": 1, "args": { "readArgs": { "path": "/w/a.txt" } } },
            { "type": "checkpoint", "state": { "tokenDetails": { "usedTokens": 10, "maxTokens": 100 }, "turns": [] } },
            { "type": "turnEnded", "inputTokens": 1 }
        ]});
        let backend = EmbeddedBackend::start(Scenario::from_json(&scenario).unwrap()).await.unwrap();
        let mut config = ClientConfig::default();
        config.transport.base_url = backend.url();
        let client = AgentClient::new(config, std::sync::Arc::new(Reading), None).unwrap();
        let session = client.new_session(SessionOptions::default()).unwrap();
        let mut live_at = Vec::new();
        for turn in 1..=10_000 {
            let t = session.prompt(vec![acp::ContentBlock::from("go")]).unwrap();
            while t.next().await.is_some() {}
            assert_eq!(t.result().await.unwrap().stop_reason, acp::StopReason::EndTurn);
            if turn == 1_000 || turn == 10_000 {
                // Let the backend's side of the last stream wind down.
                tokio::time::sleep(std::time::Duration::from_millis(100)).await;
                live_at.push(LIVE.load(Ordering::SeqCst));
            }
        }
        (live_at[0], live_at[1])
    });
    let grown = end as i64 - warm as i64;
    assert!(
        grown < 64 * 1024,
        "live bytes grew by {grown} from turn 1,000 to turn 10,000 ({} per turn)",
        grown / 9_000
    );
}
