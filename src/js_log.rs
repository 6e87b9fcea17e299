//! `setLogLevel(level)`: the core's `tracing` events, written to stderr one line each.
//!
//! Nothing is installed until the first call with a level other than `'off'`: until then every
//! event of the core is a disabled callsite (a load and a branch). Later calls change the level
//! in place, `'off'` included.

use std::sync::OnceLock;

use napi::bindgen_prelude::*;
use tracing_subscriber::filter::{LevelFilter, Targets};
use tracing_subscriber::layer::SubscriberExt as _;
use tracing_subscriber::reload;
use tracing_subscriber::util::SubscriberInitExt as _;
use tracing_subscriber::Registry;

/// The crates whose events are written; everything else (hyper, h2, rustls…) is left out.
const TARGETS: [&str; 2] = ["cursor_acp_core", "cursor_acp_native"];

type Handle = reload::Handle<Targets, Registry>;

/// The installed filter's handle, or why installing failed (another subscriber was first).
static INSTALLED: OnceLock<std::result::Result<Handle, String>> = OnceLock::new();

fn targets(level: LevelFilter) -> Targets {
    TARGETS.iter().fold(Targets::new(), |t, target| t.with_target(*target, level))
}

fn install(level: LevelFilter) -> std::result::Result<Handle, String> {
    let (filter, handle) = reload::Layer::new(targets(level));
    let lines = tracing_subscriber::fmt::layer().with_writer(std::io::stderr).with_ansi(false);
    tracing_subscriber::registry().with(filter).with(lines).try_init().map_err(|e| e.to_string())?;
    Ok(handle)
}

/// Writes the addon's log events to stderr at `level` and above (`'off'` stops them; the
/// default is off). Events name what happened (a turn started or ended, a stream failed and is
/// resumed, a reply could not be sent, a request that does not decode was dropped) and carry
/// ids, kinds, sizes and errors: never a credential, a prompt or a payload. stdout is never
/// written. The stdio agent calls this with its `--log-level`.
#[napi(ts_args_type = "level: 'error' | 'warn' | 'info' | 'debug' | 'off'")]
pub fn set_log_level(env: Env, level: String) -> Result<()> {
    let filter = match level.as_str() {
        "error" => LevelFilter::ERROR,
        "warn" => LevelFilter::WARN,
        "info" => LevelFilter::INFO,
        "debug" => LevelFilter::DEBUG,
        "off" => LevelFilter::OFF,
        other => {
            let e = cursor_acp_core::CoreError::InvalidInput(format!(
                "log level must be 'error', 'warn', 'info', 'debug' or 'off', got {other:?}"
            ));
            return Err(crate::js_error::coded(&env, &e));
        }
    };
    if filter == LevelFilter::OFF && INSTALLED.get().is_none() {
        return Ok(());
    }
    match INSTALLED.get_or_init(|| install(filter)) {
        Ok(handle) => handle.reload(targets(filter)).map_err(|e| Error::from_reason(e.to_string())),
        Err(why) => Err(Error::from_reason(format!("cannot install the log writer: {why}"))),
    }
}
