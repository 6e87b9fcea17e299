//! The `bench` namespace: measurement helpers for `bench/` (not client API), over the
//! `cursor-acp-bench` crate.

use napi::bindgen_prelude::*;
use napi::Env;

use crate::js_error::promise;

/// Result of `bench.decodeTextFrames`.
#[napi(object, namespace = "bench")]
pub struct DecodeStats {
    pub frames: u32,
    pub bytes: f64,
    /// Wall time of the decode alone, in nanoseconds.
    pub nanos: f64,
}

/// Benchmark helper (not client API): the core codec's decode ceiling on `count` text-delta frames.
#[napi(namespace = "bench")]
pub fn decode_text_frames(count: u32, text: String) -> DecodeStats {
    let s = cursor_acp_bench::decode_text_frames(count as usize, &text);
    DecodeStats { frames: s.frames as u32, bytes: s.bytes as f64, nanos: s.elapsed.as_nanos() as f64 }
}

/// Benchmark helper (not client API): a server that does only the HTTP side of RunSSE turns,
/// for `bench.floorTurns`. `close()` it when done.
#[napi(namespace = "bench")]
pub struct FloorServer {
    inner: cursor_acp_bench::FloorServer,
}

#[napi(namespace = "bench")]
impl FloorServer {
    /// `http://127.0.0.1:PORT`
    #[napi(getter)]
    pub fn url(&self) -> String {
        self.inner.url()
    }

    /// Stops the server and cuts open connections.
    #[napi]
    pub fn close(&self) {
        self.inner.close();
    }
}

/// Benchmark helper (not client API): starts a `bench.FloorServer` on 127.0.0.1.
#[napi(namespace = "bench", ts_return_type = "Promise<bench.FloorServer>")]
pub fn start_floor_server<'env>(env: &'env Env) -> Result<PromiseRaw<'env, FloorServer>> {
    promise(env, cursor_acp_bench::FloorServer::start(), |_, inner| Ok(FloorServer { inner }))
}

/// Result of `bench.floorTurns`.
#[napi(object, namespace = "bench")]
pub struct FloorStats {
    pub turns: u32,
    pub wall_ms: f64,
    /// From a turn's start to the first byte of its stream.
    pub first_p50_ms: f64,
    pub first_p99_ms: f64,
}

/// Benchmark helper (not client API): the HTTP/1.1 setup floor under the `many` scenario.
/// `turns` RunSSE-shaped turns at once against a `bench.FloorServer`, through the reqwest client
/// a RunSSE transport with default settings uses and nothing else (no protocol, no JS per turn).
#[napi(namespace = "bench", ts_return_type = "Promise<bench.FloorStats>")]
pub fn floor_turns<'env>(env: &'env Env, url: String, turns: u32) -> Result<PromiseRaw<'env, FloorStats>> {
    let ms = |d: std::time::Duration| d.as_secs_f64() * 1000.0;
    promise(env, async move { cursor_acp_bench::floor_turns(&url, turns as usize).await }, move |_, s| {
        Ok(FloorStats {
            turns: s.turns as u32,
            wall_ms: ms(s.wall),
            first_p50_ms: ms(s.first_p50),
            first_p99_ms: ms(s.first_p99),
        })
    })
}
