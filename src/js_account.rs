//! `new Account({ baseUrl, clientVersion, clientType, headers })`: the account's calls (API-key
//! exchange, login refresh, one sign-in poll) made by the core, through the same HTTP stack as
//! turns (proxy settings, certificate verifier, error diagnosis). JavaScript keeps the tokens
//! and decides when to call.

use std::collections::HashMap;

use cursor_acp_core::transport::{self, Secret, TransportConfig};
use napi::bindgen_prelude::*;
use napi::Env;

use crate::js_error::{coded, promise};

/// What the account calls are made with: the backend and the client headers a client sends.
#[napi(object, object_to_js = false)]
pub struct AccountOptions {
    /// The backend, as a client's `baseUrl` (default `https://api2.cursor.sh`).
    pub base_url: Option<String>,
    /// `x-cursor-client-version` (default: the client's default).
    pub client_version: Option<String>,
    /// `x-cursor-client-type` (default `cli`).
    pub client_type: Option<String>,
    /// Extra headers sent on every call, as a client's `headers`.
    pub headers: Option<HashMap<String, String>>,
}

/// An account call's tokens.
#[napi(object)]
pub struct AccountTokens {
    pub access_token: String,
    /// Absent when a refresh keeps the refresh token it was given.
    pub refresh_token: Option<String>,
}

fn tokens(t: transport::AccountTokens) -> AccountTokens {
    AccountTokens {
        access_token: t.access_token.expose().to_string(),
        refresh_token: t.refresh_token.map(|r| r.expose().to_string()),
    }
}

/// The account calls to one backend. Errors are coded as a client's: `E_AUTH` (a refused key,
/// a login that is over), `E_NETWORK` (naming the cause and the proxy in the way), `E_SERVER`
/// (with `httpStatus`), `E_PROTOCOL`, `E_TIMEOUT` (30 s per call), `E_INVALID`.
#[napi]
pub struct Account {
    inner: transport::Account,
}

#[napi]
impl Account {
    #[napi(constructor)]
    pub fn new(env: Env, options: Option<AccountOptions>) -> Result<Self> {
        let defaults = TransportConfig::default();
        let o = options.unwrap_or(AccountOptions {
            base_url: None,
            client_version: None,
            client_type: None,
            headers: None,
        });
        let mut headers: Vec<(String, String)> = o.headers.unwrap_or_default().into_iter().collect();
        headers.sort();
        let config = TransportConfig {
            base_url: o.base_url.unwrap_or(defaults.base_url.clone()),
            client_version: o.client_version.unwrap_or(defaults.client_version.clone()),
            client_type: o.client_type.unwrap_or(defaults.client_type.clone()),
            headers,
            ..defaults
        };
        let inner = transport::Account::new(&config).map_err(|e| coded(&env, &e))?;
        Ok(Account { inner })
    }

    /// `POST /auth/exchange_user_api_key`: the API key's tokens.
    #[napi(ts_return_type = "Promise<AccountTokens>")]
    pub fn exchange_api_key<'env>(&self, env: &'env Env, api_key: String) -> Result<PromiseRaw<'env, AccountTokens>> {
        let account = self.inner.clone();
        let key = Secret::new(api_key);
        promise(env, async move { account.exchange_api_key(&key).await.map(tokens) }, |_, t| Ok(t))
    }

    /// `POST /oauth/token` (refresh-token grant of `clientId`): a new access token, and the
    /// refresh token when the service gives a new one.
    #[napi(ts_return_type = "Promise<AccountTokens>")]
    pub fn refresh<'env>(
        &self,
        env: &'env Env,
        refresh_token: String,
        client_id: String,
    ) -> Result<PromiseRaw<'env, AccountTokens>> {
        let account = self.inner.clone();
        let refresh_token = Secret::new(refresh_token);
        promise(env, async move { account.refresh(&refresh_token, &client_id).await.map(tokens) }, |_, t| Ok(t))
    }

    /// One `GET /auth/poll` of a browser sign-in: the tokens once signed in, `null` while it is
    /// pending (the service answers 404).
    #[napi(ts_return_type = "Promise<AccountTokens | null>")]
    pub fn poll_login<'env>(
        &self,
        env: &'env Env,
        uuid: String,
        verifier: String,
    ) -> Result<PromiseRaw<'env, Option<AccountTokens>>> {
        let account = self.inner.clone();
        let verifier = Secret::new(verifier);
        promise(
            env,
            async move {
                account.poll_login(&uuid, &verifier).await.map(|poll| match poll {
                    transport::LoginPoll::Pending => None,
                    transport::LoginPoll::SignedIn(t) => Some(tokens(t)),
                })
            },
            |_, t| Ok(t),
        )
    }
}
