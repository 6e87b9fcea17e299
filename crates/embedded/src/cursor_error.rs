//! A Connect error as Cursor's server sends it: a code, a message and, when a scenario or a
//! check names one, Cursor's `ErrorDetails` (its error enum, title, detail, retryability) as a
//! detail of the end-of-stream or unary error.

use prost::Message as _;

use cursor_acp_core::connect::{Code, ConnectError, ErrorDetail, CURSOR_ERROR_DETAILS};
use cursor_acp_core::proto::aiserver::v1 as ai;

/// The error a scenario's `error` step, a failed run check or the auth service answers with.
pub(crate) fn build_error(
    code: &str,
    message: String,
    cursor_error: Option<String>,
    title: Option<String>,
    detail: Option<String>,
    is_retryable: Option<bool>,
) -> Result<ConnectError, String> {
    let mut err = ConnectError::new(Code::from_name(code), message);
    if let Some(name) = cursor_error {
        let value = ai::error_details::Error::from_str_name(&name)
            .ok_or_else(|| format!("cursorError {name:?} is not an ErrorDetails.Error name"))?;
        let details = ai::ErrorDetails {
            error: value as i32,
            details: Some(ai::CustomErrorDetails {
                title: title.clone().unwrap_or_default(),
                detail: detail.clone().unwrap_or_default(),
                is_retryable,
                ..Default::default()
            }),
            is_expected: None,
        };
        err.details.push(ErrorDetail {
            type_name: CURSOR_ERROR_DETAILS.into(),
            value: details.encode_to_vec().into(),
            debug: Some(serde_json::json!({
                "error": name,
                "details": { "title": title, "detail": detail, "isRetryable": is_retryable },
            })),
        });
    }
    Ok(err)
}
