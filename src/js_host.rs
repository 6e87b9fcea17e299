//! The JavaScript host: exec / interaction / requestContext / kv callbacks, awaited from the
//! turn loop through weak, non-error-first threadsafe functions (a stored callback never keeps
//! Node alive; a pending `next()` does). Callbacks may return a value or a Promise.

use std::sync::{Arc, Mutex};

use bytes::Bytes;
use cursor_acp_core::host::{
    self, Answers, BlobStore, ChoiceRequest, ExecEvent, ExecRequest, Host, InteractionRequest, McpCall,
    PastConversation, Permission, PermissionRequest, QuestionsRequest,
};
use cursor_acp_core::CoreError;
use futures::future::BoxFuture;
use napi::bindgen_prelude::*;
use napi::threadsafe_function::{ThreadsafeFunction, ThreadsafeFunctionCallMode};
use napi::{sys, Env, UnknownRef};
use serde_json::Value;
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

use crate::js_error::js_message;
use crate::json::{BytesAt, HostJson};

/// A callback result: a plain value or a Promise of one (`undefined`/`null` → `None`).
pub enum MaybeAsync<T: FromNapiValue + 'static> {
    Promise(Promise<Option<T>>),
    Value(Option<T>),
}

impl<T: FromNapiValue + 'static> FromNapiValue for MaybeAsync<T> {
    unsafe fn from_napi_value(env: sys::napi_env, value: sys::napi_value) -> Result<Self> {
        let mut is_promise = false;
        // SAFETY: napi calls `from_napi_value` on the JS thread with the env and value of the
        // current call; `is_promise` is a local.
        check_status!(unsafe { sys::napi_is_promise(env, value, &mut is_promise) }, "napi_is_promise failed")?;
        if is_promise {
            // SAFETY: same env and value as above; the value is a promise, which `Promise` takes.
            Ok(MaybeAsync::Promise(unsafe { Promise::from_napi_value(env, value)? }))
        } else {
            // SAFETY: same env and value as above, handed on unchanged.
            Ok(MaybeAsync::Value(unsafe { Option::<T>::from_napi_value(env, value)? }))
        }
    }
}

impl<T: FromNapiValue + 'static> MaybeAsync<T> {
    async fn settle(self) -> Result<Option<T>> {
        match self {
            MaybeAsync::Promise(p) => p.await,
            MaybeAsync::Value(v) => Ok(v),
        }
    }
}

/// `(arg) => R | Promise<R>`: weak, not error-first.
pub type Callback<Args, R> = ThreadsafeFunction<Args, MaybeAsync<R>, Args, Status, false, true>;

pub(crate) async fn call<Args: 'static + JsValuesTupleIntoVec, R: FromNapiValue + Send + 'static>(
    f: &Callback<Args, R>,
    args: Args,
) -> std::result::Result<Option<R>, CoreError> {
    let returned = f.call_async_catch(args).await.map_err(|e| CoreError::Callback(js_message(&e)))?;
    returned.settle().await.map_err(|e| CoreError::Callback(js_message(&e)))
}

/// The `ctx` argument of the exec callback.
#[napi(custom_finalize)]
pub struct ExecContext {
    events: mpsc::UnboundedSender<ExecEvent>,
    cancel: CancellationToken,
    /// Cancelled when the exec is over, so the abort watcher ends.
    done: CancellationToken,
    signal: Option<UnknownRef>,
}

impl ObjectFinalize for ExecContext {
    fn finalize(self, env: Env) -> Result<()> {
        if let Some(signal) = self.signal {
            signal.unref(&env)?;
        }
        Ok(())
    }
}

impl ExecContext {
    /// The core's view of this context, for the built-in tools.
    pub(crate) fn core(&self) -> host::ExecContext {
        host::ExecContext { cancel: self.cancel.clone(), events: self.events.clone() }
    }
}

#[napi]
impl ExecContext {
    /// Streams standard output of a shell exec to the server (`shellStream`: as `stdout`
    /// events; the first chunk also counts as `started()`).
    #[napi]
    #[allow(clippy::let_underscore_must_use, reason = "the exec may be over; nobody listens any more")]
    pub fn stdout(&self, data: String) {
        let _ = self.events.send(ExecEvent::Stdout(data));
    }

    /// Streams standard error of a shell exec to the server.
    #[napi]
    #[allow(clippy::let_underscore_must_use, reason = "the exec may be over; nobody listens any more")]
    pub fn stderr(&self, data: String) {
        let _ = self.events.send(ExecEvent::Stderr(data));
    }

    /// Says the command's process has started: a `shellStream` exec sends its `start` event
    /// now. Call it once the process runs (after the user allowed it and it spawned), or let the
    /// first `stdout()`/`stderr()` say it. A command that never starts (rejected, denied,
    /// failed to spawn) must not call it: it is then answered with `rejected`,
    /// `permission_denied` or nothing, and never with `start` and `exit`. The built-in tools
    /// (`LocalTools.run(request, ctx)`) call it themselves.
    #[napi]
    #[allow(clippy::let_underscore_must_use, reason = "the exec may be over; nobody listens any more")]
    pub fn started(&self) {
        let _ = self.events.send(ExecEvent::Started);
    }

    /// Adds a hook's additional context to this exec's answer. Sent only when the request
    /// says `acceptHookAdditionalContexts` (the server takes them); otherwise dropped.
    #[napi]
    #[allow(clippy::let_underscore_must_use, reason = "the exec may be over; nobody listens any more")]
    pub fn hook_context(&self, hook_event_name: String, content: String) {
        let _ = self.events.send(ExecEvent::HookContext { hook_event_name, content });
    }

    /// Whether the server aborted this exec or the turn was cancelled.
    #[napi(getter)]
    pub fn aborted(&self) -> bool {
        self.cancel.is_cancelled()
    }

    /// Aborts when the server sends `abort` for this exec or the turn is cancelled.
    #[napi(getter, ts_return_type = "AbortSignal")]
    pub fn signal<'env>(&mut self, env: &'env Env) -> Result<Unknown<'env>> {
        if let Some(signal) = &self.signal {
            return signal.get_value(env);
        }
        let global = env.get_global()?;
        let constructor: Function<'_, (), Object<'_>> = global.get_named_property("AbortController")?;
        let controller = constructor.new_instance(())?;
        // SAFETY: `new AbortController()` returns an object.
        let controller: Object<'_> = unsafe { controller.cast()? };
        let signal: Unknown<'_> = controller.get_named_property("signal")?;
        let abort: Function<'_, (), Unknown<'_>> = controller.get_named_property("abort")?;
        let bind: Function<'_, Unknown<'_>, Function<'_, (), Unknown<'_>>> = abort.get_named_property("bind")?;
        let bound = bind.apply(abort, controller.to_unknown())?;
        if self.cancel.is_cancelled() {
            bound.call(())?;
        } else {
            let trigger = bound.build_threadsafe_function::<()>().callee_handled::<false>().weak::<true>().build()?;
            let cancel = self.cancel.clone();
            let done = self.done.clone();
            napi::bindgen_prelude::spawn(async move {
                tokio::select! {
                    // Cancel first: when the exec ends because it was cancelled, both fire.
                    biased;
                    _ = cancel.cancelled() => {
                        trigger.call((), ThreadsafeFunctionCallMode::NonBlocking);
                    }
                    _ = done.cancelled() => {}
                }
            });
        }
        self.signal = Some(signal.create_ref()?);
        Ok(signal)
    }
}

/// `exec(request, ctx)`.
pub type ExecCallback = Callback<FnArgs<(Value, ExecContext)>, HostJson>;

/// `(request, ctx) => answer`: the permission policy and the MCP client.
pub type ContextCallback = Callback<FnArgs<(Value, ExecContext)>, Value>;

/// JS callbacks implementing the core's `Host`.
#[derive(Default)]
pub struct JsHost {
    pub exec: Option<Arc<ExecCallback>>,
    pub interaction: Option<Arc<Callback<Value, HostJson>>>,
    pub request_context: Option<Arc<Callback<(), HostJson>>>,
    pub permission: Option<Arc<ContextCallback>>,
    pub editor_read: Option<Arc<Callback<Value, String>>>,
    pub editor_write: Option<Arc<Callback<Value, Value>>>,
    pub mcp: Option<Arc<ContextCallback>>,
    pub past_conversations: Option<Arc<Callback<(), Value>>>,
    pub choose: Option<Arc<ContextCallback>>,
    pub mode_switched: Option<Arc<Callback<String, Value>>>,
    pub ask_questions: Option<Arc<ContextCallback>>,
}

impl JsHost {
    /// Whether it has any callback (else the client takes `NoHost`).
    pub fn is_empty(&self) -> bool {
        self.exec.is_none()
            && self.interaction.is_none()
            && self.request_context.is_none()
            && self.permission.is_none()
            && self.editor_read.is_none()
            && self.editor_write.is_none()
            && self.mcp.is_none()
            && self.past_conversations.is_none()
            && self.choose.is_none()
            && self.mode_switched.is_none()
            && self.ask_questions.is_none()
    }
}

/// An `ExecContext` for a callback that is not an exec's (the permission policy, the MCP
/// client): its `signal` follows `cancel`; what it reports goes nowhere.
fn context_of(cancel: CancellationToken) -> (ExecContext, tokio_util::sync::DropGuard) {
    let done = CancellationToken::new();
    let guard = done.clone().drop_guard();
    let (events, _) = mpsc::unbounded_channel();
    (ExecContext { events, cancel, done, signal: None }, guard)
}

fn permission_json(request: &PermissionRequest) -> Value {
    let mut json = serde_json::json!({
        "toolCall": request.tool_call,
        "kind": request.kind,
        "programs": request.programs,
        "paths": request.paths,
        "mayAsk": request.may_ask,
    });
    if let Some(command) = &request.command {
        json["command"] = Value::String(command.clone());
    }
    if let Some(url) = &request.url {
        json["url"] = Value::String(url.clone());
    }
    if let Some((server, tool)) = &request.mcp {
        json["mcpServer"] = Value::String(server.clone());
        json["mcpTool"] = Value::String(tool.clone());
    }
    json
}

/// `'allow'`, `'reject'`, `'cancelled'`, or `{ outcome, reason }`.
fn permission_answer(answer: Option<Value>) -> std::result::Result<Permission, CoreError> {
    let (outcome, reason) = match &answer {
        Some(Value::String(outcome)) => (outcome.as_str(), None),
        Some(Value::Object(fields)) => (
            fields.get("outcome").and_then(Value::as_str).unwrap_or_default(),
            fields.get("reason").and_then(Value::as_str).map(str::to_string),
        ),
        _ => ("", None),
    };
    match outcome {
        "allow" => Ok(Permission::Allow),
        "reject" => Ok(Permission::Reject(reason)),
        "cancelled" => Ok(Permission::Cancelled),
        _ => Err(CoreError::Callback(format!(
            "the permission callback answered {}: expected 'allow', 'reject' or 'cancelled'",
            answer.map_or_else(|| "nothing".to_string(), |a| a.to_string().chars().take(80).collect())
        ))),
    }
}

/// `{ outcome: 'answered', answers: { [questionId]: string[] } }`, `'declined'`, `'cancelled'`
/// or `'inConversation'`.
fn answers(answer: Option<Value>) -> std::result::Result<Answers, CoreError> {
    let outcome = match &answer {
        Some(Value::String(outcome)) => outcome.as_str(),
        Some(Value::Object(fields)) => fields.get("outcome").and_then(Value::as_str).unwrap_or_default(),
        _ => "",
    };
    match outcome {
        "answered" => {
            let given = answer.as_ref().and_then(|a| a.get("answers")).and_then(Value::as_object);
            let answers = given
                .map(|given| {
                    given
                        .iter()
                        .map(|(question, chosen)| {
                            let chosen = match chosen {
                                Value::Array(items) => {
                                    items.iter().filter_map(Value::as_str).map(str::to_string).collect()
                                }
                                Value::String(one) => vec![one.clone()],
                                _ => Vec::new(),
                            };
                            (question.clone(), chosen)
                        })
                        .collect()
                })
                .unwrap_or_default();
            Ok(Answers::Answered(answers))
        }
        "declined" => Ok(Answers::Declined),
        "cancelled" => Ok(Answers::Cancelled),
        "inConversation" => Ok(Answers::InConversation),
        _ => Err(CoreError::Callback(
            "the askQuestions callback answered neither 'answered', 'declined', 'cancelled' nor 'inConversation'"
                .into(),
        )),
    }
}

fn mcp_json(call: McpCall) -> Value {
    match call {
        McpCall::Tool { server, tool, args } => {
            serde_json::json!({ "op": "callTool", "server": server, "tool": tool, "args": args })
        }
        McpCall::ListResources { server } => serde_json::json!({ "op": "listResources", "server": server }),
        McpCall::ReadResource { server, uri } => {
            serde_json::json!({ "op": "readResource", "server": server, "uri": uri })
        }
        McpCall::State { servers } => serde_json::json!({ "op": "state", "servers": servers }),
    }
}

/// One entry of `pastConversations()` (`updatedAt` in milliseconds since the epoch).
fn past_conversation(entry: &Value) -> Option<PastConversation> {
    let text = |key: &str| entry.get(key).and_then(Value::as_str).map(str::to_string);
    let updated_at_ms = entry.get("updatedAt").and_then(Value::as_f64).filter(|ms| ms.is_finite()).map(|ms| ms as i64);
    Some(PastConversation {
        conversation_id: text("conversationId")?,
        title: text("title").unwrap_or_default(),
        updated_at_ms,
    })
}

fn request_json(request: &ExecRequest) -> Value {
    serde_json::json!({
        "kind": request.kind,
        "id": request.id,
        "execId": request.exec_id,
        "args": request.args,
        "acceptHookAdditionalContexts": request.accept_hook_additional_contexts,
    })
}

impl Host for JsHost {
    fn exec(
        &self,
        request: ExecRequest,
        ctx: host::ExecContext,
    ) -> BoxFuture<'static, std::result::Result<Option<Value>, CoreError>> {
        let exec = self.exec.clone();
        Box::pin(async move {
            if let Some(exec) = exec {
                let done = CancellationToken::new();
                let _guard = done.clone().drop_guard();
                let js_ctx = ExecContext { events: ctx.events.clone(), cancel: ctx.cancel.clone(), done, signal: None };
                let answered = call(&exec, FnArgs::from((request_json(&request), js_ctx))).await?;
                if let Some(HostJson { mut json, bytes }) = answered {
                    for BytesAt { path, data } in bytes {
                        let value = cursor_acp_core::bridge::byte_array_json(&request, &path, data).map_err(|e| {
                            CoreError::Callback(format!("the exec callback returned an invalid {}: {e}", request.kind))
                        })?;
                        put(&mut json, &path, value);
                    }
                    return Ok(Some(json));
                }
            }
            Ok(None)
        })
    }

    fn permission(
        &self,
        request: PermissionRequest,
        cancel: CancellationToken,
    ) -> BoxFuture<'static, std::result::Result<Permission, CoreError>> {
        let Some(permission) = self.permission.clone() else {
            let answer = host::no_policy(&request);
            return Box::pin(async move { Ok(answer) });
        };
        Box::pin(async move {
            let (ctx, _done) = context_of(cancel);
            permission_answer(call(&permission, FnArgs::from((permission_json(&request), ctx))).await?)
        })
    }

    fn has_permission_policy(&self) -> bool {
        self.permission.is_some()
    }

    fn choose(
        &self,
        request: ChoiceRequest,
        cancel: CancellationToken,
    ) -> BoxFuture<'static, std::result::Result<Option<String>, CoreError>> {
        let Some(choose) = self.choose.clone() else { return Box::pin(async { Ok(None) }) };
        Box::pin(async move {
            let (ctx, _done) = context_of(cancel);
            let options: Vec<Value> = request
                .options
                .iter()
                .map(|o| serde_json::json!({ "optionId": o.id, "name": o.name, "kind": o.kind }))
                .collect();
            let arg = serde_json::json!({ "toolCall": request.tool_call, "options": options });
            // `null`: dismissed (the host stops the turn itself).
            let chosen = call(&choose, FnArgs::from((arg, ctx))).await?;
            Ok(Some(chosen.and_then(|c| c.as_str().map(str::to_string)).unwrap_or_default()))
        })
    }

    fn mode_switched(&self, mode: String) -> BoxFuture<'static, std::result::Result<(), CoreError>> {
        let Some(switched) = self.mode_switched.clone() else { return Box::pin(async { Ok(()) }) };
        Box::pin(async move { call(&switched, mode).await.map(drop) })
    }

    fn ask_questions(
        &self,
        request: QuestionsRequest,
        cancel: CancellationToken,
    ) -> BoxFuture<'static, std::result::Result<Option<Answers>, CoreError>> {
        let Some(ask) = self.ask_questions.clone() else { return Box::pin(async { Ok(None) }) };
        Box::pin(async move {
            let (ctx, _done) = context_of(cancel);
            let arg = serde_json::json!({
                "toolCallId": request.tool_call_id,
                "title": request.title,
                "questions": request.questions,
            });
            answers(call(&ask, FnArgs::from((arg, ctx))).await?).map(Some)
        })
    }

    fn reads_through_editor(&self) -> bool {
        self.editor_read.is_some()
    }

    fn editor_read(
        &self,
        path: String,
        line: Option<u32>,
        limit: Option<u32>,
    ) -> BoxFuture<'static, std::result::Result<Option<String>, CoreError>> {
        let Some(read) = self.editor_read.clone() else { return Box::pin(async { Ok(None) }) };
        Box::pin(async move { call(&read, serde_json::json!({ "path": path, "line": line, "limit": limit })).await })
    }

    fn editor_write(&self, path: String, content: String) -> BoxFuture<'static, std::result::Result<bool, CoreError>> {
        let Some(write) = self.editor_write.clone() else { return Box::pin(async { Ok(false) }) };
        Box::pin(async move {
            let answer = call(&write, serde_json::json!({ "path": path, "content": content })).await?;
            Ok(answer != Some(Value::Bool(false)))
        })
    }

    fn mcp(
        &self,
        request: McpCall,
        cancel: CancellationToken,
    ) -> BoxFuture<'static, std::result::Result<Option<Value>, CoreError>> {
        let Some(mcp) = self.mcp.clone() else { return Box::pin(async { Ok(None) }) };
        Box::pin(async move {
            let (ctx, _done) = context_of(cancel);
            call(&mcp, FnArgs::from((mcp_json(request), ctx))).await
        })
    }

    fn past_conversations(&self) -> BoxFuture<'static, std::result::Result<Option<Vec<PastConversation>>, CoreError>> {
        let Some(list) = self.past_conversations.clone() else { return Box::pin(async { Ok(None) }) };
        Box::pin(async move {
            let entries = call(&list, ()).await?;
            Ok(entries
                .map(|e| e.as_array().map(|a| a.iter().filter_map(past_conversation).collect()).unwrap_or_default()))
        })
    }

    fn interaction(
        &self,
        query: InteractionRequest,
        _cancel: CancellationToken,
    ) -> BoxFuture<'static, std::result::Result<Option<Value>, CoreError>> {
        let Some(interaction) = self.interaction.clone() else { return Box::pin(async { Ok(None) }) };
        Box::pin(async move {
            let arg = serde_json::json!({ "kind": query.kind, "id": query.id, "query": query.query });
            call(&interaction, arg).await?.map(json_only).transpose()
        })
    }

    fn request_context(&self) -> BoxFuture<'static, std::result::Result<Option<Value>, CoreError>> {
        let Some(rc) = self.request_context.clone() else { return Box::pin(async { Ok(None) }) };
        Box::pin(async move { call(&rc, ()).await?.map(json_only).transpose() })
    }
}

/// Sets `value` at `path` of `json`, whose objects along the path the result's conversion made.
fn put(json: &mut Value, path: &[String], value: Value) {
    let Some((last, parents)) = path.split_last() else { return };
    let mut at = json;
    for name in parents {
        match at.get_mut(name.as_str()) {
            Some(inner) => at = inner,
            None => return,
        }
    }
    if let Value::Object(map) = at {
        map.insert(last.clone(), value);
    }
}

/// A result that must be JSON only: byte arrays are for exec results' `bytes` and `string` fields.
fn json_only(result: HostJson) -> std::result::Result<Value, CoreError> {
    match result.bytes.first() {
        None => Ok(result.json),
        Some(at) => Err(CoreError::Callback(format!(
            "a byte array at `{}`: only exec results take byte arrays; use base64",
            at.path.join(".")
        ))),
    }
}

/// `kv: { get(blobIdHex), set(blobIdHex, data) }` from JavaScript.
pub struct JsBlobStore {
    pub get: Arc<Callback<String, Buffer>>,
    pub set: Arc<Callback<FnArgs<(String, Buffer)>, Value>>,
    /// Blobs seen through this store, so `save()` can include them.
    pub seen: Arc<Mutex<std::collections::HashMap<Bytes, Bytes>>>,
}

impl BlobStore for JsBlobStore {
    fn get(&self, id: Bytes) -> BoxFuture<'static, std::result::Result<Option<Bytes>, CoreError>> {
        let get = self.get.clone();
        Box::pin(async move {
            let data = call(&get, hex::encode(&id)).await?;
            Ok(data.map(|b| Bytes::copy_from_slice(&b)))
        })
    }

    fn set(&self, id: Bytes, data: Bytes) -> BoxFuture<'static, std::result::Result<(), CoreError>> {
        let set = self.set.clone();
        self.seen.lock().expect("kv lock").insert(id.clone(), data.clone());
        Box::pin(async move {
            call(&set, FnArgs::from((hex::encode(&id), Buffer::from(data.to_vec())))).await?;
            Ok(())
        })
    }

    fn snapshot(&self) -> Option<Vec<(Bytes, Bytes)>> {
        Some(self.seen.lock().expect("kv lock").iter().map(|(k, v)| (k.clone(), v.clone())).collect())
    }
}
