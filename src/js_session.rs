//! `Session`: prompt, cancel, actions, save.

use cursor_acp_core::acp;
use cursor_acp_core::session;
use cursor_acp_core::{prompt, CancellationToken, CoreError};
use napi::bindgen_prelude::*;
use napi::Env;
use serde_json::{json, Value};

use crate::js_error::{coded, promise};
use crate::js_record_file::{not_begun, replace_now, RecordFile};
use crate::js_turn::PromptTurn;
use crate::json::Json;
use crate::saved;

/// What `save()` puts in.
#[napi(object)]
pub struct SaveOptions {
    /// The blobs too (the default).
    pub blobs: Option<bool>,
}

/// One conversation. One turn at a time: prompting while a turn runs throws `E_BUSY`.
#[napi]
pub struct Session {
    pub(crate) inner: session::Session,
}

/// Cancels `token` when the AbortSignal in `options.signal` aborts (or already has).
fn wire_signal(env: &Env, options: Option<Object>, token: &CancellationToken) -> Result<()> {
    let Some(options) = options else { return Ok(()) };
    let Some(signal) = options.get::<Object>("signal")? else { return Ok(()) };
    if signal.get::<bool>("aborted")?.unwrap_or(false) {
        token.cancel();
        return Ok(());
    }
    let token = token.clone();
    let on_abort = env.create_function_from_closure("onAbort", move |_ctx| {
        token.cancel();
        Ok(())
    })?;
    #[allow(clippy::type_complexity, reason = "napi's typed signature of addEventListener, used once")]
    let add: Function<'_, FnArgs<(&str, Function<'_, (), ()>, Object)>, Unknown> =
        signal.get_named_property("addEventListener")?;
    let mut once = Object::new(env)?;
    once.set_named_property("once", true)?;
    add.apply(signal, FnArgs::from(("abort", on_abort, once)))?;
    Ok(())
}

/// A new conversation id (a random v4 UUID), the kind `newSession` makes when given none: for a
/// host that names a session before opening it (the stdio agent's ACP session ids), without
/// loading `node:crypto` for it (about 1 MiB of an idle agent's memory).
#[napi]
pub fn new_conversation_id() -> String {
    cursor_acp_core::new_id()
}

#[napi]
impl Session {
    /// The Cursor conversation id (stable across turns).
    #[napi(getter)]
    pub fn conversation_id(&self) -> String {
        self.inner.conversation_id().to_string()
    }

    /// Sends a prompt: a string or ACP content blocks (text, image, resource, resource_link).
    /// `userMessage`: `UserMessage` fields (proto3 JSON) merged over the message built from the
    /// content (`hookAdditionalContexts`, `customModeIntent`, `projectDetails`, …; what you set
    /// wins, lists are appended). `requestContextParts`: large context parts by blob reference
    /// (`ConversationAction.request_context_parts`).
    #[napi(
        ts_args_type = "content: string | ContentBlock[], options?: { signal?: AbortSignal; userMessage?: agent.UserMessage; requestContextParts?: agent.RequestContextPartReferences }"
    )]
    pub fn prompt(&self, env: Env, content: Value, options: Option<Object>) -> Result<PromptTurn> {
        let blocks = prompt::parse_content(&content).map_err(|e| coded(&env, &e))?;
        let extras = match &options {
            Some(o) => session::PromptExtras {
                user_message: o.get::<Value>("userMessage")?.filter(|v| !v.is_null()),
                request_context_parts: o.get::<Value>("requestContextParts")?.filter(|v| !v.is_null()),
            },
            None => session::PromptExtras::default(),
        };
        let token = CancellationToken::new();
        wire_signal(&env, options, &token)?;
        let turn = within_runtime_if_available(|| self.inner.prompt_with_extras(blocks, extras, token))
            .map_err(|e| coded(&env, &e))?;
        crate::memory::track(&turn);
        Ok(PromptTurn::new(turn))
    }

    /// Starts a turn with any `ConversationAction` in proto3 JSON, e.g.
    /// `{ startPlanAction: { userMessage: { text } } }` or `{ executePlanAction: { … } }`.
    #[napi(ts_args_type = "action: ConversationAction, options?: { signal?: AbortSignal }")]
    pub fn action(&self, env: Env, action: Value, options: Option<Object>) -> Result<PromptTurn> {
        let token = CancellationToken::new();
        wire_signal(&env, options, &token)?;
        let turn =
            within_runtime_if_available(|| self.inner.action_with(&action, token)).map_err(|e| coded(&env, &e))?;
        crate::memory::track(&turn);
        Ok(PromptTurn::new(turn))
    }

    /// Asks the server to summarize (compact) the conversation: a turn of its own.
    #[napi]
    pub fn summarize(&self, env: Env) -> Result<PromptTurn> {
        self.action(env, json!({ "summarizeAction": {} }), None)
    }

    /// Records an explicit shell command in the conversation: a turn of its own.
    #[napi]
    pub fn shell_command(&self, env: Env, command: String, exec_id: Option<String>) -> Result<PromptTurn> {
        let mut action = json!({ "shellCommandAction": { "shellCommand": { "command": command } } });
        if let Some(id) = exec_id {
            action["shellCommandAction"]["execId"] = json!(id);
        }
        self.action(env, action, None)
    }

    /// Starts plan mode with a user message: a turn of its own.
    #[napi]
    pub fn start_plan(&self, env: Env, text: String) -> Result<PromptTurn> {
        self.action(
            env,
            json!({ "startPlanAction": { "userMessage": { "text": text, "messageId": uuid_v4() } } }),
            None,
        )
    }

    /// Sends a `ConversationAction` into the running turn (proto3 JSON).
    #[napi(ts_args_type = "action: ConversationAction", ts_return_type = "Promise<void>")]
    pub fn send_action<'env>(&self, env: &'env Env, action: Value) -> Result<PromiseRaw<'env, ()>> {
        let session = self.inner.clone();
        promise(env, async move { session.send_action(&action).await }, |_, ()| Ok(()))
    }

    /// Cancels a running sub-agent of the current turn.
    #[napi(ts_return_type = "Promise<void>")]
    pub fn cancel_subagent<'env>(&self, env: &'env Env, subagent_id: String) -> Result<PromiseRaw<'env, ()>> {
        self.send_action(env, json!({ "cancelSubagentAction": { "subagentId": subagent_id } }))
    }

    /// Moves a running shell tool call to the background.
    #[napi(ts_return_type = "Promise<void>")]
    pub fn background_shell<'env>(&self, env: &'env Env, tool_call_id: String) -> Result<PromiseRaw<'env, ()>> {
        self.send_action(env, json!({ "backgroundShellAction": { "toolCallId": tool_call_id } }))
    }

    /// Moves a running sub-agent tool call to the background.
    #[napi(ts_return_type = "Promise<void>")]
    pub fn background_subagent<'env>(&self, env: &'env Env, tool_call_id: String) -> Result<PromiseRaw<'env, ()>> {
        self.send_action(env, json!({ "backgroundSubagentAction": { "toolCallId": tool_call_id } }))
    }

    /// Injects system context into the running turn without a new user turn; resolves to the
    /// injection id.
    #[napi(ts_return_type = "Promise<string>")]
    pub fn inject_context<'env>(
        &self,
        env: &'env Env,
        content: String,
        producer: Option<String>,
    ) -> Result<PromiseRaw<'env, String>> {
        let session = self.inner.clone();
        let producer = producer.unwrap_or_else(|| "cursor-acp-native".into());
        promise(env, async move { session.inject_context(&content, &producer).await }, |_, id| Ok(id))
    }

    /// Sends a user message into the running turn (`inject_context_action.user_context`), for
    /// the model to take in at its next step without a new turn; resolves to the injection id.
    /// The turn's updates then show it as a `user_message_chunk` once it is delivered, or a
    /// notice if the server keeps it for the next turn or refuses it. Rejects `E_CLOSED` when
    /// no turn runs, `E_INVALID` for an empty message.
    #[napi(ts_return_type = "Promise<string>")]
    pub fn inject_user_message<'env>(&self, env: &'env Env, text: String) -> Result<PromiseRaw<'env, String>> {
        let session = self.inner.clone();
        promise(env, async move { session.inject_user_message(&text).await }, |_, id| Ok(id))
    }

    /// Hands messages of a subscription (CI results, review comments, …) to the conversation
    /// (`subscription_notification_action`, with the request context): a turn of its own.
    /// Each entry is the text of a message or a `UserMessage` in proto3 JSON.
    #[napi(ts_args_type = "notifications: Array<string | agent.UserMessage>, options?: { signal?: AbortSignal }")]
    pub fn notify_subscription(
        &self,
        env: Env,
        notifications: Vec<Value>,
        options: Option<Object>,
    ) -> Result<PromptTurn> {
        let messages: Vec<Value> = notifications
            .into_iter()
            .map(|n| match n {
                Value::String(text) => json!({ "text": text, "messageId": uuid_v4() }),
                other => other,
            })
            .collect();
        self.action(env, json!({ "subscriptionNotificationAction": { "notifications": messages } }), options)
    }

    /// Continues the conversation's long-running goal (`goal_continuation_action`): a turn of its own.
    #[napi]
    pub fn continue_goal(&self, env: Env) -> Result<PromptTurn> {
        self.action(env, json!({ "goalContinuationAction": {} }), None)
    }

    /// Warms the server for this session's next prompt (model, conversation state).
    #[napi(ts_return_type = "Promise<void>")]
    pub fn prewarm<'env>(&self, env: &'env Env) -> Result<PromiseRaw<'env, ()>> {
        let session = self.inner.clone();
        promise(env, async move { session.prewarm().await }, |_, ()| Ok(()))
    }

    /// The updates that replay the stored conversation (for an ACP `session/load`).
    #[napi(ts_return_type = "Promise<SessionUpdate[]>")]
    pub fn replay<'env>(&self, env: &'env Env) -> Result<PromiseRaw<'env, Json>> {
        let session = self.inner.clone();
        promise(
            env,
            async move {
                let updates = session.replay().await;
                Ok(Value::Array(updates.iter().map(cursor_acp_core::translate::to_json).collect()))
            },
            |_, v| Ok(Json(v)),
        )
    }

    /// Opens a card of the host's own in the running turn: a tool it runs that came without the
    /// server's card, a question it asks. `id` is the host's name for the card and `card` what it
    /// shows (`describeExec`, `describeInteraction`). Resolves with the card's ACP id once the
    /// client has been told of it (a permission request names the card by it), at once if it
    /// is out already, or `null` when no turn runs, the turn was cancelled or ends first. A card
    /// the host does not settle fails when the turn ends.
    #[napi(
        ts_args_type = "id: string, card: ToolCard & { status?: 'pending' | 'in_progress' | 'completed' | 'failed' }",
        ts_return_type = "Promise<string | null>"
    )]
    pub fn open_card<'env>(&self, env: &'env Env, id: String, card: Value) -> Result<PromiseRaw<'env, Option<String>>> {
        let call: acp::ToolCall = card_update("tool_call", &id, card).map_err(|e| coded(env, &e))?;
        let session = self.inner.clone();
        promise(env, async move { Ok(session.open_card(call).await) }, |_, id| Ok(id))
    }

    /// The ACP id of the server's card `id` once the client has been told of it in the running
    /// turn (at once if it has), or `null` if the turn ends first or `timeoutMs` passes. A
    /// request about a tool call (a permission, a form) waits for its card with it.
    #[napi(ts_return_type = "Promise<string | null>")]
    pub fn card_announced<'env>(
        &self,
        env: &'env Env,
        id: String,
        timeout_ms: u32,
    ) -> Result<PromiseRaw<'env, Option<String>>> {
        let session = self.inner.clone();
        let within = std::time::Duration::from_millis(u64::from(timeout_ms));
        promise(env, async move { Ok(session.card_announced(&id, within).await) }, |_, id| Ok(id))
    }

    /// Settles a card the host opened (`openCard`) with how its tool ended
    /// (`describeExecResult`), or updates it meanwhile. Like every update, it reaches the
    /// client only while the card is open in the running turn.
    #[napi(ts_args_type = "id: string, outcome: ToolCardOutcome")]
    pub fn settle_card(&self, env: Env, id: String, outcome: Value) -> Result<()> {
        let update: acp::ToolCallUpdate = card_update("tool_call_update", &id, outcome).map_err(|e| coded(&env, &e))?;
        self.inner.settle_card(update);
        Ok(())
    }

    /// Cancels the running turn, if any (ACP `session/cancel`).
    #[napi]
    pub fn cancel(&self) {
        self.inner.cancel();
    }

    /// Model for the next turns: an id, its details from `client.listModels()`, or neither
    /// (Auto, `default`).
    #[napi]
    pub fn set_model(
        &self,
        env: Env,
        model: Option<String>,
        #[napi(ts_arg_type = "ModelDetails")] details: Option<Value>,
    ) -> Result<()> {
        let details = details.as_ref().map(crate::js_models::details_from_json).transpose();
        details.and_then(|details| self.inner.set_model(model.as_deref(), details)).map_err(|e| coded(&env, &e))
    }

    /// Max Mode for the next turns, for a model whose `listModels()` entry has `maxMode`; kept
    /// by `save()`. Setting another model takes that model's own.
    #[napi]
    pub fn set_max_mode(&self, on: bool) {
        self.inner.set_max_mode(on)
    }

    /// Whether the next turns run in Max Mode.
    #[napi(getter)]
    pub fn max_mode(&self) -> bool {
        self.inner.model().max_mode.unwrap_or(false)
    }

    /// Mode for the next turns: `agent`, `ask`, `plan`, …
    #[napi]
    pub fn set_mode(&self, env: Env, mode: Option<String>) -> Result<()> {
        self.inner.set_mode(mode).map_err(|e| coded(&env, &e))
    }

    /// Conversation id, latest checkpoint and blobs: persist it, then `client.loadSession(saved)`.
    /// `{ blobs: false }` leaves the blobs out (`blobs: []`): a session opened with a `blobDir`
    /// keeps them in that folder, and reading them all again costs a long conversation's size.
    #[napi(ts_args_type = "options?: SaveOptions", ts_return_type = "SavedSession")]
    pub fn save(&self, options: Option<SaveOptions>) -> Value {
        let with_blobs = options.and_then(|o| o.blobs).unwrap_or(true);
        saved::to_json(if with_blobs { self.inner.save() } else { self.inner.save_without_blobs() })
    }

    /// Writes `{ ...fields, saved }` as JSON to `file`, where `saved` is what `save()` returns
    /// without its blobs (a session opened with a `blobDir` keeps them in that folder): the
    /// state is taken now, and the JSON made and written on the addon's file thread, in the
    /// order saves were asked for. The file is new and private to this user from its first byte
    /// (0600; on Windows this user's access list); one already at `file` is replaced, so name a
    /// temporary of your own. With `into`, the temporary is then renamed over that record as
    /// its save number `save` (from `into.begin()`), in the same job: resolves true when it
    /// landed, false when `into` was closed or a later save landed first (the temporary
    /// removed). Without `into` it resolves true once written. Rejects with `E_INVALID` when
    /// `fields` is not an object or has `saved`, when `into` comes without a `save` it gave,
    /// or when the file cannot be written or renamed (nothing is left at `file` then).
    #[napi(
        ts_args_type = "file: string, fields: Record<string, unknown>, into?: RecordFile, save?: number",
        ts_return_type = "Promise<boolean>"
    )]
    pub fn save_to_file<'env>(
        &self,
        env: &'env Env,
        file: String,
        fields: Value,
        into: Option<&RecordFile>,
        save: Option<u32>,
    ) -> Result<PromiseRaw<'env, bool>> {
        let saved = self.inner.save_without_blobs();
        // Queued here, on the JavaScript thread, so that saves run in the order they were asked
        // for; a refusal is the promise's, as a failed write is.
        let queued = queue_save(file, fields, saved, into.map(|record| record.inner.clone()), save);
        promise(env, async move { queued?.await }, |_, landed| Ok(landed))
    }

    /// Cancels any running turn; later prompts throw `E_CLOSED`.
    #[napi]
    pub fn close(&self) {
        self.inner.close();
    }
}

/// `saveToFile`'s job, checked and queued on the core's file thread: the record written to
/// `file`, then landed over `into` as save `save` when given. The rename runs in the same job:
/// a turn's end costs the JavaScript thread no file system call.
fn queue_save(
    file: String,
    fields: Value,
    state: session::SavedSession,
    into: Option<std::sync::Arc<cursor_acp_core::record_file::RecordFile>>,
    save: Option<u32>,
) -> std::result::Result<impl std::future::Future<Output = std::result::Result<bool, CoreError>>, CoreError> {
    let Value::Object(mut record) = fields else {
        return Err(CoreError::InvalidInput("saveToFile: fields must be an object".into()));
    };
    if record.contains_key("saved") {
        return Err(CoreError::InvalidInput("saveToFile: `saved` is the session's to write".into()));
    }
    let landing = match (into, save) {
        (None, _) => None,
        (Some(into), Some(save)) if into.issued(u64::from(save)).is_some() => Some((into, save)),
        (Some(into), Some(save)) => return Err(not_begun(&into, save)),
        (Some(_), None) => return Err(CoreError::InvalidInput("saveToFile: `into` needs its save number".into())),
    };
    let job = cursor_acp_core::file_queue::run(move || {
        record.insert("saved".into(), saved::to_json(state));
        let text = serde_json::to_vec(&Value::Object(record))
            .map_err(|e| CoreError::InvalidInput(format!("saveToFile: {e}")))?;
        cursor_acp_core::private_files::write_new_file(std::path::Path::new(&file), &text)
            .map_err(|e| CoreError::InvalidInput(format!("saveToFile: {file}: {e}")))?;
        match landing {
            Some((into, save)) => replace_now(&into, &file, save),
            None => Ok(true),
        }
    });
    Ok(
        async move { job.await.map_err(|e| CoreError::InvalidInput(format!("saveToFile: the write did not finish: {e}")))? },
    )
}

fn uuid_v4() -> String {
    cursor_acp_core::new_id()
}

/// A card's fields (an object) as the ACP update `kind` about card `id` (`T`: its type, a tool
/// call or a tool call update). Read as that type alone, not as any `SessionUpdate`: the
/// deserializer of every update the schema has would be in the addon for these two.
fn card_update<T: serde::de::DeserializeOwned>(
    kind: &str,
    id: &str,
    fields: Value,
) -> std::result::Result<T, CoreError> {
    let Value::Object(mut fields) = fields else {
        return Err(CoreError::InvalidInput("a card must be an object".into()));
    };
    // The schema reads an unknown `status` as absent rather than failing: a card the host meant
    // to settle would silently stay open. (An unknown `kind` is the schema's `other`, by design.)
    if let Some(status) = fields.get("status").filter(|v| !v.is_null()) {
        serde_json::from_value::<acp::ToolCallStatus>(status.clone())
            .map_err(|_| CoreError::InvalidInput(format!("not an ACP {kind}: `status` cannot be {status}")))?;
    }
    fields.insert("toolCallId".into(), Value::String(id.into()));
    serde_json::from_value(Value::Object(fields))
        .map_err(|e| CoreError::InvalidInput(format!("not an ACP {kind}: {e}")))
}
