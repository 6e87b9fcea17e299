//! Core errors → JavaScript `Error`s with a stable `code` (and, for server errors, the Connect
//! code, Cursor's error name and the HTTP status). Messages never contain credentials.

use std::future::Future;

use cursor_acp_core::CoreError;
use napi::bindgen_prelude::*;
use napi::{Env, Status};

/// Builds the JS error object on the JS thread and wraps it so napi throws it as is.
#[allow(
    clippy::let_underscore_must_use,
    reason = "setting a property of a fresh Error fails only when the engine does; the error is thrown with the properties it got"
)]
pub fn coded(env: &Env, err: &CoreError) -> napi::Error {
    match env.create_error(napi::Error::new(Status::GenericFailure, err.to_string())) {
        Ok(mut obj) => {
            let _ = obj.set_named_property("code", err.code());
            if let Some(ce) = err.connect_error() {
                let _ = obj.set_named_property("connectCode", ce.code.as_str());
                if let Some(name) = ce.cursor_error_name() {
                    let _ = obj.set_named_property("cursorError", name);
                }
                if let Some(status) = ce.http_status {
                    let _ = obj.set_named_property("httpStatus", status as u32);
                }
            }
            napi::Error::from(obj.to_unknown())
        }
        Err(e) => e,
    }
}

/// Runs `fut` on the runtime and settles a promise: `Ok` through `map` (on the JS thread),
/// `Err` as a coded error.
pub fn promise<'env, T, V, F, M>(env: &'env Env, fut: F, map: M) -> Result<PromiseRaw<'env, V>>
where
    T: Send + 'static,
    V: ToNapiValue + 'static,
    F: Future<Output = std::result::Result<T, CoreError>> + Send + 'static,
    M: FnOnce(&Env, T) -> Result<V> + Send + 'static,
{
    crate::settle::promise(env, fut, map, coded)
}

/// The message of an error thrown or rejected by a JS callback.
pub fn js_message(e: &napi::Error) -> String {
    if e.reason.is_empty() {
        format!("{}", e.status)
    } else {
        e.reason.clone()
    }
}
