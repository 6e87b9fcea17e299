//! Messages for the failures a user can fix: a server that cannot be reached (refused, no such
//! host, a proxy that would not connect) and a server or proxy without HTTP/2 under `'h2'`.
//! Each names the cause and the fix, so the error is useful the moment it is reported instead
//! of after a round of retries that cannot succeed.
//!
//! Every `reqwest::Error` becomes a [`CoreError`] here (`From`): a certificate refused, a server
//! not reached, a timeout, or another network failure.
//!
//! Nothing here prints a credential: URLs lose their user-info, and a proxy's is dropped too.

use std::io::ErrorKind;

use crate::error::{error_chain, CoreError};

/// Why a connection could not be made, read from the error's sources.
enum Cause {
    Refused,
    NoSuchHost,
    TimedOut,
    /// The proxy answered the `CONNECT` for an `https` target with something other than 200.
    TunnelRefused(&'static str),
    Other(String),
}

impl Cause {
    fn of(e: &(dyn std::error::Error + 'static)) -> Cause {
        let chain = error_chain(e);
        let lower = chain.to_ascii_lowercase();
        let mut source = Some(e);
        while let Some(err) = source {
            if let Some(io) = err.downcast_ref::<std::io::Error>() {
                match io.kind() {
                    ErrorKind::ConnectionRefused => return Cause::Refused,
                    ErrorKind::TimedOut => return Cause::TimedOut,
                    _ => {}
                }
            }
            source = err.source();
        }
        if lower.contains("dns error") || lower.contains("failed to lookup address") {
            Cause::NoSuchHost
        } else if lower.contains("proxy authorization required") {
            Cause::TunnelRefused("it asks for credentials (407)")
        } else if lower.contains("tunnel") || lower.contains("unsuccessful") {
            Cause::TunnelRefused("it answered the CONNECT request with an error")
        } else if lower.contains("timed out") || lower.contains("timeout") {
            Cause::TimedOut
        } else {
            Cause::Other(chain)
        }
    }

    fn describe(&self) -> String {
        match self {
            Cause::Refused => "connection refused (nothing listens there)".into(),
            Cause::NoSuchHost => "the host name does not resolve".into(),
            Cause::TimedOut => "no answer before the connect timeout".into(),
            Cause::TunnelRefused(why) => format!("the proxy would not open a tunnel: {why}"),
            Cause::Other(chain) => chain.clone(),
        }
    }
}

/// `scheme://host[:port]` of a URL: no user-info, path or query.
pub(crate) fn origin(url: &reqwest::Url) -> String {
    let host = url.host_str().unwrap_or("?");
    match url.port() {
        Some(port) => format!("{}://{host}:{port}", url.scheme()),
        None => format!("{}://{host}", url.scheme()),
    }
}

/// The proxy that requests for `url` go through, as `(its origin, where it is configured)`.
/// Loopback addresses are never proxied (see `clients.rs`).
pub(crate) fn proxy_for(url: &reqwest::Url) -> Option<(String, &'static str)> {
    if is_loopback(url) {
        return None;
    }
    let uri: http::Uri = url.as_str().parse().ok()?;
    let intercept = hyper_util::client::proxy::matcher::Matcher::from_system().intercept(&uri)?;
    let proxy_origin = match (intercept.uri().scheme_str(), intercept.uri().host(), intercept.uri().port_u16()) {
        (Some(scheme), Some(host), Some(port)) => format!("{scheme}://{host}:{port}"),
        (Some(scheme), Some(host), None) => format!("{scheme}://{host}"),
        _ => "?".into(),
    };
    let names: &[&'static str] = if url.scheme() == "https" {
        &["HTTPS_PROXY", "https_proxy", "ALL_PROXY", "all_proxy"]
    } else {
        &["HTTP_PROXY", "http_proxy", "ALL_PROXY", "all_proxy"]
    };
    let from = names
        .iter()
        .find(|name| std::env::var_os(name).is_some_and(|v| !v.is_empty()))
        .copied()
        .unwrap_or("the system's proxy settings");
    Some((proxy_origin, from))
}

pub(crate) fn is_loopback(url: &reqwest::Url) -> bool {
    match url.host() {
        Some(url::Host::Ipv4(ip)) => ip.is_loopback(),
        Some(url::Host::Ipv6(ip)) => ip.is_loopback(),
        Some(url::Host::Domain(d)) => d.eq_ignore_ascii_case("localhost"),
        None => false,
    }
}

/// The message of a request that could not connect (`reqwest::Error::is_connect`).
pub(crate) fn unreachable(e: &reqwest::Error) -> String {
    let cause = Cause::of(e);
    let Some(url) = e.url() else {
        return format!("cannot connect: {}", cause.describe());
    };
    let target = origin(url);
    if let Some((proxy, from)) = proxy_for(url) {
        let fix = format!("fix or unset {from}, or add the host to NO_PROXY");
        return match cause {
            Cause::TunnelRefused(_) => format!(
                "cannot reach {target} through the proxy {proxy} ({from}): {}. Check the proxy's rules and credentials, or {fix}",
                cause.describe()
            ),
            _ => format!("cannot connect to the proxy {proxy} ({from}) for {target}: {}. Then {fix}", cause.describe()),
        };
    }
    let fix = match cause {
        Cause::Refused => "Check baseUrl, and that the server or gateway it names is running",
        Cause::NoSuchHost => "Check baseUrl and this machine's network (DNS)",
        Cause::TimedOut => "Check the network, a firewall, or baseUrl",
        Cause::TunnelRefused(_) | Cause::Other(_) => "Check baseUrl and the network",
    };
    format!("cannot connect to {target}: {}. {fix}", cause.describe())
}

/// The message of a `Run` request under `'h2'` that shows the server does not speak HTTP/2:
/// `why` is what showed it.
pub(crate) fn no_http2(url: &reqwest::Url, why: &str) -> String {
    let target = origin(url);
    match proxy_for(url) {
        Some((proxy, from)) => format!(
            "the proxy {proxy} ({from}) in front of {target} does not pass HTTP/2 ({why}). Use transport 'auto' (the default) or 'sse', or add the host to NO_PROXY"
        ),
        None => format!(
            "the server at {target} does not speak HTTP/2 ({why}). Use transport 'auto' (the default) or 'sse' for an HTTP/1.1 server or gateway"
        ),
    }
}

/// Whether TLS failed because the peer accepted none of the protocols offered by ALPN, as an
/// HTTP/1.1-only TLS server (or proxy) does when offered only `h2`.
pub(crate) fn refused_alpn(e: &(dyn std::error::Error + 'static)) -> bool {
    let mut source = Some(e);
    while let Some(err) = source {
        let mut inner = err;
        while let Some(wrapped) = inner.downcast_ref::<std::io::Error>().and_then(|io| io.get_ref()) {
            inner = wrapped;
        }
        if let Some(tls) = inner.downcast_ref::<rustls::Error>() {
            return matches!(
                tls,
                rustls::Error::AlertReceived(rustls::AlertDescription::NoApplicationProtocol)
                    | rustls::Error::NoApplicationProtocol
            );
        }
        source = err.source();
    }
    false
}

impl From<reqwest::Error> for CoreError {
    fn from(e: reqwest::Error) -> Self {
        // reqwest's Display carries the URL but never headers, so no token can leak here.
        if rejected_certificate(&e) {
            CoreError::Untrusted(error_chain(&e))
        } else if e.is_connect() {
            CoreError::Unreachable(unreachable(&e))
        } else if e.is_timeout() {
            CoreError::Timeout(error_chain(&e))
        } else {
            CoreError::Network(error_chain(&e))
        }
    }
}

/// Whether TLS failed on the certificates (theirs unverifiable, or ours wanted): the same
/// server will fail the same way, so a resume would only delay the error.
fn rejected_certificate(e: &(dyn std::error::Error + 'static)) -> bool {
    let mut source = Some(e);
    while let Some(err) = source {
        if let Some(tls) = unwrapped(err).downcast_ref::<rustls::Error>() {
            return matches!(
                tls,
                rustls::Error::InvalidCertificate(_)
                    | rustls::Error::NoCertificatesPresented
                    | rustls::Error::AlertReceived(
                        rustls::AlertDescription::BadCertificate
                            | rustls::AlertDescription::CertificateRequired
                            | rustls::AlertDescription::UnknownCA
                    )
            );
        }
        source = err.source();
    }
    false
}

/// The error inside `io::Error`s that carry one, whose `source` skips it: tokio-rustls reports
/// rustls' errors that way, and hyper-rustls wraps that in one more.
fn unwrapped<'a>(mut err: &'a (dyn std::error::Error + 'static)) -> &'a (dyn std::error::Error + 'static) {
    while let Some(inner) = err.downcast_ref::<std::io::Error>().and_then(|io| io.get_ref()) {
        err = inner;
    }
    err
}
