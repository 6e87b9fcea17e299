//! HTTP side of the embedded backend: routes, per-request-id runs, seqno reassembly, recording.

use std::collections::{BTreeMap, HashMap};
use std::convert::Infallible;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use bytes::{Bytes, BytesMut};
use http::{HeaderMap, Method, Request, Response, StatusCode, Version};
use http_body_util::{combinators::BoxBody, BodyExt, Full, StreamBody};
use hyper::body::Incoming;
use hyper_util::rt::{TokioExecutor, TokioIo};
use prost::Message as _;
use tokio::net::TcpListener;
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

use super::append::{Append, AppendError, AppendReader};
use super::auth::{self, Auth, AuthOptions};
use super::client_message;
use super::inbox::{Inbox, Queued};
use super::models::Models;
use super::record::{header_map, AppendRecord, MessageRecord, RunRecord, StreamKind};
use super::run_checks::RunChecks;
use super::scenario::{Scenario, Step};
use super::script::{self, BodyItem, TurnContext};
use cursor_acp_core::connect::{self, Code, ConnectError, Encoding, Frame as EnvFrame, FrameDecoder, Limits};
use cursor_acp_core::error::CoreError;
use cursor_acp_core::models::GET_USABLE_MODELS_PATH;
use cursor_acp_core::proto::aiserver::v1::BidiRequestId;
use cursor_acp_core::protojson;
use cursor_acp_core::transport::{BIDI_APPEND_PATH, RUN_PATH, RUN_SSE_PATH};

type Body = BoxBody<Bytes, std::io::Error>;

/// A running embedded backend. Dropping it (or [`close`](Self::close)) stops it.
pub struct EmbeddedBackend {
    addr: SocketAddr,
    state: Arc<State>,
    shutdown: CancellationToken,
}

/// How the backend behaves besides its scenario (`startEmbeddedBackend({ auth, models })`).
#[derive(Debug, Clone, Default, serde::Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct BackendOptions {
    /// Sign-in, token lifetimes, and whether agent RPCs need a token (by default they do not:
    /// the demo and plain tests run without credentials).
    #[serde(default)]
    pub auth: Option<AuthOptions>,
    /// The `GetUsableModels` catalogue as `ModelDetails` in proto3 JSON (default: two models of
    /// the backend's own). Run requests must name one of them, or `default` (Auto).
    #[serde(default)]
    pub models: Option<Vec<serde_json::Value>>,
}

struct State {
    scenario: Scenario,
    auth: Auth,
    checks: Arc<RunChecks>,
    runs: Mutex<Runs>,
    records: Mutex<Vec<RunRecord>>,
    turns_started: AtomicUsize,
    connections_accepted: AtomicUsize,
    limits: Limits,
    /// The scenario reports exec results in tool calls (`Scenario::echoes_exec_results`).
    echo_results: bool,
}

/// Server-side state of one request id.
struct Run {
    id: String,
    /// Its entry in `records`, when recording.
    record: Option<usize>,
    /// When an append or the stream request first named this id.
    created: Instant,
    /// The `authorization` the stream was admitted with: its appends may carry it after it
    /// expires (a stream, once open, lives on).
    stream_authorization: Mutex<Option<String>>,
    reorder: Mutex<Reorder>,
    inbox_tx: mpsc::UnboundedSender<Queued>,
    inbox_rx: Mutex<Option<mpsc::UnboundedReceiver<Queued>>>,
}

impl Run {
    /// Whether its stream request has arrived (and taken the inbox).
    fn started(&self) -> bool {
        self.inbox_rx.lock().expect("inbox lock").is_none()
    }
}

/// How long a run whose stream never arrives is kept (see [`Runs::sweep_orphans`]).
const ORPHAN_RUN_TTL: Duration = Duration::from_secs(60);

/// How often the runs are looked through for orphans. Not on every new run: with 10,000 turns
/// in play, that made each new run look at every other, and the backend's CPU grew with the
/// square of the turns (15% of a 10,000-session run's samples, on the cores the client shares).
const ORPHAN_SWEEP_INTERVAL: Duration = Duration::from_secs(5);

/// The runs in play, by request id.
#[derive(Default)]
struct Runs {
    by_id: HashMap<String, Arc<Run>>,
    /// When orphans were last swept out.
    swept: Option<Instant>,
}

impl Runs {
    /// Runs whose stream never came (appends of an id the client gave up on, or that arrived
    /// after their stream was over) go after [`ORPHAN_RUN_TTL`]: a long-lived backend that does
    /// not record keeps only the runs in play. Looks at most once per [`ORPHAN_SWEEP_INTERVAL`].
    fn sweep_orphans(&mut self, now: Instant) {
        if self.swept.is_some_and(|at| now.saturating_duration_since(at) < ORPHAN_SWEEP_INTERVAL) {
            return;
        }
        self.swept = Some(now);
        self.by_id.retain(|_, run| run.started() || now.saturating_duration_since(run.created) < ORPHAN_RUN_TTL);
    }
}

/// Appends may arrive out of order (16 in flight); messages are delivered by seqno.
#[derive(Default)]
struct Reorder {
    next: i64,
    waiting: BTreeMap<i64, (Bytes, Queued)>,
}

impl EmbeddedBackend {
    /// Starts a backend for `scenario` on an ephemeral loopback port.
    pub async fn start(scenario: Scenario) -> Result<Self, CoreError> {
        Self::start_on(scenario, 0).await
    }

    /// Starts on a given loopback port (0 = any).
    pub async fn start_on(scenario: Scenario, port: u16) -> Result<Self, CoreError> {
        Self::start_with(scenario, port, BackendOptions::default()).await
    }

    /// Starts on a given loopback port (0 = any) with `options`.
    pub async fn start_with(scenario: Scenario, port: u16, options: BackendOptions) -> Result<Self, CoreError> {
        let models = Models::new(options.models.as_deref())?;
        let listener = TcpListener::bind(("127.0.0.1", port))
            .await
            .map_err(|e| CoreError::Network(format!("embedded backend cannot listen on 127.0.0.1:{port}: {e}")))?;
        let addr = listener.local_addr().map_err(|e| CoreError::Network(e.to_string()))?;
        let state = Arc::new(State {
            echo_results: scenario.echoes_exec_results(),
            scenario,
            auth: Auth::new(options.auth.unwrap_or_default()),
            checks: Arc::new(RunChecks { models }),
            runs: Mutex::new(Runs::default()),
            records: Mutex::new(Vec::new()),
            turns_started: AtomicUsize::new(0),
            connections_accepted: AtomicUsize::new(0),
            limits: Limits::default(),
        });
        let shutdown = CancellationToken::new();
        tokio::spawn(accept_loop(listener, state.clone(), shutdown.clone()));
        // The schema exec replies are checked against (`client_message`), built now rather than
        // in the middle of a turn when the first reply arrives (8 ms once per process, release).
        tokio::task::spawn_blocking(cursor_acp_core::descriptors::whole_schema);
        Ok(EmbeddedBackend { addr, state, shutdown })
    }

    /// `http://127.0.0.1:PORT`
    pub fn url(&self) -> String {
        format!("http://{}", self.addr)
    }

    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// The turns recorded so far, one entry per request id, in first-contact order. Streams
    /// that were prewarms are in [`EmbeddedBackend::prewarms`] instead, and a stream whose first
    /// message has not arrived is in neither until it does (or ends).
    pub fn records(&self) -> Vec<RunRecord> {
        self.state
            .records
            .lock()
            .expect("records lock")
            .iter()
            .filter(|r| r.kind() == StreamKind::Turn)
            .cloned()
            .collect()
    }

    /// The streams whose first message was a `prewarm_request`, in first-contact order. They
    /// play no turn of the scenario.
    pub fn prewarms(&self) -> Vec<RunRecord> {
        self.state
            .records
            .lock()
            .expect("records lock")
            .iter()
            .filter(|r| r.kind() == StreamKind::Prewarm)
            .cloned()
            .collect()
    }

    /// Moves the sign-in service's clock ahead by `by`: tokens it issued expire as if that time
    /// had passed (and new ones are issued from the later time), without a test waiting for it.
    pub fn advance_clock(&self, by: Duration) {
        self.state.auth.advance_clock(by);
    }

    /// TCP connections accepted so far (clients are expected to reuse them).
    pub fn connections_accepted(&self) -> usize {
        self.state.connections_accepted.load(Ordering::Relaxed)
    }

    /// Stops accepting and cuts every open connection.
    pub fn close(&self) {
        self.shutdown.cancel();
    }
}

impl Drop for EmbeddedBackend {
    fn drop(&mut self) {
        self.shutdown.cancel();
    }
}

async fn accept_loop(listener: TcpListener, state: Arc<State>, shutdown: CancellationToken) {
    loop {
        let (stream, _) = tokio::select! {
            _ = shutdown.cancelled() => return,
            r = listener.accept() => match r {
                Ok(s) => s,
                Err(_) => {
                    tokio::time::sleep(Duration::from_millis(10)).await;
                    continue;
                }
            },
        };
        #[allow(
            clippy::let_underscore_must_use,
            reason = "Nagle only delays small frames; a socket that refuses the option still works"
        )]
        let _ = stream.set_nodelay(true);
        state.connections_accepted.fetch_add(1, Ordering::Relaxed);
        let state = state.clone();
        let shutdown = shutdown.clone();
        tokio::spawn(async move {
            // HTTP/1.1 and h2c (prior knowledge) on the same port.
            let mut builder = hyper_util::server::conn::auto::Builder::new(TokioExecutor::new());
            // The client's windows, so that an upload over h2 is not held to hyper's 1 MiB per
            // round trip either.
            builder
                .http2()
                .initial_stream_window_size(cursor_acp_core::transport::H2_STREAM_WINDOW)
                .initial_connection_window_size(cursor_acp_core::transport::H2_CONNECTION_WINDOW);
            if let Some(max) = state.scenario.h2_max_concurrent_streams {
                builder.http2().max_concurrent_streams(max);
            }
            if state.scenario.http1_only {
                builder = builder.http1_only();
            }
            let service = hyper::service::service_fn(move |req| handle(state.clone(), req));
            let conn = builder.serve_connection(TokioIo::new(stream), service);
            tokio::select! {
                _ = conn => {}
                _ = shutdown.cancelled() => {}
            }
        });
    }
}

fn full(status: StatusCode, content_type: &str, body: impl Into<Bytes>) -> Response<Body> {
    Response::builder()
        .status(status)
        .header("content-type", content_type)
        .body(Full::new(body.into()).map_err(|never: Infallible| match never {}).boxed())
        .expect("static response parts are valid")
}

/// A Connect unary-style error response.
fn error_response(err: &ConnectError) -> Response<Body> {
    let status = StatusCode::from_u16(err.http_status.unwrap_or(err.code.http_status()))
        .unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
    full(status, "application/json", err.to_json().to_string())
}

/// An auth endpoint's answer as a JSON response.
fn json_answer(answer: auth::Answer) -> Response<Body> {
    let status = StatusCode::from_u16(answer.status).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
    full(status, "application/json", answer.body.to_string())
}

fn query(req: &Request<Incoming>) -> HashMap<String, String> {
    url::form_urlencoded::parse(req.uri().query().unwrap_or_default().as_bytes()).into_owned().collect()
}

fn authorization(headers: &HeaderMap) -> Option<&str> {
    headers.get("authorization").and_then(|v| v.to_str().ok())
}

/// `GetUsableModels`: the catalogue, for a client with a valid token.
async fn handle_usable_models(state: Arc<State>, req: Request<Incoming>) -> Result<Response<Body>, ConnectError> {
    state.auth.check(authorization(req.headers())).map_err(|r| r.error())?;
    let _request = read_body(req.into_body(), 64 * 1024).await?;
    Ok(full(StatusCode::OK, "application/proto", state.checks.models.usable_models()))
}

async fn handle(state: Arc<State>, req: Request<Incoming>) -> Result<Response<Body>, Infallible> {
    if req.method() == Method::GET {
        return Ok(match req.uri().path() {
            auth::POLL_PATH => json_answer(state.auth.poll(&query(&req))),
            auth::LOGIN_PAGE_PATH => json_answer(state.auth.approve(&query(&req))),
            _ => full(StatusCode::NOT_FOUND, "application/json", r#"{"error":"not found"}"#),
        });
    }
    if req.method() != Method::POST {
        return Ok(error_response(&ConnectError::new(Code::Unimplemented, "only GET and POST are served")));
    }
    let response = match req.uri().path() {
        RUN_SSE_PATH => handle_run_sse(state, req).await,
        BIDI_APPEND_PATH => handle_append(state, req).await,
        RUN_PATH => handle_run(state, req).await,
        GET_USABLE_MODELS_PATH => handle_usable_models(state, req).await,
        auth::EXCHANGE_API_KEY_PATH => Ok(json_answer(state.auth.exchange(authorization(req.headers())))),
        auth::REFRESH_PATH => match read_body(req.into_body(), 64 * 1024).await {
            Ok(body) => Ok(json_answer(state.auth.refresh(&body))),
            Err(e) => Err(e),
        },
        other => Err(ConnectError::new(Code::Unimplemented, format!("no route {other}"))),
    };
    Ok(response.unwrap_or_else(|e| error_response(&e)))
}

impl State {
    /// The run of `request_id`, made on first contact (its stream request, or an append that
    /// came first).
    fn run(&self, request_id: &str) -> Arc<Run> {
        let mut runs = self.runs.lock().expect("runs lock");
        if let Some(run) = runs.by_id.get(request_id) {
            return run.clone();
        }
        if !self.scenario.records() {
            runs.sweep_orphans(Instant::now());
        }
        let record = self.scenario.records().then(|| {
            let mut records = self.records.lock().expect("records lock");
            records.push(RunRecord { request_id: request_id.to_string(), ..Default::default() });
            records.len() - 1
        });
        let (tx, rx) = mpsc::unbounded_channel();
        let run = Arc::new(Run {
            id: request_id.to_string(),
            record,
            created: Instant::now(),
            stream_authorization: Mutex::new(None),
            reorder: Mutex::new(Reorder::default()),
            inbox_tx: tx,
            inbox_rx: Mutex::new(Some(rx)),
        });
        runs.by_id.insert(request_id.to_string(), run.clone());
        run
    }

    /// The stream of `run` is over. Without recording nothing of it is kept (late appends make
    /// an orphan run, gone in time); with recording its record must stay whole, so the run stays.
    fn finish(&self, run: &Run) {
        if !self.scenario.records() {
            self.runs.lock().expect("runs lock").by_id.remove(&run.id);
        }
    }

    /// A request's headers for its record, credentials redacted.
    fn recorded_headers(&self, headers: &HeaderMap) -> BTreeMap<String, String> {
        header_map(headers, |token| self.auth.describe_issued(token))
    }

    fn with_record(&self, run: &Run, f: impl FnOnce(&mut RunRecord)) {
        if let Some(index) = run.record {
            let mut records = self.records.lock().expect("records lock");
            f(&mut records[index]);
        }
    }

    /// Records (when enabled) and delivers one client message (`msg` is `payload` decoded).
    fn deliver(&self, run: &Run, seqno: Option<i64>, compressed: bool, payload: &[u8], mut msg: Queued) {
        if self.echo_results {
            // Queued whole (not as its head): a tool call of the scenario reports its result.
            msg = client_message::decode_whole(payload).unwrap_or(msg);
        }
        if self.scenario.records() {
            let json = protojson::to_json("agent.v1.AgentClientMessage", payload).unwrap_or(serde_json::Value::Null);
            let kind = script::client_kind(&msg).to_string();
            self.with_record(run, |r| r.messages.push(MessageRecord { seqno, kind, compressed, message: json }));
        }
        #[allow(
            clippy::let_underscore_must_use,
            reason = "the run ended and dropped its inbox; nothing waits for this message"
        )]
        let _ = run.inbox_tx.send(msg);
    }

    /// Lets a stream in if its token is good (always, unless auth is required); a refused one
    /// is recorded with how it was refused and answered HTTP 401.
    fn admit(&self, run: &Run, transport: &str, headers: &HeaderMap) -> Result<(), ConnectError> {
        let authorization = authorization(headers);
        if let Err(refusal) = self.auth.check(authorization) {
            let err = refusal.error();
            self.with_record(run, |r| {
                r.transport = transport.to_string();
                r.headers = self.recorded_headers(headers);
                r.outcome = Some(format!("refused: {}", err.message));
            });
            return Err(err);
        }
        *run.stream_authorization.lock().expect("run lock") = authorization.map(str::to_string);
        Ok(())
    }

    /// An append's token: the one its stream was admitted with, or any good one.
    fn admit_append(&self, run: &Run, headers: &HeaderMap) -> Result<(), ConnectError> {
        let authorization = authorization(headers);
        if authorization.is_some()
            && *run.stream_authorization.lock().expect("run lock") == authorization.map(str::to_string)
        {
            return Ok(());
        }
        self.auth.check(authorization).map_err(|refusal| {
            let err = refusal.error();
            // The client may give up on this refusal before its stream request arrives: the
            // record then says why it ended, and counts as the attempt it was.
            self.with_record(run, |r| {
                r.outcome.get_or_insert_with(|| format!("refused: {} (append)", err.message));
            });
            err
        })
    }

    /// Notes a stream request in its run's record.
    fn note_stream(&self, run: &Run, transport: &str, headers: &HeaderMap) {
        self.with_record(run, |r| {
            r.transport = transport.to_string();
            r.headers = self.recorded_headers(headers);
        });
    }

    /// Picks the next scenario turn for a stream and notes it in the record.
    fn take_turn(&self, run: &Run) -> Vec<Step> {
        let index = self.turns_started.fetch_add(1, Ordering::SeqCst);
        self.with_record(run, |r| r.turn_index = Some(index));
        self.scenario.turn(index).to_vec()
    }

    /// The next turn, taken now if it answers the stream request with an HTTP error (which is
    /// decided before any message of the stream arrives).
    fn take_http_error_turn(&self, run: &Run) -> Option<Vec<Step>> {
        let index = self.turns_started.load(Ordering::SeqCst);
        let steps = self.scenario.turn(index);
        if !matches!(steps.first(), Some(Step::HttpError { .. })) {
            return None;
        }
        self.turns_started.compare_exchange(index, index + 1, Ordering::SeqCst, Ordering::SeqCst).ok()?;
        self.with_record(run, |r| r.turn_index = Some(index));
        Some(steps.to_vec())
    }

    /// Starts the script for a stream and returns its streaming response. The turn it plays is
    /// picked when the stream's first message arrives: a stream that starts with a
    /// `prewarm_request` (the official client sends one while the user types) is answered with
    /// its end at once and plays no turn.
    fn stream_response(self: &Arc<Self>, run: Arc<Run>, accepts_gzip: bool) -> Response<Body> {
        let inbox = run.inbox_rx.lock().expect("inbox lock").take();
        let Some(inbox) = inbox else {
            return error_response(&ConnectError::new(Code::AlreadyExists, "this request id already has a stream"));
        };
        let http_error = self.take_http_error_turn(&run);
        if let Some(Step::HttpError { status, body, retry_after }) = http_error.as_ref().and_then(|s| s.first()) {
            let status = StatusCode::from_u16(*status).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
            let body = body.clone().unwrap_or_else(|| {
                ConnectError::new(
                    Code::from_http_status(status.as_u16()),
                    format!("embedded backend: HTTP {}", status.as_u16()),
                )
                .to_json()
                .to_string()
            });
            self.with_record(&run, |r| r.outcome = Some(format!("http {}", status.as_u16())));
            self.finish(&run);
            let mut response = full(status, "application/json", body);
            if let Some(value) = retry_after.as_deref().and_then(|v| http::HeaderValue::from_str(v).ok()) {
                response.headers_mut().insert(http::header::RETRY_AFTER, value);
            }
            return response;
        }
        let gzip = self.scenario.gzip_responses && accepts_gzip;
        let (out, mut rx) = mpsc::channel::<BodyItem>(64);
        let ctx = TurnContext {
            out,
            inbox: Inbox::new(inbox),
            gzip,
            wait_timeout: Duration::from_millis(self.scenario.wait_timeout_ms.unwrap_or(30_000)),
            heartbeat_ms: self.scenario.heartbeat_ms,
            checks: self.checks.clone(),
            conversation: None,
        };
        let state = self.clone();
        tokio::spawn(async move {
            let mut ctx = ctx;
            let first = tokio::select! {
                first = tokio::time::timeout(ctx.wait_timeout, ctx.inbox.first_is_prewarm()) => first.ok(),
                _ = ctx.out.closed() => Some(None),
            };
            let outcome = match first {
                Some(None) => "client gone".to_string(),
                Some(Some(true)) => ctx.end(None).await,
                // A turn, or nothing within the wait (the turn's script then waits for its run
                // request, and says so).
                _ => script::run_turn(state.take_turn(&run), ctx).await,
            };
            state.with_record(&run, |r| r.outcome = Some(outcome));
            state.finish(&run);
        });
        let body = StreamBody::new(futures::stream::poll_fn(move |cx| rx.poll_recv(cx)));
        let content_type =
            self.scenario.response_content_type.clone().unwrap_or_else(|| "application/connect+proto".to_string());
        let mut builder = Response::builder().status(StatusCode::OK).header("content-type", content_type);
        if gzip {
            builder = builder.header("connect-content-encoding", "gzip");
        }
        builder.body(BodyExt::boxed(body)).expect("static response parts are valid")
    }
}

fn accepts_gzip(headers: &HeaderMap) -> bool {
    headers
        .get("connect-accept-encoding")
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v.split(',').any(|e| e.trim().eq_ignore_ascii_case("gzip")))
}

/// Reads a whole request body of at most `max` bytes into one buffer sized from its declared
/// length: each chunk is copied once as it arrives and released, so a 24 MiB append costs
/// 24 MiB of memory, not its chunks plus their concatenation.
async fn read_body(mut body: Incoming, max: usize) -> Result<Bytes, ConnectError> {
    let too_large = || ConnectError::new(Code::InvalidArgument, format!("request body exceeds {max} bytes"));
    let declared = usize::try_from(http_body::Body::size_hint(&body).lower()).unwrap_or(usize::MAX);
    if declared > max {
        return Err(too_large());
    }
    let mut out = BytesMut::with_capacity(declared);
    while let Some(frame) = body.frame().await {
        let frame =
            frame.map_err(|e| ConnectError::new(Code::InvalidArgument, format!("cannot read request body: {e}")))?;
        if let Ok(data) = frame.into_data() {
            if out.len() + data.len() > max {
                return Err(too_large());
            }
            out.extend_from_slice(&data);
        }
    }
    Ok(out.freeze())
}

async fn handle_run_sse(state: Arc<State>, req: Request<Incoming>) -> Result<Response<Body>, ConnectError> {
    let (parts, body) = req.into_parts();
    let body = read_body(body, state.limits.max_frame + 5).await?;
    let mut decoder = FrameDecoder::new(state.limits);
    decoder.set_encoding(Encoding::of_stream(&parts.headers));
    decoder.push(&body);
    let frame =
        decoder.next_frame().map_err(|e| ConnectError::new(Code::InvalidArgument, format!("RunSSE body: {e}")))?;
    let payload = match frame {
        Some(EnvFrame::Message(p)) => p,
        Some(EnvFrame::End(_)) => {
            return Err(ConnectError::new(Code::InvalidArgument, "RunSSE body must not have the end-stream flag"))
        }
        None => return Err(ConnectError::new(Code::InvalidArgument, "RunSSE body must be one Connect envelope")),
    };
    if decoder.buffered() != 0 {
        return Err(ConnectError::new(Code::InvalidArgument, "RunSSE body must be exactly one envelope"));
    }
    let id = BidiRequestId::decode(payload)
        .map_err(|e| ConnectError::new(Code::InvalidArgument, format!("RunSSE body is not a BidiRequestId: {e}")))?;
    if id.request_id.is_empty() {
        return Err(ConnectError::new(Code::InvalidArgument, "BidiRequestId.request_id is empty"));
    }
    let compressed = decoder.last_flags() & connect::FLAG_COMPRESSED != 0;
    let run = state.run(&id.request_id);
    state.admit(&run, "sse", &parts.headers)?;
    state.note_stream(&run, "sse", &parts.headers);
    state.with_record(&run, |r| r.request_id_compressed = compressed);
    Ok(state.stream_response(run, accepts_gzip(&parts.headers)))
}

/// Reads an append body as it arrives (hex `data` decoded on the way, see [`AppendReader`]).
async fn read_append(mut body: Incoming, max: usize, keep_hex: bool) -> Result<Append, ConnectError> {
    let declared = usize::try_from(http_body::Body::size_hint(&body).lower()).unwrap_or(usize::MAX);
    if declared > max {
        return Err(invalid_append(AppendError::TooLarge(max)));
    }
    let mut reader = AppendReader::new(max, keep_hex);
    while let Some(frame) = body.frame().await {
        let frame =
            frame.map_err(|e| ConnectError::new(Code::InvalidArgument, format!("cannot read request body: {e}")))?;
        if let Ok(data) = frame.into_data() {
            reader.push(&data).map_err(invalid_append)?;
        }
    }
    reader.finish().map_err(invalid_append)
}

fn invalid_append(err: AppendError) -> ConnectError {
    ConnectError::new(Code::InvalidArgument, err.to_string())
}

async fn handle_append(state: Arc<State>, req: Request<Incoming>) -> Result<Response<Body>, ConnectError> {
    let (parts, body) = req.into_parts();
    // Hex doubles the payload; allow for it.
    let max = state.limits.max_frame * 2 + 1024;
    let keep_hex = state.scenario.records();
    let content_encoding = parts.headers.get("content-encoding").and_then(|v| v.to_str().ok()).map(str::to_string);
    let append = match content_encoding.as_deref() {
        None | Some("identity") => read_append(body, max, keep_hex).await?,
        Some("gzip") => {
            let body = connect::gunzip_capped(&read_body(body, max).await?, max)
                .map_err(|e| ConnectError::new(Code::InvalidArgument, format!("BidiAppend body: {e}")))?;
            let mut reader = AppendReader::new(max, keep_hex);
            reader.push(&body).and_then(|()| reader.finish()).map_err(invalid_append)?
        }
        Some(other) => {
            return Err(ConnectError::new(Code::Unimplemented, format!("unsupported content-encoding {other}")));
        }
    };
    let request_id = append.request_id.clone();
    if request_id.is_empty() {
        return Err(ConnectError::new(Code::InvalidArgument, "BidiAppendRequest.request_id is empty"));
    }
    let run = state.run(&request_id);
    state.admit_append(&run, &parts.headers)?;
    if state.scenario.records() {
        let record = AppendRecord {
            seqno: append.append_seqno,
            data: append.data_hex.clone().unwrap_or_default(),
            data_binary: !append.data_binary.is_empty(),
            content_encoding: content_encoding.clone(),
            headers: state.recorded_headers(&parts.headers),
        };
        state.with_record(&run, |r| r.appends.push(record));
    }
    if let Some(fault) =
        state.scenario.append_fault.as_ref().filter(|f| f.seqno.is_none_or(|n| n == append.append_seqno))
    {
        if let Some(ms) = fault.delay_ms {
            tokio::time::sleep(Duration::from_millis(ms)).await;
        }
        if let Some(status) = fault.status {
            let mut err = ConnectError::new(
                Code::from_http_status(status),
                format!("embedded backend: append {} refused", append.append_seqno),
            );
            err.http_status = Some(status);
            return Err(err);
        }
    }
    // Like Cursor's servers: hex `data` first, else `data_binary` (docs/protocol.md).
    let payload = if append.data.is_empty() { append.data_binary } else { append.data };
    // Decoded once, here: a payload that is not a message is refused before it is queued.
    let msg = client_message::decode(&payload).map_err(|e| {
        ConnectError::new(Code::InvalidArgument, format!("append payload is not an AgentClientMessage: {e}"))
    })?;
    {
        // Delivery happens under the lock: two appends finishing together must not overtake
        // each other between reassembly and delivery.
        let mut reorder = run.reorder.lock().expect("reorder lock");
        if append.append_seqno < reorder.next || reorder.waiting.contains_key(&append.append_seqno) {
            return Err(ConnectError::new(
                Code::InvalidArgument,
                format!("duplicate append_seqno {} for request {request_id}", append.append_seqno),
            ));
        }
        if append.append_seqno == reorder.next {
            // In order, as most are: delivered without a stop in the map.
            reorder.next += 1;
            state.deliver(&run, Some(append.append_seqno), false, &payload, msg);
        } else {
            reorder.waiting.insert(append.append_seqno, (payload, msg));
        }
        loop {
            let next = reorder.next;
            let Some((payload, msg)) = reorder.waiting.remove(&next) else { break };
            reorder.next += 1;
            state.deliver(&run, Some(next), false, &payload, msg);
        }
    }
    Ok(full(StatusCode::OK, "application/proto", Bytes::new()))
}

async fn handle_run(state: Arc<State>, req: Request<Incoming>) -> Result<Response<Body>, ConnectError> {
    if req.version() != Version::HTTP_2 {
        // What Cursor's load balancer answers to Run over HTTP/1.1.
        let mut err = ConnectError::new(Code::Unknown, "Run needs HTTP/2");
        err.http_status = Some(464);
        return Err(err);
    }
    let (parts, mut body) = req.into_parts();
    let request_id = parts
        .headers
        .get("x-request-id")
        .and_then(|v| v.to_str().ok())
        .map(str::to_string)
        .unwrap_or_else(|| uuid::Uuid::new_v4().to_string());
    let run = state.run(&request_id);
    state.admit(&run, "h2", &parts.headers)?;
    state.note_stream(&run, "h2", &parts.headers);
    let response = state.stream_response(run.clone(), accepts_gzip(&parts.headers));
    let reader_state = state.clone();
    let encoding = Encoding::of_stream(&parts.headers);
    tokio::spawn(async move {
        let mut decoder = FrameDecoder::new(reader_state.limits);
        decoder.set_encoding(encoding);
        while let Some(frame) = body.frame().await {
            let Ok(frame) = frame else { break };
            let Ok(data) = frame.into_data() else { continue };
            decoder.push(&data);
            loop {
                match decoder.next_frame() {
                    Ok(Some(EnvFrame::Message(payload))) => {
                        let compressed = decoder.last_flags() & connect::FLAG_COMPRESSED != 0;
                        if let Ok(msg) = client_message::decode(&payload) {
                            reader_state.deliver(&run, None, compressed, &payload, msg);
                        }
                    }
                    Ok(Some(EnvFrame::End(_))) | Ok(None) => break,
                    Err(e) => {
                        reader_state.with_record(&run, |r| r.outcome = Some(format!("client sent bad frame: {e}")));
                        return;
                    }
                }
            }
        }
    });
    Ok(response)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn run(id: &str, created: Instant, started: bool) -> Arc<Run> {
        let (tx, rx) = mpsc::unbounded_channel();
        Arc::new(Run {
            id: id.to_string(),
            record: None,
            created,
            stream_authorization: Mutex::new(None),
            reorder: Mutex::new(Reorder::default()),
            inbox_tx: tx,
            inbox_rx: Mutex::new((!started).then_some(rx)),
        })
    }

    #[test]
    fn orphan_runs_go_after_their_time_and_are_looked_for_only_now_and_then() {
        let t0 = Instant::now();
        let mut runs = Runs::default();
        runs.by_id.insert("orphan".into(), run("orphan", t0, false));
        runs.by_id.insert("playing".into(), run("playing", t0, true));
        let before_its_time = t0 + ORPHAN_RUN_TTL - Duration::from_secs(1);
        runs.sweep_orphans(before_its_time);
        assert_eq!(runs.by_id.len(), 2, "an orphan younger than its time stays");
        // Past its time, but the last look was a moment ago: not looked at again yet.
        runs.sweep_orphans(before_its_time + Duration::from_secs(2));
        assert!(runs.by_id.contains_key("orphan"));
        runs.sweep_orphans(before_its_time + ORPHAN_SWEEP_INTERVAL);
        assert!(!runs.by_id.contains_key("orphan"), "the orphan is gone");
        assert!(runs.by_id.contains_key("playing"), "a run whose stream came stays, however old");
    }
}
