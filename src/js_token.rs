//! `accessToken`: a string, or a function the core asks before every stream and call
//! (`{ reason: 'request' | 'unauthenticated' }`), which may return a promise.

use std::sync::Arc;

use cursor_acp_core::transport::{Credentials, Secret, TokenReason, TokenSource};
use cursor_acp_core::CoreError;
use futures::future::BoxFuture;
use napi::bindgen_prelude::*;
use napi::sys;
use serde_json::Value;

use crate::js_host::{call, Callback};

/// The `accessToken` option.
pub enum AccessToken {
    Token(String),
    Function(Arc<Callback<Value, String>>),
}

impl FromNapiValue for AccessToken {
    unsafe fn from_napi_value(env: sys::napi_env, value: sys::napi_value) -> Result<Self> {
        let mut kind = sys::ValueType::napi_undefined;
        // SAFETY: napi calls `from_napi_value` on the JS thread with the env and value of the
        // current call; `kind` is a local.
        check_status!(unsafe { sys::napi_typeof(env, value, &mut kind) }, "napi_typeof failed")?;
        match kind {
            // SAFETY: same env and value; `napi_typeof` said it is a string.
            sys::ValueType::napi_string => Ok(AccessToken::Token(unsafe { String::from_napi_value(env, value)? })),
            sys::ValueType::napi_function => {
                // SAFETY: same env and value; `napi_typeof` said it is a function.
                Ok(AccessToken::Function(Arc::new(unsafe { Callback::<Value, String>::from_napi_value(env, value)? })))
            }
            _ => Err(Error::new(Status::InvalidArg, "accessToken must be a string or a function")),
        }
    }
}

impl AccessToken {
    pub fn credentials(&self) -> Credentials {
        match self {
            AccessToken::Token(t) if t.is_empty() => Credentials::None,
            AccessToken::Token(t) => Credentials::Token(Secret::new(t.clone())),
            AccessToken::Function(f) => Credentials::Source(Arc::new(JsTokenSource(f.clone()))),
        }
    }
}

struct JsTokenSource(Arc<Callback<Value, String>>);

impl TokenSource for JsTokenSource {
    fn token(&self, reason: TokenReason) -> BoxFuture<'static, std::result::Result<Option<Secret>, CoreError>> {
        let f = self.0.clone();
        Box::pin(async move {
            let arg = serde_json::json!({ "reason": reason.as_str() });
            match call(&f, arg).await {
                Ok(token) => Ok(token.filter(|t| !t.is_empty()).map(Secret::new)),
                // The function's own message (it never holds the token: the function has not
                // returned one).
                Err(CoreError::Callback(message)) => {
                    Err(CoreError::Credentials(format!("the accessToken function failed: {message}")))
                }
                Err(other) => Err(other),
            }
        })
    }
}
