//! MCP tool schemas lose `oneOf`/`anyOf`/`allOf` at every place JSON Schema reads a subschema
//! (2020-12 and draft-07), whichever form the host gives them in (`inputSchema`, a protobuf
//! `Struct`, or `inputSchemaJson`, JSON text), and both forms come out alike. A session whose
//! tool has combinators under draft-07's `additionalItems` and `dependencies` is accepted by
//! the embedded backend, which refuses what the live service refuses.

use std::sync::Arc;

use cursor_acp_core::acp::{ContentBlock, StopReason};
use cursor_acp_core::host::{ExecContext, ExecRequest, Host};
use cursor_acp_core::proto::agent::v1 as pb;
use cursor_acp_core::session::{AgentClient, ClientConfig, SessionOptions};
use cursor_acp_core::tool_schema::{self, has_combinators, normalize, normalize_tool, to_proto};
use cursor_acp_core::CoreError;
use cursor_acp_embedded::{EmbeddedBackend, Scenario};
use futures::future::BoxFuture;
use proptest::prelude::*;
use serde_json::{json, Value};

/// Combinators where draft-07 MCP servers put them and the walk used to miss them.
fn draft_07_schema() -> Value {
    json!({
        "type": "object",
        "properties": {
            "pairs": {
                "type": "array",
                "items": [{ "type": "string" }],
                "additionalItems": { "anyOf": [{ "type": "integer" }, { "type": "null" }] },
            },
            "config": { "type": "object", "additionalProperties": false },
        },
        "dependencies": {
            "config": { "oneOf": [
                { "properties": { "mode": { "const": "a" } } },
                { "properties": { "mode": { "const": "b" } } },
            ] },
            "pairs": ["config"],
        },
        "x-vendor": { "allOf": [{ "description": "a vendor keyword holding a schema" }] },
        "contentSchema": { "anyOf": [{ "type": "string" }] },
    })
}

fn normalized(mut schema: Value) -> Value {
    normalize(&mut schema);
    schema
}

/// No `allOf`/`anyOf`/`oneOf` key anywhere in the text (generated schemas use no such names
/// for properties or values, so any left is a keyword).
fn no_combinator_text(schema: &Value) -> bool {
    let text = schema.to_string();
    !["\"allOf\"", "\"anyOf\"", "\"oneOf\""].iter().any(|k| text.contains(k))
}

#[test]
fn combinators_under_additional_items_and_dependencies_are_folded() {
    let schema = draft_07_schema();
    assert!(has_combinators(&schema));
    let v = normalized(schema);
    assert!(!has_combinators(&v) && no_combinator_text(&v), "{v}");
    assert_eq!(v["properties"]["pairs"]["additionalItems"], json!({ "type": "integer" }));
    assert_eq!(v["dependencies"]["config"]["properties"]["mode"]["enum"], json!(["a", "b"]));
    assert_eq!(v["dependencies"]["pairs"], json!(["config"]), "the list form is data, kept");
    assert_eq!(v["x-vendor"], json!({ "description": "a vendor keyword holding a schema" }));
    assert_eq!(v["contentSchema"], json!({ "type": "string" }));
}

#[test]
fn names_and_values_are_data_not_keywords() {
    // A property called anyOf, and values that hold the word, are neither folded nor counted.
    let schema = json!({
        "type": "object",
        "properties": { "anyOf": { "type": "string" } },
        "required": ["anyOf"],
        "default": { "anyOf": 1 },
        "examples": [{ "oneOf": 2 }],
        "enum": [{ "allOf": 3 }],
    });
    assert!(!has_combinators(&schema));
    assert_eq!(normalized(schema.clone()), schema);
}

#[test]
fn struct_and_json_text_forms_normalize_alike() {
    let schema = draft_07_schema();
    let mut tool = pb::McpToolDefinition {
        name: "t".into(),
        input_schema: Some(to_proto(schema.clone())),
        input_schema_json: Some(schema.to_string()),
        ..Default::default()
    };
    normalize_tool(&mut tool);
    let from_text: Value = serde_json::from_str(tool.input_schema_json.as_deref().unwrap()).unwrap();
    assert!(!has_combinators(&from_text));
    assert_eq!(tool.input_schema, Some(to_proto(from_text)));
}

/// Advertises one MCP tool with the draft-07 schema, in both forms.
struct ToolHost;

impl Host for ToolHost {
    fn exec(&self, _: ExecRequest, _: ExecContext) -> BoxFuture<'static, Result<Option<Value>, CoreError>> {
        Box::pin(async { Ok(None) })
    }

    fn request_context(&self) -> BoxFuture<'static, Result<Option<Value>, CoreError>> {
        Box::pin(async {
            Ok(Some(json!({ "tools": [{
                "name": "db-query", "toolName": "query", "providerIdentifier": "db",
                "inputSchema": draft_07_schema(),
                "inputSchemaJson": draft_07_schema().to_string(),
            }] })))
        })
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_session_with_a_draft_07_tool_is_accepted_by_the_backend() {
    let scenario = json!({ "steps": [{ "type": "text", "text": "ok" }, { "type": "turnEnded" }] });
    let b = EmbeddedBackend::start(Scenario::from_json(&scenario).unwrap()).await.unwrap();
    let mut config = ClientConfig::default();
    config.transport.base_url = b.url();
    let client = AgentClient::new(config, Arc::new(ToolHost), None).unwrap();
    let session = client.new_session(SessionOptions::default()).unwrap();
    let turn = session.prompt(vec![ContentBlock::from("hi")]).unwrap();
    while turn.next().await.is_some() {}
    assert_eq!(turn.result().await.expect("accepted").stop_reason, StopReason::EndTurn);
    let run = &b.records()[0].messages[0].message["runRequest"];
    let tool = &run["action"]["userMessageAction"]["requestContext"]["tools"][0];
    assert!(!has_combinators(&tool["inputSchema"]), "{}", tool["inputSchema"]);
    let text: Value = serde_json::from_str(tool["inputSchemaJson"].as_str().unwrap()).unwrap();
    assert!(!has_combinators(&text), "{text}");
    assert_eq!(tool["inputSchema"]["properties"]["pairs"]["additionalItems"]["type"], "integer");
}

/// Keywords whose value is one schema.
const ONE: [&str; 13] = [
    "additionalProperties",
    "additionalItems",
    "items",
    "contains",
    "propertyNames",
    "if",
    "then",
    "else",
    "not",
    "unevaluatedItems",
    "unevaluatedProperties",
    "contentSchema",
    "x-extension",
];
/// Keywords whose value maps names to schemas.
const MAPS: [&str; 6] = ["properties", "patternProperties", "dependentSchemas", "dependencies", "$defs", "definitions"];
/// Keywords whose value is a list of schemas.
const LISTS: [&str; 5] = ["items", "prefixItems", "allOf", "anyOf", "oneOf"];

fn leaf() -> impl Strategy<Value = Value> {
    let scalar = prop_oneof![
        Just(json!(null)),
        any::<bool>().prop_map(Value::from),
        (-3i64..4).prop_map(Value::from),
        (-3i64..4).prop_map(|n| Value::from(n as f64 + 0.5)),
        "[a-c]{0,2}".prop_map(Value::from),
    ];
    prop_oneof![
        prop::sample::select(vec!["string", "number", "integer", "boolean", "null", "object", "array"])
            .prop_map(|t| json!({ "type": t })),
        scalar.clone().prop_map(|v| json!({ "const": v })),
        prop::collection::vec(scalar, 1..3).prop_map(|v| json!({ "enum": v })),
        "[a-z ]{0,8}".prop_map(|d| json!({ "description": d })),
        (1i64..5).prop_map(|n| json!({ "minLength": n, "type": "string" })),
        any::<bool>().prop_map(Value::from),
    ]
}

/// Schemas with subschemas, and combinators, at every place a subschema can be.
fn schema() -> impl Strategy<Value = Value> {
    leaf().prop_recursive(4, 48, 4, |inner| {
        let name = prop::sample::select(vec!["a", "b", "c"]);
        let one = (prop::sample::select(ONE.to_vec()), inner.clone());
        let map = (prop::sample::select(MAPS.to_vec()), prop::collection::vec((name, inner.clone()), 1..3));
        let list = (prop::sample::select(LISTS.to_vec()), prop::collection::vec(inner.clone(), 1..4));
        let keyword = prop_oneof![
            one.prop_map(|(k, v)| (k.to_string(), v)),
            map.prop_map(|(k, entries)| (
                k.to_string(),
                Value::Object(entries.into_iter().map(|(n, v)| (n.to_string(), v)).collect())
            )),
            list.prop_map(|(k, v)| (k.to_string(), Value::Array(v))),
        ];
        (leaf(), prop::collection::vec(keyword, 1..4)).prop_map(|(base, keywords)| {
            let mut node = match base {
                Value::Object(map) => map,
                _ => serde_json::Map::new(),
            };
            node.extend(keywords);
            Value::Object(node)
        })
    })
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 1000, ..ProptestConfig::default() })]

    #[test]
    fn generated_schemas_lose_every_combinator_in_both_forms(schema in schema()) {
        let out = normalized(schema.clone());
        prop_assert!(!has_combinators(&out), "{} -> {}", schema, out);
        prop_assert!(no_combinator_text(&out), "{} -> {}", schema, out);
        let mut tool = pb::McpToolDefinition {
            input_schema: Some(to_proto(schema.clone())),
            input_schema_json: Some(schema.to_string()),
            ..Default::default()
        };
        normalize_tool(&mut tool);
        let from_text: Value = serde_json::from_str(tool.input_schema_json.as_deref().unwrap()).unwrap();
        let from_struct = tool_schema::from_proto(tool.input_schema.as_ref().unwrap());
        prop_assert!(no_combinator_text(&from_text) && no_combinator_text(&from_struct), "{}", schema);
        prop_assert_eq!(tool.input_schema.clone(), Some(to_proto(from_text)), "{}", schema);
    }
}
