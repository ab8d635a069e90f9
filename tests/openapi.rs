//! `/openapi.json` is an OpenAPI 3.1 document that parses, and lists every route: each
//! documented operation is served (not the fallback), and every path the router registers
//! in the source is documented. Each operation lists its HTTP statuses (no `default`), the
//! request bodies declare their required fields, and the document follows the host's
//! configuration (tokens, admin routes). `scripts/schemathesis.sh` checks a running host's
//! answers against it.

use serde_json::Value;
use std::collections::BTreeSet;
use wharf::config::{TokenConfig, TokenScope};
use wharf_integration_tests::{bundled, start_with};

/// The HTTP statuses an operation documents.
fn statuses(operation: &Value) -> BTreeSet<String> {
    operation["responses"]
        .as_object()
        .map(|r| r.keys().cloned().collect())
        .unwrap_or_default()
}

/// `schema`, or what its `$ref` points at in the document.
fn resolve<'a>(doc: &'a Value, schema: &'a Value) -> &'a Value {
    match schema["$ref"].as_str() {
        Some(r) => doc
            .pointer(r.trim_start_matches('#'))
            .unwrap_or_else(|| panic!("{r} is not in the document")),
        None => schema,
    }
}

fn registered_paths() -> BTreeSet<String> {
    let api = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../host/src/api");
    let mut files = vec![api.join("rest.rs")];
    for dir in [api.clone(), api.join("compat")] {
        for entry in std::fs::read_dir(dir).unwrap() {
            files.push(entry.unwrap().path());
        }
    }
    let mut paths = BTreeSet::new();
    for file in files
        .iter()
        .filter(|f| f.extension().is_some_and(|e| e == "rs"))
    {
        let text = std::fs::read_to_string(file).unwrap();
        let squashed: String = text.split_whitespace().collect::<Vec<_>>().join("");
        for marker in [".route(\"", ".route_service(\""] {
            for piece in squashed.split(marker).skip(1) {
                // The operator's console (`/console`) serves pages, not the API.
                if let Some(path) = piece.split('"').next()
                    && !path.starts_with("/console")
                {
                    paths.insert(path.to_string());
                }
            }
        }
    }
    paths
}

#[tokio::test]
async fn the_document_parses_as_openapi_3_1_and_lists_every_route() {
    let h = start_with(vec![("echo", bundled("echo"))], |s| {
        s.auth.tokens = vec![TokenConfig {
            name: "ops".into(),
            value: Some("ops-token".into()),
            value_file: None,
            scopes: vec![TokenScope::Admin],
            backends: None,
            tools: None,
        }];
    })
    .await;
    let doc: Value = reqwest::get(format!("{}/openapi.json", h.url))
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(doc["openapi"], "3.1.0");
    let parsed = oas3::from_json(doc.to_string()).expect("a valid OpenAPI 3.1 document");
    assert_eq!(parsed.info.title, "Wharf");

    let documented: BTreeSet<String> = doc["paths"].as_object().unwrap().keys().cloned().collect();
    let registered = registered_paths();
    assert!(registered.len() >= 20, "found only {registered:?}");
    let missing: Vec<&String> = registered.difference(&documented).collect();
    assert!(
        missing.is_empty(),
        "routes without documentation: {missing:?}"
    );

    for (method, path) in wharf::api::openapi::operations() {
        let url = format!(
            "{}{}",
            h.url,
            path.replace("{id}", "ses_none").replace("{name}", "echo")
        );
        let client = reqwest::Client::new();
        let request = match method {
            "get" => client.get(url),
            "post" => client.post(url).json(&serde_json::json!({})),
            "put" => client.put(url).body(Vec::<u8>::new()),
            _ => client.delete(url),
        };
        let reply = request
            .bearer_auth("ops-token")
            .header("accept", "application/json, text/event-stream")
            .send()
            .await
            .unwrap();
        let text = reply.text().await.unwrap_or_default();
        assert!(
            !text.contains("no route"),
            "{method} {path} is documented but not served: {text}"
        );
        let operation = &doc["paths"][path][method];
        assert!(operation["summary"].is_string(), "{method} {path}");
        let statuses = statuses(operation);
        // The edge guard answers every route 403; a route behind a token also 401.
        assert!(statuses.contains("403"), "{method} {path}: {statuses:?}");
        let secured = operation["security"]
            .as_array()
            .is_some_and(|s| !s.is_empty());
        assert_eq!(
            secured,
            statuses.contains("401"),
            "{method} {path}: {statuses:?}"
        );
        assert!(
            statuses.iter().all(|s| s.len() == 3 && s != "default"),
            "{method} {path}: {statuses:?}"
        );
    }
    // Every status of a tool call, each with the codes behind it.
    let call_responses = &doc["paths"]["/v1/call"]["post"]["responses"];
    for status in [
        "200", "400", "401", "403", "404", "413", "415", "429", "500", "503", "504",
    ] {
        assert!(
            call_responses[status]["content"]["application/json"]["schema"]["$ref"]
                == "#/components/schemas/Envelope",
            "{status}: {call_responses}"
        );
    }
    assert!(
        call_responses["400"]["description"]
            .as_str()
            .unwrap()
            .contains("4002"),
        "{call_responses}"
    );
    assert!(call_responses["429"]["headers"]["Retry-After"].is_object());
    // Required fields are declared: `{}` is not a valid body for the compatibility routes.
    let body = |path: &str| {
        let schema =
            &doc["paths"][path]["post"]["requestBody"]["content"]["application/json"]["schema"];
        resolve(&doc, schema)
    };
    assert_eq!(
        body("/api/v1/execute")["required"],
        serde_json::json!(["action"])
    );
    assert_eq!(
        body("/api/v1/execute/batch")["required"],
        serde_json::json!(["actions"])
    );
    assert_eq!(
        body("/api/v1/session/create")["required"],
        serde_json::json!(["worker_id", "resource_type"])
    );
    assert_eq!(
        body("/api/v1/worker/disconnect")["required"],
        serde_json::json!(["worker_id"])
    );
    assert_eq!(
        body("/v1/sessions")["required"],
        serde_json::json!(["backend"])
    );
    assert_eq!(body("/v1/call")["additionalProperties"], false);
    // The envelope's schema comes from the Rust type, codes from the table.
    let envelope = &doc["components"]["schemas"]["Envelope"];
    assert_eq!(
        envelope["required"],
        serde_json::json!(["code", "message", "data", "meta"]),
        "{envelope}"
    );
    let code = resolve(&doc, &envelope["properties"]["code"]);
    assert!(
        code["enum"]
            .as_array()
            .unwrap()
            .contains(&serde_json::json!(5011))
    );
    // Content types: metrics are text, a downloaded file is bytes.
    assert!(
        doc["paths"]["/metrics"]["get"]["responses"]["200"]["content"]
            ["application/openmetrics-text"]
            .is_object()
    );
    assert!(
        doc["paths"]["/v1/sessions/{id}/files"]["get"]["responses"]["200"]["content"]
            ["application/octet-stream"]
            .is_object()
    );
    assert_eq!(
        doc["components"]["securitySchemes"]["bearer"]["scheme"],
        "bearer"
    );
    assert!(doc["paths"]["/v1/admin/backends/{name}"]["put"].is_object());
    let call = body("/v1/call");
    assert!(call["properties"]["tool"].is_object(), "{call}");
    assert_eq!(
        doc["paths"]["/v1/sessions/{id}"]["get"]["parameters"][0]["name"],
        "id"
    );
}

/// A host without tokens serves no admin routes and asks for no token: its document says so.
#[test]
fn an_open_host_documents_no_tokens_and_no_admin_routes() {
    let doc = wharf::api::openapi::document(&wharf::config::AuthConfig::default());
    oas3::from_json(doc.to_string()).expect("a valid OpenAPI 3.1 document");
    assert!(doc["components"]["securitySchemes"].is_null(), "{doc}");
    let paths = doc["paths"].as_object().unwrap();
    assert!(paths.keys().all(|p| !p.starts_with("/v1/admin")));
    for (path, item) in paths {
        for (method, operation) in item.as_object().unwrap() {
            assert_eq!(
                operation["security"],
                serde_json::json!([]),
                "{method} {path}"
            );
            assert!(!statuses(operation).contains("401"), "{method} {path}");
        }
    }
}
