//! `SavedSession` (what `session.save()` returns and `client.loadSession()` takes) to and from
//! its JSON form.

use base64::Engine as _;
use bytes::Bytes;
use cursor_acp_core::session::SavedSession;
use cursor_acp_core::CoreError;
use serde_json::Value;

/// A `SavedSession` from its JSON form (what `session.save()` returned, maybe via a file).
pub fn from_json(v: &Value) -> Result<SavedSession, CoreError> {
    let bad = |what: &str| CoreError::InvalidInput(format!("saved session: {what}"));
    let b64 = base64::engine::general_purpose::STANDARD;
    let text = |k: &str| v.get(k).and_then(|x| x.as_str()).map(str::to_string);
    let conversation_id = text("conversationId").ok_or_else(|| bad("conversationId is missing"))?;
    let checkpoint = match v.get("checkpoint") {
        None | Some(Value::Null) => None,
        Some(Value::String(s)) => Some(Bytes::from(b64.decode(s).map_err(|_| bad("checkpoint is not base64"))?)),
        Some(_) => return Err(bad("checkpoint must be a base64 string")),
    };
    let mut blobs = Vec::new();
    if let Some(list) = v.get("blobs") {
        for entry in list.as_array().ok_or_else(|| bad("blobs must be an array"))? {
            let id = entry
                .get("id")
                .and_then(|x| x.as_str())
                .and_then(|h| hex::decode(h).ok())
                .ok_or_else(|| bad("blob id must be hex"))?;
            let data = entry
                .get("data")
                .and_then(|x| x.as_str())
                .and_then(|d| b64.decode(d).ok())
                .ok_or_else(|| bad("blob data must be base64"))?;
            blobs.push((Bytes::from(id), Bytes::from(data)));
        }
    }
    let model_details = match v.get("modelDetails") {
        None | Some(Value::Null) => None,
        Some(details) => Some(crate::js_models::details_from_json(details)?),
    };
    let card_ids = match v.get("cardIds") {
        None | Some(Value::Null) => Vec::new(),
        Some(Value::Array(ids)) => ids
            .iter()
            .map(|id| id.as_str().map(str::to_string).ok_or_else(|| bad("cardIds must be strings")))
            .collect::<Result<_, _>>()?,
        Some(_) => return Err(bad("cardIds must be an array of strings")),
    };
    Ok(SavedSession {
        conversation_id,
        checkpoint,
        blobs,
        model: text("model"),
        model_details,
        mode: text("mode"),
        cwd: text("cwd"),
        card_ids,
    })
}

/// The JSON form of `saved`: ids and checkpoint as strings (base64, hex for blob ids).
pub fn to_json(saved: SavedSession) -> Value {
    let b64 = base64::engine::general_purpose::STANDARD;
    serde_json::json!({
        "conversationId": saved.conversation_id,
        "checkpoint": saved.checkpoint.map(|c| b64.encode(c)),
        "blobs": saved.blobs.iter().map(|(id, data)| serde_json::json!({ "id": hex::encode(id), "data": b64.encode(data) })).collect::<Vec<_>>(),
        "model": saved.model,
        "modelDetails": saved.model_details.as_ref().map(crate::js_models::details_json),
        "mode": saved.mode,
        "cwd": saved.cwd,
        "cardIds": saved.card_ids,
    })
}
