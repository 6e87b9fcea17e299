//! `rawOutput` kept small: editors render it as a JSON block when a card has no other content,
//! so a result goes there with its structure and small values, never a whole file or listing.

use serde_json::{Map, Value};

/// Characters of a string kept.
const MAX_STRING: usize = 200;
/// Items of a list kept.
const MAX_ITEMS: usize = 10;
/// Levels of nesting kept.
const MAX_DEPTH: usize = 4;
/// Below [`MAX_DEPTH`], a value whose JSON is at most this long is kept as it is: a listing's
/// `{"name":"main.rs"}` reads better than a count of its fields.
const MAX_INLINE: usize = 80;

/// `value` with long strings cut (`…` and how long they were), long lists cut (and how many
/// were left out), and nesting below [`MAX_DEPTH`] left out unless it is small.
pub fn compact(value: &Value) -> Value {
    compact_at(value, 0)
}

fn compact_at(value: &Value, depth: usize) -> Value {
    match value {
        Value::String(s) => Value::String(cut(s)),
        Value::Array(_) | Value::Object(_) if depth >= MAX_DEPTH && small(value) => value.clone(),
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

/// Whether `value`'s JSON fits in [`MAX_INLINE`] characters (counted without building it all).
fn small(value: &Value) -> bool {
    let mut budget = MAX_INLINE as isize;
    fits(value, &mut budget)
}

fn fits(value: &Value, budget: &mut isize) -> bool {
    *budget -= match value {
        Value::Null | Value::Bool(_) | Value::Number(_) => value.to_string().len() as isize,
        Value::String(s) => s.len() as isize + 2,
        Value::Array(items) => 1 + items.len() as isize,
        Value::Object(fields) => 1 + fields.iter().map(|(k, _)| k.len() as isize + 4).sum::<isize>(),
    };
    if *budget < 0 {
        return false;
    }
    match value {
        Value::Array(items) => items.iter().all(|v| fits(v, budget)),
        Value::Object(fields) => fields.values().all(|v| fits(v, budget)),
        _ => true,
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
        let deep = compact(&json!({ "a": { "b": { "c": { "d": { "e": "x".repeat(100) } } } } }));
        assert_eq!(deep["a"]["b"]["c"]["d"], "{1 fields}");
        let deep = compact(&json!({ "a": { "b": { "c": { "d": { "e": [1, 2, 3], "f": "g" } } } } }));
        assert_eq!(deep["a"]["b"]["c"]["d"], json!({ "e": [1, 2, 3], "f": "g" }), "small: kept whole");
    }

    /// An ls result, as a client printing `rawOutput` shows it: the files by name, not
    /// `"{1 fields}"`.
    #[test]
    fn a_listing_shows_its_entries() {
        let listing = json!({ "success": { "directoryTreeRoot": {
            "absPath": "/w",
            "childrenDirs": [{ "absPath": "/w/src", "childrenFiles": [{ "name": "main.rs" }, { "name": "lib.rs" }] }],
            "childrenFiles": [{ "name": "Cargo.toml" }]
        } } });
        let out = compact(&listing);
        let root = &out["success"]["directoryTreeRoot"];
        assert_eq!(root["childrenFiles"][0], json!({ "name": "Cargo.toml" }));
        assert_eq!(root["childrenDirs"][0]["childrenFiles"], json!([{ "name": "main.rs" }, { "name": "lib.rs" }]));
        let many: Vec<_> = (0..40).map(|i| json!({ "name": format!("file-{i}.rs") })).collect();
        let out = compact(&json!({ "a": { "b": { "c": { "files": many } } } }));
        assert_eq!(out["a"]["b"]["c"]["files"], "[40 items]", "a large list below the depth is still counted");
    }
}
