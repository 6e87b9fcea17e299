//! `PromptTurn`: the async iterator of ACP updates of one turn, plus its result.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use cursor_acp_core::session::{Turn, TurnResult};
use cursor_acp_core::CoreError;
use napi::bindgen_prelude::*;
use napi::{sys, Env};
use serde_json::{json, Value};

use crate::js_error::coded;
use crate::json::Json;
use crate::settle::deferred;

/// One turn: `for await (const update of turn)` yields ACP `SessionUpdate`s in order;
/// `await turn.result` gives `{ stopReason, usage }` once the turn is over (all its updates are
/// queued by then). A turn that fails makes the iteration throw, after every update queued
/// before the failure, the same coded error `result` rejects with (`code`, `connectCode`, …);
/// a cancelled turn never throws. Breaking out of the loop cancels the turn.
#[napi(async_iterator)]
pub struct PromptTurn {
    pub(crate) turn: Turn,
    /// Set once the iteration has thrown the turn's error: later reads are the end, as for a
    /// JavaScript generator that threw.
    failure_thrown: Arc<AtomicBool>,
}

impl PromptTurn {
    pub(crate) fn new(turn: Turn) -> Self {
        PromptTurn { turn, failure_thrown: Arc::default() }
    }

    /// The next batch of up to `max` updates (at least one), as `convert` makes it. No task: the
    /// turn hands the batch over from whichever thread has it (this one, if updates are queued
    /// already), converted there (off the JS thread when the turn's thread has it), and the
    /// promises settle in the order the reads were made.
    fn read_batch_as<'env, V: ToNapiValue + Send + 'static>(
        &self,
        env: &'env Env,
        max: u32,
        convert: impl FnOnce(Vec<cursor_acp_core::acp::SessionUpdate>) -> V + Send + 'static,
    ) -> Result<PromiseRaw<'env, V>> {
        let (promise, resolver) = deferred(env)?;
        self.turn.read_batch(
            max.max(1) as usize,
            Box::new(move |batch| {
                let value = convert(batch);
                resolver.settle(move |_| Ok(value));
            }),
        );
        Ok(promise)
    }
}

/// What one read of the iterator settles with: an update, or the turn's failure.
pub enum IteratorStep {
    Update(Value),
    Failed(CoreError),
}

impl ToNapiValue for IteratorStep {
    unsafe fn to_napi_value(env: sys::napi_env, step: Self) -> Result<sys::napi_value> {
        match step {
            // SAFETY: napi calls `to_napi_value` on the JS thread with a live env, handed on
            // unchanged.
            IteratorStep::Update(update) => unsafe { Json::to_napi_value(env, Json(update)) },
            // On the JS thread: the coded error object is made here, and napi rejects the read's
            // promise with that very object (a future's own error would lose its properties).
            IteratorStep::Failed(e) => Err(coded(&Env::from_raw(env), &e)),
        }
    }
}

fn update_json(update: cursor_acp_core::acp::SessionUpdate) -> Value {
    cursor_acp_core::translate::to_json(&update)
}

fn result_json(result: TurnResult) -> Value {
    let stop = serde_json::to_value(result.stop_reason).unwrap_or(Value::Null);
    let mut out = json!({ "stopReason": stop });
    if let Some(u) = result.usage {
        out["usage"] = json!({
            "inputTokens": u.input_tokens,
            "outputTokens": u.output_tokens,
            "cachedReadTokens": u.cache_read_tokens,
            "cachedWriteTokens": u.cache_write_tokens,
            "thoughtTokens": u.reasoning_tokens,
            "totalTokens": u.total(),
        });
    }
    out
}

impl AsyncGenerator for PromptTurn {
    type Yield = IteratorStep;
    type Next = ();
    type Return = ();

    fn next(
        &mut self,
        _value: Option<()>,
    ) -> impl std::future::Future<Output = Result<Option<IteratorStep>>> + Send + 'static {
        let turn = self.turn.clone();
        let failure_thrown = self.failure_thrown.clone();
        async move {
            if let Some(update) = turn.next().await {
                return Ok(Some(IteratorStep::Update(update_json(update))));
            }
            // Every update is out; the result is stored right after (or already).
            match turn.result().await {
                Err(e) if !failure_thrown.swap(true, Ordering::SeqCst) => Ok(Some(IteratorStep::Failed(e))),
                _ => Ok(None),
            }
        }
    }

    fn complete(
        &mut self,
        _value: Option<()>,
    ) -> impl std::future::Future<Output = Result<Option<IteratorStep>>> + Send + 'static {
        // `break` / `return()`: the consumer is gone. Cancel and drop what nobody will read.
        self.turn.release();
        async { Ok(None) }
    }
}

#[napi]
impl PromptTurn {
    /// Up to `max` updates at once (at least one unless the turn is over: then `[]`). Cheaper
    /// than `for await` for bursts.
    #[napi(ts_return_type = "Promise<SessionUpdate[]>")]
    pub fn next_batch<'env>(&self, env: &'env Env, max: u32) -> Result<PromiseRaw<'env, Json>> {
        self.read_batch_as(env, max, |batch| Json(Value::Array(batch.into_iter().map(update_json).collect())))
    }

    /// Like `nextBatch`, the updates as ACP's stdio transport carries them: a `session/update`
    /// notification of `sessionId` per update, one JSON-RPC line each (ending in `\n`), in a
    /// `Buffer` to write as it is; empty once the turn is over. For an agent relaying the turn
    /// to its client: no object is made for each update, and nothing is serialized again.
    #[napi(ts_return_type = "Promise<Buffer>")]
    pub fn next_lines<'env>(&self, env: &'env Env, max: u32, session_id: String) -> Result<PromiseRaw<'env, Buffer>> {
        self.read_batch_as(env, max, move |batch| {
            Buffer::from(cursor_acp_core::translate::notification_lines(&session_id, batch))
        })
    }

    /// `{ stopReason, usage? }`, settled when the turn is over; every update was queued before
    /// it (and stays readable from the iterator). Awaited without iterating, updates are dropped.
    /// Rejects with a coded error (`E_AUTH`, `E_NETWORK`, `E_PROTOCOL`, `E_SERVER`, …).
    #[napi(getter, ts_return_type = "Promise<PromptResult>")]
    pub fn result<'env>(&self, env: &'env Env) -> Result<PromiseRaw<'env, Value>> {
        // No task either: settled by the turn's end.
        let (promise, resolver) = deferred(env)?;
        self.turn.result_with(Box::new(move |outcome| {
            resolver.settle(move |env| outcome.map(result_json).map_err(|e| coded(env, &e)));
        }));
        Ok(promise)
    }

    /// Cancels the turn (ACP `session/cancel`); `result` resolves `cancelled` within the bound.
    #[napi]
    pub fn cancel(&self) {
        self.turn.cancel();
    }
}
