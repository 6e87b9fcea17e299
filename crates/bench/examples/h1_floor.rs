//! What 1,000 RunSSE-shaped turns cost over HTTP/1.1 on loopback with nothing else in the way:
//! the floor under the bench's `many` setup. Per turn, a stream request on a new connection
//! whose response starts once the turn's append (one of 32 kept-alive connections) has arrived.
//!
//! `h1_floor server` prints its port and serves; `h1_floor reqwest|legacy|hyper PORT [N]` runs
//! the turns through reqwest as the RunSSE transport configures it (`floor_turns`, which
//! `npm run bench` reports next to `many`), through the hyper-util pooled client reqwest wraps,
//! or through hyper's connection API directly, and prints the wall time and the p50/p99
//! time to the first byte of each stream. Pointed at by the core
//! (`many_turns http://127.0.0.1:PORT N --first-only`), the server stands in for a gateway: it
//! pairs a RunSSE with its BidiAppend by `x-request-id` and answers with one text-delta frame.

use std::sync::{Arc, Mutex};
use std::time::Instant;

use bytes::Bytes;
use cursor_acp_bench::{floor_turns, FloorServer};
use http_body_util::{BodyExt, Full};
use hyper::Request;
use hyper_util::rt::TokioIo;
use tokio::net::TcpStream;
use tokio::sync::Semaphore;

type Error = Box<dyn std::error::Error + Send + Sync>;

const APPEND_CONNECTIONS: usize = cursor_acp_core::transport::DEFAULT_MAX_APPEND_CONNECTIONS;

#[allow(clippy::print_stdout, reason = "the server tells its parent its port on stdout")]
async fn server() -> Result<(), Error> {
    let server = FloorServer::start().await?;
    println!("{}", server.url().rsplit(':').next().unwrap_or_default());
    std::future::pending::<()>().await;
    Ok(())
}

type Sender = hyper::client::conn::http1::SendRequest<Full<Bytes>>;

async fn connect(port: u16) -> Result<Sender, Error> {
    let socket = TcpStream::connect(("127.0.0.1", port)).await?;
    socket.set_nodelay(true)?;
    let (sender, connection) = hyper::client::conn::http1::handshake(TokioIo::new(socket)).await?;
    tokio::spawn(connection);
    Ok(sender)
}

fn post(port: u16, path: &str, id: usize) -> Result<Request<Full<Bytes>>, Error> {
    Ok(Request::post(format!("http://127.0.0.1:{port}{path}?{id}"))
        .header("host", "127.0.0.1")
        .body(Full::new(Bytes::from_static(&[0; 64])))?)
}

/// Kept-alive connections for appends, at most `APPEND_CONNECTIONS` in use.
struct AppendPool {
    idle: Mutex<Vec<Sender>>,
    in_use: Semaphore,
}

impl AppendPool {
    async fn append(&self, port: u16, id: usize) -> Result<(), Error> {
        let _permit = self.in_use.acquire().await?;
        let idle = self.idle.lock().expect("pool lock").pop();
        let mut sender = match idle {
            Some(sender) => sender,
            None => connect(port).await?,
        };
        sender.ready().await?;
        sender.send_request(post(port, "/append", id)?).await?.into_body().collect().await?;
        self.idle.lock().expect("pool lock").push(sender);
        Ok(())
    }
}

async fn turn_with_hyper(pool: Arc<AppendPool>, port: u16, id: usize) -> Result<(), Error> {
    let stream = tokio::spawn(async move {
        let mut sender = connect(port).await?;
        let response = sender.send_request(post(port, "/stream", id)?).await?;
        response.into_body().collect().await?;
        Ok::<_, Error>(())
    });
    pool.append(port, id).await?;
    stream.await?
}

/// hyper-util's pooled client: what reqwest wraps, without reqwest's own layers.
type Legacy = hyper_util::client::legacy::Client<hyper_util::client::legacy::connect::HttpConnector, Full<Bytes>>;

async fn turn_with_legacy(client: Legacy, appends: Arc<Semaphore>, port: u16, id: usize) -> Result<(), Error> {
    let stream_client = client.clone();
    let stream = tokio::spawn(async move {
        stream_client.request(post(port, "/stream", id)?).await?.into_body().collect().await?;
        Ok::<_, Error>(())
    });
    {
        let _permit = appends.acquire().await?;
        client.request(post(port, "/append", id)?).await?.into_body().collect().await?;
    }
    stream.await?
}

#[allow(clippy::print_stdout, reason = "an example reports its measurements on stdout")]
async fn run(mode: &str, port: u16, n: usize) -> Result<(), Error> {
    if mode == "reqwest" {
        // The bench's own floor, from the library: the client a RunSSE transport with default settings uses.
        let stats = floor_turns(&format!("http://127.0.0.1:{port}"), n).await?;
        let ms = |d: std::time::Duration| d.as_secs_f64() * 1000.0;
        let (wall, p50, p99) = (ms(stats.wall), ms(stats.first_p50), ms(stats.first_p99));
        println!("{mode}: {n} turns, wall {wall:.0} ms, first byte p50 {p50:.0} ms, p99 {p99:.0} ms");
        return Ok(());
    }
    let pool = Arc::new(AppendPool { idle: Mutex::new(Vec::new()), in_use: Semaphore::new(APPEND_CONNECTIONS) });
    let legacy = {
        let mut connector = hyper_util::client::legacy::connect::HttpConnector::new();
        connector.set_nodelay(true);
        hyper_util::client::legacy::Client::builder(hyper_util::rt::TokioExecutor::new())
            .pool_max_idle_per_host(2 * APPEND_CONNECTIONS)
            .build(connector)
    };
    let appends = Arc::new(Semaphore::new(APPEND_CONNECTIONS));
    let t0 = Instant::now();
    let turns: Vec<_> = (0..n)
        .map(|id| {
            let (mode, pool, legacy, appends) = (mode.to_string(), pool.clone(), legacy.clone(), appends.clone());
            tokio::spawn(async move {
                let start = Instant::now();
                match mode.as_str() {
                    "hyper" => turn_with_hyper(pool, port, id).await?,
                    _ => turn_with_legacy(legacy, appends, port, id).await?,
                }
                Ok::<_, Error>(start.elapsed().as_secs_f64() * 1000.0)
            })
        })
        .collect();
    let mut firsts = Vec::with_capacity(n);
    for turn in turns {
        firsts.push(turn.await??);
    }
    let wall = t0.elapsed().as_secs_f64() * 1000.0;
    firsts.sort_by(f64::total_cmp);
    let at = |p: usize| firsts[(p * n / 100).min(n - 1)];
    println!("{mode}: {n} turns, wall {wall:.0} ms, first byte p50 {:.0} ms, p99 {:.0} ms", at(50), at(99));
    Ok(())
}

fn main() -> Result<(), Error> {
    #[allow(clippy::let_underscore_must_use, reason = "a provider installed already is as good")]
    let _ = rustls::crypto::ring::default_provider().install_default();
    let args: Vec<String> = std::env::args().skip(1).collect();
    let runtime = tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build()?;
    match args.first().map(String::as_str) {
        Some("server") => runtime.block_on(server()),
        Some(mode @ ("hyper" | "legacy" | "reqwest")) => {
            let port = args.get(1).ok_or("PORT missing")?.parse()?;
            let n = args.get(2).map_or(Ok(1000), |v| v.parse())?;
            runtime.block_on(run(mode, port, n))
        }
        _ => Err("usage: h1_floor server | h1_floor hyper|legacy|reqwest PORT [N]".into()),
    }
}
