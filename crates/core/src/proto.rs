//! Generated protobuf types for `agent.v1` and `aiserver.v1` (compiled from `proto/` by build.rs).
//!
//! Credential messages are generated without `Debug`; the impls below redact the secrets so a
//! `{:?}` of a run request can never leak an API key into a log.
#![allow(clippy::all, missing_docs, reason = "prost's generated code, as prost-build writes it")]
include!(concat!(env!("OUT_DIR"), "/protos.rs"));

use std::fmt;

impl fmt::Debug for agent::v1::ApiKeyCredentials {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ApiKeyCredentials").field("api_key", &"<redacted>").field("base_url", &self.base_url).finish()
    }
}

impl fmt::Debug for agent::v1::AzureCredentials {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("AzureCredentials")
            .field("api_key", &"<redacted>")
            .field("base_url", &self.base_url)
            .field("deployment", &self.deployment)
            .finish()
    }
}

impl fmt::Debug for agent::v1::BedrockCredentials {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("BedrockCredentials")
            .field("access_key", &"<redacted>")
            .field("secret_key", &"<redacted>")
            .field("region", &self.region)
            .field("session_token", &self.session_token.as_ref().map(|_| "<redacted>"))
            .finish()
    }
}

#[cfg(test)]
mod tests {
    use super::agent::v1::*;

    #[test]
    fn credentials_are_redacted_in_debug_output() {
        let model = RequestedModel {
            model_id: "m".into(),
            credentials: Some(requested_model::Credentials::ApiKeyCredentials(ApiKeyCredentials {
                api_key: "sk-secret-123".into(),
                base_url: None,
            })),
            ..Default::default()
        };
        let text = format!("{model:?}");
        assert!(!text.contains("sk-secret-123"), "{text}");
        assert!(text.contains("<redacted>"));
        let bedrock = BedrockCredentials {
            access_key: "AKIA1".into(),
            secret_key: "s3cr3t".into(),
            region: "us".into(),
            session_token: Some("tok".into()),
        };
        let text = format!("{bedrock:?}");
        assert!(!text.contains("AKIA1") && !text.contains("s3cr3t") && !text.contains("tok\""), "{text}");
    }
}
