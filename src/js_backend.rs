//! `startEmbeddedBackend({ scenario })`: the core's loopback server, for demos and tests.

use std::sync::Arc;

use cursor_acp_embedded::{self as embedded, Scenario};
use napi::bindgen_prelude::*;
use napi::Env;

use cursor_acp_core::CoreError;

use crate::js_error::promise;
use crate::json::Json;

#[napi(object, object_to_js = false)]
pub struct EmbeddedBackendOptions {
    /// What the backend plays: see `Scenario`.
    #[napi(ts_type = "Scenario")]
    pub scenario: Json,
    /// Loopback port (default: any free port).
    pub port: Option<u32>,
    /// Sign-in, API-key exchange and token refresh with expiring tokens, and whether agent
    /// RPCs need a valid token (see `EmbeddedAuthOptions`; without it no token is needed).
    #[napi(ts_type = "EmbeddedAuthOptions")]
    pub auth: Option<Json>,
    /// What `GetUsableModels` answers (`ModelDetails`, proto3 JSON); run requests must name one
    /// of them or `default`. Default: two models of the backend's own.
    #[napi(ts_type = "ModelDetails[]")]
    pub models: Option<Json>,
}

/// A running embedded backend (loopback only). `close()` it when done.
#[napi]
pub struct EmbeddedBackend {
    inner: Arc<embedded::EmbeddedBackend>,
}

#[napi]
impl EmbeddedBackend {
    /// `http://127.0.0.1:PORT`: pass it as `baseUrl`.
    #[napi(getter)]
    pub fn url(&self) -> String {
        self.inner.url()
    }

    /// What clients sent, one record per turn's stream (request id), in first-contact order. A
    /// stream is listed once its first message arrives (or it ends without one).
    #[napi(ts_return_type = "RunRecord[]")]
    pub fn records(&self) -> Result<Json> {
        serde_json::to_value(self.inner.records()).map(Json).map_err(|e| Error::from_reason(e.to_string()))
    }

    /// The streams that began with a `prewarm_request` (they play no turn), in first-contact
    /// order; `records()` leaves them out.
    #[napi(ts_return_type = "RunRecord[]")]
    pub fn prewarms(&self) -> Result<Json> {
        serde_json::to_value(self.inner.prewarms()).map(Json).map_err(|e| Error::from_reason(e.to_string()))
    }

    /// Moves the backend's sign-in clock `ms` milliseconds ahead: the tokens it issued expire as
    /// if that time had passed, so a test need not wait for them to.
    #[napi]
    pub fn advance_clock(&self, ms: f64) -> Result<()> {
        let by = std::time::Duration::try_from_secs_f64(ms / 1000.0).map_err(|_| {
            Error::new(Status::InvalidArg, format!("advanceClock: ms must be a number from 0 to 2^64 s, got {ms}"))
        })?;
        self.inner.advance_clock(by);
        Ok(())
    }

    /// Stops the server and cuts open connections.
    #[napi]
    pub fn close(&self) {
        self.inner.close();
    }
}

/// Starts an embedded backend playing `scenario` on 127.0.0.1.
#[napi(ts_return_type = "Promise<EmbeddedBackend>")]
pub fn start_embedded_backend<'env>(
    env: &'env Env,
    options: EmbeddedBackendOptions,
) -> Result<PromiseRaw<'env, EmbeddedBackend>> {
    let port = options.port.unwrap_or(0);
    let scenario = options.scenario.0;
    let auth = options.auth.map(|a| a.0);
    let models = options.models.map(|m| m.0);
    // Validation happens inside the promise so a bad scenario rejects rather than throws.
    promise(
        env,
        async move {
            let scenario = Scenario::from_json(&scenario)?;
            let port =
                u16::try_from(port).map_err(|_| CoreError::InvalidInput(format!("port {port} is not 0-65535")))?;
            let auth = auth
                .map(|a| {
                    serde_json::from_value(a).map_err(|e| CoreError::InvalidInput(format!("invalid auth options: {e}")))
                })
                .transpose()?;
            let models = match models {
                None => None,
                Some(serde_json::Value::Array(models)) => Some(models),
                Some(_) => return Err(CoreError::InvalidInput("models must be an array of ModelDetails".into())),
            };
            let options = embedded::BackendOptions { auth, models };
            embedded::EmbeddedBackend::start_with(scenario, port, options).await
        },
        |_, backend| Ok(EmbeddedBackend { inner: Arc::new(backend) }),
    )
}
