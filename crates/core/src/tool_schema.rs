//! MCP tool input schemas as Cursor's backend accepts them. A request context whose tool schema
//! contains `oneOf`, `anyOf` or `allOf` (at any depth) makes the live service fail the whole
//! turn (`resource_exhausted` at turn start), so those keywords are folded into plain schemas
//! before a schema is advertised, keeping what a model needs to call the tool:
//!
//! * `allOf`: every part is merged into the schema that holds it (properties united, `required`
//!   united; the holder's own keywords win).
//! * `anyOf` / `oneOf`: `{"type": "null"}` alternatives are dropped (the value is then simply
//!   optional); one alternative left is merged in as for `allOf`; several are united: their
//!   properties merged (a property named in several takes the union of their schemas), a
//!   property `required` only when every object alternative requires it, differing `const`
//!   or `enum` values become one `enum`, and `type` is the alternatives' type when they agree,
//!   else `object` if one of them is an object, else the first one's — with the types accepted
//!   named in the description ("Accepts string or number."). The alternatives' descriptions are
//!   kept in the description when the holder has none.
//!
//! Subschemas are normalized first, at every place JSON Schema (2020-12, 2019-09 and draft-07)
//! reads one: the one-schema keywords (`additionalProperties`, `additionalItems`, `items`,
//! `contains`, `propertyNames`, `not`, `if`/`then`/`else`, `unevaluatedItems`,
//! `unevaluatedProperties`, `contentSchema`, ...), the lists (`items` in its tuple form,
//! `prefixItems`), and the maps of names to schemas (`properties`, `patternProperties`, `$defs`,
//! `definitions`, `dependentSchemas`, and `dependencies`, whose values are a schema or a list of
//! property names). A keyword this module does not know is walked as a schema too: MCP servers
//! emit vendor keywords and older drafts' ones, and a combinator left in one would cost the tool
//! every turn of the session, while folding one in an annotation costs nothing.
//!
//! Values that are instances, not schemas (`const`, `enum`, `default`, `examples`), and the
//! names in a map (a property may be called `anyOf`) are data: they are neither walked nor
//! counted by [`has_combinators`], which walks the same places [`normalize`] folds.

use serde_json::{Map, Value};

const COMBINATORS: [&str; 3] = ["allOf", "anyOf", "oneOf"];

/// Keywords whose value maps names to schemas (a name is never a keyword).
const SCHEMA_MAPS: [&str; 6] =
    ["properties", "patternProperties", "$defs", "definitions", "dependentSchemas", "dependencies"];
/// Keywords whose value is data: an instance, a list of names, a type name, a reference.
const DATA: [&str; 6] = ["const", "enum", "default", "examples", "required", "type"];

/// Where a keyword's value holds schemas.
enum Place {
    /// A map of names to schemas (or, in `dependencies`, to lists of names).
    Map,
    /// Data, never a schema.
    Data,
    /// One schema, or a list of them (`items`, `prefixItems`, the combinators).
    Schemas,
}

fn place(keyword: &str) -> Place {
    if SCHEMA_MAPS.contains(&keyword) {
        Place::Map
    } else if DATA.contains(&keyword) {
        Place::Data
    } else {
        Place::Schemas
    }
}

/// Whether `schema` holds `oneOf`, `anyOf` or `allOf` as a keyword anywhere (what the backend
/// refuses): at every place [`normalize`] walks, so that `normalize`d schemas never have one.
pub fn has_combinators(schema: &Value) -> bool {
    match schema {
        Value::Object(node) => node.iter().any(|(keyword, value)| {
            COMBINATORS.contains(&keyword.as_str())
                || match place(keyword) {
                    Place::Map => value.as_object().is_some_and(|map| map.values().any(has_combinators)),
                    Place::Data => false,
                    Place::Schemas => has_combinators(value),
                }
        }),
        Value::Array(items) => items.iter().any(has_combinators),
        _ => false,
    }
}

/// A tool definition's schemas (`input_schema`, and `input_schema_json` when set) normalized.
/// Both forms go through [`canonical`] first, so that the same schema comes out the same
/// whichever form the host gave it in (a `Struct` keeps its keys sorted and its numbers as
/// doubles; JSON text keeps its order and its integers). A schema without combinators, or JSON
/// text that does not parse, is left exactly as it is: the tool is advertised either way.
pub fn normalize_tool(tool: &mut crate::proto::agent::v1::McpToolDefinition) {
    if let Some(schema) = &mut tool.input_schema {
        let mut json = from_proto(schema);
        if has_combinators(&json) {
            canonical(&mut json);
            normalize(&mut json);
            *schema = to_proto(json);
        }
    }
    if let Some(text) = &mut tool.input_schema_json {
        if let Ok(mut json) = serde_json::from_str::<Value>(text) {
            if has_combinators(&json) {
                canonical(&mut json);
                normalize(&mut json);
                *text = json.to_string();
            }
        }
    }
}

/// Largest integer a double holds exactly.
const EXACT_INTEGER: f64 = 9_007_199_254_740_992.0;

/// `value` in the one form both of a tool's schema forms share: keys sorted (the folding of
/// `const` and `enum` depends on the order it meets them), and a number that is a whole number
/// a double holds exactly written as an integer (`1.0` and `1` are one value to a `Struct`).
pub fn canonical(value: &mut Value) {
    match value {
        Value::Object(map) => {
            map.sort_keys();
            map.values_mut().for_each(canonical);
        }
        Value::Array(items) => items.iter_mut().for_each(canonical),
        Value::Number(n) => {
            if let Some(f) = n.as_f64().filter(|f| n.is_f64() && f.fract() == 0.0 && f.abs() <= EXACT_INTEGER) {
                // Exact: whole and within the range a double holds every integer of.
                *n = serde_json::Number::from(f as i64);
            }
        }
        _ => {}
    }
}

/// `google.protobuf.Value` as JSON.
pub fn from_proto(value: &prost_types::Value) -> Value {
    use prost_types::value::Kind;
    match &value.kind {
        None | Some(Kind::NullValue(_)) => Value::Null,
        Some(Kind::BoolValue(b)) => Value::Bool(*b),
        Some(Kind::NumberValue(n)) => serde_json::Number::from_f64(*n).map(Value::Number).unwrap_or(Value::Null),
        Some(Kind::StringValue(s)) => Value::String(s.clone()),
        Some(Kind::ListValue(list)) => Value::Array(list.values.iter().map(from_proto).collect()),
        Some(Kind::StructValue(map)) => {
            Value::Object(map.fields.iter().map(|(k, v)| (k.clone(), from_proto(v))).collect())
        }
    }
}

/// JSON as a `google.protobuf.Value`.
pub fn to_proto(value: Value) -> prost_types::Value {
    use prost_types::value::Kind;
    let kind = match value {
        Value::Null => Kind::NullValue(0),
        Value::Bool(b) => Kind::BoolValue(b),
        Value::Number(n) => Kind::NumberValue(n.as_f64().unwrap_or_default()),
        Value::String(s) => Kind::StringValue(s),
        Value::Array(items) => {
            Kind::ListValue(prost_types::ListValue { values: items.into_iter().map(to_proto).collect() })
        }
        Value::Object(map) => {
            Kind::StructValue(prost_types::Struct { fields: map.into_iter().map(|(k, v)| (k, to_proto(v))).collect() })
        }
    };
    prost_types::Value { kind: Some(kind) }
}

/// `schema` without `oneOf`, `anyOf` or `allOf` at any depth (see the module docs).
pub fn normalize(schema: &mut Value) {
    let Value::Object(node) = schema else { return };
    for (keyword, value) in node.iter_mut() {
        if COMBINATORS.contains(&keyword.as_str()) {
            // Folded below, each part normalized first.
            continue;
        }
        match (place(keyword), value) {
            (Place::Map, Value::Object(children)) => children.values_mut().for_each(normalize),
            (Place::Schemas, Value::Array(children)) => children.iter_mut().for_each(normalize),
            (Place::Schemas, child @ Value::Object(_)) => normalize(child),
            _ => {}
        }
    }
    if let Some(Value::Array(parts)) = node.remove("allOf") {
        for mut part in parts {
            normalize(&mut part);
            if let Value::Object(part) = part {
                merge(node, part, Mode::All);
            }
        }
    }
    for key in ["anyOf", "oneOf"] {
        if let Some(Value::Array(alternatives)) = node.remove(key) {
            let mut alternatives: Vec<Map<String, Value>> = alternatives
                .into_iter()
                .filter_map(|mut alternative| {
                    normalize(&mut alternative);
                    match alternative {
                        Value::Object(map) => Some(map),
                        // `true` accepts anything; nothing to add.
                        _ => None,
                    }
                })
                .filter(|alternative| !is_null_only(alternative))
                .collect();
            match alternatives.len() {
                0 => {}
                1 => merge(node, alternatives.remove(0), Mode::All),
                _ => {
                    let united = unite(alternatives);
                    merge(node, united, Mode::All);
                }
            }
        }
    }
}

/// `{"type": "null"}`, perhaps with a title or description.
fn is_null_only(schema: &Map<String, Value>) -> bool {
    schema.get("type") == Some(&Value::String("null".into()))
        && schema.keys().all(|k| k == "type" || k == "description" || k == "title")
}

/// The type a schema describes, named or implied.
fn type_of(schema: &Map<String, Value>) -> Option<String> {
    match schema.get("type") {
        Some(Value::String(t)) => Some(t.clone()),
        Some(Value::Array(types)) => types.iter().filter_map(Value::as_str).find(|t| *t != "null").map(str::to_string),
        _ if schema.contains_key("properties") => Some("object".into()),
        _ if schema.contains_key("items") => Some("array".into()),
        _ => None,
    }
}

/// One schema for several alternatives.
fn unite(alternatives: Vec<Map<String, Value>>) -> Map<String, Value> {
    let types: Vec<String> = alternatives.iter().filter_map(type_of).collect();
    let mut distinct = types.clone();
    distinct.sort();
    distinct.dedup();
    let descriptions: Vec<String> = alternatives
        .iter()
        .filter_map(|a| a.get("description").and_then(Value::as_str))
        .map(|d| d.trim().to_string())
        .filter(|d| !d.is_empty())
        .collect();
    // Required in every object alternative.
    let required: Option<Vec<Value>> = alternatives
        .iter()
        .filter(|a| type_of(a).as_deref() == Some("object"))
        .map(|a| a.get("required").and_then(Value::as_array).cloned().unwrap_or_default())
        .reduce(|kept, next| kept.into_iter().filter(|r| next.contains(r)).collect());
    let mut united = Map::new();
    for mut alternative in alternatives {
        alternative.remove("required");
        alternative.remove("description");
        alternative.remove("type");
        merge(&mut united, alternative, Mode::Any);
    }
    match distinct.len() {
        0 => {}
        1 => {
            united.insert("type".into(), Value::String(distinct.remove(0)));
        }
        _ => {
            let chosen = if distinct.iter().any(|t| t == "object") { "object".to_string() } else { types[0].clone() };
            united.insert("type".into(), Value::String(chosen));
            let (last, rest) = distinct.split_last().expect("two or more");
            let note = format!("Accepts {} or {last}.", rest.join(", "));
            append_description(&mut united, &note);
        }
    }
    if !descriptions.is_empty() {
        let mut seen = Vec::new();
        for d in descriptions {
            if !seen.contains(&d) {
                seen.push(d);
            }
        }
        let text = if seen.len() == 1 { seen.remove(0) } else { format!("One of: {}", seen.join(" | ")) };
        append_description(&mut united, &text);
    }
    if let Some(required) = required.filter(|r| !r.is_empty()) {
        united.insert("required".into(), Value::Array(required));
    }
    united
}

fn append_description(schema: &mut Map<String, Value>, text: &str) {
    let joined = match schema.get("description").and_then(Value::as_str) {
        Some(existing) if !existing.trim().is_empty() => format!("{} {text}", existing.trim()),
        _ => text.to_string(),
    };
    schema.insert("description".into(), Value::String(joined));
}

#[derive(Clone, Copy, PartialEq)]
enum Mode {
    /// The value must satisfy both (`allOf`): the target's keywords win, `required` is united.
    All,
    /// The value may satisfy either (`anyOf`, `oneOf`): values of one keyword are united.
    Any,
}

/// Merges `source` into `target`.
fn merge(target: &mut Map<String, Value>, source: Map<String, Value>, mode: Mode) {
    for (key, value) in source {
        let (has_enum, has_const) = (target.contains_key("enum"), target.contains_key("const"));
        match (key.as_str(), target.get_mut(&key), value) {
            ("properties", Some(Value::Object(existing)), Value::Object(more)) => {
                for (name, schema) in more {
                    match (existing.get_mut(&name), schema) {
                        (Some(Value::Object(have)), Value::Object(add)) => merge(have, add, mode),
                        (Some(_), _) => {}
                        (None, schema) => {
                            existing.insert(name, schema);
                        }
                    }
                }
            }
            ("required", Some(Value::Array(existing)), Value::Array(more)) => {
                for name in more {
                    if !existing.contains(&name) {
                        existing.push(name);
                    }
                }
            }
            ("items" | "additionalProperties", Some(Value::Object(existing)), Value::Object(more)) => {
                merge(existing, more, mode)
            }
            ("enum", Some(Value::Array(existing)), Value::Array(more)) if mode == Mode::Any => {
                for v in more {
                    if !existing.contains(&v) {
                        existing.push(v);
                    }
                }
            }
            ("const", Some(existing), value) if mode == Mode::Any && *existing != value => {
                let first = existing.clone();
                target.remove("const");
                add_enum(target, [first, value]);
            }
            ("const", None, value) if mode == Mode::Any && has_enum => add_enum(target, [value]),
            ("enum", None, Value::Array(values)) if mode == Mode::Any && has_const => {
                let first = target.remove("const").expect("checked");
                add_enum(target, std::iter::once(first).chain(values));
            }
            (_, Some(_), _) => {}
            (_, None, value) => {
                target.insert(key, value);
            }
        }
    }
}

fn add_enum(target: &mut Map<String, Value>, values: impl IntoIterator<Item = Value>) {
    let entry = target.entry("enum").or_insert_with(|| Value::Array(Vec::new()));
    if let Value::Array(list) = entry {
        for v in values {
            if !list.contains(&v) {
                list.push(v);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn normalized(mut v: Value) -> Value {
        normalize(&mut v);
        assert!(!has_combinators(&v), "left combinators in {v}");
        v
    }

    #[test]
    fn nullable_alternatives_become_the_plain_type() {
        let v = normalized(json!({
            "type": "object",
            "properties": { "path": { "anyOf": [{ "type": "string" }, { "type": "null" }], "description": "A file" } },
        }));
        assert_eq!(v["properties"]["path"], json!({ "type": "string", "description": "A file" }));
    }

    #[test]
    fn all_of_parts_are_merged_with_their_required_fields() {
        let v = normalized(json!({
            "allOf": [
                { "type": "object", "properties": { "a": { "type": "string" } }, "required": ["a"] },
                { "properties": { "b": { "type": "integer" } }, "required": ["b"] },
            ],
        }));
        assert_eq!(v["type"], "object");
        assert_eq!(v["properties"]["a"]["type"], "string");
        assert_eq!(v["properties"]["b"]["type"], "integer");
        assert_eq!(v["required"], json!(["a", "b"]));
    }

    #[test]
    fn object_alternatives_keep_every_property_and_only_the_common_required_ones() {
        let v = normalized(json!({
            "type": "object",
            "properties": {
                "target": { "oneOf": [
                    { "type": "object", "description": "By id", "properties": { "kind": { "const": "id" }, "id": { "type": "string" } }, "required": ["kind", "id"] },
                    { "type": "object", "description": "By name", "properties": { "kind": { "const": "name" }, "name": { "type": "string" } }, "required": ["kind", "name"] },
                ] },
            },
        }));
        let target = &v["properties"]["target"];
        assert_eq!(target["type"], "object");
        assert_eq!(target["properties"]["kind"]["enum"], json!(["id", "name"]));
        assert_eq!(target["properties"]["id"]["type"], "string");
        assert_eq!(target["properties"]["name"]["type"], "string");
        assert_eq!(target["required"], json!(["kind"]));
        assert_eq!(target["description"], "One of: By id | By name");
    }

    #[test]
    fn mixed_types_name_what_is_accepted() {
        let v = normalized(json!({ "anyOf": [{ "type": "string" }, { "type": "number" }] }));
        assert_eq!(v["type"], "string");
        assert_eq!(v["description"], "Accepts number or string.");
    }

    #[test]
    fn combinators_are_found_and_removed_at_any_depth() {
        let deep = json!({
            "type": "object",
            "properties": { "list": { "type": "array", "items": { "type": "object", "properties": {
                "x": { "allOf": [{ "type": "string" }, { "minLength": 1 }] },
            } } } },
            "$defs": { "y": { "oneOf": [{ "type": "boolean" }] } },
        });
        assert!(has_combinators(&deep));
        let v = normalized(deep);
        assert_eq!(v["properties"]["list"]["items"]["properties"]["x"], json!({ "type": "string", "minLength": 1 }));
        assert_eq!(v["$defs"]["y"], json!({ "type": "boolean" }));
        let plain = json!({ "type": "object", "properties": { "q": { "type": "string" } }, "required": ["q"] });
        assert_eq!(normalized(plain.clone()), plain);
    }
}
