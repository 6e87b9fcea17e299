//! `PromptTurn`: the async iterator of ACP updates of one turn, plus its result.

use cursor_acp_core::session::{Turn, TurnResult};
use napi::bindgen_prelude::*;
use napi::Env;
use serde_json::{json, Value};

use crate::js_error::coded;
use crate::settle::deferred;

/// One turn: `for await (const update of turn)` yields ACP `SessionUpdate`s in order;
/// `await turn.result` gives `{ stopReason, usage }` once the turn is over (all its updates are
/// queued by then). Breaking out of the loop cancels the turn.
#[napi(async_iterator)]
pub struct PromptTurn {
    pub(crate) turn: Turn,
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
    type Yield = Value;
    type Next = ();
    type Return = ();

    fn next(
        &mut self,
        _value: Option<()>,
    ) -> impl std::future::Future<Output = Result<Option<Value>>> + Send + 'static {
        let turn = self.turn.clone();
        async move { Ok(turn.next().await.map(update_json)) }
    }

    fn complete(
        &mut self,
        _value: Option<()>,
    ) -> impl std::future::Future<Output = Result<Option<Value>>> + Send + 'static {
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
    pub fn next_batch<'env>(&self, env: &'env Env, max: u32) -> Result<PromiseRaw<'env, Value>> {
        // No task: the turn hands the batch over from whichever thread has it (this one, if
        // updates are queued already), converted there, and the promise settles in order.
        let (promise, resolver) = deferred(env)?;
        self.turn.read_batch(
            max.max(1) as usize,
            Box::new(move |batch| {
                let batch = Value::Array(batch.into_iter().map(update_json).collect());
                resolver.settle(move |_| Ok(batch));
            }),
        );
        Ok(promise)
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
