//! `new AgentClient(options)`: transport, timing and the JS host, shared by its sessions.

use std::collections::HashMap;
use std::sync::Arc;

use cursor_acp_core::host::{BlobStore, DirBlobStore, NoHost};
use cursor_acp_core::session::{self, ClientOptions, SessionOptions};
use cursor_acp_core::transport::TransportKind;
use cursor_acp_core::CoreError;
use napi::bindgen_prelude::*;
use napi::Env;
use serde_json::Value;

use crate::js_error::coded;
use crate::js_host::{Callback, ExecCallback, JsBlobStore, JsHost};
use crate::js_session::Session;
use crate::saved;

/// Reads the system's certificate store and makes the TLS setup every client shares now, on a
/// thread of its own, so that the first `new AgentClient()` does not wait for it on the
/// JavaScript thread (about 5 ms on Linux). A client made meanwhile waits for the same setup.
/// The store is read once per process: set `SSL_CERT_FILE` or `SSL_CERT_DIR` before calling it.
/// Later calls do nothing.
#[napi]
pub fn prepare_tls() {
    // The thread is not waited for: the first client joins its work through the shared setup.
    drop(cursor_acp_core::transport::prepare_tls_in_background());
}

/// Blob storage callbacks; they replace the built-in store. Ids are lower-case hex.
#[napi(object, object_to_js = false)]
pub struct KvOptions {
    #[napi(ts_type = "(blobId: string) => Uint8Array | null | undefined | Promise<Uint8Array | null | undefined>")]
    pub get: Callback<String, Buffer>,
    #[napi(ts_type = "(blobId: string, data: Buffer) => void | Promise<void>")]
    pub set: Callback<FnArgs<(String, Buffer)>, Value>,
}

/// The editor's file hooks (ACP `fs/read_text_file`, `fs/write_text_file`).
#[napi(object, object_to_js = false)]
pub struct EditorHooks {
    /// The file's text as the editor holds it, from `line` (1-based) for `limit` lines;
    /// `null` to read the disk instead.
    #[napi(
        ts_type = "(request: { path: string; line?: number | null; limit?: number | null }) => string | null | undefined | Promise<string | null | undefined>"
    )]
    pub read_text_file: Option<Callback<Value, String>>,
    /// Writes a text file through the editor; `false` to write the disk instead. A throw is the
    /// write's error.
    #[napi(ts_type = "(request: { path: string; content: string }) => boolean | void | Promise<boolean | void>")]
    pub write_text_file: Option<Callback<Value, Value>>,
}

#[napi(object, object_to_js = false)]
pub struct AgentClientOptions {
    /// `https://api2.cursor.sh` (default) or a local gateway / embedded backend URL.
    pub base_url: Option<String>,
    /// Sent as `authorization: Bearer …`; never logged or put in errors. A function is asked
    /// before every stream and every call (`reason: 'request'`), and once more when the server
    /// refuses its token before a stream has produced anything (`reason: 'unauthenticated'`:
    /// refresh it); that stream then starts again unseen, and a second refusal is `E_AUTH`.
    /// `null`/`undefined` means no token.
    #[napi(
        ts_type = "string | ((request: { reason: 'request' | 'unauthenticated' }) => string | null | undefined | Promise<string | null | undefined>)"
    )]
    pub access_token: Option<crate::js_token::AccessToken>,
    /// Added to authentication errors: how to sign in (default: `npx cursor-acp-native login`
    /// or a valid CURSOR_API_KEY / CURSOR_ACCESS_TOKEN).
    pub sign_in_hint: Option<String>,
    /// Extra headers on every request.
    pub headers: Option<HashMap<String, String>>,
    /// `x-cursor-client-version` (old values are refused by Cursor with ERROR_OUTDATED_CLIENT).
    pub client_version: Option<String>,
    /// `x-cursor-client-type` (default `cli`).
    pub client_type: Option<String>,
    /// `x-ghost-mode` (default true).
    pub ghost_mode: Option<bool>,
    /// `'auto'` (default): Run over HTTP/2 where the server speaks it, else RunSSE + BidiAppend
    /// over HTTP/1.1, as the official client does; `'sse'` or `'h2'` for just one of them.
    #[napi(ts_type = "'auto' | 'sse' | 'h2'")]
    pub transport: Option<String>,
    /// `'gzip'` compresses outbound messages of 1 KiB or more (default `'none'`).
    #[napi(ts_type = "'gzip' | 'none'")]
    pub compression: Option<String>,
    /// BidiAppend payload as lower-case hex `data` (default) or raw `data_binary`.
    #[napi(ts_type = "'hex' | 'binary'")]
    pub append_encoding: Option<String>,
    /// Runs the server's exec requests. Return the result message for `request.kind` in proto3
    /// JSON (e.g. `{ success: { path, content, totalLines } }` for `read`; a `bytes` field also
    /// takes a `Uint8Array` or `Buffer`, and a `string` field UTF-8 bytes, such as a file read with
    /// `fs.readFile`), or `undefined` if this host does not handle that kind: the built-in
    /// `tools` then answer it if configured; else the allowlist prechecks
    /// (`shellAllowlistPrecheck`, `mcpAllowlistPrecheck`, `webFetchAllowlistPrecheck`) are
    /// answered "not allowlisted" (`{}`: the server asks for approval as usual; return
    /// `{ allowlisted: true }` for what your policy allows), `canvasDiagnostics`,
    /// `conversationSearch` and `agentStoreConflict` with their "not available" error, and any
    /// other kind with throw + close. A throw or rejection becomes the result's `error` branch.
    /// A `shellStream` host calls `ctx.started()` once the process runs (see `ExecContext`).
    #[napi(
        ts_type = "(request: ExecRequest, ctx: ExecContext) => ExecAnswer | null | undefined | Promise<ExecAnswer | null | undefined>"
    )]
    pub exec: Option<ExecCallback>,
    /// Answers the server's interaction queries (proto3 JSON of the matching response, e.g.
    /// `{ approved: {} }`); `undefined` or no callback = a rejection.
    #[napi(
        ts_type = "(query: InteractionQuery) => InteractionAnswer | null | undefined | Promise<InteractionAnswer | null | undefined>"
    )]
    pub interaction: Option<Callback<Value, crate::json::HostJson>>,
    /// Supplies the `RequestContext` (rules, env, MCP tools) in proto3 JSON.
    #[napi(ts_type = "() => RequestContext | null | undefined | Promise<RequestContext | null | undefined>")]
    pub request_context: Option<Callback<(), crate::json::HostJson>>,
    /// Built-in local tools confined to these roots, run by the core for every exec the `exec`
    /// callback leaves unhandled (no callback, or `undefined`): reads, listings and searches at
    /// once; writes, deletes, shells, fetches and MCP calls once `permission` allows them
    /// (without a `permission` callback they all run). `client.tools` is them.
    pub tools: Option<crate::js_tools::LocalToolsOptions>,
    /// The permission policy of the built-in tools: asked before a call that changes something,
    /// about a card the client already shows (`request.toolCall`), and (`mayAsk: false`) for
    /// the server's allowlist prechecks. `ctx.signal` aborts when the turn is cancelled.
    #[napi(ts_type = "(request: PermissionRequest, ctx: ExecContext) => PermissionAnswer | Promise<PermissionAnswer>")]
    pub permission: Option<crate::js_host::ContextCallback>,
    /// The editor's file hooks: reads and text writes of the built-in tools go through them.
    pub editor: Option<EditorHooks>,
    /// The host's MCP client: the built-in tools' MCP calls (after `permission`), resource
    /// listings and reads, and server state. The servers' tools are those the request context
    /// lists.
    #[napi(ts_type = "(request: McpRequest, ctx: ExecContext) => McpAnswer | Promise<McpAnswer>")]
    pub mcp: Option<crate::js_host::ContextCallback>,
    /// The conversations this host keeps, for the model's conversation search.
    #[napi(ts_type = "() => PastConversation[] | Promise<PastConversation[]>")]
    pub past_conversations: Option<Callback<(), Value>>,
    /// A choice for the user, on a card the client shows (the server asks to switch modes, or
    /// whether to implement a plan): the chosen `optionId`, or `null` when the user dismissed it.
    /// Without it those queries are refused (unless `interaction` answers them).
    #[napi(ts_type = "(request: ChoiceRequest, ctx: ExecContext) => string | null | Promise<string | null>")]
    pub choose: Option<crate::js_host::ContextCallback>,
    /// The user accepted a mode switch (or a plan, which is implemented in `agent` mode): the
    /// host's picker follows, then the session's mode is set (a throw refuses the mode and
    /// leaves the session's as it was).
    #[napi(ts_type = "(modeId: string) => void | Promise<void>")]
    pub mode_switched: Option<Callback<String, Value>>,
    /// The server's questions for the user: a form's answers, or where they went instead.
    #[napi(ts_type = "(request: QuestionsRequest, ctx: ExecContext) => QuestionsAnswer | Promise<QuestionsAnswer>")]
    pub ask_questions: Option<crate::js_host::ContextCallback>,
    /// Replaces the built-in in-memory blob store.
    pub kv: Option<KvOptions>,
    /// Keep blobs as files in this directory (survives restarts). Ignored when `kv` is set.
    pub blob_dir: Option<String>,
    /// Client heartbeat period (default 5000).
    pub heartbeat_interval_ms: Option<f64>,
    /// Heartbeat period for each running exec (default 3000).
    pub exec_heartbeat_interval_ms: Option<f64>,
    /// No frame for this long = stall, then resume (default 30000).
    pub stall_timeout_ms: Option<f64>,
    /// After cancel, resolve `cancelled` within this bound even if the server is silent (default 2000).
    pub cancel_timeout_ms: Option<f64>,
    /// Bound on each exec / interaction / kv callback (default 300000).
    pub callback_timeout_ms: Option<f64>,
    /// Resume attempts after a drop or stall (default 3).
    pub resume_attempts: Option<f64>,
    /// First resume back-off; doubles each attempt, capped at 60 s, plus 0–20 % jitter (default 1000).
    pub resume_backoff_ms: Option<f64>,
    /// The longest `Retry-After` a turn waits before resuming (default 60000); a server asking
    /// for longer fails the turn at once with the wait in the message.
    pub max_retry_after_ms: Option<f64>,
    /// Base deadline of each BidiAppend (default 60000; +1 s per 128 KiB).
    pub append_timeout_ms: Option<f64>,
    /// Largest accepted frame, raw and decompressed (default 16 MiB).
    pub max_frame_bytes: Option<f64>,
    /// Update queue capacity before back-pressure (default 256).
    pub update_queue_size: Option<f64>,
    /// Report context summarization as ACP `compaction_update` / `compaction_summary_chunk`
    /// (only for clients that advertise `session.compaction`); otherwise it is a `think` card.
    pub compaction_updates: Option<bool>,
    /// Report server notices as ACP `notice` updates (only for clients that advertise
    /// `session.notices`); otherwise a notice is an agent message of its own.
    pub notices: Option<bool>,
    /// Show shell tool calls as Zed's display-only terminal (`_meta.terminal_info`,
    /// `terminal_output`, `terminal_exit`; only for clients advertising `_meta.terminal_output`);
    /// otherwise their output is fenced text.
    pub terminal_output: Option<bool>,
    /// The shell commands run in: named in the request context the server gets (whatever
    /// `requestContext` says), and the shell of the built-in `tools` (giving `tools.shell`
    /// instead is the same; giving both, they must agree). An absolute path or a name found
    /// on `PATH`; it must exist (`E_INVALID` otherwise). Default bash, else sh: what the
    /// built-in tools run. A host running commands itself in another shell names it here.
    pub shell: Option<String>,
}

#[napi(object, object_to_js = false)]
pub struct NewSessionOptions {
    /// Workspace folder (sent as the workspace path in the request context).
    pub cwd: Option<String>,
    /// Model id from Cursor's catalogue (`default`, Auto, when neither this nor `modelDetails`
    /// is given).
    pub model: Option<String>,
    /// The model's details as `client.listModels()` gave them (`details`): sent as they are.
    #[napi(ts_type = "ModelDetails")]
    pub model_details: Option<Value>,
    /// `agent` (default), `ask`, `plan`, …
    pub mode: Option<String>,
    /// Reuse a conversation id (default: a new UUID).
    pub conversation_id: Option<String>,
}

/// The options as the core takes them: values converted, nothing checked or defaulted here
/// (`ClientOptions::into_config` does both, with one message per option).
fn core_options(o: &AgentClientOptions, shell: Option<String>) -> ClientOptions {
    ClientOptions {
        base_url: o.base_url.clone(),
        credentials: o.access_token.as_ref().map(crate::js_token::AccessToken::credentials).unwrap_or_default(),
        sign_in_hint: o.sign_in_hint.clone(),
        headers: o.headers.clone().unwrap_or_default().into_iter().collect(),
        client_version: o.client_version.clone(),
        client_type: o.client_type.clone(),
        ghost_mode: o.ghost_mode,
        transport: o.transport.clone(),
        compression: o.compression.clone(),
        append_encoding: o.append_encoding.clone(),
        heartbeat_interval_ms: o.heartbeat_interval_ms,
        exec_heartbeat_interval_ms: o.exec_heartbeat_interval_ms,
        stall_timeout_ms: o.stall_timeout_ms,
        cancel_timeout_ms: o.cancel_timeout_ms,
        callback_timeout_ms: o.callback_timeout_ms,
        resume_attempts: o.resume_attempts,
        resume_backoff_ms: o.resume_backoff_ms,
        max_retry_after_ms: o.max_retry_after_ms,
        append_timeout_ms: o.append_timeout_ms,
        max_frame_bytes: o.max_frame_bytes,
        update_queue_size: o.update_queue_size,
        compaction_updates: o.compaction_updates,
        notices: o.notices,
        terminal_output: o.terminal_output,
        shell,
    }
}

/// `shell`, or `tools.shell` when only that is given: one shell for the client and its tools.
fn one_shell(o: &AgentClientOptions) -> std::result::Result<Option<String>, CoreError> {
    let of_tools = o.tools.as_ref().and_then(|t| t.shell.clone());
    match (o.shell.clone(), of_tools) {
        (Some(shell), Some(of_tools)) if shell != of_tools => Err(CoreError::invalid_option(
            "tools.shell",
            "the client's shell when both are given",
            &of_tools.into(),
            None,
        )),
        (shell, of_tools) => Ok(shell.or(of_tools)),
    }
}

/// Cursor's service: the `baseUrl` of a client that names none (the core's default, for hosts
/// that print it or compare a URL with it).
#[napi]
pub const DEFAULT_BASE_URL: &str = cursor_acp_core::transport::DEFAULT_BASE_URL;

/// Checks client options given as JSON (a configuration file, an environment variable) as
/// `new AgentClient` would take them, without making a client: throws `E_INVALID` with the
/// option's message, for a name that is no option or a value of the wrong type too. Callbacks
/// and `accessToken` are not options JSON carries.
#[napi(ts_args_type = "options: Record<string, unknown>")]
pub fn check_client_options(env: Env, options: Value) -> Result<()> {
    ClientOptions::from_json(&options).and_then(ClientOptions::into_config).map(drop).map_err(|e| coded(&env, &e))
}

/// A client of Cursor's agent backend (or any server speaking its protocol).
#[napi]
pub struct AgentClient {
    inner: session::AgentClient,
}

#[napi]
impl AgentClient {
    #[napi(constructor)]
    pub fn new(env: Env, options: AgentClientOptions) -> Result<Self> {
        let config = one_shell(&options)
            .and_then(|shell| core_options(&options, shell).into_config())
            .map_err(|e| coded(&env, &e))?;
        let kv: Option<Arc<dyn BlobStore>> = match (options.kv, &options.blob_dir) {
            (Some(kv), _) => {
                Some(Arc::new(JsBlobStore { get: Arc::new(kv.get), set: Arc::new(kv.set), seen: Arc::default() }))
            }
            (None, Some(dir)) => Some(Arc::new(DirBlobStore::new(dir).map_err(|e| coded(&env, &e))?)),
            (None, None) => None,
        };
        let tools = match &options.tools {
            Some(t) => Some(
                within_runtime_if_available(|| crate::js_tools::build(t, Some(&config.shell)))
                    .map_err(|e| coded(&env, &e))?,
            ),
            None => None,
        };
        let (editor_read, editor_write) = match options.editor {
            Some(e) => (e.read_text_file.map(Arc::new), e.write_text_file.map(Arc::new)),
            None => (None, None),
        };
        let js_host = JsHost {
            exec: options.exec.map(Arc::new),
            interaction: options.interaction.map(Arc::new),
            request_context: options.request_context.map(Arc::new),
            permission: options.permission.map(Arc::new),
            editor_read,
            editor_write,
            mcp: options.mcp.map(Arc::new),
            past_conversations: options.past_conversations.map(Arc::new),
            choose: options.choose.map(Arc::new),
            mode_switched: options.mode_switched.map(Arc::new),
            ask_questions: options.ask_questions.map(Arc::new),
        };
        let host: Arc<dyn cursor_acp_core::host::Host> =
            if js_host.is_empty() { Arc::new(NoHost) } else { Arc::new(js_host) };
        let mut inner = session::AgentClient::new(config, host, kv).map_err(|e| coded(&env, &e))?;
        if let Some(tools) = tools {
            inner = inner.with_tools(tools);
        }
        Ok(AgentClient { inner })
    }

    /// The transport the next turn uses: `'h2'` or `'sse'`. With `transport: 'auto'` it is
    /// `'h2'` until a turn finds that the server does not speak HTTP/2.
    #[napi(getter, ts_return_type = "'sse' | 'h2'")]
    pub fn transport(&self) -> &'static str {
        match self.inner.active_transport() {
            TransportKind::Sse => "sse",
            TransportKind::H2 | TransportKind::Auto => "h2",
        }
    }

    /// The built-in tools of the `tools` option (the same tools the core runs, their
    /// background shells included), or `null`.
    #[napi(getter)]
    pub fn tools(&self) -> Option<crate::js_tools::LocalTools> {
        self.inner.tools().cloned().map(crate::js_tools::LocalTools::from_core)
    }

    /// Starts a new conversation.
    #[napi]
    pub fn new_session(&self, env: Env, options: Option<NewSessionOptions>) -> Result<Session> {
        let o = options.unwrap_or(NewSessionOptions {
            cwd: None,
            model: None,
            model_details: None,
            mode: None,
            conversation_id: None,
        });
        let model_details = o.model_details.as_ref().map(crate::js_models::details_from_json).transpose();
        let session = model_details
            .and_then(|model_details| {
                self.inner.new_session(SessionOptions {
                    conversation_id: o.conversation_id,
                    model: o.model,
                    model_details,
                    mode: o.mode,
                    cwd: o.cwd,
                })
            })
            .map_err(|e| coded(&env, &e))?;
        Ok(Session { inner: session })
    }

    /// The models the account may use (`GetUsableModels`, as the official client gets them), in
    /// the server's order. Pass one's `details` as `modelDetails` (or to `session.setModel`).
    #[napi(ts_return_type = "Promise<UsableModel[]>")]
    pub fn list_models<'env>(&self, env: &'env Env) -> Result<PromiseRaw<'env, Value>> {
        let client = self.inner.clone();
        crate::js_error::promise(
            env,
            async move { client.usable_models().await.map(|list| crate::js_models::list_json(&list)) },
            |_, v| Ok(v),
        )
    }

    /// Continues a conversation from `session.save()`.
    #[napi(ts_args_type = "saved: SavedSession")]
    pub fn load_session(&self, env: Env, saved: Value) -> Result<Session> {
        let saved = saved::from_json(&saved).map_err(|e| coded(&env, &e))?;
        let session = within_runtime_if_available(|| self.inner.load_session(saved)).map_err(|e| coded(&env, &e))?;
        Ok(Session { inner: session })
    }
}
