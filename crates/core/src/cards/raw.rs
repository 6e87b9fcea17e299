//! `rawOutput` kept small: editors render it as a JSON block when a card has no other content,
//! so a result goes there with its structure and small values, never a whole file or listing.

use serde_json::{Map, Value};

/// Characters of a string kept.
const MAX_STRING: usize = 200;
/// Items of a list kept.
const MAX_ITEMS: usize = 10;
/// Levels of nesting kept.
const MAX_DEPTH: usize = 4;

/// `value` with long strings cut (`…` and how long they were), long lists cut (and how many
/// were left out), and nesting below [`MAX_DEPTH`] left out.
pub fn compact(value: &Value) -> Value {
    compact_at(value, 0)
}

fn compact_at(value: &Value, depth: usize) -> Value {
    match value {
        Value::String(s) => Value::String(cut(s)),
        Value::Array(items) if depth >= MAX_DEPTH => Value::String(format!("[{} items]", items.len())),
        Value::Object(fields) if depth >= MAX_DEPTH => Value::String(format!("{{{} fields}}", fields.len())),
        Value::Array(items) => {
            let mut out: Vec<Value> = items.iter().take(MAX_ITEMS).map(|v| compact_at(v, depth + 1)).collect();
            if items.len() > MAX_ITEMS {
                out.push(Value::String(format!("… {} more", items.len() - MAX_ITEMS)));
            }
            Value::Array(out)
        }
        Value::Object(fields) => {
            let out: Map<String, Value> = fields.iter().map(|(k, v)| (k.clone(), compact_at(v, depth + 1))).collect();
            Value::Object(out)
        }
        other => other.clone(),
    }
}

fn cut(s: &str) -> String {
    let chars = s.chars().count();
    if chars <= MAX_STRING {
        return s.to_string();
    }
    let head: String = s.chars().take(MAX_STRING).collect();
    format!("{head}… ({chars} characters)")
}

#[cfg(test)]
mod tests {
    use super::compact;
    use serde_json::json;

    #[test]
    fn structure_stays_bulk_goes() {
        let file = "x".repeat(100_000);
        let out = compact(&json!({ "success": { "content": file, "totalLines": 3, "path": "/a" } }));
        let content = out["success"]["content"].as_str().unwrap();
        assert!(content.len() < 260 && content.ends_with("… (100000 characters)"), "{content}");
        assert_eq!(out["success"]["totalLines"], 3);
        let out = compact(&json!({ "files": (0..50).collect::<Vec<_>>() }));
        assert_eq!(out["files"].as_array().unwrap().len(), 11);
        assert_eq!(out["files"][10], "… 40 more");
        let deep = compact(&json!({ "a": { "b": { "c": { "d": { "e": 1 } } } } }));
        assert_eq!(deep["a"]["b"]["c"]["d"], "{1 fields}");
    }
}
