//! What a client and its sessions are made with ([`ClientOptions`] as a host gives them,
//! checked into a [`ClientConfig`] with its [`Timing`]; [`SessionOptions`], [`SavedSession`])
//! and what a turn returns ([`TurnResult`]).

use std::path::PathBuf;
use std::time::Duration;

use agent_client_protocol_schema::v1 as acp;
use bytes::Bytes;
use serde_json::Value;

use crate::connect::Limits;
use crate::error::CoreError;
use crate::proto::agent::v1 as pb;
use crate::tools;
use crate::transport::{
    check_headers, is_client_string, parse_base_url, AppendEncoding, Compression, Credentials, TransportConfig,
    TransportKind, CLIENT_STRING_TAKES,
};

/// Timers and bounds of the turn loop. Defaults follow the real CLI.
#[derive(Debug, Clone)]
pub struct Timing {
    pub client_heartbeat: Duration,
    pub exec_heartbeat: Duration,
    /// No inbound frame for this long = stall (then resume).
    pub stall: Duration,
    /// After cancel, how long to wait for the server before resolving `cancelled` anyway.
    pub cancel_grace: Duration,
    /// Bound on a host callback (exec, interaction, request context, KV override).
    pub callback: Duration,
    /// After `turn_ended`, how long in-flight handlers may take to finish.
    pub drain: Duration,
    pub resume_attempts: u32,
    pub resume_backoff: Duration,
    pub resume_backoff_max: Duration,
    /// The longest `Retry-After` (or `RetryInfo`) a turn waits for before resuming; a server
    /// that asks for longer fails the turn at once, saying how long it asked for.
    pub retry_after_max: Duration,
    /// Capacity of the update queue (back-pressure beyond it).
    pub queue: usize,
}

impl Default for Timing {
    fn default() -> Self {
        Timing {
            client_heartbeat: Duration::from_secs(5),
            exec_heartbeat: Duration::from_secs(3),
            stall: Duration::from_secs(30),
            cancel_grace: Duration::from_secs(2),
            callback: Duration::from_secs(300),
            drain: Duration::from_secs(5),
            resume_attempts: 3,
            resume_backoff: Duration::from_secs(1),
            resume_backoff_max: Duration::from_secs(60),
            retry_after_max: Duration::from_secs(60),
            queue: 256,
        }
    }
}

/// Client-wide configuration.
#[derive(Debug, Clone)]
pub struct ClientConfig {
    pub transport: TransportConfig,
    pub timing: Timing,
    /// Report summarization as ACP compaction updates (the client advertised `session.compaction`).
    pub compaction_updates: bool,
    /// Report server notices as ACP `notice` updates (the client advertised `session.notices`).
    pub notices: bool,
    /// Show shells as Zed display-only terminals (the client advertised `_meta.terminal_output`).
    pub terminal_output: bool,
    /// The shell the request context names (`env.shell`), whatever the host's context says:
    /// the shell the tools answering this client's execs run (`LocalTools::shell`; the binding
    /// gives its built-in `tools` this one). Default [`tools::default_shell`], the tools' own.
    pub shell: PathBuf,
}

impl Default for ClientConfig {
    fn default() -> Self {
        ClientConfig {
            transport: TransportConfig::default(),
            timing: Timing::default(),
            compaction_updates: false,
            notices: false,
            terminal_output: false,
            shell: tools::default_shell(),
        }
    }
}

/// A client's options as a host gives them: nothing defaulted or checked yet. The binding
/// fills it from `new AgentClient(options)`, [`ClientOptions::from_json`] from JSON (the stdio
/// agent's `CURSOR_ACP_CLIENT_OPTIONS` and flags); [`ClientOptions::into_config`] is the one
/// place they are defaulted and checked, each bad value refused with one message
/// ([`CoreError::invalid_option`]: the option's JavaScript name, what it takes, what it got).
/// Numbers are `f64`, as JavaScript and JSON give them, so that a negative or fractional value
/// is refused here rather than wrapped on the way in.
#[derive(Debug, Clone, Default)]
pub struct ClientOptions {
    pub base_url: Option<String>,
    /// Not in JSON: a token comes from the host's `accessToken`, never from options text.
    pub credentials: Credentials,
    pub sign_in_hint: Option<String>,
    pub headers: Vec<(String, String)>,
    pub client_version: Option<String>,
    pub client_type: Option<String>,
    pub ghost_mode: Option<bool>,
    pub transport: Option<String>,
    pub compression: Option<String>,
    pub append_encoding: Option<String>,
    pub heartbeat_interval_ms: Option<f64>,
    pub exec_heartbeat_interval_ms: Option<f64>,
    pub stall_timeout_ms: Option<f64>,
    pub cancel_timeout_ms: Option<f64>,
    pub callback_timeout_ms: Option<f64>,
    pub resume_attempts: Option<f64>,
    pub resume_backoff_ms: Option<f64>,
    pub max_retry_after_ms: Option<f64>,
    pub append_timeout_ms: Option<f64>,
    pub max_frame_bytes: Option<f64>,
    pub update_queue_size: Option<f64>,
    pub compaction_updates: Option<bool>,
    pub notices: Option<bool>,
    pub terminal_output: Option<bool>,
    pub shell: Option<String>,
}

/// A whole-number option: its name and the range it takes.
struct WholeOption {
    name: &'static str,
    min: u32,
    unit: &'static str,
}

impl WholeOption {
    const fn new(name: &'static str, min: u32, unit: &'static str) -> Self {
        WholeOption { name, min, unit }
    }

    fn takes(&self) -> String {
        format!("a whole number of {} from {} to {}", self.unit, self.min, u32::MAX)
    }

    /// `value` checked, or `default` when not given.
    fn read(&self, value: Option<f64>, default: u64) -> Result<u64, CoreError> {
        let Some(v) = value else { return Ok(default) };
        if v.is_finite() && v.fract() == 0.0 && v >= f64::from(self.min) && v <= f64::from(u32::MAX) {
            // In range and whole: the conversion is exact.
            return Ok(v as u64);
        }
        // Whole numbers as JSON writes them (`-1`, not `-1.0`); NaN and infinities as text.
        let got = if v.is_finite() && v.fract() == 0.0 && v.abs() < 9e15 {
            Value::from(v as i64)
        } else {
            serde_json::Number::from_f64(v).map_or_else(|| Value::String(v.to_string()), Value::Number)
        };
        Err(CoreError::invalid_option(self.name, &self.takes(), &got, None))
    }

    fn millis(&self, value: Option<f64>, default: Duration) -> Result<Duration, CoreError> {
        let default = u64::try_from(default.as_millis()).unwrap_or(u64::MAX);
        self.read(value, default).map(Duration::from_millis)
    }
}

const HEARTBEAT_INTERVAL: WholeOption = WholeOption::new("heartbeatIntervalMs", 1, "milliseconds");
const EXEC_HEARTBEAT_INTERVAL: WholeOption = WholeOption::new("execHeartbeatIntervalMs", 1, "milliseconds");
const STALL_TIMEOUT: WholeOption = WholeOption::new("stallTimeoutMs", 1, "milliseconds");
const CANCEL_TIMEOUT: WholeOption = WholeOption::new("cancelTimeoutMs", 0, "milliseconds");
const CALLBACK_TIMEOUT: WholeOption = WholeOption::new("callbackTimeoutMs", 0, "milliseconds");
const RESUME_ATTEMPTS: WholeOption = WholeOption::new("resumeAttempts", 0, "attempts");
const RESUME_BACKOFF: WholeOption = WholeOption::new("resumeBackoffMs", 0, "milliseconds");
const MAX_RETRY_AFTER: WholeOption = WholeOption::new("maxRetryAfterMs", 0, "milliseconds");
const APPEND_TIMEOUT: WholeOption = WholeOption::new("appendTimeoutMs", 0, "milliseconds");
const MAX_FRAME_BYTES: WholeOption = WholeOption::new("maxFrameBytes", 1, "bytes");
const UPDATE_QUEUE_SIZE: WholeOption = WholeOption::new("updateQueueSize", 1, "updates");

/// The keyword options: name, what it takes, and the value it names.
fn keyword<T>(
    name: &str,
    takes: &str,
    value: Option<&str>,
    parse: impl Fn(&str) -> Option<T>,
    default: T,
) -> Result<T, CoreError> {
    match value {
        None => Ok(default),
        Some(v) => parse(v).ok_or_else(|| CoreError::invalid_option(name, takes, &v.into(), None)),
    }
}

/// `clientVersion` / `clientType`: one header token.
fn client_string(name: &str, value: Option<String>, default: String) -> Result<String, CoreError> {
    match value {
        None => Ok(default),
        Some(v) if is_client_string(&v) => Ok(v),
        Some(v) => Err(CoreError::invalid_option(name, CLIENT_STRING_TAKES, &v.into(), None)),
    }
}

/// The options [`ClientOptions::from_json`] takes, with what each takes when its JSON type is
/// wrong (a value of the right type gets its own option's message from `into_config`).
const JSON_OPTIONS: &[(&str, &str)] = &[
    ("baseUrl", "a string"),
    ("signInHint", "a string"),
    ("headers", "an object of header names to string values"),
    ("clientVersion", "a string"),
    ("clientType", "a string"),
    ("ghostMode", "true or false"),
    ("transport", "a string"),
    ("compression", "a string"),
    ("appendEncoding", "a string"),
    ("heartbeatIntervalMs", "a number"),
    ("execHeartbeatIntervalMs", "a number"),
    ("stallTimeoutMs", "a number"),
    ("cancelTimeoutMs", "a number"),
    ("callbackTimeoutMs", "a number"),
    ("resumeAttempts", "a number"),
    ("resumeBackoffMs", "a number"),
    ("maxRetryAfterMs", "a number"),
    ("appendTimeoutMs", "a number"),
    ("maxFrameBytes", "a number"),
    ("updateQueueSize", "a number"),
    ("compactionUpdates", "true or false"),
    ("notices", "true or false"),
    ("terminalOutput", "true or false"),
    ("shell", "a string"),
];

impl ClientOptions {
    /// The options in a JSON object (the JavaScript names; `null` = not given). A key that is
    /// no option, or a value of the wrong JSON type, is refused with the option's message.
    /// Callbacks and the access token are not options text can carry.
    pub fn from_json(json: &Value) -> Result<ClientOptions, CoreError> {
        let Value::Object(map) = json else {
            return Err(CoreError::invalid_option("client options", "a JSON object", json, None));
        };
        let mut o = ClientOptions::default();
        for (key, value) in map {
            if value.is_null() {
                continue;
            }
            let Some(&(name, takes)) = JSON_OPTIONS.iter().find(|(name, _)| name == key) else {
                let names: Vec<&str> = JSON_OPTIONS.iter().map(|(name, _)| *name).collect();
                return Err(CoreError::invalid_option(
                    "each client option",
                    &format!("one of {}", names.join(", ")),
                    &key.as_str().into(),
                    None,
                ));
            };
            let wrong = || CoreError::invalid_option(name, takes, value, None);
            let string = || value.as_str().map(str::to_string).ok_or_else(wrong);
            let number = || value.as_f64().ok_or_else(wrong);
            let flag = || value.as_bool().ok_or_else(wrong);
            match name {
                "baseUrl" => o.base_url = Some(string()?),
                "signInHint" => o.sign_in_hint = Some(string()?),
                "headers" => {
                    let Value::Object(headers) = value else { return Err(wrong()) };
                    for (header, v) in headers {
                        let v = v.as_str().ok_or_else(wrong)?;
                        o.headers.push((header.clone(), v.to_string()));
                    }
                }
                "clientVersion" => o.client_version = Some(string()?),
                "clientType" => o.client_type = Some(string()?),
                "ghostMode" => o.ghost_mode = Some(flag()?),
                "transport" => o.transport = Some(string()?),
                "compression" => o.compression = Some(string()?),
                "appendEncoding" => o.append_encoding = Some(string()?),
                "heartbeatIntervalMs" => o.heartbeat_interval_ms = Some(number()?),
                "execHeartbeatIntervalMs" => o.exec_heartbeat_interval_ms = Some(number()?),
                "stallTimeoutMs" => o.stall_timeout_ms = Some(number()?),
                "cancelTimeoutMs" => o.cancel_timeout_ms = Some(number()?),
                "callbackTimeoutMs" => o.callback_timeout_ms = Some(number()?),
                "resumeAttempts" => o.resume_attempts = Some(number()?),
                "resumeBackoffMs" => o.resume_backoff_ms = Some(number()?),
                "maxRetryAfterMs" => o.max_retry_after_ms = Some(number()?),
                "appendTimeoutMs" => o.append_timeout_ms = Some(number()?),
                "maxFrameBytes" => o.max_frame_bytes = Some(number()?),
                "updateQueueSize" => o.update_queue_size = Some(number()?),
                "compactionUpdates" => o.compaction_updates = Some(flag()?),
                "notices" => o.notices = Some(flag()?),
                "terminalOutput" => o.terminal_output = Some(flag()?),
                "shell" => o.shell = Some(string()?),
                // Every name of JSON_OPTIONS has its arm above.
                _ => return Err(wrong()),
            }
        }
        Ok(o)
    }

    /// The configuration these options make: each option checked, each one not given
    /// defaulted (the defaults are [`TransportConfig::default`], [`Timing::default`] and
    /// [`tools::default_shell`]).
    pub fn into_config(self) -> Result<ClientConfig, CoreError> {
        let t = TransportConfig::default();
        let base_url = match self.base_url {
            Some(url) => {
                parse_base_url(&url)?;
                url
            }
            None => t.base_url.clone(),
        };
        check_headers(&self.headers)?;
        let mut headers = self.headers;
        headers.sort();
        let limits = match self.max_frame_bytes {
            None => Limits::default(),
            Some(_) => {
                let max = MAX_FRAME_BYTES.read(self.max_frame_bytes, 0)?;
                Limits::uniform(usize::try_from(max).unwrap_or(usize::MAX))
            }
        };
        let transport = TransportConfig {
            base_url,
            credentials: self.credentials,
            sign_in_hint: self.sign_in_hint.unwrap_or(t.sign_in_hint.clone()),
            headers,
            client_version: client_string("clientVersion", self.client_version, t.client_version.clone())?,
            client_type: client_string("clientType", self.client_type, t.client_type.clone())?,
            ghost_mode: self.ghost_mode.unwrap_or(t.ghost_mode),
            kind: keyword(
                "transport",
                TransportKind::TAKES,
                self.transport.as_deref(),
                TransportKind::from_option,
                t.kind,
            )?,
            compression: keyword(
                "compression",
                Compression::TAKES,
                self.compression.as_deref(),
                Compression::from_option,
                t.compression,
            )?,
            append_encoding: keyword(
                "appendEncoding",
                AppendEncoding::TAKES,
                self.append_encoding.as_deref(),
                AppendEncoding::from_option,
                t.append_encoding,
            )?,
            limits,
            append_deadline: APPEND_TIMEOUT.millis(self.append_timeout_ms, t.append_deadline)?,
            ..t
        };
        let d = Timing::default();
        let timing = Timing {
            client_heartbeat: HEARTBEAT_INTERVAL.millis(self.heartbeat_interval_ms, d.client_heartbeat)?,
            exec_heartbeat: EXEC_HEARTBEAT_INTERVAL.millis(self.exec_heartbeat_interval_ms, d.exec_heartbeat)?,
            stall: STALL_TIMEOUT.millis(self.stall_timeout_ms, d.stall)?,
            cancel_grace: CANCEL_TIMEOUT.millis(self.cancel_timeout_ms, d.cancel_grace)?,
            callback: CALLBACK_TIMEOUT.millis(self.callback_timeout_ms, d.callback)?,
            resume_attempts: u32::try_from(RESUME_ATTEMPTS.read(self.resume_attempts, u64::from(d.resume_attempts))?)
                .unwrap_or(u32::MAX),
            resume_backoff: RESUME_BACKOFF.millis(self.resume_backoff_ms, d.resume_backoff)?,
            retry_after_max: MAX_RETRY_AFTER.millis(self.max_retry_after_ms, d.retry_after_max)?,
            queue: usize::try_from(UPDATE_QUEUE_SIZE.read(self.update_queue_size, d.queue as u64)?)
                .unwrap_or(usize::MAX),
            ..d
        };
        Ok(ClientConfig {
            transport,
            timing,
            compaction_updates: self.compaction_updates.unwrap_or(false),
            notices: self.notices.unwrap_or(false),
            terminal_output: self.terminal_output.unwrap_or(false),
            shell: tools::check_shell(self.shell.as_deref())?,
        })
    }
}

/// Options of a new session.
#[derive(Debug, Clone, Default)]
pub struct SessionOptions {
    pub conversation_id: Option<String>,
    /// A model id (`default`, Auto, when neither this nor `model_details` is given).
    pub model: Option<String>,
    /// The server's details of the model (from `GetUsableModels`), sent as they are.
    pub model_details: Option<pb::ModelDetails>,
    pub mode: Option<String>,
    pub cwd: Option<String>,
}

/// What `Session::save` returns and `AgentClient::load_session` takes.
#[derive(Debug, Clone, Default)]
pub struct SavedSession {
    pub conversation_id: String,
    /// The latest checkpoint exactly as the server sent it.
    pub checkpoint: Option<Bytes>,
    /// Blobs of the session's store (id, data), when the store can enumerate them.
    pub blobs: Vec<(Bytes, Bytes)>,
    pub model: Option<String>,
    pub model_details: Option<pb::ModelDetails>,
    pub mode: Option<String>,
    pub cwd: Option<String>,
    /// The ACP tool call ids the session has shown its client: kept so that a card of a later
    /// turn, after a restart too, never takes one of them.
    pub card_ids: Vec<String>,
}

/// Token counts of one turn (`turn_ended`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct TurnUsage {
    pub input_tokens: i64,
    pub output_tokens: i64,
    pub cache_read_tokens: i64,
    pub cache_write_tokens: i64,
    pub reasoning_tokens: i64,
}

impl TurnUsage {
    pub fn total(&self) -> i64 {
        self.input_tokens + self.output_tokens + self.cache_read_tokens + self.cache_write_tokens
    }
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TurnResult {
    pub stop_reason: acp::StopReason,
    pub usage: Option<TurnUsage>,
}

/// What a prompt may carry besides its content, as proto3 JSON.
#[derive(Debug, Clone, Default)]
pub struct PromptExtras {
    /// `UserMessage` fields merged over the message built from the content (protobuf merge:
    /// what is set here wins, lists are appended): `hookAdditionalContexts`,
    /// `customModeIntent`, `projectDetails`, `richText`, …
    pub user_message: Option<serde_json::Value>,
    /// `ConversationAction.request_context_parts`: large context parts by blob reference.
    pub request_context_parts: Option<serde_json::Value>,
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn config(options: Value) -> Result<ClientConfig, CoreError> {
        ClientOptions::from_json(&options)?.into_config()
    }

    fn message(options: Value) -> String {
        match config(options) {
            Err(CoreError::InvalidInput(m)) => m,
            other => panic!("expected E_INVALID, got {other:?}"),
        }
    }

    #[test]
    fn no_options_give_the_defaults() {
        let c = config(json!({})).unwrap();
        let t = TransportConfig::default();
        assert_eq!(c.transport.base_url, "https://api2.cursor.sh");
        assert_eq!(c.transport.base_url, crate::transport::DEFAULT_BASE_URL);
        assert_eq!(c.transport.kind, TransportKind::Auto);
        assert_eq!(c.transport.compression, Compression::None);
        assert_eq!(c.transport.append_encoding, AppendEncoding::Hex);
        assert!(c.transport.ghost_mode, "ghost mode is on unless turned off");
        assert_eq!(c.transport.client_version, crate::transport::DEFAULT_CLIENT_VERSION);
        assert_eq!(c.transport.client_type, "cli");
        assert_eq!(c.transport.sign_in_hint, t.sign_in_hint);
        assert!(c.transport.headers.is_empty());
        assert_eq!(c.transport.limits.max_frame, Limits::default().max_frame);
        assert_eq!(c.transport.append_deadline, Duration::from_secs(60));
        let d = Timing::default();
        assert_eq!(c.timing.client_heartbeat, Duration::from_secs(5));
        assert_eq!(c.timing.exec_heartbeat, Duration::from_secs(3));
        assert_eq!(c.timing.stall, Duration::from_secs(30));
        assert_eq!(c.timing.cancel_grace, Duration::from_secs(2));
        assert_eq!(c.timing.callback, Duration::from_secs(300));
        assert_eq!(c.timing.resume_attempts, 3);
        assert_eq!(c.timing.resume_backoff, Duration::from_secs(1));
        assert_eq!(c.timing.retry_after_max, Duration::from_secs(60));
        assert_eq!(c.timing.queue, d.queue);
        assert!(!c.compaction_updates && !c.notices && !c.terminal_output);
        assert_eq!(c.shell, tools::default_shell());
        assert_eq!(ClientConfig::default().shell, tools::default_shell(), "Rust's default is the options' default");
        // `null` is "not given", as in JavaScript.
        assert_eq!(config(json!({ "transport": null })).unwrap().transport.kind, TransportKind::Auto);
    }

    #[test]
    fn every_option_given_is_applied() {
        let c = config(json!({
            "baseUrl": "http://127.0.0.1:9", "signInHint": "ask the admin", "headers": { "X-Team": "a" },
            "clientVersion": "cli-2099.01.01-x", "clientType": "ide", "ghostMode": false, "transport": "sse",
            "compression": "gzip", "appendEncoding": "binary", "heartbeatIntervalMs": 100,
            "execHeartbeatIntervalMs": 200, "stallTimeoutMs": 300, "cancelTimeoutMs": 0, "callbackTimeoutMs": 500,
            "resumeAttempts": 0, "resumeBackoffMs": 700, "maxRetryAfterMs": 800, "appendTimeoutMs": 900,
            "maxFrameBytes": 1000, "updateQueueSize": 11, "compactionUpdates": true, "notices": true,
            "terminalOutput": true, "shell": "/bin/sh"
        }))
        .unwrap();
        let t = &c.transport;
        assert_eq!(
            (t.base_url.as_str(), t.sign_in_hint.as_str(), t.client_version.as_str(), t.client_type.as_str()),
            ("http://127.0.0.1:9", "ask the admin", "cli-2099.01.01-x", "ide")
        );
        assert_eq!(t.headers, [("X-Team".to_string(), "a".to_string())]);
        assert!(!t.ghost_mode);
        assert_eq!(
            (t.kind, t.compression, t.append_encoding),
            (TransportKind::Sse, Compression::Gzip, AppendEncoding::Binary)
        );
        assert_eq!(t.append_deadline, Duration::from_millis(900));
        assert_eq!((t.limits.max_frame, t.limits.max_decompressed), (1000, 1000));
        let m = Duration::from_millis;
        let g = &c.timing;
        assert_eq!(
            (g.client_heartbeat, g.exec_heartbeat, g.stall, g.cancel_grace, g.callback),
            (m(100), m(200), m(300), m(0), m(500))
        );
        assert_eq!((g.resume_attempts, g.resume_backoff, g.retry_after_max, g.queue), (0, m(700), m(800), 11));
        assert!(c.compaction_updates && c.notices && c.terminal_output);
        assert_eq!(c.shell, PathBuf::from("/bin/sh"));
    }

    #[test]
    fn each_bad_value_gets_one_message_naming_the_option_what_it_takes_and_what_it_got() {
        let cases = [
            (json!({ "transport": "quic" }), r#"transport must be 'auto', 'sse' or 'h2', got "quic""#),
            (json!({ "compression": "br" }), r#"compression must be 'gzip' or 'none', got "br""#),
            (json!({ "appendEncoding": "base64" }), r#"appendEncoding must be 'hex' or 'binary', got "base64""#),
            (json!({ "baseUrl": "ftp://x" }), r#"baseUrl must be an http(s) URL, got "ftp://x" (the scheme is "ftp")"#),
            (json!({ "baseUrl": "not a url" }), r#"baseUrl must be an http(s) URL, got "not a url" ("#),
            (
                json!({ "clientVersion": "cli 1" }),
                r#"clientVersion must be 1 to 128 printable ASCII characters without spaces, got "cli 1""#,
            ),
            (
                json!({ "clientVersion": "" }),
                r#"clientVersion must be 1 to 128 printable ASCII characters without spaces, got """#,
            ),
            (
                json!({ "clientType": "é" }),
                r#"clientType must be 1 to 128 printable ASCII characters without spaces, got "é""#,
            ),
            (
                json!({ "headers": { "Host": "x" } }),
                r#"headers must be HTTP header names and values other than host, content-length and pseudo-headers, got "Host" (set by the transport)"#,
            ),
            (json!({ "headers": { "bad name": "x" } }), r#"got "bad name" (not a header name)"#),
            (
                json!({ "headers": { "x-secret": "line
break" } }),
                r#"got "x-secret" (its value is not a valid header value)"#,
            ),
            (
                json!({ "heartbeatIntervalMs": 0 }),
                "heartbeatIntervalMs must be a whole number of milliseconds from 1 to 4294967295, got 0",
            ),
            (
                json!({ "execHeartbeatIntervalMs": 0 }),
                "execHeartbeatIntervalMs must be a whole number of milliseconds from 1 to 4294967295, got 0",
            ),
            (
                json!({ "stallTimeoutMs": -1 }),
                "stallTimeoutMs must be a whole number of milliseconds from 1 to 4294967295, got -1",
            ),
            (
                json!({ "cancelTimeoutMs": 1.5 }),
                "cancelTimeoutMs must be a whole number of milliseconds from 0 to 4294967295, got 1.5",
            ),
            (
                json!({ "callbackTimeoutMs": 5e9 }),
                "callbackTimeoutMs must be a whole number of milliseconds from 0 to 4294967295, got 5000000000",
            ),
            (
                json!({ "resumeAttempts": -2 }),
                "resumeAttempts must be a whole number of attempts from 0 to 4294967295, got -2",
            ),
            (
                json!({ "resumeBackoffMs": 0.1 }),
                "resumeBackoffMs must be a whole number of milliseconds from 0 to 4294967295, got 0.1",
            ),
            (
                json!({ "maxRetryAfterMs": -0.5 }),
                "maxRetryAfterMs must be a whole number of milliseconds from 0 to 4294967295, got -0.5",
            ),
            (
                json!({ "appendTimeoutMs": -1 }),
                "appendTimeoutMs must be a whole number of milliseconds from 0 to 4294967295, got -1",
            ),
            (
                json!({ "maxFrameBytes": 0 }),
                "maxFrameBytes must be a whole number of bytes from 1 to 4294967295, got 0",
            ),
            (
                json!({ "updateQueueSize": 0 }),
                "updateQueueSize must be a whole number of updates from 1 to 4294967295, got 0",
            ),
            (
                json!({ "shell": "/no/such/shell" }),
                r#"shell must be an executable file: an absolute path, or a name found on PATH, got "/no/such/shell" (no such file)"#,
            ),
            (json!({ "shell": "no-such-shell-here" }), r#"got "no-such-shell-here" (not found on PATH)"#),
            (json!({ "shell": "/tmp" }), r#"got "/tmp" (not a file)"#),
            (json!({ "shell": "" }), r#"got "" (not a file name)"#),
            // Wrong JSON types, and names that are no option.
            (json!({ "transport": 2 }), "transport must be a string, got 2"),
            (json!({ "stallTimeoutMs": "1000" }), r#"stallTimeoutMs must be a number, got "1000""#),
            (json!({ "ghostMode": "no" }), r#"ghostMode must be true or false, got "no""#),
            (
                json!({ "headers": { "x": 1 } }),
                r#"headers must be an object of header names to string values, got {"x":1}"#,
            ),
            (json!({ "transprot": "sse" }), r#"each client option must be one of baseUrl, "#),
            (json!({ "accessToken": "secret" }), r#"got "accessToken""#),
            (json!([1]), "client options must be a JSON object, got [1]"),
        ];
        for (options, expected) in cases {
            let m = message(options.clone());
            assert!(m.contains(expected), "{options}: {m:?} does not contain {expected:?}");
        }
        // A header's value is never in the message: it may be a credential.
        let m = message(json!({ "headers": { "authorization": "Bearer tok-123\n" } }));
        assert!(!m.contains("tok-123"), "{m}");
    }

    #[test]
    fn a_shell_named_by_name_is_found_on_path_and_named_by_its_full_path() {
        let c = config(json!({ "shell": "sh" })).unwrap();
        assert!(c.shell.is_absolute(), "{:?}", c.shell);
        assert_eq!(c.shell.file_name().and_then(|n| n.to_str()), Some("sh"));
    }

    #[cfg(unix)]
    #[test]
    fn a_shell_that_is_not_executable_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("notes.txt");
        std::fs::write(&file, "echo hi").unwrap();
        let m = message(json!({ "shell": file.display().to_string() }));
        assert!(m.ends_with("(not executable)"), "{m}");
    }
}
