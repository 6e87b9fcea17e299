//! The HTTP clients behind a transport: TLS set up once per process, one reqwest client per
//! transport, and for HTTP/2 as many connections as the streams in flight need.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Once, OnceLock};
use std::time::Duration;

use super::config::{TransportConfig, TransportKind, H2_CONNECTION_WINDOW, H2_STREAM_WINDOW};
use crate::error::{error_chain, CoreError};

/// Idle keep-alive connections kept per host for streams, beyond those for appends.
const IDLE_STREAM_CONNECTIONS: usize = 32;

static CRYPTO_PROVIDER: Once = Once::new();

/// The process's certificate verifier, or why the system has none.
type SharedVerifier = Result<Arc<rustls_platform_verifier::Verifier>, String>;

/// The crypto provider clients are made with: the process's default (ours, unless another
/// library installed one first).
fn crypto_provider() -> Arc<rustls::crypto::CryptoProvider> {
    rustls::crypto::CryptoProvider::get_default()
        .cloned()
        .unwrap_or_else(|| Arc::new(rustls::crypto::ring::default_provider()))
}

/// The certificate verifier every client shares, made at the first call.
///
/// Left to itself, reqwest makes a certificate verifier for every client, and the platform
/// verifier reads and parses the system's certificate store as it is made: about 5 ms on
/// Linux, on the caller's thread (the JS thread, for `new AgentClient()`), every time. It is
/// made once per process instead, and [`prepare_tls_in_background`] makes it before the first
/// client is asked for.
fn shared_verifier(provider: &Arc<rustls::crypto::CryptoProvider>) -> &'static SharedVerifier {
    static VERIFIER: OnceLock<SharedVerifier> = OnceLock::new();
    VERIFIER.get_or_init(|| {
        rustls_platform_verifier::Verifier::new(provider.clone()).map(Arc::new).map_err(|e| e.to_string())
    })
}

/// Makes the process's TLS setup (the crypto provider, the certificate verifier and with it
/// the system's certificate store) on a thread of its own, so that the first client made
/// finds it ready; a client made meanwhile waits for that same setup rather than making
/// another. The addon's `prepareTls()`: the stdio agent calls it once `initialize` is answered,
/// and the store's reading is off its JavaScript thread. Not made as the addon loads: a host
/// may still set `SSL_CERT_FILE` after loading it.
/// Once per process: the first call gives the thread (a caller may wait for it), later calls
/// `None`, as does a system that cannot start a thread (the first client then makes the setup
/// on its own thread, as it would without this). Nothing else is reported: a system without
/// certificates is said by the first `https` client.
pub fn prepare_tls_in_background() -> Option<std::thread::JoinHandle<()>> {
    static STARTED: Once = Once::new();
    let mut thread = None;
    STARTED.call_once(|| {
        let started = std::thread::Builder::new().name("acp-tls-setup".into()).spawn(|| {
            install_crypto_provider();
            shared_verifier(&crypto_provider());
        });
        match started {
            Ok(handle) => thread = Some(handle),
            Err(e) => tracing::debug!("the TLS setup thread could not start: {e}"),
        }
    });
    thread
}

/// The TLS setup of a client of `kind` for an `https` base URL or a plain one, with the
/// process's one verifier ([`shared_verifier`]). Where the system has no certificates there is
/// none; a client of a plain `http` URL (the embedded backend, a local gateway) then still
/// works, with TLS that trusts nobody, and an `https` one fails to build, saying why.
fn tls_config(kind: TransportKind, https: bool) -> Result<rustls::ClientConfig, CoreError> {
    let provider = crypto_provider();
    let verifier = shared_verifier(&provider);
    let builder = rustls::ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .map_err(|e| CoreError::InvalidInput(format!("TLS setup: {e}")))?;
    let mut config = match verifier {
        Ok(verifier) => builder.dangerous().with_custom_certificate_verifier(verifier.clone()).with_no_client_auth(),
        Err(why) if https => {
            return Err(CoreError::InvalidInput(format!("cannot verify TLS servers on this system: {why}")))
        }
        Err(_) => builder.with_root_certificates(rustls::RootCertStore::empty()).with_no_client_auth(),
    };
    // What reqwest would offer: HTTP/1.1 only for RunSSE, h2 only for Run; the automatic
    // transport offers both and learns from the server's choice whether it speaks h2.
    config.alpn_protocols = match kind {
        TransportKind::Sse => vec![b"http/1.1".to_vec()],
        TransportKind::H2 => vec![b"h2".to_vec()],
        TransportKind::Auto => vec![b"h2".to_vec(), b"http/1.1".to_vec()],
    };
    Ok(config)
}

fn install_crypto_provider() {
    CRYPTO_PROVIDER.call_once(|| {
        if rustls::crypto::ring::default_provider().install_default().is_err() {
            // Another library in the process installed one already: that one is used.
            tracing::debug!("a TLS crypto provider was installed already; using it");
        }
    });
}

/// A client for the built-in tools' web fetches: the TLS roots and proxy settings of turns
/// (`HTTPS_PROXY`, `NO_PROXY`, the platform's certificates), HTTP/1.1, at most 10 redirects,
/// `timeout` for the whole exchange.
pub fn web_client(timeout: Duration) -> Result<reqwest::Client, CoreError> {
    install_crypto_provider();
    reqwest::Client::builder()
        .user_agent(concat!("cursor-acp-native/", env!("CARGO_PKG_VERSION")))
        .timeout(timeout)
        .redirect(reqwest::redirect::Policy::limited(10))
        .tls_backend_preconfigured(tls_config(TransportKind::Sse, true)?)
        .build()
        .map_err(|e| CoreError::InvalidInput(error_chain(&e)))
}

/// A reqwest client for a transport of `kind` at `url` (its base URL, parsed), with the rest of
/// `config`. For [`TransportKind::Auto`] it is the HTTP/2 side: h2c by prior knowledge on a
/// plain `http` URL, and on `https` whichever protocol the server picks by ALPN.
pub(super) fn http_client(
    config: &TransportConfig,
    kind: TransportKind,
    url: &reqwest::Url,
) -> Result<reqwest::Client, CoreError> {
    install_crypto_provider();
    let loopback = super::diagnosis::is_loopback(url);
    let mut builder = reqwest::Client::builder()
        .user_agent(concat!("cursor-acp-native/", env!("CARGO_PKG_VERSION")))
        .connect_timeout(config.connect_timeout)
        .tcp_nodelay(true)
        // Room for every append connection and as many streams' connections, for the next
        // turns to reuse; more idle sockets than that only hold buffers (with many sessions,
        // most of their idle memory).
        .pool_max_idle_per_host(config.max_append_connections + IDLE_STREAM_CONNECTIONS);
    let https = url.scheme() == "https";
    builder = match kind {
        // Appends are never retried (module docs); reqwest's retries are for h2's refused
        // streams anyway, and turning them off spares a copy of every request it keeps
        // in case one is needed.
        TransportKind::Sse => builder.http1_only().retry(reqwest::retry::never().max_retries_per_request(0)),
        TransportKind::H2 | TransportKind::Auto => {
            if kind == TransportKind::H2 || !https {
                builder = builder.http2_prior_knowledge();
            }
            builder
                .http2_keep_alive_interval(Duration::from_secs(10))
                .http2_keep_alive_timeout(Duration::from_secs(20))
                .http2_keep_alive_while_idle(true)
                .http2_initial_stream_window_size(H2_STREAM_WINDOW)
                .http2_initial_connection_window_size(H2_CONNECTION_WINDOW)
        }
    };
    if loopback {
        // A local gateway is never reached through a proxy; HTTPS_PROXY/NO_PROXY apply otherwise.
        builder = builder.no_proxy();
    }
    builder = builder.tls_backend_preconfigured(tls_config(kind, https)?);
    builder.build().map_err(|e| CoreError::InvalidInput(error_chain(&e)))
}

/// The H2 transport's connections: a stream goes to the first connection carrying fewer than
/// `h2_streams_per_connection` streams, or else to a new connection.
///
/// A `Run` stream lasts its whole turn, and reqwest keeps one HTTP/2 connection per host: past
/// the server's cap on the streams of one connection, a turn would wait, without an update,
/// until some other turn ended (with hyper's cap of 200, turn 201 of 250 did). Each connection
/// here is a reqwest client of its own, as public h2 clients of the backend keep a pool of
/// sessions. Connections are kept for the next streams; reqwest closes them when idle.
pub(super) struct H2Connections {
    config: Arc<TransportConfig>,
    url: reqwest::Url,
    connections: std::sync::Mutex<Vec<H2Connection>>,
}

#[derive(Clone)]
struct H2Connection {
    client: reqwest::Client,
    streams: Arc<AtomicUsize>,
}

/// A stream's place on an [`H2Connection`], given back when dropped.
pub(super) struct StreamSlot(Arc<AtomicUsize>);

impl Drop for StreamSlot {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::Relaxed);
    }
}

impl H2Connections {
    pub(super) fn new(config: Arc<TransportConfig>, url: reqwest::Url, first: reqwest::Client) -> Self {
        let first = H2Connection { client: first, streams: Arc::default() };
        H2Connections { config, url, connections: std::sync::Mutex::new(vec![first]) }
    }

    /// The client for one more stream, and the stream's slot on its connection.
    pub(super) fn checkout(&self) -> (reqwest::Client, StreamSlot) {
        let per_connection = self.config.h2_streams_per_connection;
        let mut connections = self.connections.lock().expect("h2 connections lock");
        let free = connections.iter().find(|c| c.streams.load(Ordering::Relaxed) < per_connection).cloned();
        let connection = match free {
            Some(connection) => connection,
            // The first client was built from the same config, so this fails only if the system
            // does (out of sockets or memory); the stream then queues on the least busy one.
            None => match http_client(&self.config, self.config.kind, &self.url) {
                Ok(client) => {
                    let connection = H2Connection { client, streams: Arc::default() };
                    connections.push(connection.clone());
                    connection
                }
                Err(_) => connections
                    .iter()
                    .min_by_key(|c| c.streams.load(Ordering::Relaxed))
                    .cloned()
                    .expect("there is always a first connection"),
            },
        };
        connection.streams.fetch_add(1, Ordering::Relaxed);
        (connection.client, StreamSlot(connection.streams))
    }
}
